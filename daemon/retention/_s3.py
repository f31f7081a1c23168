"""The S3 retention store: any S3-compatible object store through ``boto3``
(``docs/retention.md`` §3).

Rules (in addition to :mod:`daemon.retention._store`'s):

1. Object ``sha256:<hex>`` is the key ``PREFIX<hex>`` of ``BUCKET``. The bucket must exist
   (the store never creates one). Endpoint, region and credentials come from the environment
   exactly as boto3 reads them (``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``,
   ``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``…, ``AWS_PROFILE``, config
   files); a missing region is ``us-east-1``.
2. Retries are the SDK's: ``Config(retries={"mode": "standard"})`` — bounded exponential
   backoff with jitter (capped at 20 s) for throttling, 5xx and connection errors, at most
   ``AWS_MAX_ATTEMPTS`` attempts (boto3's default: 3), under a retry quota. Connect timeout
   :data:`CONNECT_TIMEOUT`, read timeout :data:`READ_TIMEOUT`. Whatever still fails is a
   :class:`StoreError` naming the S3 error code (``AccessDenied``, ``SlowDown``, an
   unreachable endpoint, …).
3. ``put`` sends ``If-None-Match: *`` (the object is written only if the key is absent) and
   the SHA-256 checksum of the bytes (``ChecksumAlgorithm=SHA256`` with the value computed
   here, which S3 verifies against the body and keeps with the object). ``412
   PreconditionFailed`` (or a ``409`` concurrent conditional write) means present: the
   object is then verified — its stored SHA-256 checksum and length (``HEAD`` with checksum
   mode) must be those of the bytes offered, or, when the object carries no SHA-256
   checksum, its bytes are read and compared — else :class:`ObjectCorrupt`. It is never
   overwritten. (A server that ignores ``If-None-Match`` would at worst rewrite the same
   bytes under the same name.)
4. ``get`` asks for checksum validation (the SDK checks the stored checksum while reading)
   and re-hashes the bytes itself; a length other than the log's is corrupt before any byte
   is read.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from daemon.retention._store import (
    ObjectCorrupt,
    ObjectMissing,
    PutResult,
    StoredObject,
    StoreError,
    StoreExtraMissing,
    hex_of,
)
from session import missing_extra

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["CONNECT_TIMEOUT", "READ_TIMEOUT", "S3Store"]

CONNECT_TIMEOUT: Final = 2.0
READ_TIMEOUT: Final = 10.0
#: Connections kept to the endpoint (concurrent store writes beyond this open new ones).
MAX_POOL_CONNECTIONS: Final = 32
_PRESENT_CODES: Final = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})
_MISSING_CODES: Final = frozenset({"NoSuchKey", "404", "NotFound"})


def _import_boto3() -> Any:
    missing = missing_extra("s3")  # the one line every missing extra is said with
    if missing is not None:
        raise StoreExtraMissing(str(missing))
    import boto3

    return boto3


_SESSION: list[Any] = []
_SESSION_LOCK = threading.Lock()


def shared_session() -> Any:
    """One boto3 session per process (a session loads the service models once, ~0.3 s; a
    client of an existing session costs ~10 ms). It reads the environment when a client is
    made, so each store sees the environment of its creation."""
    with _SESSION_LOCK:
        if not _SESSION:
            _SESSION.append(_import_boto3().session.Session())
        return _SESSION[0]


def _client() -> S3Client:
    from botocore.config import Config

    session = shared_session()
    client: S3Client = session.client(
        "s3",
        region_name=session.region_name or "us-east-1",
        config=Config(
            retries={"mode": "standard"},
            connect_timeout=CONNECT_TIMEOUT,
            read_timeout=READ_TIMEOUT,
            max_pool_connections=MAX_POOL_CONNECTIONS,
            tcp_keepalive=True,
        ),
    )
    return client


def _error_code(error: Exception) -> tuple[str, int | None, str]:
    """(code, HTTP status, message) of a botocore error."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        details = response.get("Error", {})
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = str(details.get("Code") or status or type(error).__name__)
        return code, status, str(details.get("Message") or error)
    return type(error).__name__, None, str(error)


class S3Store:
    """Evidence objects under ``s3://BUCKET/PREFIX`` (module rules)."""

    def __init__(self, bucket: str, prefix: str = "", *, client: S3Client | None = None) -> None:
        _import_boto3()  # without the s3 extra: StoreExtraMissing, never a ModuleNotFoundError
        from botocore.exceptions import BotoCoreError, ClientError

        self.bucket = bucket
        self.prefix = prefix
        self._errors: tuple[type[Exception], ...] = (BotoCoreError, ClientError)
        try:
            self._client = client if client is not None else _client()
        except self._errors as error:
            message = _error_code(error)[2]
            raise StoreError(f"store {self.id}: cannot create the S3 client: {message}") from None

    @property
    def id(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def close(self) -> None:
        self._client.close()

    def _key(self, hexdigest: str) -> str:
        return self.prefix + hexdigest

    def _fail(self, verb: str, name: str, error: Exception) -> StoreError:
        code, status, message = _error_code(error)
        where = f" (HTTP {status})" if status else ""
        return StoreError(f"store {self.id}: cannot {verb} {name}: {code}{where}: {message}")

    # -- put

    def put(self, data: bytes) -> PutResult:
        digest = hashlib.sha256(data).digest()
        hexdigest = digest.hex()
        name = "sha256:" + hexdigest
        checksum = base64.b64encode(digest).decode("ascii")
        try:
            self._client.put_object(
                Bucket=self.bucket,
                Key=self._key(hexdigest),
                Body=data,
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=checksum,
                IfNoneMatch="*",
                ContentType="application/octet-stream",
            )
            return PutResult(name, len(data), created=True)
        except self._errors as error:
            code, status, _ = _error_code(error)
            if code not in _PRESENT_CODES and status != 412:
                raise self._fail("store", name, error) from None
        self._verify_present(name, hexdigest, checksum, data)
        return PutResult(name, len(data), created=False)

    def _verify_present(self, name: str, hexdigest: str, checksum: str, data: bytes) -> None:
        try:
            head = self._client.head_object(
                Bucket=self.bucket, Key=self._key(hexdigest), ChecksumMode="ENABLED"
            )
        except self._errors as error:
            raise self._fail("verify the present object", name, error) from None
        size = head.get("ContentLength")
        if size != len(data):
            raise ObjectCorrupt(
                f"store {self.id}: object {name} is {size} bytes, not the {len(data)} bytes "
                "that hash to its name (corrupt; never rewritten)"
            )
        stored = head.get("ChecksumSHA256")
        if stored is not None and "-" not in stored:
            if stored != checksum:
                raise ObjectCorrupt(
                    f"store {self.id}: object {name} carries SHA-256 checksum {stored}, not "
                    "its name's (corrupt; never rewritten)"
                )
            return
        try:  # no usable checksum: compare the bytes
            same = self.get(name, len(data)) == data
        except ObjectCorrupt:
            same = False
        if not same:
            raise ObjectCorrupt(
                f"store {self.id}: object {name} holds other bytes than its name says "
                "(corrupt; never rewritten)"
            )

    # -- get, list, delete

    def get(self, name: str, size: int | None = None) -> bytes:
        hexdigest = hex_of(name)
        try:
            response = self._client.get_object(
                Bucket=self.bucket, Key=self._key(hexdigest), ChecksumMode="ENABLED"
            )
        except self._errors as error:
            code, status, _ = _error_code(error)
            if code in _MISSING_CODES or status == 404:
                raise ObjectMissing(f"store {self.id}: no object {name}") from None
            raise self._fail("read", name, error) from None
        body = response["Body"]
        try:
            length = response.get("ContentLength")
            if size is not None and length != size:
                raise ObjectCorrupt(
                    f"store {self.id}: object {name} is {length} bytes, the log says {size} "
                    "(corrupt)"
                )
            try:
                data = body.read()
            except self._errors as error:
                code, _, message = _error_code(error)
                if code == "FlexibleChecksumError":
                    raise ObjectCorrupt(
                        f"store {self.id}: object {name} does not match its stored checksum "
                        f"(corrupt): {message}"
                    ) from None
                raise self._fail("read", name, error) from None
        finally:
            body.close()
        if hashlib.sha256(data).hexdigest() != hexdigest:
            raise ObjectCorrupt(
                f"store {self.id}: object {name} does not hash to its name (corrupt)"
            )
        return data

    def objects(self) -> Iterator[StoredObject]:
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix):
                for item in page.get("Contents", []):
                    key = item.get("Key", "")
                    rest = key[len(self.prefix) :]
                    if len(rest) != 64 or any(c not in "0123456789abcdef" for c in rest):
                        continue
                    modified = item.get("LastModified")
                    yield StoredObject(
                        "sha256:" + rest,
                        int(item.get("Size", 0)),
                        modified.timestamp() if modified is not None else 0.0,
                    )
        except self._errors as error:
            raise self._fail("list", self.id, error) from None

    def delete(self, name: str) -> bool:
        """Always True when S3 answered (a DELETE of an absent key succeeds too)."""
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(hex_of(name)))
        except self._errors as error:
            raise self._fail("delete", name, error) from None
        return True
