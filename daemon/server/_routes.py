"""The HTTP front end's one route table: every route the server serves, declared once.

The codec's dispatch (:mod:`daemon.server._http_codec`: :data:`~daemon.server._http_codec.ROUTES`,
the session paths' pattern, the tile prefix), the front end's open routes
(:mod:`daemon.server._http_server`), the OpenAPI description (:mod:`daemon.server._openapi`)
and the route list of ``docs/http.md`` are all derived from :data:`TABLE`, so a route cannot be
served without being described, nor described without being served.

Rules (the contract):

1. :data:`TABLE` holds one :class:`Operation` per method and path template: its
   :class:`Route` (what the front end runs), ``method``, OpenAPI ``path`` template, how the
   path is matched (:class:`Match`), ``operation_id``, ``tag``, ``summary``, :class:`Auth`,
   request body (media type → schema name), parameters and answers (status → :class:`Answer`:
   a description, a schema name, a media type, header names). Schema names are
   ``components/schemas`` of the description; nothing here is a schema.
2. Matching. ``EXACT``: the request path is the template. ``SESSION``: the template is
   ``/v1/sessions/{name}<tail>``; ``{name}`` is one path segment, percent-decoded (UTF-8),
   the session the request names; the batch tail is the submit's followed by ``:batch``, both
   ``POST`` (the one shape the codec's pattern, :data:`SESSION_PATTERN`, dispatches).
   ``PREFIX``: the path begins with the template's literal head (:data:`TILE_PREFIX`,
   ``/tile/``, ``GET``) and the route's own parser reads the rest. Every
   matched path has the one method of its route; another is ``405`` with ``Allow``, and a path
   no operation matches is ``404`` (``UNKNOWN_KIND``).
3. ``Auth.TOKEN``: on a listener with a ``tokens_file`` the request needs a valid bearer
   token (else ``401``); ``Auth.OPEN``: answered without one, as a probe (the status only,
   then the connection closes; ``docs/http.md``).
4. Checked at import (:func:`check`): every :class:`Route` has an operation and each route one
   method and one match; operation ids are unique; exact paths are unique; the session and
   prefix operations have the shapes rule 2 states. A table that breaks one is a ``ValueError``
   before the server can start.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

__all__ = [
    "EXACT_ROUTES",
    "SESSION_PATTERN",
    "TABLE",
    "TILE_PREFIX",
    "Answer",
    "Auth",
    "Match",
    "Operation",
    "Parameter",
    "Route",
    "check",
    "operations_of",
]

JSON: Final = "application/json"
MULTIPART: Final = "multipart/form-data"
TEXT: Final = "text/plain"
OCTETS: Final = "application/octet-stream"


class Route(enum.Enum):
    """What the front end runs for a request (:mod:`daemon.server._http_server`)."""

    SUBMIT = "submit"
    BATCH = "batch"
    SESSIONS = "sessions"
    HEALTH = "health"
    READY = "ready"
    METRICS = "metrics"
    # The transparency log and the API's description (daemon.server._http_tlog, _openapi).
    CHECKPOINT = "checkpoint"
    TILE = "tile"
    INCLUSION_PROOF = "inclusion_proof"
    CONSISTENCY_PROOF = "consistency_proof"
    LOG_ENTRY = "log_entry"
    OPENAPI = "openapi"


class Match(enum.Enum):
    """How a request path is matched to an operation (rule 2)."""

    EXACT = "exact"
    SESSION = "session"
    PREFIX = "prefix"


class Auth(enum.Enum):
    """Who may ask (rule 3)."""

    TOKEN = "token"
    OPEN = "open"


@attrs.frozen
class Answer:
    """One status of an operation: ``schema`` names a component (None: a string body of
    ``media``), ``headers`` the response header fields it carries."""

    description: str
    schema: str | None = "Error"
    media: str = JSON
    headers: tuple[str, ...] = ()


@attrs.frozen
class Parameter:
    """A path or query parameter, as the route's handler reads it."""

    name: str
    where: str
    schema: Mapping[str, Any]
    description: str
    required: bool = False


@attrs.frozen
class Operation:
    """One method on one path template (rule 1). ``sample`` is a concrete path of it, asked
    by the tests that walk the dispatch."""

    route: Route
    method: str
    path: str
    match: Match
    operation_id: str
    tag: str
    summary: str
    auth: Auth
    answers: Mapping[str, Answer]
    sample: str
    body: Mapping[str, str] = attrs.field(factory=dict)
    parameters: tuple[Parameter, ...] = ()
    description: str = ""


_RETRY: Final = ("Retry-After",)
_CACHE: Final = ("Cache-Control",)

#: What any request can be answered before its route runs (its head, the listener's caps, a
#: server fault), and, on a token route, without a valid token.
_BEFORE: Final = {
    "400": Answer("HEADER_INVALID or TRUNCATED_FRAME: a malformed or ambiguous request"),
    "408": Answer("IDLE_TIMEOUT: the request did not arrive in time"),
    "429": Answer("BUSY: a penalized peer's request without a valid token", headers=_RETRY),
    "431": Answer("HEADER_TOO_LARGE: the head is over max_header_bytes or max_headers"),
    "500": Answer("INTERNAL: a fault of the server"),
    "503": Answer("BUSY (a cap is reached) or SHUTTING_DOWN", headers=_RETRY),
}
_TOKEN: Final = {
    **_BEFORE,
    "401": Answer("UNAUTHENTICATED: the listener has a tokens_file and no valid token came"),
}
_SUBMIT: Final = {
    **_TOKEN,
    "404": Answer("UNKNOWN_SESSION: no session of that name"),
    "413": Answer("EVIDENCE_ITEMS_EXCEEDED or EVIDENCE_BYTES_EXCEEDED, before the body is read"),
    "415": Answer("HEADER_INVALID: a body that is not of a described media type"),
    "422": Answer("BINDING_INVALID: the binding is not a bound proposition"),
    "500": Answer("AUDIT_FAILED (the decision could not be recorded) or INTERNAL"),
}
_LOG: Final = {
    **_TOKEN,
    "400": Answer("HEADER_INVALID (a query parameter) or PROOF_RANGE (past the checkpoint)"),
    "404": Answer(
        "TRANSPARENCY_DISABLED (no transparency log, or no checkpoint yet) or UNKNOWN_KIND "
        "(no such tile or line, yet)"
    ),
    "500": Answer("INTERNAL: a tile the proof needs is refused by the guard"),
}
_NAME: Final = Parameter(
    "name", "path", {"type": "string", "examples": ["formation"]}, "the hosted session", True
)


def _integer(example: str) -> dict[str, Any]:
    """A decimal query integer of at most 19 digits (daemon.server._http_tlog rule 2)."""
    return {"type": "string", "pattern": "^(0|[1-9][0-9]{0,18})$", "examples": [example]}


_TILE_LEVEL: Final = Parameter(
    "level",
    "path",
    {"type": "string", "pattern": "^(entries|0|[1-9][0-9]?)$", "examples": ["0"]},
    "the tile level (0-63), or `entries` for an entry bundle",
    True,
)
_TILE_INDEX: Final = Parameter(
    "index",
    "path",
    {"type": "string", "pattern": "^[0-9]{3}$", "examples": ["000"]},
    "the tile index in 3-digit groups; an index of 1000 or more is written `x001/x234/067` "
    "(C2SP tlog-tiles), which this template shows for the last group only",
    True,
)
_TILE_OK: Final = Answer(
    "the tile or entry bundle, byte for byte", None, media=OCTETS, headers=_CACHE
)

TABLE: Final[tuple[Operation, ...]] = (
    Operation(
        Route.SUBMIT,
        "POST",
        "/v1/sessions/{name}/decisions",
        Match.SESSION,
        "submitDecision",
        "decisions",
        "Submit evidence for one decision (PASS, FAIL and UNKNOWN are 200)",
        Auth.TOKEN,
        {"200": Answer("the decision", "Decision"), **_SUBMIT},
        "/v1/sessions/formation/decisions",
        body={JSON: "SubmitJson", MULTIPART: "SubmitMultipart"},
        parameters=(_NAME,),
    ),
    Operation(
        Route.BATCH,
        "POST",
        "/v1/sessions/{name}/decisions:batch",
        Match.SESSION,
        "submitBatch",
        "decisions",
        "Submit 1 to 64 pairs, each its own decision, in one request",
        Auth.TOKEN,
        {
            "200": Answer("one element per pair, in order: its decision or its refusal", "Batch"),
            **_SUBMIT,
            "400": Answer(
                "HEADER_INVALID: a malformed request, or a body that is not an object with "
                "exactly pairs (1 to 64)"
            ),
        },
        "/v1/sessions/formation/decisions:batch",
        body={JSON: "BatchJson"},
        parameters=(_NAME,),
    ),
    Operation(
        Route.SESSIONS,
        "GET",
        "/v1/sessions",
        Match.EXACT,
        "listSessions",
        "sessions",
        "The hosted sessions, their mechanisms and what a client must pin",
        Auth.TOKEN,
        {"200": Answer("the sessions", "Sessions"), **_TOKEN},
        "/v1/sessions",
    ),
    Operation(
        Route.HEALTH,
        "GET",
        "/health",
        Match.EXACT,
        "getHealth",
        "service",
        "Liveness and figures (without a valid token on a tokens_file listener: the status only)",
        Auth.OPEN,
        {"200": Answer("the health", "Health"), **_BEFORE},
        "/health",
    ),
    Operation(
        Route.READY,
        "GET",
        "/ready",
        Match.EXACT,
        "getReady",
        "service",
        "Readiness: 200 only while serving",
        Auth.OPEN,
        {
            "200": Answer("serving", "Ready"),
            **_BEFORE,
            "503": Answer(
                "not ready: AUDIT_FAILED (degraded) or SHUTTING_DOWN (draining), or BUSY",
                headers=_RETRY,
            ),
        },
        "/ready",
    ),
    Operation(
        Route.METRICS,
        "GET",
        "/metrics",
        Match.EXACT,
        "getMetrics",
        "service",
        "Prometheus text exposition",
        Auth.TOKEN,
        {"200": Answer("the samples", None, media=TEXT), **_TOKEN},
        "/metrics",
    ),
    Operation(
        Route.OPENAPI,
        "GET",
        "/openapi.json",
        Match.EXACT,
        "getOpenApi",
        "api",
        "This description (OpenAPI 3.1)",
        Auth.TOKEN,
        {"200": Answer("the OpenAPI 3.1 description", "OpenApi"), **_TOKEN},
        "/openapi.json",
    ),
    Operation(
        Route.CHECKPOINT,
        "GET",
        "/checkpoint",
        Match.EXACT,
        "getCheckpoint",
        "transparency log",
        "The latest signed checkpoint (C2SP tlog-checkpoint signed note)",
        Auth.TOKEN,
        {"200": Answer("the note, exactly as signed", None, media=TEXT, headers=_CACHE), **_LOG},
        "/checkpoint",
    ),
    Operation(
        Route.TILE,
        "GET",
        "/tile/{level}/{index}",
        Match.PREFIX,
        "getTile",
        "transparency log",
        "A full tile or entry bundle (C2SP tlog-tiles; immutable)",
        Auth.TOKEN,
        {"200": _TILE_OK, **_LOG},
        "/tile/0/000",
        parameters=(_TILE_LEVEL, _TILE_INDEX),
    ),
    Operation(
        Route.TILE,
        "GET",
        "/tile/{level}/{index}.p/{width}",
        Match.PREFIX,
        "getPartialTile",
        "transparency log",
        "A partial tile or entry bundle of a checkpoint's size",
        Auth.TOKEN,
        {"200": _TILE_OK, **_LOG},
        "/tile/0/000.p/1",
        parameters=(
            _TILE_LEVEL,
            _TILE_INDEX,
            Parameter(
                "width",
                "path",
                {"type": "string", "pattern": "^[1-9][0-9]{0,2}$", "examples": ["1"]},
                "hashes in the partial tile (1-255)",
                True,
            ),
        ),
    ),
    Operation(
        Route.INCLUSION_PROOF,
        "GET",
        "/v1/log/inclusion-proof",
        Match.EXACT,
        "getInclusionProof",
        "transparency log",
        "RFC 9162 inclusion proof of a leaf in a tree no larger than the checkpoint",
        Auth.TOKEN,
        {"200": Answer("the proof", "InclusionProof"), **_LOG},
        "/v1/log/inclusion-proof?index=0&tree_size=1",
        parameters=(
            Parameter("index", "query", _integer("0"), "the leaf (audit line seq - 1)", True),
            Parameter("tree_size", "query", _integer("1"), "the tree size", True),
        ),
    ),
    Operation(
        Route.CONSISTENCY_PROOF,
        "GET",
        "/v1/log/consistency-proof",
        Match.EXACT,
        "getConsistencyProof",
        "transparency log",
        "RFC 9162 consistency proof between two tree sizes",
        Auth.TOKEN,
        {"200": Answer("the proof", "ConsistencyProof"), **_LOG},
        "/v1/log/consistency-proof?old_size=1&new_size=1",
        parameters=(
            Parameter("old_size", "query", _integer("1"), "the older size", True),
            Parameter("new_size", "query", _integer("1"), "the newer size", True),
        ),
    ),
    Operation(
        Route.LOG_ENTRY,
        "GET",
        "/v1/log/entry",
        Match.EXACT,
        "getLogEntry",
        "transparency log",
        "The audit line at a log index, or with a decision id or line digest (one of them)",
        Auth.TOKEN,
        {"200": Answer("the line and its index", "LogEntry"), **_LOG},
        "/v1/log/entry?index=0",
        parameters=(
            Parameter("index", "query", _integer("0"), "the log index"),
            Parameter("decision_id", "query", {"type": "string"}, "a decision's decision_id"),
            Parameter("line_digest", "query", {"type": "string"}, "an audit line's line_digest"),
        ),
    ),
)

#: The tags, in the description's order, with what they group.
TAGS: Final = {
    "decisions": "Evidence in, PASS / FAIL / UNKNOWN out, each decision one audit line",
    "sessions": "What the daemon hosts",
    "service": "Probes and metrics",
    "transparency log": "The audit log as an RFC 9162 / C2SP tlog-tiles log",
    "api": "This description",
}

_SESSION_HEAD: Final = "/v1/sessions/{name}"


def operations_of(route: Route) -> tuple[Operation, ...]:
    """The operations that serve ``route`` (one, or the tile route's two templates)."""
    return tuple(operation for operation in TABLE if operation.route is route)


def _prefix(template: str) -> str:
    return template.split("{", 1)[0]


def check(table: tuple[Operation, ...] = TABLE) -> None:
    """Rule 4; raises ``ValueError`` naming what is wrong."""
    missing = set(Route) - {operation.route for operation in table}
    if missing:
        raise ValueError(f"routes without an operation: {sorted(r.name for r in missing)}")
    ids = [operation.operation_id for operation in table]
    if len(set(ids)) != len(ids):
        raise ValueError("operation ids repeat")
    for route in Route:
        served = [operation for operation in table if operation.route is route]
        if len({(operation.method, operation.match) for operation in served}) != 1:
            raise ValueError(f"{route.name} has more than one method or match")
    exact = [operation.path for operation in table if operation.match is Match.EXACT]
    if len(set(exact)) != len(exact) or any("{" in path for path in exact):
        raise ValueError("exact paths repeat or hold a parameter")
    session = [operation for operation in table if operation.match is Match.SESSION]
    paths = {operation.route: operation.path for operation in session}
    if (
        set(paths) != {Route.SUBMIT, Route.BATCH}
        or len(session) != 2
        or not paths[Route.SUBMIT].startswith(_SESSION_HEAD + "/")
        or paths[Route.BATCH] != paths[Route.SUBMIT] + ":batch"
        or any(operation.method != "POST" for operation in session)
    ):
        raise ValueError("the session operations are not submit and its :batch, both POST")
    prefixes = {_prefix(operation.path) for operation in table if operation.match is Match.PREFIX}
    prefixed = [operation for operation in table if operation.match is Match.PREFIX]
    if (
        prefixes != {"/tile/"}
        or {operation.route for operation in prefixed} != {Route.TILE}
        or any(operation.method != "GET" for operation in prefixed)
    ):
        raise ValueError("the prefix operations are not the tile route under /tile/, GET")


check()

#: Exact path → (route, its one method): the codec's dispatch table (rule 2).
EXACT_ROUTES: Final[dict[str, tuple[Route, str]]] = {
    operation.path: (operation.route, operation.method)
    for operation in TABLE
    if operation.match is Match.EXACT
}
#: The ``PREFIX`` operations' literal head.
TILE_PREFIX: Final = _prefix(operations_of(Route.TILE)[0].path)
#: The ``SESSION`` operations' pattern: group 1 the (percent-encoded) session name, group 2
#: ``:batch`` for the batch route.
SESSION_PATTERN: Final = re.compile(
    re.escape(_prefix(_SESSION_HEAD))
    + "([^/]+)"
    + re.escape(operations_of(Route.SUBMIT)[0].path.removeprefix(_SESSION_HEAD))
    + "(:batch)?\\Z"
)
