"""The retention room: evidence stores and what is kept (``docs/retention.md``).

* Stores: :class:`RetentionStore` (the contract), :class:`FilesystemStore`, :class:`S3Store`,
  :func:`open_store`, :func:`parse_spec`, and the errors :class:`StoreError`,
  :class:`ObjectMissing`, :class:`ObjectCorrupt`, :class:`UnsafeStorePath`,
  :class:`StoreStuck`, :class:`StoreExtraMissing` (each with a ``code``).
* The retainer (what a decision keeps, under the session's policy) and the policy itself.
* Publishing a transparency log's tiles to the same kinds of store (``_publish``).

Replay and garbage collection, which read stores back, live in :mod:`daemon.replay`.

May import: ``daemon.audit`` (the decision fields), ``daemon.tlog`` (tile paths),
``daemon.wire``, ``daemon.schema`` (the ``[stores]`` keys); never a server, a client
or a command.
"""

from daemon.retention._fs import FilesystemStore
from daemon.retention._open import open_store
from daemon.retention._s3 import S3Store
from daemon.retention._store import (
    ObjectCorrupt,
    ObjectMissing,
    PutResult,
    RetentionStore,
    StoredObject,
    StoreError,
    StoreExtraMissing,
    StoreSpec,
    StoreStuck,
    UnsafeStorePath,
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
    "StoreExtraMissing",
    "StoreSpec",
    "StoreStuck",
    "StoredObject",
    "UnsafeStorePath",
    "name_of",
    "open_store",
    "parse_spec",
]
