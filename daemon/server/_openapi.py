"""The OpenAPI 3.1 description of the HTTP API, built from the route table and served at
``GET /openapi.json`` (``docs/http.md``; a copy is kept in ``docs/openapi.json``).

Rules (the contract):

1. :func:`document` is the whole description, built here from the codec's route table
   (:data:`daemon.server._http_codec.ROUTES`, the submit path and the tile prefix) and
   :data:`OPERATIONS`: a route without an operation, or an operation without a route, is a
   ``KeyError`` at import, so the description cannot name a route the server lacks or miss
   one it has. ``tests/daemon/test_openapi.py`` holds ``docs/openapi.json`` byte-equal to
   :func:`rendered` and validates it with ``openapi-spec-validator``.
2. Answer documents are described as the server writes them: the binary protocol's answer
   headers (``kind``, ``request_id``, ...), the refusal document ``{"error": {...}}`` with the
   closed vocabulary of codes (:data:`daemon.wire._protocol.ERROR_CODES`), and every status
   a route can answer (a refusal's status is :data:`daemon.server._http_errors.STATUS_OF`'s).
3. ``python -m daemon.server._openapi`` prints :func:`rendered` (what ``docs/openapi.json``
   holds: ``make openapi`` writes it).
"""

from __future__ import annotations

import json
import sys
from functools import cache
from typing import Any, Final

from daemon import __version__
from daemon.server._http_codec import ROUTES, TILE_PREFIX, HttpServerCodec, Route
from daemon.wire._protocol import ERROR_CODES

__all__ = ["OPERATIONS", "document", "openapi_answer", "rendered"]

_JSON: Final = "application/json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(_ref("Error"), description)


_RETRY = {"Retry-After": {"schema": {"type": "string"}, "description": "seconds"}}

#: Refusals every request can meet before its route runs (the head, the token, the caps).
_COMMON_REFUSALS: Final = {
    "400": _error("HEADER_INVALID or TRUNCATED_FRAME: a malformed or ambiguous request"),
    "401": _error("UNAUTHENTICATED: the listener has a tokens_file and no valid token came"),
    "408": _error("IDLE_TIMEOUT: the request did not arrive in time"),
    "431": _error("HEADER_TOO_LARGE: the request head is over max_header_bytes/max_headers"),
    "503": {**_error("BUSY or SHUTTING_DOWN"), "headers": _RETRY},
}
_LOG_REFUSALS: Final = {
    **_COMMON_REFUSALS,
    "400": _error("HEADER_INVALID (a query parameter) or PROOF_RANGE"),
    "404": _error(
        "TRANSPARENCY_DISABLED (no transparency log, or no checkpoint yet) or UNKNOWN_KIND "
        "(no such tile or line)"
    ),
}
_INTEGER = {"type": "string", "pattern": "^(0|[1-9][0-9]{0,18})$", "examples": ["1"]}


def _parameter(name: str, where: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    required = where == "path"
    return {
        "name": name,
        "in": where,
        "required": required,
        "description": description,
        "schema": schema,
    }


def _get(summary: str, ok: dict[str, Any], refusals: dict[str, Any], **extra: Any) -> Any:
    return {"get": {"summary": summary, "responses": {"200": ok, **refusals}, **extra}}


_TILE_LEVEL = _parameter(
    "level",
    "path",
    {"type": "string", "pattern": "^(entries|0|[1-9][0-9]?)$", "examples": ["0"]},
    "the tile level (0-63), or `entries` for an entry bundle",
)
_TILE_INDEX = _parameter(
    "index",
    "path",
    {"type": "string", "pattern": "^[0-9]{3}$", "examples": ["000"]},
    "the tile index in 3-digit groups; an index of 1000 or more is written "
    "`x001/x234/067` (C2SP tlog-tiles), which this template shows for the last group only",
)
_TILE_OK = {
    "description": "the tile or entry bundle, byte for byte",
    "headers": {"Cache-Control": {"schema": {"type": "string"}}},
    "content": {"application/octet-stream": {"schema": {"type": "string"}}},
}

#: Path template → (the route it is, its operations). Rule 1.
OPERATIONS: Final[dict[str, tuple[Route, dict[str, Any]]]] = {
    "/v1/sessions/{name}/decisions": (
        Route.SUBMIT,
        {
            "post": {
                "summary": "Submit evidence for one decision (PASS, FAIL and UNKNOWN are 200)",
                "parameters": [
                    _parameter(
                        "name",
                        "path",
                        {"type": "string", "examples": ["formation"]},
                        "the hosted session",
                    )
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        _JSON: {"schema": _ref("SubmitJson")},
                        "multipart/form-data": {"schema": _ref("SubmitMultipart")},
                    },
                },
                "responses": {
                    "200": _json(_ref("Decision"), "the decision"),
                    **_COMMON_REFUSALS,
                    "404": _error("UNKNOWN_SESSION"),
                    "413": _error("EVIDENCE_ITEMS_EXCEEDED or EVIDENCE_BYTES_EXCEEDED"),
                    "415": _error("HEADER_INVALID: not JSON or multipart/form-data"),
                    "422": _error("BINDING_INVALID"),
                    "500": _error("AUDIT_FAILED: the decision could not be recorded"),
                },
            }
        },
    ),
    "/v1/sessions": (
        Route.SESSIONS,
        _get("The hosted sessions", _json(_ref("Sessions"), "the sessions"), _COMMON_REFUSALS),
    ),
    "/health": (
        Route.HEALTH,
        _get("Liveness and figures", _json(_ref("Health"), "the health"), _COMMON_REFUSALS),
    ),
    "/ready": (
        Route.READY,
        _get("Readiness", _json(_ref("Ready"), "serving"), _COMMON_REFUSALS),
    ),
    "/metrics": (
        Route.METRICS,
        _get(
            "Prometheus text exposition",
            {
                "description": "the samples",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            _COMMON_REFUSALS,
        ),
    ),
    "/openapi.json": (
        Route.OPENAPI,
        _get(
            "This description",
            _json({"type": "object"}, "the OpenAPI 3.1 description"),
            _COMMON_REFUSALS,
        ),
    ),
    "/checkpoint": (
        Route.CHECKPOINT,
        _get(
            "The latest signed checkpoint (C2SP tlog-checkpoint signed note)",
            {
                "description": "the note, exactly as signed",
                "headers": {"Cache-Control": {"schema": {"type": "string"}}},
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            _LOG_REFUSALS,
        ),
    ),
    "/tile/{level}/{index}": (
        Route.TILE,
        _get(
            "A full tile or entry bundle (C2SP tlog-tiles; immutable)",
            _TILE_OK,
            _LOG_REFUSALS,
            parameters=[_TILE_LEVEL, _TILE_INDEX],
        ),
    ),
    "/tile/{level}/{index}.p/{width}": (
        Route.TILE,
        _get(
            "A partial tile or entry bundle of a checkpoint's size",
            _TILE_OK,
            _LOG_REFUSALS,
            parameters=[
                _TILE_LEVEL,
                _TILE_INDEX,
                _parameter(
                    "width",
                    "path",
                    {"type": "string", "pattern": "^[1-9][0-9]{0,2}$"},
                    "hashes in the partial tile (1-255)",
                ),
            ],
        ),
    ),
    "/v1/log/inclusion-proof": (
        Route.INCLUSION_PROOF,
        _get(
            "RFC 9162 inclusion proof of a leaf in a tree no larger than the checkpoint",
            _json(_ref("InclusionProof"), "the proof"),
            _LOG_REFUSALS,
            parameters=[
                _parameter("index", "query", _INTEGER, "the leaf (audit line seq - 1)"),
                _parameter("tree_size", "query", _INTEGER, "the tree size"),
            ],
        ),
    ),
    "/v1/log/consistency-proof": (
        Route.CONSISTENCY_PROOF,
        _get(
            "RFC 9162 consistency proof between two tree sizes",
            _json(_ref("ConsistencyProof"), "the proof"),
            _LOG_REFUSALS,
            parameters=[
                _parameter("old_size", "query", _INTEGER, "the older size"),
                _parameter("new_size", "query", _INTEGER, "the newer size"),
            ],
        ),
    ),
    "/v1/log/entry": (
        Route.LOG_ENTRY,
        _get(
            "The audit line at a log index, or with a decision id or line digest (one of them)",
            _json(_ref("LogEntry"), "the line and its index"),
            _LOG_REFUSALS,
            parameters=[
                _parameter("index", "query", _INTEGER, "the log index"),
                _parameter("decision_id", "query", {"type": "string"}, "a decision's decision_id"),
                _parameter(
                    "line_digest", "query", {"type": "string"}, "an audit line's line_digest"
                ),
            ],
        ),
    ),
}


def _route_table() -> set[Route]:
    # The submit path and the TILE_PREFIX paths are matched outside ROUTES.
    assert TILE_PREFIX == "/tile/"
    return {route for route, _ in ROUTES.values()} | {Route.SUBMIT, Route.TILE}


def _check_coverage() -> None:
    """Rule 1: every route has an operation and every operation a route."""
    described = {route for route, _ in OPERATIONS.values()}
    for path, (route, _) in OPERATIONS.items():
        known = ROUTES.get(path)
        if known is not None and known[0] is not route:
            raise KeyError(f"{path} is {known[0]} in the route table, not {route}")
    missing = _route_table() - described
    extra = described - _route_table()
    if missing or extra:
        raise KeyError(
            f"routes without a description {missing}, descriptions without a route {extra}"
        )


_check_coverage()

_NULLABLE_STRING = {"type": ["string", "null"]}
_PROOF = {"type": "array", "items": {"type": "string", "contentEncoding": "base64"}}
SCHEMAS: Final[dict[str, Any]] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "fault", "decision_id"],
                "additionalProperties": False,
                "properties": {
                    "code": {"type": "string", "enum": sorted(ERROR_CODES)},
                    "message": {"type": "string"},
                    "fault": {"type": "string", "enum": ["peer", "service"]},
                    "decision_id": _NULLABLE_STRING,
                },
            }
        },
    },
    "Decision": {
        "type": "object",
        "required": ["kind", "request_id", "decision_id", "session", "result"],
        "properties": {
            "kind": {"const": "decision"},
            "request_id": {"type": "integer", "minimum": 0},
            "decision_id": {"type": "string"},
            "session": {"type": "string"},
            "result": {"type": "object"},
            "seq": {"type": ["integer", "null"], "minimum": 1},
            "line_digest": _NULLABLE_STRING,
            "log_index": {"type": ["integer", "null"], "minimum": 0},
            "audit_line": _NULLABLE_STRING,
        },
    },
    "Sessions": {
        "type": "object",
        "required": ["kind", "request_id", "sessions"],
        "properties": {
            "kind": {"const": "sessions"},
            "request_id": {"type": "integer"},
            "sessions": {"type": "array", "items": {"type": "object"}},
        },
    },
    "Health": {
        "type": "object",
        "required": ["kind", "request_id", "status"],
        "properties": {
            "kind": {"const": "health"},
            "request_id": {"type": "integer"},
            "status": {"type": "object"},
        },
    },
    "Ready": {
        "type": "object",
        "required": ["ready", "status", "reason"],
        "properties": {
            "ready": {"const": True},
            "status": {"const": "serving"},
            "reason": {"type": "null"},
        },
    },
    "InclusionProof": {
        "type": "object",
        "required": ["kind", "request_id", "index", "tree_size", "proof"],
        "properties": {
            "kind": {"const": "inclusion_proof"},
            "request_id": {"type": "integer"},
            "index": {"type": "integer", "minimum": 0},
            "tree_size": {"type": "integer", "minimum": 1},
            "proof": _PROOF,
        },
    },
    "ConsistencyProof": {
        "type": "object",
        "required": ["kind", "request_id", "old_size", "new_size", "proof"],
        "properties": {
            "kind": {"const": "consistency_proof"},
            "request_id": {"type": "integer"},
            "old_size": {"type": "integer", "minimum": 0},
            "new_size": {"type": "integer", "minimum": 0},
            "proof": _PROOF,
        },
    },
    "LogEntry": {
        "type": "object",
        "required": ["log_index", "line"],
        "additionalProperties": False,
        "properties": {
            "log_index": {"type": "integer", "minimum": 0},
            "line": {"type": "string", "description": "the audit line, without its newline"},
        },
    },
    "Binding": {
        "type": "object",
        "description": "the bound proposition's wire form (docs/protocol.md §3)",
    },
    "SubmitJson": {
        "type": "object",
        "required": ["binding", "evidence"],
        "additionalProperties": False,
        "properties": {
            "binding": _ref("Binding"),
            "evidence": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["base64"],
                    "additionalProperties": False,
                    "properties": {"base64": {"type": "string", "contentEncoding": "base64"}},
                },
            },
        },
    },
    "SubmitMultipart": {
        "type": "object",
        "required": ["binding", "evidence"],
        "properties": {
            "binding": _ref("Binding"),
            "evidence": {
                "type": "array",
                "items": {"type": "string", "contentMediaType": "application/octet-stream"},
            },
        },
    },
}


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 description (module rules)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "evidenced HTTP API",
            "version": __version__,
            "description": (
                "Evidence-bound verification sessions over HTTP/1.1 (docs/http.md) and the "
                "transparency log in the C2SP tlog-tiles layout (docs/transparency.md). With a "
                "tokens_file every route but /health and /ready needs a bearer token."
            ),
        },
        "servers": [{"url": "http://127.0.0.1:7434"}],
        # A bearer token when the listener has a tokens_file (docs/http.md), else none.
        "security": [{}, {"bearer": []}],
        "paths": {path: operations for path, (_, operations) in OPERATIONS.items()},
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


@cache
def rendered() -> bytes:
    """:func:`document` as ``docs/openapi.json`` holds it (sorted keys, 2-space indent)."""
    return (json.dumps(document(), indent=2, sort_keys=True) + "\n").encode("utf-8")


def openapi_answer(codec: HttpServerCodec) -> bytes:
    """``GET /openapi.json``."""
    return codec.respond(200, rendered())


if __name__ == "__main__":
    sys.stdout.buffer.write(rendered())
