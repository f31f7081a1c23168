"""Every configuration key, declared once: attrs tables whose fields are the keys.

Rules (the contract):

1. A table is an attrs class; each field is one key: its name, its type (the annotation), its
   default (``attrs.NOTHING``: required), and in its metadata one line of meaning
   (:data:`DOC`) and the label of its range rule (:data:`RULE`, one of :data:`RULES`; None: the
   type says it all). Nothing else in the product states a key's default or range: every view
   reads it here (:func:`default_of`, :func:`rule_of`, :func:`check_ranges`).
2. A :class:`Rule` refuses a value outside it with ``ValueError("<key> must be <says>")``; a
   ``bool`` is never a number, an integer rule takes only an ``int``.
3. :class:`ConfigFile` is the whole file: ``[server]``, ``[http]``, ``[audit]``,
   ``[transparency]``, ``[sessions.<name>]`` and ``[stores."<store>"]`` (read as plain tables
   by :mod:`daemon.retention._policy`, whose keys and rules are :class:`StoreTable`'s).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final

import attrs

from daemon.wire._records import (
    DEFAULT_MAX_FRAME_BYTES,
    DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_ITEMS,
)

__all__ = [
    "AGE",
    "CHOICES",
    "DOC",
    "INTERVAL",
    "NON_NEGATIVE",
    "POSITIVE",
    "POSITIVE_OR_AUTO",
    "POSITIVE_SECONDS",
    "RULE",
    "RULES",
    "SIZE",
    "AuditTable",
    "ConfigFile",
    "HttpTable",
    "Rule",
    "ServerTable",
    "SessionTable",
    "SinkTable",
    "StoreTable",
    "TransparencyTable",
    "check_key",
    "check_range",
    "check_ranges",
    "choices_of",
    "default_of",
    "rule_of",
]

#: The metadata keys of a schema field: its one-line meaning (``docs/configuration.md``'s key
#: table, ``default.toml``'s comments) and the label of its range rule (:data:`RULES`,
#: :func:`check_range`; None: the type says it all).
DOC: Final = "evidenced.doc"
RULE: Final = "evidenced.rule"
#: The metadata key of a key's choices: the only values it takes (its runtime view checks
#: them with a message of its own; :func:`choices_of`).
CHOICES: Final = "evidenced.choices"


@attrs.frozen
class Rule:
    """A key's range: ``label`` in the key table (``docs/configuration.md``, ``config keys``),
    ``says`` in a refusal (``<key> must be <says>``). A number within ``[least, most]``
    (``least`` itself excluded when ``above``); an integer when ``integer`` (never a ``bool``);
    a finite number otherwise (an integer too, if a float can hold it); or one of ``words``."""

    label: str
    says: str
    integer: bool = False
    least: float = 0.0
    above: bool = False
    most: float = math.inf
    #: Strings the key takes besides the numbers (``"auto"``).
    words: tuple[str, ...] = ()

    def holds(self, value: object) -> bool:
        """Whether ``value`` is within the rule."""
        if type(value) is str:
            return value in self.words
        if type(value) is int:  # compared as it is (an integer of 400 digits is exact) ...
            if not self.integer and not _is_float(value):
                return False  # ... but a number of seconds must be one a float can hold
            number: float = value
        elif type(value) is float and not self.integer and math.isfinite(value):
            number = value
        else:
            return False
        if number < self.least or number > self.most:
            return False
        return not (self.above and number == self.least)

    def check(self, name: str, value: object) -> None:
        """``value`` of the key ``name`` within the rule, else ``ValueError`` naming the key."""
        if not self.holds(value):
            raise ValueError(f"{name} must be {self.says}")


def _is_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


#: The range rules, by the label a field's :data:`RULE` metadata names.
POSITIVE_SECONDS: Final = "positive seconds"
POSITIVE: Final = "positive integer"
NON_NEGATIVE: Final = "non-negative integer"
POSITIVE_OR_AUTO: Final = 'positive integer or "auto"'
INTERVAL: Final = "seconds in (0, 3600]"
SIZE: Final = 'non-negative integer, or a size such as `"10GiB"`'
AGE: Final = 'positive seconds, or a duration such as `"30d"`'
RULES: Final = {
    rule.label: rule
    for rule in (
        Rule(POSITIVE_SECONDS, "a positive number of seconds", above=True),
        Rule(POSITIVE, "a positive integer", integer=True, least=1),
        Rule(NON_NEGATIVE, "a non-negative integer", integer=True),
        Rule(
            POSITIVE_OR_AUTO, 'a positive integer or "auto"', integer=True, least=1, words=("auto",)
        ),
        Rule(INTERVAL, "a number of seconds in (0, 3600]", above=True, most=3600),
        Rule(SIZE, "a non-negative integer or a size", integer=True),
        Rule(AGE, "a positive number of seconds or a duration", above=True),
    )
}


def _key(
    doc: str, rule: str | None = None, choices: tuple[str, ...] = ()
) -> dict[str, str | tuple[str, ...] | None]:
    assert rule is None or rule in RULES, rule
    return {DOC: doc, RULE: rule, CHOICES: choices}


def choices_of(table: type, key: str) -> tuple[str, ...]:
    """The values ``table``'s ``key`` may take (empty: any value of its type and rule)."""
    choices: tuple[str, ...] = attrs.fields_dict(table)[key].metadata.get(CHOICES, ())
    return choices


def check_range(name: str, rule: str | None, value: object) -> None:
    """``value`` of the key ``name`` within the rule labelled ``rule`` (None: any value of the
    field's type), else ``ValueError`` naming the key: ``<name> must be <rule.says>``."""
    if rule is not None:
        RULES[rule].check(name, value)


def rule_of(table: type, key: str) -> Rule | None:
    """The range rule of ``table``'s ``key`` (None: the type says it all)."""
    label = attrs.fields_dict(table)[key].metadata.get(RULE)
    return None if label is None else RULES[label]


def default_of(table: type, key: str) -> Any:
    """The declared default of ``table``'s ``key`` (a factory's value; ``attrs.NOTHING`` for
    a required key)."""
    default: Any = attrs.fields_dict(table)[key].default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return default.factory()
    return default


def check_key(table: type, key: str, value: object, name: str | None = None) -> None:
    """``value`` of ``table``'s ``key`` within its declared rule, else ``ValueError`` naming
    ``name`` (default: the key)."""
    check_range(
        key if name is None else name, attrs.fields_dict(table)[key].metadata.get(RULE), value
    )


def check_ranges(table: type, value: object, names: Iterable[str], prefix: str = "") -> None:
    """Each of ``names`` (keys of ``table`` and attributes of ``value``) within its declared
    rule, else ``ValueError`` naming ``<prefix><key>``: the one range check every runtime view
    of a table runs when it is built."""
    fields = attrs.fields_dict(table)
    for name in names:
        check_range(f"{prefix}{name}", fields[name].metadata.get(RULE), getattr(value, name))


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
            'serving processes sharing the listeners and one audit log; "auto": one per CPU',
            POSITIVE_OR_AUTO,
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
            "line per event on stdout; required",
            choices=("http", "console"),
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
            "a sink without a cursor starts; one with a cursor resumes from it",
            choices=("oldest", "now"),
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
        default="fsync",
        metadata=_key(
            "what a line reaches before its answer: the disk, the operating system, or neither",
            choices=("fsync", "write", "none"),
        ),
    )
    overflow: str = attrs.field(
        default="block",
        metadata=_key(
            "when the writer is behind: wait, or drop the line (counted and logged)",
            choices=("block", "drop"),
        ),
    )
    max_pending: int = attrs.field(
        default=4096, metadata=_key("lines rendered and not yet durable, at most", POSITIVE)
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
        default=1.0, metadata=_key("seconds between checkpoint signatures, at most", INTERVAL)
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
        default="none",
        metadata=_key(
            "whose evidence is kept: no decision's, every one's, or those not PASS",
            choices=("none", "all", "refused"),
        ),
    )
    store: str | None = attrs.field(
        default=None, metadata=_key("with retain: `fs:PATH` or `s3://bucket/prefix`")
    )


@attrs.frozen
class StoreTable:
    """``[stores."<store>"]``: the limits ``evidenced store gc --config`` applies to a store
    (the key is the store as a session writes it; ``docs/retention.md``). Read as a plain table
    by :mod:`daemon.retention._policy`, which parses the sizes and durations."""

    max_bytes: int | str | None = attrs.field(
        default=None,
        metadata=_key("the most bytes the store may hold; unset: no limit of size", SIZE),
    )
    max_age: float | str | None = attrs.field(
        default=None,
        metadata=_key("the oldest evidence the store keeps; unset: no limit of age", AGE),
    )


@attrs.frozen
class ConfigFile:
    """The whole file."""

    server: ServerTable = ServerTable()
    http: HttpTable | None = None
    audit: AuditTable = AuditTable()
    transparency: TransparencyTable | None = None
    sessions: dict[str, SessionTable] = attrs.field(factory=dict)
    #: ``[stores."<store>"]``: retention limits, :class:`StoreTable`'s keys, read as plain tables
    #: by :mod:`daemon.retention._policy` (which names its own faults).
    stores: dict[str, dict[str, Any]] = attrs.field(factory=dict)
