"""The daemon's side of the transparency log: configuration, start-up against the audit log,
and the answers to the ``checkpoint``, ``inclusion_proof`` and ``consistency_proof`` requests
(``docs/spec/transparency.md §6``, ``§10``).

Rules (the contract):

1. Configuration (:class:`TransparencyConfig`): a key file (required to enable the log), an
   origin (default :func:`daemon.tlog.default_origin` of the audit log path), the directory
   (default ``LOG.tlog``), ``checkpoint_interval`` (seconds), ``entry_bundles`` and
   ``publish`` (``fs:PATH`` or ``s3://BUCKET/PREFIX/``; :mod:`daemon.server._publishing`):
   each the ``[transparency]`` key of that name, whose default and range rule are the schema's
   (:class:`~daemon.schema._tables.TransparencyTable`), read from it, never restated here.
2. :func:`open_transparency` refuses (:class:`TransparencyStartError`, the CLI exits 65), in
   order: an unsafe or invalid key file (``docs/spec/transparency.md §6.3``); a key whose name
   is not the origin; then every start-up check of ``§6.4``. It reads audit lines from the
   live file and its rotated files, backwards from the end when only the tail is needed.
3. :func:`attach` gives the started log to the audit log (every durable line becomes a leaf)
   and starts the background verification of the whole tree against the lines
   (:func:`daemon.audit._background_verify.start_tree`, after the chain's own, if any): an
   edited tile found there is the audit log's ``alarm`` (``health`` ``degraded``), never a
   refusal to serve. It also gives the audit log its lookup index
   (:class:`daemon.tlog._lookup.LineIndex`, rules 5–6 there: fed with every durable line,
   rebuilt from the files in the background), what ``GET /v1/log/entry`` asks.
4. Requests are answered from tile files only, for sizes up to the latest checkpoint; a size
   or index out of range is the peer's fault (:data:`PROOF_RANGE`), no transparency log is
   :data:`TRANSPARENCY_DISABLED`, a tile that cannot be read (missing, or refused by
   :mod:`daemon.tlog._served_files`) is :data:`INTERNAL`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

import attrs

from daemon.audit._audit import AuditLog, AuditLogError
from daemon.audit._background_verify import start_tree
from daemon.schema._tables import TransparencyTable, check_ranges, default_of
from daemon.tlog import (
    KeyFileError,
    ProofRangeError,
    SignerKey,
    TileError,
    TransparencyError,
    TransparencyLog,
    default_origin,
    load_signer,
)
from daemon.tlog._lookup import LineIndex
from daemon.tlog._names import log_tag
from daemon.tlog._note import b64encode
from daemon.tlog._verify import iter_lines
from daemon.wire._errors import PeerError
from daemon.wire._protocol import (
    CheckpointNote,
    CheckpointRequest,
    ConsistencyProof,
    ConsistencyProofRequest,
    InclusionProof,
    InclusionProofRequest,
)

DEFAULT_INTERVAL: Final = default_of(TransparencyTable, "checkpoint_interval")
PROOF_RANGE: Final = "PROOF_RANGE"
TRANSPARENCY_DISABLED: Final = "TRANSPARENCY_DISABLED"
#: A proof whose tiles cannot be read (missing, or refused: ``daemon.tlog._served_files``).
INTERNAL: Final = "INTERNAL"
_ARCHIVE_RE: Final = re.compile(r"\.(\d{12})-(\d{12})\Z")
_TAIL_CHUNK: Final = 1 << 16
#: Up to this many lines are read backwards from the end; more are streamed forwards.
_TAIL_LIMIT: Final = 100_000


class TransparencyStartError(AuditLogError):
    """The transparency log cannot start; the message says why and what to do (the daemon
    refuses to start, as for a broken audit log)."""


@attrs.frozen
class TransparencyConfig:
    key_file: str
    origin: str | None = default_of(TransparencyTable, "origin")
    directory: str | None = default_of(TransparencyTable, "directory")
    checkpoint_interval: float = DEFAULT_INTERVAL
    entry_bundles: bool = default_of(TransparencyTable, "entry_bundles")
    #: ``fs:PATH`` or ``s3://BUCKET/PREFIX/``: where the daemon publishes the log (or None).
    publish: str | None = default_of(TransparencyTable, "publish")

    def __attrs_post_init__(self) -> None:
        check_ranges(TransparencyTable, self, ("checkpoint_interval",))
        if type(self.entry_bundles) is not bool:
            raise ValueError("entry_bundles must be a boolean")
        publish = self.publish
        if publish is not None and not (
            (publish.startswith("fs:") and len(publish) > 3)
            or (publish.startswith("s3://") and len(publish) > 5 and publish[5] != "/")
        ):
            raise ValueError("publish must be fs:PATH or s3://BUCKET/PREFIX/")

    def origin_for(self, log: Path) -> str:
        """The log's origin: ``origin``, else the default named after ``log``."""
        return self.origin or default_origin(log)

    def directory_for(self, log: Path) -> Path:
        return Path(self.directory) if self.directory else log.with_name(log.name + ".tlog")


def audit_files(log: Path) -> list[Path]:
    """The rotated files of ``log`` (``LOG.<first seq>-<last seq>``, in chain order), then
    ``log`` itself."""
    archives = sorted(
        path
        for path in log.parent.glob(log.name + ".*")
        if _ARCHIVE_RE.search(path.name)
        and path.name[: -len(".000000000000-000000000000")] == log.name
    )
    return [*archives, log] if log.exists() else archives


def _tail(files: list[Path], count: int) -> list[bytes]:
    """The last ``count`` complete lines of ``files`` (fewer if they hold fewer); a final
    segment without a newline (a torn tail) is not a line."""
    found: list[bytes] = []
    for path in reversed(files):
        with path.open("rb") as handle:
            end = _last_newline_end(handle)
            position, carry = end, b""
            while position > 0 and len(found) < count:
                step = min(_TAIL_CHUNK, position)
                position -= step
                handle.seek(position)
                parts = (handle.read(step) + carry).split(b"\n")
                carry = parts[0]
                found[:0] = parts[1:-1] if position + step == end else parts[1:]
            if position == 0 and end and len(found) < count:
                found.insert(0, carry)
        if len(found) >= count:
            break
    return found[-count:] if count else []


def _last_newline_end(handle: BinaryIO) -> int:
    """The offset just after the file's last newline (0 when it has none)."""
    position = handle.seek(0, os.SEEK_END)
    while position > 0:
        step = min(_TAIL_CHUNK, position)
        position -= step
        handle.seek(position)
        chunk = handle.read(step)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return position + newline + 1
    return 0


def line_source(log: Path, last_seq: int) -> Any:
    """``lines(first_seq)`` over the audit log and its rotated files (``last_seq`` lines)."""

    def lines(first_seq: int) -> Iterator[bytes]:
        count = last_seq - first_seq + 1
        if count <= 0:
            return iter(())
        files = audit_files(log)
        if count <= _TAIL_LIMIT:
            return iter(_tail(files, count))
        return _forward(files, first_seq)

    return lines


def _forward(files: list[Path], first_seq: int) -> Iterator[bytes]:
    torn = [False]
    started = False
    for line in iter_lines(files, torn):
        if not started:
            try:
                seq = json.loads(line).get("seq")
            except (ValueError, AttributeError):
                seq = None
            if seq != 1:
                return  # rotated files are missing: the caller reports LOG_UNAVAILABLE
            started = True
            skip = first_seq - 1
        if skip:
            skip -= 1
            continue
        yield line


def transparency_signer(config: TransparencyConfig, log: Path) -> SignerKey:
    """The signing key of ``log``'s transparency log, named for its origin: an unreadable or
    malformed key, or one named for another origin, is :class:`TransparencyStartError`. The
    one check of the key both ``serve`` (at start) and ``config check`` run, so a
    configuration the check passes is one whose key ``serve`` accepts."""
    try:
        signer = load_signer(config.key_file)
    except KeyFileError as error:
        raise TransparencyStartError(str(error)) from None
    origin = config.origin_for(log)
    if signer.name != origin:
        raise TransparencyStartError(
            f"the key in {config.key_file} is named {signer.name!r} but the log's origin is"
            f" {origin!r}: set [transparency] origin to the key's name, or create a key for"
            f" this origin (evidenced log keygen --origin {origin} --out FILE)"
        )
    return signer


def open_transparency(
    config: TransparencyConfig, log: Path, last_seq: int, *, sync: bool
) -> TransparencyLog:
    """Start the transparency log of ``log`` whose last durable line is ``last_seq``."""
    signer = transparency_signer(config, log)
    directory = config.directory_for(log)
    try:
        return TransparencyLog.open(
            directory,
            signer,
            log_size=last_seq,
            lines=line_source(log, last_seq),
            sync=sync,
            entry_bundles=config.entry_bundles,
            interval=float(config.checkpoint_interval),
        )
    except TransparencyError as error:
        raise TransparencyStartError(
            f"transparency log {directory}: {error.code}: {error}"
        ) from None
    except OSError as error:
        raise TransparencyStartError(
            f"transparency log {directory}: {error.strerror or error}"
        ) from None


def attach(audit: AuditLog, tree: TransparencyLog) -> None:
    """Rule 3: ``tree`` takes ``audit``'s lines from now on; its tiles on disk are verified
    against the lines in the background."""
    audit.transparency = tree
    attach_index(audit).start_rebuild()
    audit.tree_background = start_tree(
        audit.path,
        tree.directory,
        lambda: audit_files(audit.path),
        tree.signer.verifier(),
        after=audit.background,
    )


def attach_index(audit: AuditLog) -> LineIndex:
    """The lookup index of ``audit`` (rule 3), fed from now on; its rebuild of the lines
    already on disk is the caller's to start (:meth:`LineIndex.start_rebuild`)."""
    index = LineIndex(
        audit.path,
        first_seq=audit._file_first_seq,
        durable_seq=audit.durable.seq,
        durable_size=audit._size,
    )
    audit.line_index = index
    return index


# --------------------------------------------------------------------------- requests


class RequestRefused(PeerError):
    """A transparency request the peer got wrong (or that this daemon cannot serve)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _require(log: TransparencyLog | None) -> TransparencyLog:
    if log is None or log.checkpoint_note is None:
        raise RequestRefused(TRANSPARENCY_DISABLED, "this daemon keeps no transparency log")
    return log


def checkpoint_answer(log: TransparencyLog | None) -> str:
    note = _require(log).checkpoint_note
    assert note is not None
    return note.decode("utf-8")


def inclusion_answer(log: TransparencyLog | None, index: int, tree_size: int) -> list[str]:
    try:
        return [b64encode(item) for item in _require(log).inclusion_proof(index, tree_size)]
    except ProofRangeError as error:
        raise RequestRefused(PROOF_RANGE, str(error)) from None
    except TileError as error:
        raise RequestRefused(INTERNAL, f"the tiles cannot be read: {error}") from None


def consistency_answer(log: TransparencyLog | None, old_size: int, new_size: int) -> list[str]:
    try:
        return [b64encode(item) for item in _require(log).consistency_proof(old_size, new_size)]
    except ProofRangeError as error:
        raise RequestRefused(PROOF_RANGE, str(error)) from None
    except TileError as error:
        raise RequestRefused(INTERNAL, f"the tiles cannot be read: {error}") from None


TransparencyRequest = CheckpointRequest | InclusionProofRequest | ConsistencyProofRequest


def answer(
    log: TransparencyLog | None, request: TransparencyRequest
) -> CheckpointNote | InclusionProof | ConsistencyProof:
    """The answer to a transparency request, or :class:`RequestRefused` (rule 4)."""
    if isinstance(request, CheckpointRequest):
        return CheckpointNote(request.request_id, checkpoint_answer(log))
    if isinstance(request, InclusionProofRequest):
        proof = inclusion_answer(log, request.index, request.tree_size)
        return InclusionProof(request.request_id, request.index, request.tree_size, tuple(proof))
    proof = consistency_answer(log, request.old_size, request.new_size)
    return ConsistencyProof(request.request_id, request.old_size, request.new_size, tuple(proof))


def status(log: TransparencyLog | None, index: LineIndex | None = None) -> dict[str, Any] | None:
    if log is None:
        return None
    checkpoint = log.checkpoint
    return {
        "origin": log.origin,
        "log_tag": log_tag(log.origin),
        "verifier_key": log.signer.verifier().encode(),
        "directory": str(log.directory),
        "size": log.size,
        "checkpoint_size": None if checkpoint is None else checkpoint.size,
        "signatures": log.signatures,
        "failed": log.failure,
        "lookup_index": None if index is None else index.status(),
    }
