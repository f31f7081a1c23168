"""The transparency log over HTTP: the C2SP ``tlog-tiles`` read API, proofs and entry lookup
(``docs/http.md``, ``docs/transparency.md §5``).

Rules (the contract):

1. Routes, all ``GET``, served only when the daemon keeps a transparency log:

   * ``/checkpoint``: the latest signed checkpoint note, exactly as signed
     (``text/plain; charset=utf-8``, ``Cache-Control: no-cache``);
   * ``/tile/<L>/<N>[.p/<W>]`` and ``/tile/entries/<N>[.p/<W>]``: the tile or entry
     bundle file, byte for byte (``application/octet-stream``). The path must be one
     :func:`daemon.tlog.parse_tile_path` accepts; the file is re-addressed from the parsed
     numbers, never from the request's text. A full tile or bundle never changes:
     ``Cache-Control: public, max-age=31536000, immutable``; a partial one may be deleted
     once the full one exists: ``public, max-age=60``;
   * ``/v1/log/inclusion-proof?index=I&tree_size=S`` and
     ``/v1/log/consistency-proof?old_size=M&new_size=N``: the binary protocol's
     ``inclusion_proof`` / ``consistency_proof`` answer documents (RFC 9162 hashes, base64),
     for sizes up to the latest checkpoint, computed as the binary protocol computes them
     (:meth:`daemon.server._pipeline.Pipeline.query`: a worker asks its sequencer);
   * ``/v1/log/entry?index=I | decision_id=ID | line_digest=D``: ``{"log_index", "line"}``,
     the audit line that is leaf ``log_index`` (:mod:`daemon.tlog._lookup`), read from the
     audit files off the event loop, one lookup at a time (another at once: ``BUSY``).

2. Refusals of these routes are answers, not the end of the conversation: the error document
   with its code and status, on a connection that stays open, and **not audited** (reading
   the log must not grow it). ``TRANSPARENCY_DISABLED`` (404) without a log or before its
   first checkpoint; ``UNKNOWN_KIND`` (404) for a tile path that is not one or a tile or
   line that does not exist (yet); ``HEADER_INVALID`` (400) for a missing, repeated,
   unknown or malformed query parameter; ``PROOF_RANGE`` (400) for sizes outside the latest
   checkpoint. Authentication happened before (the listener's tokens apply).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl

import trio

from daemon.audit._transparency import audit_files
from daemon.config._hosting import ServerConfig
from daemon.server._http_codec import HttpServerCodec, RequestHead, Route
from daemon.server._http_errors import HttpRefusal, error_document
from daemon.server._pipeline import Pipeline, Refused
from daemon.tlog import CHECKPOINT_FILE, TileDirectory, TileError, parse_tile_path
from daemon.tlog._lookup import LineNotFound, LineQuery, LookupInvalid, find_line
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
_MAX_QUERY_FIELDS: Final = 4


class LogRoutes:
    """Answers the transparency-log routes of one HTTP front end (module rules)."""

    def __init__(self, config: ServerConfig, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        audit = Path(config.audit_path)
        transparency = config.transparency
        self.audit_path = audit
        self.tiles = (
            None if transparency is None else TileDirectory(transparency.directory_for(audit))
        )
        self.lookups = trio.CapacityLimiter(1)

    async def answer(self, codec: HttpServerCodec, head: RequestHead, number: int) -> bytes:
        """The framed answer to a log route (rule 1), or its refusal (rule 2)."""
        try:
            return await self._answer(codec, head, number)
        except HttpRefusal as refusal:
            body = error_document(refusal.code.name, refusal.message, None)
            return codec.respond(refusal.status, body, headers=refusal.headers)

    async def _answer(self, codec: HttpServerCodec, head: RequestHead, number: int) -> bytes:
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
            return codec.respond(200, encode_header(await self._entry(fields)))
        return codec.respond(200, encode_header(answer.to_header()))

    async def _query(self, request: Any) -> Any:
        try:
            return await self.pipeline.query(request)
        except Refused as refused:
            raise HttpRefusal(refused.code, refused.message) from None

    async def _tile(self, codec: HttpServerCodec, head: RequestHead) -> bytes:
        tiles = self.tiles
        assert tiles is not None
        relative = head.target.split("?", 1)[0][1:]
        try:
            level, index, width = parse_tile_path(relative)
        except TileError:
            raise HttpRefusal(ErrorCode.UNKNOWN_KIND, "not a tile path") from None
        if not (tiles.root / CHECKPOINT_FILE).exists():
            raise HttpRefusal(ErrorCode.TRANSPARENCY_DISABLED, "no checkpoint has been signed yet")
        data = await trio.to_thread.run_sync(tiles.read, level, index, width)
        if data is None:
            raise HttpRefusal(ErrorCode.UNKNOWN_KIND, "no such tile (yet)")
        cache = IMMUTABLE if width == TILE_WIDTH else PARTIAL
        return codec.respond(200, data, content_type=TILE_TYPE, headers=[("Cache-Control", cache)])

    async def _entry(self, fields: dict[str, str]) -> dict[str, Any]:
        unknown = set(fields) - {"index", "decision_id", "line_digest"}
        if unknown:
            raise HttpRefusal(ErrorCode.HEADER_INVALID, f"unknown parameter {sorted(unknown)[0]}")
        try:
            query = LineQuery(
                index=_integer(fields["index"], "index") if "index" in fields else None,
                decision_id=fields.get("decision_id"),
                line_digest=fields.get("line_digest"),
            )
        except LookupInvalid as error:
            raise HttpRefusal(ErrorCode.HEADER_INVALID, str(error)) from None
        try:
            self.lookups.acquire_nowait()
        except trio.WouldBlock:
            raise HttpRefusal(ErrorCode.BUSY, "another entry lookup is running; retry") from None
        try:
            files = audit_files(self.audit_path)
            index, line = await trio.to_thread.run_sync(find_line, files, query)
        except LineNotFound as error:
            raise HttpRefusal(ErrorCode.UNKNOWN_KIND, str(error)) from None
        except (OSError, UnicodeDecodeError) as error:
            raise HttpRefusal(
                ErrorCode.INTERNAL, f"the audit log cannot be read: {error}"
            ) from None
        finally:
            self.lookups.release()
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
        raise HttpRefusal(ErrorCode.HEADER_INVALID, "the query string is malformed") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise HttpRefusal(ErrorCode.HEADER_INVALID, "a query parameter is given twice")
        fields[name] = value
    return fields


def _integer(text: str, name: str) -> int:
    if not (text.isascii() and text.isdigit()) or (len(text) > 1 and text[0] == "0"):
        raise HttpRefusal(ErrorCode.HEADER_INVALID, f"{name} must be a decimal integer")
    value = int(text)
    if value > _MAX_INTEGER:
        raise HttpRefusal(ErrorCode.HEADER_INVALID, f"{name} is too large")
    return value


def _integers(fields: dict[str, str], first: str, second: str) -> tuple[int, int]:
    if set(fields) != {first, second}:
        raise HttpRefusal(ErrorCode.HEADER_INVALID, f"give exactly {first} and {second}")
    return _integer(fields[first], first), _integer(fields[second], second)
