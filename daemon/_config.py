"""The daemon's TOML configuration (read with ``tomllib``), and the embedded default.

Rules (the contract):

1. Tables: ``[server]``, ``[audit]``, ``[transparency]``, ``[sessions.<name>]``,
   ``[stores]``. Unknown tables or keys are refused (:class:`ConfigError`), and so are values
   of the wrong type (booleans are not numbers). Every key is optional except each session's
   ``mechanisms``.
2. ``[server]``: ``listen = "HOST:PORT"`` (empty string: no TCP), ``socket = "PATH"`` (empty:
   none), ``socket_group`` (a group name or number: the socket is then mode 0660 for that
   group; empty: 0600), and the :class:`ServerConfig` limits of the same names (times in
   seconds, rates in bytes per second). ``worker_threads`` (before evaluation moved to worker
   processes) is still read, as ``worker_processes``; both at once is an error.
3. ``[audit]``: ``path``, ``durability`` (``fsync`` | ``write`` | ``none``), ``overflow``
   (``block`` | ``drop``), ``max_pending``, ``rotate_bytes`` (0: never rotate). A relative
   path is relative to the config file's directory (to the working directory for the
   embedded default).
3a. ``[transparency]`` (optional; present means on): ``key_file`` (required), ``origin``,
   ``directory``, ``checkpoint_interval`` (seconds), ``entry_bundles``
   (``docs/spec/transparency.md §6``); relative paths resolve like ``[audit] path``.
4. ``[sessions.<name>]``: ``mechanisms`` (names of installed mechanism providers: entry points
   of the group ``evidenced.mechanisms``, :mod:`session._plugins`; ``evidenced mechanisms``
   lists them), ``max_evidence_items``, ``max_evidence_bytes`` (declared bounds, clamped to
   what the mechanisms accept and checked on declared sizes before reading;
   :mod:`daemon._hosting`), ``optional`` (default false),
   ``[sessions.<name>.options.<mechanism>]``: that provider's typed options
   (:func:`session.structure_options`: unknown keys and wrong types refused with the full key
   path, e.g. ``sessions.f.options.formation.max_nodes: expected int, got bool``), and the
   retention keys ``retain``/``store`` (:mod:`daemon.retention._policy`; limits in
   ``[stores]``).
5. Text that is not TOML is a :class:`ConfigError`, never another exception: a syntax error,
   arrays or inline tables nested deeper than the TOML reader's recursion, an integer of more
   than 4,300 digits. A configuration file is read with :func:`session.read_capped` (more
   than 16 MiB is an ``OSError`` naming the cap) and must be UTF-8 (else ``ConfigError``).
6. :meth:`DaemonConfig.build_sessions` loads each provider, structures its options and creates
   the mechanism. A session whose mechanism cannot be created (the provider cannot be loaded,
   its options do not structure, or it refuses them — a raised lower-only limit) is an error,
   unless it is ``optional``: then it is skipped and the reason is reported (the CLI prints it
   on stderr). The embedded default marks ``descriptor`` optional so the daemon still serves
   ``formation`` on an installation without the descriptor mechanism.
"""

from __future__ import annotations

import importlib.resources
import os
import tomllib
from pathlib import Path
from typing import Any, Final

import attrs

from session import VerificationMechanism, load_provider, provider_entries, read_capped

from ._hosting import DEFAULT_PORT, HostedSession, ServerConfig
from ._transparency import TransparencyConfig
from .retention._fields import session_config_entry
from .retention._policy import (
    RETENTION_KEYS,
    RetentionPolicy,
    StoreLimits,
    parse_retention,
    parse_store_limits,
)


class ConfigError(ValueError):
    """The configuration is not valid; the message names the key."""


def create_mechanism(session: str, name: str, options: dict[str, Any]) -> VerificationMechanism:
    """The mechanism of provider ``name`` for ``session`` (rule 5); raises what the provider
    lookup, the options or the provider raise (``OptionsError`` names the key path)."""
    from session import OptionsError

    provider = load_provider(name)
    try:
        settings = provider.structure_options(options, where=f"sessions.{session}.options.{name}")
    except OptionsError as error:
        raise ConfigError(str(error)) from None
    return provider.create(settings)


_SERVER_NUMBERS: Final = {
    "idle_timeout": float,
    "pre_hello_timeout": float,
    "request_deadline": float,
    "min_evidence_rate": int,
    "evidence_grace": float,
    "shutdown_grace": float,
    "max_in_flight": int,
    "max_in_flight_per_peer": int,
    "max_connections": int,
    "max_connections_per_peer": int,
    "worker_processes": int,
    "inline_max_bytes": int,
    "max_header_bytes": int,
    "max_frame_bytes": int,
    "max_items": int,
}


@attrs.frozen
class SessionSpec:
    name: str
    mechanisms: tuple[str, ...]
    max_evidence_items: int
    max_evidence_bytes: int
    optional: bool
    options: dict[str, dict[str, Any]]
    retention: RetentionPolicy | None = None
    retain: str = "none"


@attrs.frozen
class DaemonConfig:
    """A parsed configuration: server settings, session specs, and build results."""

    server: ServerConfig
    sessions: tuple[SessionSpec, ...]
    source: str
    #: ``[stores]``: the retention limits ``evidenced store gc --config`` applies.
    stores: dict[str, StoreLimits] = attrs.field(factory=dict)

    def build_sessions(self) -> tuple[list[HostedSession], list[str]]:
        """Construct the mechanisms: (hosted sessions, messages about skipped sessions)."""
        hosted: list[HostedSession] = []
        skipped: list[str] = []
        for spec in self.sessions:
            try:
                mechanisms = tuple(
                    create_mechanism(spec.name, name, dict(spec.options.get(name, {})))
                    for name in spec.mechanisms
                )
                hosted.append(
                    HostedSession(
                        spec.name,
                        mechanisms,
                        spec.max_evidence_items,
                        spec.max_evidence_bytes,
                        recipe=_recipe(spec),
                        retention=spec.retention,
                    )
                )
            except ConfigError as error:  # options that do not structure (the path is named)
                message = f"session {spec.name!r} not hosted: {error}"
                if not spec.optional:
                    raise ConfigError(message) from None
                skipped.append(message)
            except Exception as error:  # a provider that cannot be loaded, or refuses options
                message = (
                    f"session {spec.name!r} not hosted: its mechanism is unavailable "
                    f"({type(error).__name__}: {error})"
                )
                if not spec.optional:
                    raise ConfigError(message) from None
                skipped.append(message)
        if not hosted:
            raise ConfigError("no session can be hosted")
        return hosted, skipped


def _recipe(spec: SessionSpec) -> dict[str, Any]:
    """``daemon_start``'s ``session_config`` entry for ``spec`` (docs/retention.md)."""
    store = None if spec.retention is None else spec.retention.store.id
    return session_config_entry(spec.mechanisms, spec.options, spec.retain, store)


def _check_keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}")


def _typed(value: Any, kind: type, where: str) -> Any:
    if kind is float:
        if type(value) not in (int, float):
            raise ConfigError(f"{where} must be a number")
        return float(value)
    if type(value) is not kind:
        raise ConfigError(f"{where} must be of type {kind.__name__}")
    return value


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 as ``[::1]:PORT``) → (host, port)."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"address {text!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


def parse_config(text: str, *, base: Path, source: str) -> DaemonConfig:
    """Parse TOML configuration text; relative paths resolve against ``base``."""
    try:
        data = tomllib.loads(text)
    except ValueError as error:  # TOMLDecodeError, or an integer of more than 4,300 digits
        raise ConfigError(f"{source}: not TOML: {error}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{source}: not TOML: arrays or tables nested too deep") from None
    _check_keys(data, {"server", "audit", "transparency", "sessions", "stores"}, source)
    server_table = data.get("server", {})
    audit_table = data.get("audit", {})
    sessions_table = data.get("sessions", {})
    for name, table in (
        ("server", server_table),
        ("audit", audit_table),
        ("sessions", sessions_table),
    ):
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: [{name}] must be a table")
    _check_keys(
        server_table,
        {"listen", "socket", "socket_group", "worker_threads", *_SERVER_NUMBERS},
        f"{source} [server]",
    )
    _check_keys(
        audit_table,
        {"path", "durability", "overflow", "max_pending", "rotate_bytes"},
        f"{source} [audit]",
    )
    options: dict[str, Any] = {}
    listen = _typed(server_table.get("listen", f"127.0.0.1:{DEFAULT_PORT}"), str, "server.listen")
    options["tcp"] = parse_address(listen) if listen else None
    socket_path = _typed(server_table.get("socket", ""), str, "server.socket")
    options["unix"] = str(base / socket_path) if socket_path else None
    group = server_table.get("socket_group", "")
    options["socket_group"] = _typed(group, str, "server.socket_group")
    for key, kind in _SERVER_NUMBERS.items():
        if key in server_table:
            options[key] = _typed(server_table[key], kind, f"server.{key}")
    if "worker_threads" in server_table:  # the former name (evaluation was in threads)
        if "worker_processes" in server_table:
            raise ConfigError(f"{source}: server.worker_threads and worker_processes both set")
        options["worker_processes"] = _typed(
            server_table["worker_threads"], int, "server.worker_threads"
        )
    audit_path = _typed(audit_table.get("path", "evidenced-audit.jsonl"), str, "audit.path")
    options["audit_path"] = str(base / audit_path)
    options["audit_durability"] = _typed(
        audit_table.get("durability", "fsync"), str, "audit.durability"
    )
    options["audit_overflow"] = _typed(audit_table.get("overflow", "block"), str, "audit.overflow")
    if "max_pending" in audit_table:
        options["audit_max_pending"] = _typed(audit_table["max_pending"], int, "audit.max_pending")
    if "rotate_bytes" in audit_table:
        options["audit_rotate_bytes"] = _typed(
            audit_table["rotate_bytes"], int, "audit.rotate_bytes"
        )
    if "transparency" in data:
        options["transparency"] = _transparency(data["transparency"], base, source)
    try:
        server = ServerConfig(**options)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None
    specs = []
    installed = {entry.name for entry in provider_entries()}
    for name, table in sessions_table.items():
        where = f"{source} [sessions.{name}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table")
        _check_keys(
            table,
            {"mechanisms", "max_evidence_items", "max_evidence_bytes", "optional", "options"}
            | RETENTION_KEYS,
            where,
        )
        mechanisms = table.get("mechanisms")
        if (
            type(mechanisms) is not list
            or not mechanisms
            or any(type(m) is not str or m not in installed for m in mechanisms)
        ):
            raise ConfigError(
                f"{where}: mechanisms must be a non-empty list of installed mechanism providers "
                f"{sorted(installed)}"
            )
        mechanism_options = table.get("options", {})
        if not isinstance(mechanism_options, dict) or any(
            key not in mechanisms or not isinstance(value, dict)
            for key, value in mechanism_options.items()
        ):
            raise ConfigError(f"{where}: options must be tables named after its mechanisms")
        items = _typed(table.get("max_evidence_items", 2), int, f"{where} max_evidence_items")
        size = _typed(table.get("max_evidence_bytes", 524_288), int, f"{where} max_evidence_bytes")
        if items < 0 or size < 0:
            raise ConfigError(f"{where}: bounds must be non-negative")
        try:
            retention, retain = parse_retention(table, where, base)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        specs.append(
            SessionSpec(
                name,
                tuple(mechanisms),
                items,
                size,
                _typed(table.get("optional", False), bool, f"{where} optional"),
                {key: dict(value) for key, value in mechanism_options.items()},
                retention,
                retain,
            )
        )
    if not specs:
        raise ConfigError(f"{source}: no [sessions.<name>] table")
    stores = data.get("stores", {})
    if not isinstance(stores, dict):
        raise ConfigError(f"{source}: [stores] must be a table")
    policies = {spec.name: spec.retention for spec in specs if spec.retention is not None}
    try:
        limits = parse_store_limits(stores, policies, source)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return DaemonConfig(server, tuple(specs), source, limits)


def _transparency(table: Any, base: Path, source: str) -> TransparencyConfig:
    where = f"{source} [transparency]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    _check_keys(
        table, {"key_file", "origin", "directory", "checkpoint_interval", "entry_bundles"}, where
    )
    if "key_file" not in table:
        raise ConfigError(f"{where}: key_file is required (evidenced log keygen --out FILE)")
    key_file = _typed(table["key_file"], str, "transparency.key_file")
    origin = table.get("origin")
    directory = table.get("directory")
    interval = table.get("checkpoint_interval", 1.0)
    if type(interval) is int:
        interval = float(interval)
    try:
        return TransparencyConfig(
            key_file=str(base / key_file),
            origin=None if origin is None else _typed(origin, str, "transparency.origin"),
            directory=None
            if directory is None
            else str(base / _typed(directory, str, "transparency.directory")),
            checkpoint_interval=_typed(interval, float, "transparency.checkpoint_interval"),
            entry_bundles=_typed(
                table.get("entry_bundles", False), bool, "transparency.entry_bundles"
            ),
        )
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None


def default_config_text() -> str:
    """The embedded default configuration (``daemon/default.toml``)."""
    return importlib.resources.files("daemon").joinpath("default.toml").read_text("utf-8")


def load_config(path: str | os.PathLike[str] | None = None) -> DaemonConfig:
    """Load ``path`` or, when None, the embedded default."""
    if path is None:
        return parse_config(default_config_text(), base=Path.cwd(), source="<default config>")
    target = Path(path)
    try:
        text = read_capped(target).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{target}: not UTF-8 text: {error}") from None
    return parse_config(text, base=target.resolve().parent, source=str(target))


def default_sessions() -> list[HostedSession]:
    """The default sessions (``formation`` and, when installed, ``descriptor``)."""
    hosted, _ = load_config(None).build_sessions()
    return hosted
