"""The shape of the daemon's TOML configuration: attrs tables and ONE cattrs converter.

:func:`structure_config` turns the table ``tomllib`` returns into :class:`ConfigFile` with
:data:`CONFIG_CONVERTER` (``forbid_extra_keys=True``, detailed validation) and these rules; every
violation in the document is reported, each as ``<key path>: <problem>`` (joined by ``; `` in
document order) in one :class:`SchemaError`:

1. A table is exactly a TOML table (at the top: ``server``, ``http``, ``audit``,
   ``transparency``, ``sessions``, ``stores``); a key the table does not declare is refused
   (``server: unknown key 'listen_on'``; several: ``unknown keys [...]``).
2. Every value has exactly its field's type: ``bool`` is not a number, an ``int`` is not a
   ``str``; a ``float`` field takes an ``int`` (not a ``bool``) or a ``float``; an array field
   takes an array whose members have the member type
   (``sessions.formation.max_evidence_bytes: expected int, got bool``,
   ``sessions.a.mechanisms[1]: expected str, got int``).
3. A field without a default that is missing is ``<path>: required`` (a session's
   ``mechanisms``).

Range and cross-field rules (addresses, positive timeouts, known mechanisms, option tables named
after the session's mechanisms, non-negative bounds) are :mod:`daemon.config._config`'s, checked
after
the shape. The defaults here are the embedded default configuration's
(``daemon/config/default.toml``;
a test checks they agree).
"""

from __future__ import annotations

import json
import math
import types
import typing
from typing import Any, Final

import attrs

from daemon.wire._errors import PeerError
from daemon.wire._protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_ITEMS,
)
from session._exact import ExactError, exact_converter, structure_exact

__all__ = [
    "CONFIG_CONVERTER",
    "AuditTable",
    "ConfigFile",
    "HttpTable",
    "SchemaError",
    "ServerTable",
    "SessionTable",
    "SinkTable",
    "TransparencyTable",
    "structure_config",
    "unstructure_config",
]


class SchemaError(PeerError, ValueError):
    """A configuration whose shape is wrong; the message names every key path at fault."""


#: The metadata keys of a schema field: its one-line meaning (``docs/configuration.md``, from
#: :func:`key_table`) and its range rule (:func:`check_range`; None: the type says it all).
DOC: Final = "evidenced.doc"
RULE: Final = "evidenced.rule"
#: Range rules: a positive finite number of seconds; an integer >= 1; an integer >= 0.
POSITIVE_SECONDS: Final = "positive seconds"
POSITIVE: Final = "positive integer"
NON_NEGATIVE: Final = "non-negative integer"


def _key(doc: str, rule: str | None = None) -> dict[str, str | None]:
    return {DOC: doc, RULE: rule}


def check_range(name: str, rule: str | None, value: object) -> None:
    """``value`` of the key ``name`` within ``rule``, else ``ValueError`` naming the key."""
    if rule == POSITIVE_SECONDS:
        number = value if type(value) in (int, float) else math.nan
        if not math.isfinite(number) or number <= 0:  # type: ignore[arg-type,operator]
            raise ValueError(f"{name} must be a positive number of seconds")
        return
    least = {POSITIVE: 1, NON_NEGATIVE: 0}.get(rule or "")
    if least is not None and (type(value) is not int or value < least):
        raise ValueError(f"{name} must be a {rule}")


@attrs.frozen
class ServerTable:
    """``[server]``: where to listen and the server's limits (times in seconds)."""

    listen: str = attrs.field(
        default="127.0.0.1:7433",
        metadata=_key('TCP `HOST:PORT` of the binary protocol (EVD1); `""`: no TCP'),
    )
    socket: str = attrs.field(
        default="", metadata=_key('Unix socket path (created mode 0600); `""`: none')
    )
    socket_group: str = attrs.field(
        default="", metadata=_key("a group name or gid: the socket is then mode 0660 for it")
    )
    pre_hello_timeout: float = attrs.field(
        default=5.0,
        metadata=_key("seconds a new connection has to say hello", POSITIVE_SECONDS),
    )
    idle_timeout: float = attrs.field(
        default=30.0,
        metadata=_key("seconds to complete the next request frame", POSITIVE_SECONDS),
    )
    min_evidence_rate: int = attrs.field(
        default=65_536,
        metadata=_key(
            "bytes/s evidence must keep arriving at after the grace, else IDLE_TIMEOUT", POSITIVE
        ),
    )
    evidence_grace: float = attrs.field(
        default=1.0,
        metadata=_key("seconds before the minimum evidence rate applies", POSITIVE_SECONDS),
    )
    request_deadline: float = attrs.field(
        default=30.0,
        metadata=_key(
            "seconds from a complete frame to its answer (UNKNOWN if overrun)", POSITIVE_SECONDS
        ),
    )
    shutdown_grace: float = attrs.field(
        default=10.0,
        metadata=_key("seconds in-flight requests get on SIGINT/SIGTERM", POSITIVE_SECONDS),
    )
    max_in_flight: int = attrs.field(
        default=256, metadata=_key("concurrent submits; more are answered BUSY", POSITIVE)
    )
    max_in_flight_per_peer: int = attrs.field(
        default=0,
        metadata=_key(
            "per uid (Unix socket) / address (TCP); 0: max_in_flight less an eighth",
            NON_NEGATIVE,
        ),
    )
    max_connections: int = attrs.field(
        default=1024,
        metadata=_key(
            "open connections (lowered to fit the descriptor limit); when full, the "
            "longest-idle keep-alive one is closed for a newcomer, else it is answered BUSY",
            POSITIVE,
        ),
    )
    max_connections_per_peer: int = attrs.field(
        default=0,
        metadata=_key(
            "per uid / address (a full share closes the peer's longest-idle one); "
            "0: a quarter of max_connections",
            NON_NEGATIVE,
        ),
    )
    unix_reserved_connections: int = attrs.field(
        default=0,
        metadata=_key(
            "connections only the Unix socket may take (TCP never can); "
            "0: a sixteenth of max_connections",
            NON_NEGATIVE,
        ),
    )
    workers: int | str = attrs.field(
        default=1,
        metadata=_key(
            'serving processes sharing the listeners and one audit log; "auto": one per CPU'
        ),
    )
    worker_processes: int = attrs.field(
        default=2,
        metadata=_key(
            "forked evaluation workers (killed at the deadline); 0: one per CPU", NON_NEGATIVE
        ),
    )
    worker_threads: int | None = attrs.field(
        default=None, metadata=_key("the former name of worker_processes (still read)")
    )
    inline_max_bytes: int = attrs.field(
        default=4096,
        metadata=_key(
            "evaluate pairs up to this size on the event loop (no worker hop)", NON_NEGATIVE
        ),
    )
    max_header_bytes: int = attrs.field(
        default=DEFAULT_MAX_HEADER_BYTES,
        metadata=_key("the largest EVD1 header a frame may declare", POSITIVE),
    )
    max_frame_bytes: int = attrs.field(
        default=DEFAULT_MAX_FRAME_BYTES, metadata=_key("the largest EVD1 frame", POSITIVE)
    )
    max_items: int = attrs.field(
        default=DEFAULT_MAX_ITEMS,
        metadata=_key("the most evidence items one frame may declare", NON_NEGATIVE),
    )
    # The TCP listener's TLS and bearer tokens ("": none; daemon.config._security).
    tls_cert: str = attrs.field(
        default="", metadata=_key("PEM chain; with tls_key: TLS 1.2+ on the TCP listener")
    )
    tls_key: str = attrs.field(default="", metadata=_key("the certificate's private key (PEM)"))
    tls_client_ca: str = attrs.field(
        default="", metadata=_key("require client certificates signed by this bundle")
    )
    tokens_file: str = attrs.field(
        default="",
        metadata=_key('`"<sha256 hex of token> <name>"` per line; every request needs one'),
    )


@attrs.frozen
class HttpTable:
    """``[http]`` (optional; present means on): the HTTP/1.1 listener
    (daemon.config._http_config)."""

    listen: str = attrs.field(
        default="127.0.0.1:7434", metadata=_key("`HOST:PORT` of the HTTP/JSON API")
    )
    tls_cert: str = attrs.field(default="", metadata=_key("as in `[server]`, for HTTP"))
    tls_key: str = attrs.field(default="", metadata=_key("as in `[server]`, for HTTP"))
    tls_client_ca: str = attrs.field(default="", metadata=_key("as in `[server]`, for HTTP"))
    tokens_file: str = attrs.field(
        default="", metadata=_key("as in `[server]`; sent as `Authorization: Bearer`")
    )
    max_header_bytes: int = attrs.field(
        default=16384, metadata=_key("the largest request head (line and fields)", POSITIVE)
    )
    max_headers: int = attrs.field(
        default=100, metadata=_key("the most header fields in a request head", POSITIVE)
    )
    header_timeout: float = attrs.field(
        default=5.0,
        metadata=_key(
            "seconds for a new connection's TLS handshake and first request head",
            POSITIVE_SECONDS,
        ),
    )
    trusted_proxies: tuple[str, ...] = attrs.field(
        factory=tuple,
        metadata=_key(
            "CIDRs of proxies whose PROXY protocol header or `X-Forwarded-For` names the "
            "client (docs/deployment.md); from any other peer both are ignored"
        ),
    )


@attrs.frozen
class SinkTable:
    """``[[audit.sinks]]``: one place the committed audit lines are shipped to
    (``docs/audit-log.md`` "Shipping decision logs"; :mod:`daemon.audit._shipping_config`)."""

    name: str = attrs.field(
        metadata=_key(
            "names the sink in `health`, `/metrics` and its cursor file "
            "`<audit log>.sink-<name>.cursor` (letters, digits, `_`, `-`, `.`); required"
        )
    )
    type: str = attrs.field(
        metadata=_key(
            '`"http"`: batches POSTed to `url` as a gzip JSON array; `"console"`: one JSON '
            "line per event on stdout; required"
        )
    )
    url: str = attrs.field(
        default="",
        metadata=_key("`http://` or `https://` URL the batches go to (`http`: required)"),
    )
    token_file: str = attrs.field(
        default="",
        metadata=_key(
            "a file whose first line is sent as `Authorization: Bearer` (read per upload)"
        ),
    )
    tls_ca: str = attrs.field(
        default="",
        metadata=_key(
            'CA bundle (PEM) an `https://` receiver is checked against; `""`: the system\'s'
        ),
    )
    timeout: float = attrs.field(
        default=10.0, metadata=_key("seconds one upload may take", POSITIVE_SECONDS)
    )
    events: tuple[str, ...] = attrs.field(
        default=("decision",),
        metadata=_key(
            'the audit events shipped (`event` names); `["*"]`: every line, the whole chain'
        ),
    )
    batch_lines: int = attrs.field(
        default=500, metadata=_key("events in one batch, at most", POSITIVE)
    )
    batch_bytes: int = attrs.field(
        default=1_048_576,
        metadata=_key(
            "bytes of a batch's JSON array before gzip, at most (a larger event goes alone)",
            POSITIVE,
        ),
    )
    flush_interval: float = attrs.field(
        default=1.0,
        metadata=_key("seconds between looks at the log once caught up", POSITIVE_SECONDS),
    )
    backoff_min: float = attrs.field(
        default=1.0,
        metadata=_key(
            "seconds before the first retry of a failed batch (then doubling, with jitter)",
            POSITIVE_SECONDS,
        ),
    )
    backoff_max: float = attrs.field(
        default=60.0, metadata=_key("the longest wait between two retries", POSITIVE_SECONDS)
    )
    start_at: str = attrs.field(
        default="oldest",
        metadata=_key(
            '`"oldest"` (the log and its rotated files from their first line) or `"now"`: where '
            "a sink without a cursor starts; one with a cursor resumes from it"
        ),
    )
    labels: dict[str, str] = attrs.field(
        factory=dict, metadata=_key("labels of this sink's events, over `[audit] labels`")
    )


@attrs.frozen
class AuditTable:
    """``[audit]``: the audit log file and its policies."""

    path: str = attrs.field(default="evidenced-audit.jsonl", metadata=_key("the audit log file"))
    durability: str = attrs.field(
        default="fsync", metadata=_key("`fsync` or `write` or `none` before an answer")
    )
    overflow: str = attrs.field(
        default="block",
        metadata=_key("`block` or `drop` (dropped lines are counted and logged)"),
    )
    max_pending: int = attrs.field(
        default=4096, metadata=_key("lines rendered and not yet durable, at most", NON_NEGATIVE)
    )
    rotate_bytes: int = attrs.field(
        default=0,
        metadata=_key("start a new, linked file at this size; 0: never", NON_NEGATIVE),
    )
    labels: dict[str, str] = attrs.field(
        factory=dict,
        metadata=_key(
            "instance labels of every shipped event: `id` (default `<host name>/<log tag>`) "
            "and yours; `version` is always the daemon's"
        ),
    )
    sinks: tuple[SinkTable, ...] = attrs.field(
        factory=tuple,
        metadata=_key("`[[audit.sinks]]`: where the committed lines are shipped (below)"),
    )


@attrs.frozen
class TransparencyTable:
    """``[transparency]`` (optional; present means on): the signed transparency log."""

    key_file: str = attrs.field(
        metadata=_key("the signing key (`evidenced log keygen`, mode 0600); required")
    )
    origin: str | None = attrs.field(
        default=None,
        metadata=_key("default: `<host name>/evidenced/<absolute audit log path>`"),
    )
    directory: str | None = attrs.field(
        default=None, metadata=_key("default: `<audit log path>.tlog`")
    )
    checkpoint_interval: float = attrs.field(
        default=1.0, metadata=_key("seconds between checkpoint signatures, at most")
    )
    entry_bundles: bool = attrs.field(default=False, metadata=_key("also write `tile/entries/`"))
    publish: str | None = attrs.field(
        default=None,
        metadata=_key(
            "publish the tiles and checkpoints to `fs:PATH` or `s3://BUCKET/PREFIX/` "
            "(docs/transparency.md §6); default: not published"
        ),
    )


@attrs.frozen
class SessionTable:
    """``[sessions.<name>]``: the mechanisms, the evidence bounds, and mechanism options
    (``[sessions.<name>.options.<mechanism>]``, each a table the mechanism's provider reads)."""

    mechanisms: tuple[str, ...] = attrs.field(
        metadata=_key("names of installed mechanism providers (`evidenced mechanisms`)")
    )
    max_evidence_items: int = attrs.field(
        default=2, metadata=_key("declared bound, clamped to the mechanisms'", NON_NEGATIVE)
    )
    max_evidence_bytes: int = attrs.field(
        default=524_288,
        metadata=_key("declared bound, clamped to the mechanisms'", NON_NEGATIVE),
    )
    optional: bool = attrs.field(
        default=False, metadata=_key("skip the session (with a message) if it cannot be built")
    )
    options: dict[str, dict[str, Any]] = attrs.field(
        factory=dict,
        metadata=_key("`[sessions.<name>.options.<mechanism>]`: the provider's typed options"),
    )
    retain: str = attrs.field(
        default="none", metadata=_key('`"none"` or `"all"` or `"refused"`: keep evidence')
    )
    store: str | None = attrs.field(
        default=None, metadata=_key("with retain: `fs:PATH` or `s3://bucket/prefix`")
    )


@attrs.frozen
class ConfigFile:
    """The whole file."""

    server: ServerTable = ServerTable()
    http: HttpTable | None = None
    audit: AuditTable = AuditTable()
    transparency: TransparencyTable | None = None
    sessions: dict[str, SessionTable] = attrs.field(factory=dict)
    #: ``[stores."<store>"]``: retention limits, checked by :mod:`daemon.retention._policy`.
    stores: dict[str, dict[str, Any]] = attrs.field(factory=dict)


#: The exact-type converter of the configuration (:mod:`session._exact`, shared with the
#: mechanism options).
CONFIG_CONVERTER: Final = exact_converter()


def structure_config(raw: dict[str, Any]) -> ConfigFile:
    """``raw`` (what ``tomllib`` returned) as :class:`ConfigFile` (module rules)."""
    try:
        return structure_exact(CONFIG_CONVERTER, raw, ConfigFile)
    except ExactError as error:
        raise SchemaError(str(error)) from None


def unstructure_config(config: ConfigFile) -> dict[str, Any]:
    """The plain tables of ``config`` (arrays as lists), e.g. to print the effective file."""
    value: dict[str, Any] = CONFIG_CONVERTER.unstructure(config)
    for table in value["sessions"].values():
        table["mechanisms"] = list(table["mechanisms"])
    for sink in value["audit"]["sinks"]:
        sink["events"] = list(sink["events"])
    value["audit"]["sinks"] = list(value["audit"]["sinks"])
    if value.get("http") is not None:
        value["http"]["trusted_proxies"] = list(value["http"]["trusted_proxies"])
    return value


#: The tables of the key table, in the file's order: (heading, class).
KEY_TABLES: Final = (
    ("[server]", ServerTable),
    ("[http]", HttpTable),
    ("[audit]", AuditTable),
    ("[[audit.sinks]]", SinkTable),
    ("[transparency]", TransparencyTable),
    ("[sessions.<name>]", SessionTable),
)
_SCALAR_NAMES: Final = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _type_label(kind: Any) -> str:
    """A field's type in the words of the key table (``integer or "auto"``, ``array of
    strings``)."""
    members = [member for member in typing.get_args(kind) if member is not type(None)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        if members == [int, str]:
            return 'integer or "auto"'
        return " or ".join(_type_label(member) for member in members)
    if typing.get_origin(kind) is tuple:
        if attrs.has(members[0]):
            return "array of tables"
        return f"array of {_SCALAR_NAMES[members[0]]}s"
    if typing.get_origin(kind) is dict:
        return "table of strings" if members[1:] == [str] else "tables"
    return _SCALAR_NAMES[kind]


def _default_of(field: attrs.Attribute[Any]) -> Any:
    default: Any = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        default = default.factory()
    if default is attrs.NOTHING:
        return None
    return list(default) if type(default) is tuple else default  # as TOML states an array


def _default_text(row: dict[str, Any]) -> str:
    default = row["default"]
    if row["required"]:
        return "required"
    if default is None:
        return "unset"
    if type(default) is bool:
        return "`true`" if default else "`false`"
    if type(default) is str:
        return f'`"{default}"`'
    if type(default) is list:
        return f"`{json.dumps(default)}`"
    return f"`{default}`"


def key_rows() -> list[dict[str, Any]]:
    """Every key of the schema: ``table``, ``key``, ``type``, ``default`` (its value, None
    when unset), ``required``, ``rule`` (the range rule, or None) and ``doc`` (its meaning)."""
    rows = []
    for table, cls in KEY_TABLES:
        attrs.resolve_types(cls)  # the annotations as types (cattrs does it when it first runs)
        for field in attrs.fields(cls):
            rows.append(
                {
                    "table": table,
                    "key": field.name,
                    "type": _type_label(field.type),
                    "default": _default_of(field),
                    "required": field.default is attrs.NOTHING,
                    "rule": field.metadata.get(RULE),
                    "doc": field.metadata.get(DOC, ""),
                }
            )
    return rows


def key_table() -> str:
    """The Markdown key table of ``docs/configuration.md`` (``evidenced config keys
    --markdown``), generated from the schema: one table per TOML table."""
    lines: list[str] = []
    current = None
    for row in key_rows():
        if row["table"] != current:
            current = row["table"]
            if lines:
                lines.append("")
            lines += [
                f"### `{current}`",
                "",
                "| key | type | default | meaning |",
                "|---|---|---|---|",
            ]
        meaning = row["doc"] + (f" ({row['rule']})" if row["rule"] else "")
        lines.append(f"| `{row['key']}` | {row['type']} | {_default_text(row)} | {meaning} |")
    return "\n".join(lines) + "\n"
