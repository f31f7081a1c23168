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

from typing import Any, Final

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ForbiddenExtraKeysError,
    IterableValidationNote,
)

from daemon.errors import PeerError

__all__ = [
    "CONFIG_CONVERTER",
    "AuditTable",
    "ConfigFile",
    "HttpTable",
    "SchemaError",
    "ServerTable",
    "SessionTable",
    "TransparencyTable",
    "structure_config",
    "unstructure_config",
]


class SchemaError(PeerError, ValueError):
    """A configuration whose shape is wrong; the message names every key path at fault."""


@attrs.frozen
class ServerTable:
    """``[server]``: where to listen and the server's limits (times in seconds)."""

    listen: str = "127.0.0.1:7433"
    socket: str = ""
    socket_group: str = ""
    pre_hello_timeout: float = 5.0
    idle_timeout: float = 30.0
    min_evidence_rate: int = 65_536
    evidence_grace: float = 1.0
    request_deadline: float = 30.0
    shutdown_grace: float = 10.0
    max_in_flight: int = 256
    max_in_flight_per_peer: int = 0
    max_connections: int = 1024
    max_connections_per_peer: int = 0
    workers: int | str = 1  # serving processes: N or "auto" (daemon.server._supervisor)
    worker_processes: int = 2
    worker_threads: int | None = None  # the former name of worker_processes
    inline_max_bytes: int = 4096
    max_header_bytes: int = 65536
    max_frame_bytes: int = 2097152
    max_items: int = 16
    # The TCP listener's TLS and bearer tokens ("": none; daemon.config._security).
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    tokens_file: str = ""


@attrs.frozen
class HttpTable:
    """``[http]`` (optional; present means on): the HTTP/1.1 listener
    (daemon.config._http_config)."""

    listen: str = "127.0.0.1:7434"
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""
    tokens_file: str = ""
    max_header_bytes: int = 16384
    max_headers: int = 100
    header_timeout: float = 5.0


@attrs.frozen
class AuditTable:
    """``[audit]``: the audit log file and its policies."""

    path: str = "evidenced-audit.jsonl"
    durability: str = "fsync"
    overflow: str = "block"
    max_pending: int = 4096
    rotate_bytes: int = 0


@attrs.frozen
class TransparencyTable:
    """``[transparency]`` (optional; present means on): the signed transparency log."""

    key_file: str
    origin: str | None = None
    directory: str | None = None
    checkpoint_interval: float = 1.0
    entry_bundles: bool = False


@attrs.frozen
class SessionTable:
    """``[sessions.<name>]``: the mechanisms, the evidence bounds, and mechanism options
    (``[sessions.<name>.options.<mechanism>]``, each a table the mechanism's provider reads)."""

    mechanisms: tuple[str, ...]
    max_evidence_items: int = 2
    max_evidence_bytes: int = 524_288
    optional: bool = False
    options: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    retain: str = "none"
    store: str | None = None


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


class _Mismatch(TypeError):
    """A value of the wrong type (raised by the exact-type hooks)."""

    def __init__(self, expected: str, value: object) -> None:
        super().__init__(f"expected {expected}, got {type_name(value)}")


def type_name(value: object) -> str:
    """The TOML name of a value's type (``table``, ``array``, ``bool``, ``int`` …)."""
    if type(value) is dict:
        return "table"
    if type(value) is list:
        return "array"
    if type(value) is float:
        return "float"
    return type(value).__name__


CONFIG_CONVERTER: Final = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)


def _exact(kind: type) -> Any:
    def hook(value: object, _: object) -> object:
        if type(value) is not kind:
            raise _Mismatch(kind.__name__, value)
        return value

    return hook


def _number(value: object, _: object) -> float:
    if type(value) is not float and type(value) is not int:
        raise _Mismatch("float", value)
    return float(value)


def _strings(value: object, _: object) -> tuple[str, ...]:
    if type(value) is not list:
        raise _Mismatch("array", value)
    members: list[str] = []
    for index, member in enumerate(value):
        if type(member) is not str:
            error = _Mismatch("str", member)
            error.__notes__ = [IterableValidationNote(f"@ index {index}", index, str)]
            raise cattrs.IterableValidationError("array", [error], tuple)
        members.append(member)
    return tuple(members)


def _raw_table(value: object, _: object) -> dict[str, Any]:
    if type(value) is not dict:
        raise _Mismatch("table", value)
    return dict(value)


for _kind in (str, int, bool):
    CONFIG_CONVERTER.register_structure_hook(_kind, _exact(_kind))
CONFIG_CONVERTER.register_structure_hook(float, _number)


def _count_or_word(value: object, _: object) -> int | str:
    if type(value) is not int and type(value) is not str:
        raise _Mismatch("int or str", value)
    return value


CONFIG_CONVERTER.register_structure_hook_func(lambda cl: cl == int | str, _count_or_word)
CONFIG_CONVERTER.register_structure_hook_func(lambda cl: cl == tuple[str, ...], _strings)
CONFIG_CONVERTER.register_structure_hook_func(lambda cl: cl == dict[str, Any], _raw_table)


def _table_hook(cl: Any) -> Any:
    generated = cattrs.gen.make_dict_structure_fn(
        cl, CONFIG_CONVERTER, _cattrs_forbid_extra_keys=True
    )

    def hook(value: object, _: object) -> object:
        if type(value) is not dict:
            raise _Mismatch("table", value)
        return generated(value, cl)

    return hook


def _mapping_hook(cl: Any) -> Any:
    inner = CONFIG_CONVERTER.gen_structure_mapping(cl)

    def hook(value: object, kind: object) -> object:
        if type(value) is not dict:
            raise _Mismatch("table", value)
        return inner(value, kind)

    return hook


def _is_table(cl: Any) -> bool:
    return attrs.has(cl)


def _is_mapping_of_tables(cl: Any) -> bool:
    return getattr(cl, "__origin__", None) is dict and cl != dict[str, Any]


CONFIG_CONVERTER.register_structure_hook_factory(_is_table, _table_hook)
CONFIG_CONVERTER.register_structure_hook_factory(_is_mapping_of_tables, _mapping_hook)


def _messages(error: BaseException, path: str) -> list[str]:
    """Flatten cattrs' validation groups into ``path: problem`` lines, in document order."""
    if isinstance(error, ForbiddenExtraKeysError):
        extra = sorted(error.extra_fields)
        where = path or "<top level>"
        if len(extra) == 1:
            return [f"{where}: unknown key {extra[0]!r}"]
        return [f"{where}: unknown keys {extra}"]
    if isinstance(error, BaseExceptionGroup):
        found: list[str] = []
        for member in error.exceptions:
            found.extend(_messages(member, _extend(path, member)))
        return found
    if isinstance(error, KeyError):
        return [f"{path}: required"]
    if isinstance(error, _Mismatch):
        return [f"{path}: {error}"]
    return [f"{path}: {type(error).__name__}: {error}"]


def _extend(path: str, error: BaseException) -> str:
    for note in reversed(getattr(error, "__notes__", ())):
        if isinstance(note, AttributeValidationNote):
            path = f"{path}.{note.name}" if path else note.name
        elif isinstance(note, IterableValidationNote):
            if isinstance(note.index, str):
                path = f"{path}.{note.index}" if path else note.index
            else:
                path = f"{path}[{note.index}]"
    return path


def structure_config(raw: dict[str, Any]) -> ConfigFile:
    """``raw`` (what ``tomllib`` returned) as :class:`ConfigFile` (module rules)."""
    try:
        return CONFIG_CONVERTER.structure(raw, ConfigFile)
    except (cattrs.BaseValidationError, ForbiddenExtraKeysError, _Mismatch) as error:
        raise SchemaError("; ".join(_messages(error, ""))) from None


def unstructure_config(config: ConfigFile) -> dict[str, Any]:
    """The plain tables of ``config`` (arrays as lists), e.g. to print the effective file."""
    value: dict[str, Any] = CONFIG_CONVERTER.unstructure(config)
    for table in value["sessions"].values():
        table["mechanisms"] = list(table["mechanisms"])
    return value
