"""The transparency log over HTTP: the C2SP ``tlog-tiles`` read API, proofs and entry lookup
(``docs/http.md``, ``docs/transparency.md §5``).

Rules (the contract):

1. Routes, all ``GET``, served only when the daemon keeps a transparency log:

   * ``/checkpoint``: the latest signed checkpoint note, exactly as signed
     (``text/plain; charset=utf-8``, ``Cache-Control: no-cache``);
   * ``/tile/<L>/<N>[.p/<W>]`` and ``/tile/entries/<N>[.p/<W>]``: the tile or entry
     bundle file, byte for byte (``application/octet-stream``). The path must be one
     :func:`daemon.tlog.parse_tile_path` accepts (its length bounded before a number is
     converted); the file is re-addressed from the parsed numbers, never from the request's
     text, and read by the one guarded way (:mod:`daemon.tlog._served_files`: rules 1–5, a
     regular file under the directory, no link followed; rule 6, off the event loop under
     its own limiter and deadline). A full tile or bundle never changes:
     ``Cache-Control: public, max-age=31536000, immutable``; a partial one may be deleted
     once the full one exists: ``public, max-age=60``;
   * ``/v1/log/inclusion-proof?index=I&tree_size=S`` and
     ``/v1/log/consistency-proof?old_size=M&new_size=N``: the binary protocol's
     ``inclusion_proof`` / ``consistency_proof`` answer documents (RFC 9162 hashes, base64),
     for sizes up to the latest checkpoint, computed as the binary protocol computes them
     (:meth:`daemon.server._pipeline.Pipeline.query`: a worker asks its sequencer);
   * ``/v1/log/entry?index=I | decision_id=ID | line_digest=D``: ``{"log_index", "line"}``,
     the audit line that is leaf ``log_index``, found by the one guarded lookup
     (:meth:`daemon.server._pipeline.Pipeline.find_line`, :mod:`daemon.tlog._lookup` rules
     5–7: the index, then the line read from disk), within the lookup budget (rule 8 there:
     at most 8 at once, 2 of them one peer's; over it: ``BUSY``).

2. Refusals of these routes are answers, not the end of the conversation: the error document
   with its code and status, on a connection that stays open, and **not audited** (reading
   the log must not grow it). ``TRANSPARENCY_DISABLED`` (404) without a log or before its
   first checkpoint; ``UNKNOWN_KIND`` (404) for a tile path that is not one or a tile or
   line that does not exist (yet), or a file refused by the guard (a FIFO, a link: the
   operator sees a ``served_file_refused`` warning); ``HEADER_INVALID`` (400) for a missing,
   repeated, unknown or malformed query parameter (an integer is at most 19 digits, checked
   before it is converted); ``PROOF_RANGE`` (400) for sizes outside the latest checkpoint;
   ``BUSY`` (503) while the lookup index is rebuilt, over the lookup budget or when a read
   did not finish within its deadline. Authentication happened before (the listener's
   tokens apply).
3. A malformed request — not a tile path, a malformed query — is also *noise*
   (:mod:`daemon.server._noise`, :mod:`daemon.server._connection` rule 4): counted per peer
   and summarised, never an error line or an audit line each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl

from daemon.config._hosting import ServerConfig
from daemon.server._http_codec import HttpServerCodec, RequestHead, Route
from daemon.server._http_errors import HttpRefusal, error_document
from daemon.server._pipeline import Pipeline, Refused
from daemon.tlog import CHECKPOINT_FILE, TileDirectory, TileError, parse_tile_path
from daemon.tlog._lookup import LineQuery, LookupBudget, LookupBusy, LookupInvalid
from daemon.tlog._served_files import ReadsStuck
from daemon.tlog._tiles import TILE_WIDTH
from daemon.wire._protocol import (
    CheckpointNote,
    CheckpointRequest,
    ConsistencyProofRequest,
    ErrorCode,
    InclusionProofRequest,
    encode_header,
)

__all__ = ["LOG_ROUTES", "LogRoutes"]

LOG_ROUTES: Final = frozenset(
    {
        Route.CHECKPOINT,
        Route.TILE,
        Route.INCLUSION_PROOF,
        Route.CONSISTENCY_PROOF,
        Route.LOG_ENTRY,
    }
)
IMMUTABLE: Final = "public, max-age=31536000, immutable"
PARTIAL: Final = "public, max-age=60"
CHECKPOINT_CACHE: Final = "no-cache"
NOTE_TYPE: Final = "text/plain; charset=utf-8"
TILE_TYPE: Final = "application/octet-stream"
_MAX_INTEGER: Final = (1 << 63) - 1
_MAX_DIGITS: Final = len(str(_MAX_INTEGER))
_MAX_QUERY_FIELDS: Final = 4


class _Malformed(HttpRefusal):
    """A refusal of a malformed request: noise (rule 3)."""


class LogRoutes:
    """Answers the transparency-log routes of one HTTP front end (module rules)."""

    def __init__(self, config: ServerConfig, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        audit = Path(config.audit_path)
        transparency = config.transparency
        self.tiles = (
            None if transparency is None else TileDirectory(transparency.directory_for(audit))
        )
        self.lookups = LookupBudget()

    async def answer(
        self, codec: HttpServerCodec, head: RequestHead, number: int, peer: str
    ) -> bytes:
        """The framed answer to a log route (rule 1), or its refusal (rules 2, 3)."""
        try:
            return await self._answer(codec, head, number, peer)
        except HttpRefusal as refusal:
            if isinstance(refusal, _Malformed):
                self.pipeline.noise.record(peer)
            body = error_document(refusal.code.name, refusal.message, None)
            return codec.respond(refusal.status, body, headers=refusal.headers)

    async def _answer(
        self, codec: HttpServerCodec, head: RequestHead, number: int, peer: str
    ) -> bytes:
        route = head.route
        if self.tiles is None:
            raise HttpRefusal(
                ErrorCode.TRANSPARENCY_DISABLED, "this daemon keeps no transparency log"
            )
        if route is Route.CHECKPOINT:
            answer = await self._query(CheckpointRequest(number))
            assert isinstance(answer, CheckpointNote)
            return codec.respond(
                200,
                answer.note.encode("utf-8"),
                content_type=NOTE_TYPE,
                headers=[("Cache-Control", CHECKPOINT_CACHE)],
            )
        if route is Route.TILE:
            return await self._tile(codec, head)
        fields = _query_fields(head.target)
        if route is Route.INCLUSION_PROOF:
            index, size = _integers(fields, "index", "tree_size")
            answer = await self._query(InclusionProofRequest(number, index, size))
        elif route is Route.CONSISTENCY_PROOF:
            old, new = _integers(fields, "old_size", "new_size")
            answer = await self._query(ConsistencyProofRequest(number, old, new))
        else:
            return codec.respond(200, encode_header(await self._entry(fields, peer)))
        return codec.respond(200, encode_header(answer.to_header()))

    async def _query(self, request: Any) -> Any:
        try:
            return await self.pipeline.query(request)
        except Refused as refused:
            raise HttpRefusal(refused.code, refused.message) from None

    async def _tile(self, codec: HttpServerCodec, head: RequestHead) -> bytes:
        relative = head.target.split("?", 1)[0][1:]
        try:
            level, index, width = parse_tile_path(relative)
        except TileError:
            raise _Malformed(ErrorCode.UNKNOWN_KIND, "not a tile path") from None
        try:
            signed, data = await self.pipeline.file_reads.run(self._read_tile, level, index, width)
        except ReadsStuck as stuck:
            raise HttpRefusal(ErrorCode.BUSY, str(stuck)) from None
        if not signed:
            raise HttpRefusal(ErrorCode.TRANSPARENCY_DISABLED, "no checkpoint has been signed yet")
        if data is None:
            raise HttpRefusal(ErrorCode.UNKNOWN_KIND, "no such tile (yet)")
        cache = IMMUTABLE if width == TILE_WIDTH else PARTIAL
        return codec.respond(200, data, content_type=TILE_TYPE, headers=[("Cache-Control", cache)])

    def _read_tile(self, level: int | str, index: int, width: int) -> tuple[bool, bytes | None]:
        """(a read thread) Whether a checkpoint was signed, and the tile's bytes (rule 1)."""
        tiles = self.tiles
        assert tiles is not None
        if tiles.read_file(CHECKPOINT_FILE) is None:
            return False, None
        return True, tiles.read(level, index, width)

    async def _entry(self, fields: dict[str, str], peer: str) -> dict[str, Any]:
        unknown = set(fields) - {"index", "decision_id", "line_digest"}
        if unknown:
            raise _Malformed(ErrorCode.HEADER_INVALID, f"unknown parameter {sorted(unknown)[0]}")
        try:
            query = LineQuery(
                index=_integer(fields["index"], "index") if "index" in fields else None,
                decision_id=fields.get("decision_id"),
                line_digest=fields.get("line_digest"),
            )
        except LookupInvalid as error:
            raise _Malformed(ErrorCode.HEADER_INVALID, str(error)) from None
        try:
            with self.lookups.slot(peer):
                index, line = await self.pipeline.find_line(query)
        except LookupBusy as busy:
            raise HttpRefusal(ErrorCode.BUSY, str(busy)) from None
        except Refused as refused:
            raise HttpRefusal(refused.code, refused.message) from None
        return {"log_index": index, "line": line.decode("utf-8")}


def _query_fields(target: str) -> dict[str, str]:
    """The query string's parameters, each given at most once (rule 2)."""
    _, _, query = target.partition("?")
    try:
        pairs = parse_qsl(
            query,
            keep_blank_values=True,
            strict_parsing=bool(query),
            max_num_fields=_MAX_QUERY_FIELDS,
            errors="strict",
        )
    except (ValueError, UnicodeDecodeError):
        raise _Malformed(ErrorCode.HEADER_INVALID, "the query string is malformed") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise _Malformed(ErrorCode.HEADER_INVALID, "a query parameter is given twice")
        fields[name] = value
    return fields


def _integer(text: str, name: str) -> int:
    """A decimal integer of at most 19 digits, bounded before it is converted (rule 2)."""
    if not (text.isascii() and text.isdigit()) or (len(text) > 1 and text[0] == "0"):
        raise _Malformed(ErrorCode.HEADER_INVALID, f"{name} must be a decimal integer")
    if len(text) > _MAX_DIGITS or int(text) > _MAX_INTEGER:
        raise _Malformed(ErrorCode.HEADER_INVALID, f"{name} is too large")
    return int(text)


def _integers(fields: dict[str, str], first: str, second: str) -> tuple[int, int]:
    if set(fields) != {first, second}:
        raise _Malformed(ErrorCode.HEADER_INVALID, f"give exactly {first} and {second}")
    return _integer(fields[first], first), _integer(fields[second], second)
