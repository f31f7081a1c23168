"""Evidence retention and replay (``docs/retention.md``).

* Stores: :class:`RetentionStore` (the contract), :class:`FilesystemStore`, :class:`S3Store`,
  :func:`open_store`, :func:`parse_spec`, and the errors :class:`StoreError`,
  :class:`ObjectMissing`, :class:`ObjectCorrupt`.
"""

from ._fs import FilesystemStore
from ._open import open_store
from ._s3 import S3Store
from ._store import (
    ObjectCorrupt,
    ObjectMissing,
    PutResult,
    RetentionStore,
    StoredObject,
    StoreError,
    StoreSpec,
    name_of,
    parse_spec,
)

__all__ = [
    "FilesystemStore",
    "ObjectCorrupt",
    "ObjectMissing",
    "PutResult",
    "RetentionStore",
    "S3Store",
    "StoreError",
    "StoreSpec",
    "StoredObject",
    "name_of",
    "open_store",
    "parse_spec",
]
