"""Publishing a transparency log as static C2SP tiles to object storage
(``docs/transparency.md`` "Publishing").

A replica's local tile directory is the truth; publishing copies it to a place verifiers and
monitors read without reaching the replica: a directory a static HTTP server exposes
(``fs:PATH``) or an S3-compatible bucket under a per-log prefix (``s3://BUCKET/PREFIX/``).

Rules (the contract):

1. One pass (:meth:`Publisher.sync`) reads the local signed checkpoint, and for the tree size
   it names uploads, in tile order (level by level, index by index), every full tile the tree
   needs that is not known to be published, then every partial tile of that size (entry
   bundles the same way, when the log keeps them), and **the checkpoint last**: a reader that
   sees a checkpoint finds every tile it needs.
2. A full tile is immutable: one already at the target is compared byte for byte and never
   rewritten; different bytes are ``TILE_CONFLICT`` (the target holds another log, or was
   edited) and the pass stops before the checkpoint. Partial tiles and the checkpoint are
   (re)written.
3. Full tiles published by an earlier pass of this publisher are not read or sent again; the
   first pass after a start checks the target for each full tile, so whatever an earlier run
   left missing is published again (the local log is the truth).
4. A pass that fails raises :class:`PublishError` (its ``code`` says why) and publishes no
   checkpoint; what it uploaded stays. :class:`PublishLoop` runs passes in a thread of its
   own when the local checkpoint changes, retries failures with exponential backoff
   (:data:`FIRST_BACKOFF` doubling to :data:`MAX_BACKOFF`) and reports :meth:`~PublishLoop.
   status` for ``health`` and ``/metrics``; it never blocks or fails a decision.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Protocol

import attrs

from daemon.tlog import CHECKPOINT_FILE, CheckpointError, peek_checkpoint
from daemon.tlog._tiles import ENTRIES, TileDirectory, tile_path, tile_widths
from daemon.wire._errors import ServiceError

__all__ = [
    "FIRST_BACKOFF",
    "MAX_BACKOFF",
    "PublishError",
    "PublishLoop",
    "PublishStatus",
    "Publisher",
    "Target",
    "open_target",
]

FIRST_BACKOFF: Final = 1.0
MAX_BACKOFF: Final = 60.0


class PublishError(ServiceError):
    """A publishing pass failed: ``code`` is ``TILE_CONFLICT``, ``TARGET_FAILED``,
    ``LOCAL_MISSING`` or ``TARGET_INVALID``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Target(Protocol):
    """Where tiles are published: ``read`` is ``None`` for an absent object."""

    @property
    def id(self) -> str: ...

    def read(self, relative: str) -> bytes | None: ...

    def write(self, relative: str, data: bytes, *, immutable: bool) -> None: ...


class DirectoryTarget:
    """``fs:PATH``: files written by temporary file and ``rename`` (a static server never
    serves half a tile)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._tiles = TileDirectory(root)

    @property
    def id(self) -> str:
        return f"fs:{self.root}"

    def read(self, relative: str) -> bytes | None:
        return self._tiles.read_file(relative)

    def write(self, relative: str, data: bytes, *, immutable: bool) -> None:
        try:
            self._tiles.write_atomic(relative, data, sync=False)
        except OSError as error:
            raise PublishError("TARGET_FAILED", f"{self.id}/{relative}: {error}") from None


class BucketTarget:
    """``s3://BUCKET/PREFIX/``: through the retention room's boto3 client (endpoint, region
    and credentials from the environment, as the S3 evidence store reads them)."""

    def __init__(self, bucket: str, prefix: str, client: Any = None) -> None:
        from daemon.retention._s3 import _client

        self.bucket = bucket
        self.prefix = prefix
        self._client = client if client is not None else _client()

    @property
    def id(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def _fail(self, verb: str, relative: str, error: Exception) -> PublishError:
        from daemon.retention._s3 import _error_code

        code, _, message = _error_code(error)
        return PublishError("TARGET_FAILED", f"{verb} {self.id}{relative}: {code}: {message}")

    def read(self, relative: str) -> bytes | None:
        try:
            answer = self._client.get_object(Bucket=self.bucket, Key=self.prefix + relative)
            return bytes(answer["Body"].read())
        except Exception as error:  # boto3 raises botocore's ClientError and transport errors
            from daemon.retention._s3 import _error_code

            if _error_code(error)[0] in {"NoSuchKey", "404", "NotFound"}:
                return None
            raise self._fail("GET", relative, error) from None

    def write(self, relative: str, data: bytes, *, immutable: bool) -> None:
        if immutable:
            cache = "public, max-age=31536000, immutable"
        else:  # as the daemon serves them (docs/transparency.md §5)
            cache = "no-cache" if relative == CHECKPOINT_FILE else "public, max-age=60"
        try:
            self._client.put_object(
                Bucket=self.bucket,
                Key=self.prefix + relative,
                Body=data,
                CacheControl=cache,
                ContentType="application/octet-stream"
                if relative != CHECKPOINT_FILE
                else "text/plain; charset=utf-8",
            )
        except Exception as error:
            raise self._fail("PUT", relative, error) from None


class HttpSource:
    """``http(s)://…/``: published tiles read over HTTP (a static server, a CDN, a daemon's
    own tile endpoints). Read-only: nothing is published to it."""

    def __init__(self, base: str, timeout: float = 10.0) -> None:
        self.base = base if base.endswith("/") else base + "/"
        self.timeout = timeout

    @property
    def id(self) -> str:
        return self.base

    def read(self, relative: str) -> bytes | None:
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(self.base + relative, timeout=self.timeout) as answer:
                return bytes(answer.read())
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise PublishError("TARGET_FAILED", f"GET {self.base}{relative}: {error}") from None
        except (urllib.error.URLError, OSError) as error:
            raise PublishError("TARGET_FAILED", f"GET {self.base}{relative}: {error}") from None

    def write(self, relative: str, data: bytes, *, immutable: bool) -> None:
        raise PublishError("TARGET_INVALID", f"{self.base} is read-only (an HTTP source)")


def open_target(spec: str) -> Target:
    """``fs:PATH``, ``s3://BUCKET[/PREFIX/]`` or (read-only) ``http(s)://…`` → a
    :class:`Target`; anything else is ``TARGET_INVALID``."""
    if spec.startswith(("http://", "https://")):
        return HttpSource(spec)
    if spec.startswith("fs:") and len(spec) > 3:
        return DirectoryTarget(Path(spec[3:]))
    if spec.startswith("s3://"):
        bucket, _, prefix = spec[5:].partition("/")
        if not bucket:
            raise PublishError("TARGET_INVALID", f"{spec!r}: no bucket")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return BucketTarget(bucket, prefix)
    raise PublishError(
        "TARGET_INVALID", f"{spec!r}: a publish target is fs:PATH or s3://BUCKET/PREFIX/"
    )


def _tiles_for(size: int, bundles: bool) -> Iterator[tuple[str, bool]]:
    """(path, full) of every tile (and bundle) a tree of ``size`` needs, in tile order: full
    tiles first, level by level, then the partial tiles (rule 1)."""
    widths = tile_widths(size)
    for level, full, _ in widths:
        for index in range(full):
            yield tile_path(level, index), True
            if bundles and level == 0:
                yield tile_path(ENTRIES, index), True
    for level, full, width in widths:
        if width:
            yield tile_path(level, full, width), False
            if bundles and level == 0:
                yield tile_path(ENTRIES, full, width), False


class Publisher:
    """Publishes one local tile directory to one target (rules 1–3)."""

    def __init__(
        self, directory: Path, target: Target, *, entry_bundles: bool | None = None
    ) -> None:
        self.directory = directory
        self.target = target
        #: Publish entry bundles too (default: when the local log keeps them).
        self.entry_bundles = (
            (directory / "tile" / ENTRIES).is_dir() if entry_bundles is None else entry_bundles
        )
        self._local = TileDirectory(directory)
        self._known: set[str] = set()
        self.published_size: int | None = None
        self.published_note: bytes | None = None

    def local_checkpoint(self) -> bytes:
        note = self._local.read_file(CHECKPOINT_FILE)
        if note is None:
            raise PublishError("LOCAL_MISSING", f"{self.directory} has no {CHECKPOINT_FILE}")
        return note

    def sync(self) -> int:
        """One pass; the tree size now published (rule 1)."""
        note = self.local_checkpoint()
        if note == self.published_note and self.published_size is not None:
            return self.published_size
        try:
            size = peek_checkpoint(note).size
        except CheckpointError as error:
            raise PublishError("LOCAL_MISSING", f"local checkpoint: {error}") from None
        for relative, full in _tiles_for(size, self.entry_bundles):
            if full and relative in self._known:
                continue
            data = self._local.read_file(relative)
            if data is None:
                raise PublishError("LOCAL_MISSING", f"{self.directory}/{relative} is missing")
            if full:
                present = self.target.read(relative)
                if present is not None and present != data:
                    raise PublishError(
                        "TILE_CONFLICT",
                        f"{self.target.id}: {relative} differs from the local log's",
                    )
                if present is None:
                    self.target.write(relative, data, immutable=True)
                self._known.add(relative)
            else:
                self.target.write(relative, data, immutable=False)
        self.target.write(CHECKPOINT_FILE, note, immutable=False)
        self.published_size, self.published_note = size, note
        return size


@attrs.frozen
class PublishStatus:
    target: str
    published_size: int | None
    local_size: int | None
    failures: int
    last_error: str | None
    last_success: float | None

    @property
    def lag(self) -> int | None:
        if self.local_size is None:
            return None
        return self.local_size - (self.published_size or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "published_size": self.published_size,
            "local_size": self.local_size,
            "lag": self.lag,
            "failures": self.failures,
            "last_error": self.last_error,
            "last_success": self.last_success,
        }


class PublishLoop:
    """Runs :meth:`Publisher.sync` in a daemon thread whenever the local checkpoint changes
    (polled every ``interval`` seconds), with backoff after a failure (rule 4)."""

    def __init__(self, publisher: Publisher, *, interval: float = 1.0) -> None:
        self.publisher = publisher
        self.interval = interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._failures = 0
        self._last_error: str | None = None
        self._last_success: float | None = None
        self._thread = threading.Thread(target=self._run, name="evidenced-publish", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def status(self) -> PublishStatus:
        """The state now: the local size is read afresh (one small file), so the lag is never
        stale between passes."""
        try:
            local: int | None = peek_checkpoint(self.publisher.local_checkpoint()).size
        except (PublishError, CheckpointError, OSError):
            local = None
        with self._lock:
            return PublishStatus(
                target=self.publisher.target.id,
                published_size=self.publisher.published_size,
                local_size=local,
                failures=self._failures,
                last_error=self._last_error,
                last_success=self._last_success,
            )

    def pass_once(self) -> bool:
        """One pass; whether it succeeded (the error is kept for :meth:`status`; a local log
        with no checkpoint yet is not a publishing failure)."""
        try:
            self.publisher.sync()
        except PublishError as error:
            with self._lock:
                if error.code == "LOCAL_MISSING":
                    self._last_error = str(error)
                else:
                    self._failures += 1
                    self._last_error = f"{error.code}: {error}"
            return False
        except OSError as error:  # reading the local directory
            with self._lock:
                self._last_error = str(error)
            return False
        with self._lock:
            self._last_error = None
            self._last_success = time.time()
        return True

    def _run(self) -> None:
        backoff = FIRST_BACKOFF
        while not self._stop.is_set():
            if self.pass_once():
                backoff = FIRST_BACKOFF
                self._stop.wait(self.interval)
            else:
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)


class TargetTiles:
    """A target seen as a tile directory (``read(level, index, width)``), so
    :class:`daemon.tlog._tiles.TileReader` proves from published tiles."""

    def __init__(self, target: Target) -> None:
        self.target = target

    def read(self, level: int | str, index: int, width: int = 256) -> bytes | None:
        return self.target.read(tile_path(level, index, width))

    def read_file(self, relative: str) -> bytes | None:
        return self.target.read(relative)


def publish_directory(directory: str | os.PathLike[str], spec: str) -> int:
    """One pass from ``directory`` to the target ``spec``; the published tree size."""
    return Publisher(Path(directory), open_target(spec)).sync()
