"""The retention store contract: write-once, content-addressed evidence objects
(``docs/retention.md`` §1).

Rules (the contract every backend keeps):

1. An object's name is ``sha256:<hex>`` of its bytes: the store never holds bytes under
   another name. :meth:`RetentionStore.put` hashes the bytes itself and returns the name.
2. Write-once. ``put`` writes an absent object durably (the backend's strongest guarantee:
   ``fsync`` of the file and its directory; an S3 ``PUT`` answered 200) before it returns. A
   present object is *verified* against the bytes offered, never rewritten: equal bytes are
   success (``created`` false); different bytes mean the stored object is corrupt
   (:class:`ObjectCorrupt`, the put fails: the evidence is not retained).
3. ``get(name, size)`` returns bytes that were re-hashed now and equal ``name``; an absent
   object is :class:`ObjectMissing`; bytes that do not hash to their name (or whose length is
   not ``size``) are :class:`ObjectCorrupt` and are never returned.
4. Every failure is a :class:`StoreError` (a service fault: ours, never the client's) with a
   message that names the store and the object, and a :attr:`StoreError.code`; nothing else
   escapes a store method except ``ValueError`` for a malformed name.
5. A store is named by its *spec*: ``fs:PATH`` or ``s3://BUCKET[/PREFIX]``
   (:func:`parse_spec`). :attr:`RetentionStore.id` is the canonical spec (``fs:`` with an
   absolute path), the value audit lines record in ``store``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Protocol

import attrs

from daemon.wire._errors import ServiceError
from session.canon import digest_bytes

__all__ = [
    "ObjectCorrupt",
    "ObjectMissing",
    "PutResult",
    "RetentionStore",
    "StoreError",
    "StoreSpec",
    "StoreStuck",
    "StoredObject",
    "UnsafeStorePath",
    "hex_of",
    "name_of",
    "parse_spec",
]

_NAME_RE: Final = re.compile(r"sha256:([0-9a-f]{64})\Z")
_HEX_RE: Final = re.compile(r"[0-9a-f]{64}\Z")
_BUCKET_RE: Final = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]\Z")


class StoreError(ServiceError):
    """The store cannot do what was asked (unreachable, refused, I/O error, unsafe path).

    :attr:`code` is a closed-vocabulary name of the kind of failure (rule 4), the same for
    every backend: ``STORE_FAILED`` (I/O error, unreachable, refused), ``OBJECT_MISSING``,
    ``OBJECT_CORRUPT`` (other bytes, another length, a link or a non-regular file in an
    object's place), ``STORE_PATH_UNSAFE`` (a path component that is not a real directory),
    ``STORE_STUCK`` (an operation did not end within its deadline)."""

    code = "STORE_FAILED"


class ObjectMissing(StoreError):
    """No object of that name is in the store."""

    code = "OBJECT_MISSING"


class ObjectCorrupt(StoreError):
    """The stored bytes do not hash to the object's name (or have another length), or the
    object is not a regular file."""

    code = "OBJECT_CORRUPT"


class UnsafeStorePath(StoreError):
    """A directory on the way to an object is a symbolic link or not a directory: the object
    would be read or written outside the store root, so nothing is."""

    code = "STORE_PATH_UNSAFE"


class StoreStuck(StoreError):
    """A store operation did not end within its deadline (a hung filesystem or endpoint)."""

    code = "STORE_STUCK"


class StoreExtraMissing(StoreError):
    """The store's library is not installed: an ``s3://`` store without the ``s3`` extra
    (boto3). The message is the one line of :func:`session.missing_extra`."""

    code = "EXTRA_MISSING"


@attrs.frozen
class PutResult:
    """What :meth:`RetentionStore.put` did: the object's name and size, and whether this call
    created it (false: it was present and verified)."""

    name: str
    size: int
    created: bool


@attrs.frozen
class StoredObject:
    """One object as a listing sees it: name, size, and last modification (Unix seconds;
    for the filesystem also refreshed when a put re-verifies it)."""

    name: str
    size: int
    modified: float


class RetentionStore(Protocol):
    """A write-once, content-addressed evidence store (module rules)."""

    @property
    def id(self) -> str:
        """The canonical spec (rule 5)."""
        ...

    def put(self, data: bytes) -> PutResult:
        """Store ``data`` under its SHA-256 name (rule 2)."""
        ...

    def get(self, name: str, size: int | None = None) -> bytes:
        """The verified bytes of ``name`` (rule 3)."""
        ...

    def objects(self) -> Iterator[StoredObject]:
        """Every object, in no particular order."""
        ...

    def delete(self, name: str) -> bool:
        """Remove ``name``; False when it was already absent."""
        ...

    def close(self) -> None:
        """Release what the store holds (connections)."""
        ...


def hex_of(name: str) -> str:
    """The 64 lowercase hex digits of ``sha256:<hex>``; ``ValueError`` for anything else."""
    match = _NAME_RE.match(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"not an evidence object name (sha256:<64 hex>): {name!r}")
    return match.group(1)


def name_of(data: bytes) -> str:
    """The object name of ``data``."""
    return digest_bytes(data)


def is_hex_name(text: str) -> bool:
    return _HEX_RE.match(text) is not None


@attrs.frozen
class StoreSpec:
    """A parsed spec: ``kind`` ``"fs"`` (``path`` absolute) or ``"s3"`` (``bucket``,
    ``prefix`` empty or ending in ``/``)."""

    kind: str
    path: Path | None = None
    bucket: str = ""
    prefix: str = ""

    @property
    def id(self) -> str:
        if self.kind == "fs":
            return f"fs:{self.path}"
        return f"s3://{self.bucket}/{self.prefix}"


def parse_spec(text: str, *, base: Path | None = None) -> StoreSpec:
    """``fs:PATH`` (relative to ``base``, else to the working directory) or
    ``s3://BUCKET[/PREFIX]``; ``ValueError`` naming the problem otherwise."""
    if not isinstance(text, str):
        raise ValueError("a store is a string: fs:PATH or s3://BUCKET/PREFIX")
    if text.startswith("fs:"):
        raw = text[3:]
        if not raw or "\0" in raw:
            raise ValueError(f"store {text!r}: fs: needs a path")
        path = Path(raw)
        if not path.is_absolute():
            path = (base if base is not None else Path.cwd()) / path
        return StoreSpec("fs", path=Path(os.path.normpath(path)))
    if text.startswith("s3://"):
        bucket, _, prefix = text[5:].partition("/")
        if not _BUCKET_RE.match(bucket) or ".." in bucket:
            raise ValueError(f"store {text!r}: {bucket!r} is not an S3 bucket name")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        if prefix.startswith("/") or "//" in prefix:
            raise ValueError(f"store {text!r}: the prefix has an empty path segment")
        return StoreSpec("s3", bucket=bucket, prefix=prefix)
    raise ValueError(f"store {text!r} is neither fs:PATH nor s3://BUCKET/PREFIX")
