"""The daemon's TOML configuration (read with ``tomllib``), and the embedded default.

Rules (the contract), checked in this order; every failure is a :class:`ConfigError` whose
message names the key path (``sessions.formation.max_evidence_bytes: expected int, got
bool``) and starts with the file:

1. Text that is not TOML is refused, never another exception: a syntax error, arrays or
   inline tables nested deeper than the TOML reader's recursion, an integer of more than 4,300
   digits. A configuration file is read with :func:`session.read_capped` (more than 16 MiB is
   an ``OSError`` naming the cap) and must be UTF-8.
2. The shape (:mod:`daemon.config._config_schema`, one cattrs converter over the tables the
   schema declares, :mod:`daemon.schema._tables`): the tables ``[server]``, ``[http]``,
   ``[audit]``, ``[transparency]``, ``[sessions.<name>]``, ``[stores]``; unknown tables or keys
   are refused, and so are values of the wrong type (booleans are not numbers). Every key is
   optional except each session's ``mechanisms`` and the transparency ``key_file``. All
   violations are reported at once. Each key's default, range rule and choices are the
   schema's, checked by the runtime object that holds it as it is built (a refusal names the
   key); nothing here restates them.
3. ``[server]``: ``listen = "HOST:PORT"`` (empty string: no TCP), ``socket = "PATH"`` (empty:
   none), ``socket_group`` (a group name or number: the socket is then mode 0660 for that
   group; empty: 0600), and the :class:`ServerConfig` limits of the same names (times in
   seconds; rates in bytes per second). ``worker_threads`` (before evaluation moved
   to worker processes) is still read, as ``worker_processes``; both at once is an error.
   ``tls_cert`` with ``tls_key``, ``tls_client_ca`` (needs them) and ``tokens_file`` secure
   the TCP listener (:mod:`daemon.config._security`; ``""``: none).
3a. ``[http]`` (optional; present means on): ``listen``, the same four security keys for the
   HTTP listener, ``max_header_bytes``, ``max_headers``, ``header_timeout``,
   ``trusted_proxies`` (:mod:`daemon.config._http_config`).
4. ``[audit]``: ``path``, ``durability``, ``overflow``, ``max_pending``, ``rotate_bytes``
   (0: never rotate), ``labels``, ``sinks`` (rule 4b).
4b. ``[audit] labels`` and ``[[audit.sinks]]`` (:mod:`daemon.audit._shipping_config`): each
   sink's keys within the schema's ranges, then its own rules (``audit.sinks[0].url is
   required for an http sink``), its token and CA files read, then the sinks together
   (distinct names, one console sink at most); ``[audit] labels`` go under each sink's own.
4a. ``[transparency]`` (optional; present means on): ``key_file`` (required), ``origin``,
   ``directory``, ``checkpoint_interval`` (seconds), ``entry_bundles``
   (``docs/spec/transparency.md §6``).
5. Relative paths (``socket``, ``audit.path``, the transparency ``key_file`` and
   ``directory``, the TLS and tokens files, ``*_file`` options) resolve against the config
   file's directory; for the embedded default, against ``$STATE_DIRECTORY`` when systemd sets
   it (its first entry), else the working directory (:func:`default_base`).
6. ``[sessions.<name>]``: ``mechanisms`` (a non-empty array of names of installed mechanism
   providers: entry points of the group ``evidenced.mechanisms``, :mod:`session._plugins`;
   ``evidenced mechanisms`` lists them), ``max_evidence_items``, ``max_evidence_bytes``
   (non-negative; declared bounds, clamped to what the mechanisms accept and checked on
   declared sizes before reading; :mod:`daemon.config._hosting`), ``optional`` (default false), the
   retention keys ``retain``/``store`` (:mod:`daemon.retention._policy`; limits in
   ``[stores]``), and ``[sessions.<name>.options.<mechanism>]``, only for the session's
   mechanisms: that provider's typed options (:func:`session.structure_options`: unknown keys
   and wrong types refused with the full key path, e.g.
   ``sessions.f.options.formation.max_nodes: expected int, got bool``; lower-only limits
   refused when the mechanism is created). An option ``X_file = "PATH"`` is read (capped,
   UTF-8) and passed as ``X``; giving both ``X`` and ``X_file`` is refused, and so is an
   unreadable file. A value given inline where text is expected that looks like a file path (a
   field of the provider's options marked with :data:`TEXT_FORM`: the descriptor's ``policy``
   is an Axion s-expression, its ``allowlist`` a JSON object) is refused with the key named,
   instead of being taken as text that every decision would then FAIL on.
7. At least one session.
8. :meth:`DaemonConfig.build_sessions` loads each provider, structures its options and creates
   the mechanism. A session whose mechanism cannot be created (the provider cannot be loaded,
   its options do not structure, or it refuses them — a raised lower-only limit) is an error,
   unless it is ``optional``: then it is skipped and the reason is reported (the CLI
   prints it on stderr). A mechanism whose extra is not installed (``session.ExtraMissing``)
   is reported as that one line, ``session 'S' not hosted: <feature> needs the '<extra>'
   extra: pip install 'evidenced[<extra>]'``; for a session that is not optional it is
   :class:`ExtraNotInstalled` (exit 69, ``EXTRA_MISSING``), not an invalid configuration.
   A session retaining evidence in an ``s3://`` store needs the ``s3`` extra the same way.
   The embedded default marks ``descriptor`` optional, so ``evidenced serve`` on an
   installation without the ``descriptor`` extra serves ``formation`` and says once why
   ``descriptor`` is not hosted (ADR 0020).

:meth:`DaemonConfig.effective` is the configuration as it will run (defaults filled in, paths
resolved), which ``evidenced config check`` prints.
"""

from __future__ import annotations

import importlib.resources
import os
import tomllib
from pathlib import Path
from typing import Any, Final

import attrs

from daemon.audit._fields import session_config_entry
from daemon.audit._shipping_config import SinkConfig, check_sink_files, check_sinks
from daemon.audit._transparency import TransparencyConfig
from daemon.config._config_schema import (
    SchemaError,
    structure_config,
    unstructure_config,
)
from daemon.config._credentials import resolve_file
from daemon.config._hosting import HostedSession, ServerConfig, schema_fields
from daemon.config._http_config import HttpConfig
from daemon.config._security import ListenerSecurity
from daemon.config._tls import TlsConfig
from daemon.retention._policy import (
    RetentionPolicy,
    StoreLimits,
    parse_retention,
    parse_store_limits,
)
from daemon.schema._tables import (
    AuditTable,
    ConfigFile,
    HttpTable,
    ServerTable,
    SessionTable,
    SinkTable,
    default_of,
    rule_of,
)
from daemon.wire._errors import PeerError, Unavailable
from session import (
    ExtraMissing,
    VerificationMechanism,
    load_provider,
    provider_entries,
    read_capped,
    require_extra,
)


class ConfigError(PeerError, ValueError):
    """The configuration is not valid; the message names the key."""


class ExtraNotInstalled(Unavailable):
    """A session that is not ``optional`` needs an extra this installation lacks (rule 8):
    the configuration is valid, the installation cannot host it. ``code`` ``EXTRA_MISSING``;
    ``extra`` names it."""

    code: Final = ExtraMissing.code

    def __init__(self, message: str, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


def create_mechanism(session: str, name: str, options: dict[str, Any]) -> VerificationMechanism:
    """The mechanism of provider ``name`` for ``session`` (rule 8); raises what the provider
    lookup, the options or the provider raise (:class:`ConfigError` naming the key path for
    options that do not structure, or text that is a file path: rule 6)."""
    from session import OptionsError

    provider = load_provider(name)
    where = f"sessions.{session}.options.{name}"
    _refuse_paths_as_text(provider.options_type, options, where)
    try:  # a constructor's refusal names the path too (MechanismProvider.configure)
        return provider.configure(options, where=where)
    except OptionsError as error:
        raise ConfigError(str(error)) from None


#: The attrs field metadata key by which a provider's options class says a field holds text of
#: a known form: its value is what the text starts with (``"("`` for an Axion policy). A
#: one-line value that does not is taken for a file path given by mistake (rule 6).
TEXT_FORM: Final = "evidenced.text_starts_with"


@attrs.frozen
class SessionSpec:
    """One ``[sessions.<name>]`` table as read (its keys the schema's :class:`SessionTable`),
    before its mechanisms are created."""

    name: str
    mechanisms: tuple[str, ...]
    max_evidence_items: int
    max_evidence_bytes: int
    optional: bool
    options: dict[str, dict[str, Any]]
    retention: RetentionPolicy | None = None
    retain: str = default_of(SessionTable, "retain")


@attrs.frozen
class DaemonConfig:
    """A parsed configuration: server settings, session specs, and build results."""

    server: ServerConfig
    sessions: tuple[SessionSpec, ...]
    source: str
    #: ``[stores]``: the retention limits ``evidenced store gc --config`` applies.
    stores: dict[str, StoreLimits] = attrs.field(factory=dict)
    file: ConfigFile | None = None

    def effective(self) -> dict[str, Any]:
        """The configuration as it runs: every key with its value, paths resolved (the
        tables of the file, plus ``source``)."""
        tables = unstructure_config(self.file) if self.file is not None else {}
        if tables:
            tables["server"]["socket"] = self.server.unix or ""
            tables["server"].pop("worker_threads", None)
            tables["server"]["worker_processes"] = self.server.worker_processes
            tables["audit"]["path"] = self.server.audit_path
            for table, sink in zip(tables["audit"]["sinks"], self.server.sinks, strict=True):
                table["token_file"] = sink.token_file or ""
                table["tls_ca"] = sink.tls_ca or ""
        return {"source": self.source, **tables}

    def build_sessions(self) -> tuple[list[HostedSession], list[str]]:
        """Construct the mechanisms: (hosted sessions, messages about skipped sessions)."""
        hosted: list[HostedSession] = []
        skipped: list[str] = []
        for spec in self.sessions:
            try:
                if spec.retention is not None and spec.retention.store.kind == "s3":
                    require_extra("s3")  # its store cannot open: said as a mechanism's extra
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
            except ExtraMissing as missing:  # the installation lacks a library (rule 8)
                message = f"session {spec.name!r} not hosted: {missing}"
                if not spec.optional:
                    raise ExtraNotInstalled(f"{self.source}: {message}", missing.extra) from None
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


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 as ``[::1]:PORT``) → (host, port)."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"address {text!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


def parse_config(text: str, *, base: Path, source: str) -> DaemonConfig:
    """Parse TOML configuration text (module rules); relative paths resolve against ``base``."""
    try:
        data = tomllib.loads(text)
    except ValueError as error:  # TOMLDecodeError, or an integer of more than 4,300 digits
        raise ConfigError(f"{source}: not TOML: {error}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{source}: not TOML: arrays or tables nested too deep") from None
    try:
        file = structure_config(data)
    except SchemaError as error:
        raise ConfigError(f"{source}: {error}") from None
    server_table, audit = file.server, file.audit
    workers = server_table.worker_processes
    if server_table.worker_threads is not None:  # the former name (evaluation was in threads)
        if "worker_processes" in data.get("server", {}):
            raise ConfigError(f"{source}: server.worker_threads and worker_processes both set")
        workers = server_table.worker_threads
    try:
        # Every schema key of ServerConfig, copied by name (daemon.config._hosting.schema_fields).
        copied = {
            name: getattr(audit if name.startswith("audit_") else server_table, key.name)
            for name, key in schema_fields().items()
        }
        server = ServerConfig(
            **{
                **copied,
                "worker_processes": workers,
                "audit_path": str(base / audit.path),
            },
            tcp=parse_address(server_table.listen) if server_table.listen else None,
            unix=str(base / server_table.socket) if server_table.socket else None,
            transparency=_transparency(file, base),
            security=_security(server_table, base, f"{source}: server"),
            http=_http(file.http, base, source),
            sinks=_sinks(audit, base),
        )
    except ValueError as error:  # includes ConfigError from parse_address
        message = str(error).removeprefix(f"{source}: ")
        raise ConfigError(f"{source}: {message}") from None
    installed = {entry.name for entry in provider_entries()}
    specs = [
        _session_spec(name, table, base, source, installed) for name, table in file.sessions.items()
    ]
    if not specs:
        raise ConfigError(f"{source}: no [sessions.<name>] table")
    policies = {spec.name: spec.retention for spec in specs if spec.retention is not None}
    try:
        limits = parse_store_limits(file.stores, policies, source)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return DaemonConfig(server, tuple(specs), source, limits, file)


def _security(table: ServerTable | HttpTable, base: Path, where: str) -> ListenerSecurity:
    """A listener's TLS and tokens files (``tls_cert``, ``tls_key``, ``tls_client_ca``,
    ``tokens_file``; daemon.config._security); paths resolve against ``base``."""

    def path(value: str) -> str | None:
        return _file(value, base, where) if value else None

    cert, key, client_ca = path(table.tls_cert), path(table.tls_key), path(table.tls_client_ca)
    if (cert is None) != (key is None):
        raise ConfigError(f"{where}: tls_cert and tls_key go together")
    if client_ca is not None and cert is None:
        raise ConfigError(f"{where}: tls_client_ca needs tls_cert and tls_key")
    tls = None if cert is None or key is None else TlsConfig(cert, key, client_ca)
    return ListenerSecurity(tls, path(table.tokens_file))


def _http(table: HttpTable | None, base: Path, source: str) -> HttpConfig | None:
    """``[http]`` (present means on; daemon.config._http_config)."""
    if table is None:
        return None
    return HttpConfig(
        listen=parse_address(table.listen),
        security=_security(table, base, f"{source}: http"),
        max_header_bytes=table.max_header_bytes,
        max_headers=table.max_headers,
        header_timeout=table.header_timeout,
        trusted_proxies=table.trusted_proxies,
    )


def _sinks(audit: AuditTable, base: Path) -> tuple[SinkConfig, ...]:
    """``[[audit.sinks]]`` (rule 4b): each checked, its files read, then all of them together;
    ``ConfigError`` naming ``audit.sinks[i]``."""
    sinks = []
    for index, table in enumerate(audit.sinks):
        where = f"audit.sinks[{index}]"
        sinks.append(_sink(table, base, where, dict(audit.labels)))
    try:
        check_sinks(sinks)
    except ValueError as error:
        raise ConfigError(f"audit.sinks: {error}") from None
    return tuple(sinks)


def _sink(table: SinkTable, base: Path, where: str, labels: dict[str, str]) -> SinkConfig:
    """One sink: :class:`SinkConfig` runs the schema's range rules (the key is named)."""

    def path(value: str) -> str | None:
        return _file(value, base, where) if value else None

    try:
        sink = SinkConfig(
            name=table.name,
            type=table.type,
            url=table.url or None,
            token_file=path(table.token_file),
            tls_ca=path(table.tls_ca),
            timeout=table.timeout,
            events=table.events,
            batch_lines=table.batch_lines,
            batch_bytes=table.batch_bytes,
            flush_interval=table.flush_interval,
            backoff_min=table.backoff_min,
            backoff_max=table.backoff_max,
            start_at=table.start_at,
            labels={**labels, **table.labels},
        )
        check_sink_files(sink)
    except ValueError as error:
        raise ConfigError(
            f"{where}.{error}" if _names_key(error) else f"{where}: {error}"
        ) from None
    return sink


def _names_key(error: ValueError) -> bool:
    """Whether a sink's message starts with its key (``timeout must …``)."""
    first = str(error).split(" ", 1)[0].split(":", 1)[0].split(".", 1)[0]
    return first in attrs.fields_dict(SinkTable)


def _file(value: str, base: Path, where: str) -> str:
    """A secret's file: a path, or ``credential:NAME`` (daemon.config._credentials)."""
    try:
        return resolve_file(value, base)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None


def _transparency(file: ConfigFile, base: Path) -> TransparencyConfig | None:
    table = file.transparency
    if table is None:
        return None
    return TransparencyConfig(
        key_file=_file(table.key_file, base, "transparency"),
        origin=table.origin,
        directory=None if table.directory is None else str(base / table.directory),
        checkpoint_interval=table.checkpoint_interval,
        entry_bundles=table.entry_bundles,
        publish=_publish_target(table.publish, base),
    )


def _publish_target(spec: str | None, base: Path) -> str | None:
    """``[transparency] publish``: an ``fs:`` path is relative to the configuration file."""
    if spec is not None and spec.startswith("fs:") and len(spec) > 3:
        return f"fs:{base / spec[3:]}"
    return spec


def _session_spec(
    name: str, table: SessionTable, base: Path, source: str, installed: set[str]
) -> SessionSpec:
    where = f"sessions.{name}"
    mechanisms = table.mechanisms
    if not mechanisms or any(m not in installed for m in mechanisms):
        raise ConfigError(
            f"{source}: {where}.mechanisms must be a non-empty list of installed mechanism "
            f"providers {sorted(installed)}, not {list(mechanisms)}"
        )
    strangers = sorted(set(table.options) - set(mechanisms))
    if strangers:
        raise ConfigError(
            f"{source}: {where}.options must be tables named after its mechanisms "
            f"{list(mechanisms)}, not {strangers}"
        )
    for field in attrs.fields(SessionTable):  # the schema's range rules (the bounds)
        rule = rule_of(SessionTable, field.name)
        if rule is not None and not rule.holds(getattr(table, field.name)):
            raise ConfigError(f"{source}: {where}.{field.name}: bounds must be non-negative")
    options = {
        mechanism: _resolve_files(f"{where}.options.{mechanism}", given, base, source)
        for mechanism, given in table.options.items()
    }
    try:
        retention, retain = parse_retention(
            {"retain": table.retain, "store": table.store}, f"{source}: {where}", base
        )
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return SessionSpec(
        name,
        tuple(mechanisms),
        table.max_evidence_items,
        table.max_evidence_bytes,
        table.optional,
        options,
        retention,
        retain,
    )


def _resolve_files(where: str, given: dict[str, Any], base: Path, source: str) -> dict[str, Any]:
    """Rule 6: each ``X_file`` option read (capped, UTF-8) into ``X``."""
    options = dict(given)
    for key in sorted(given):
        if not key.endswith("_file"):
            continue
        target = key.removesuffix("_file")
        if target in given:
            raise ConfigError(f"{source}: {where}: give {target} or {key}, not both")
        path = given[key]
        if type(path) is not str or not path:
            raise ConfigError(f"{source}: {where}.{key}: expected a file path (str)")
        try:
            options[target] = read_capped(base / path).decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{source}: {where}.{key}: {path} is not UTF-8 text") from None
        except OSError as error:
            reason = error.strerror or str(error)
            raise ConfigError(f"{source}: {where}.{key}: cannot read {path}: {reason}") from None
        del options[key]
    return options


def _refuse_paths_as_text(options_type: Any, given: dict[str, Any], where: str) -> None:
    """Rule 6: a one-line value of a :data:`TEXT_FORM` field that does not start as that text
    does is a file path given by mistake."""
    if not attrs.has(options_type):
        return
    for field in attrs.fields(options_type):
        start = field.metadata.get(TEXT_FORM)
        value = given.get(field.name)
        if start is None or type(value) is not str:
            continue
        if "\n" not in value.strip() and not value.lstrip().startswith(start):
            shown = value if len(value) <= 80 else value[:80] + "…"
            raise ConfigError(
                f"{where}.{field.name}: {shown!r} is not {field.name} text (it starts with "
                f"{start!r}); to name a file, use {field.name}_file = {shown!r}"
            )


def default_config_text() -> str:
    """The embedded default configuration (``daemon/config/default.toml``)."""
    return importlib.resources.files("daemon.config").joinpath("default.toml").read_text("utf-8")


def default_base() -> Path:
    """Where the embedded default's relative paths resolve (rule 5): the first entry of
    ``$STATE_DIRECTORY`` (set by systemd's ``StateDirectory=``) when set, else the working
    directory."""
    state = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    return Path(state) if state else Path.cwd()


def load_config(path: str | os.PathLike[str] | None = None) -> DaemonConfig:
    """Load ``path`` or, when None, the embedded default."""
    if path is None:
        return parse_config(default_config_text(), base=default_base(), source="<default config>")
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
