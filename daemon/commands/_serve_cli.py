"""CLI command ``serve``.

The :mod:`cli` contract applies (one JSON document on stdout on every path, errors as
``{"error": {"code", "message", "exit"}}``, one-line messages on stderr); per command:

* ``serve [--listen HOST:PORT | --socket PATH] [--config FILE] [--audit-log PATH]
  [--http HOST:PORT] [--insecure-listen]`` prints ``{"status": "serving", "tcp", "unix",
  "http", "insecure_listen", "audit_log", "sessions", "skipped"}`` once it listens,
  serves until SIGINT/SIGTERM, then shuts down gracefully. Exit 0 after a clean shutdown;
  65 for an invalid configuration (``CONFIG_INVALID``: also an unusable TLS or tokens file, or
  a non-loopback TCP listener without TLS and authentication unless ``--insecure-listen``)
  or a corrupt or unsafe audit log (never truncated); 75 when another daemon holds the audit
  log (``AUDIT_LOG_IN_USE``); 69 when it cannot listen, or when a session that is not
  ``optional`` needs an extra this installation lacks (``EXTRA_MISSING``, the message naming
  ``pip install 'evidenced[<extra>]'``; an optional one is skipped, its line in ``skipped``
  and on stderr); 70 (not 0) when it stops while its audit log cannot be written. With a
  ``console`` decision-log sink (``[[audit.sinks]]``) stdout is the sink's: one event per line
  and nothing else (the ``serving`` document and an error document after the configuration
  was accepted are not written; stderr says them).
"""

from __future__ import annotations

import argparse
import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from daemon.wire import _logs as logs
from session import cli
from session.cli import CliError, Exit, RejectedInput

# The server, the configuration and the audit log load when ``serve`` runs, not when the
# command line is built (docs/benchmarks.md, "The CLI's imports").
if TYPE_CHECKING:
    from daemon.config._config import DaemonConfig
    from daemon.config._hosting import HostedSession, ServerConfig
    from daemon.server._server import Server
    from daemon.server._supervisor import Supervisor


from daemon.commands._client_cli import _add_address


def _load(args: argparse.Namespace) -> tuple[DaemonConfig, ServerConfig]:
    """The configuration and the server settings with the command line's overrides (at start,
    and again for each SIGHUP reload); ``ConfigError`` when invalid."""
    from daemon.config._config import load_config, parse_address
    from daemon.config._http_config import HttpConfig

    config = load_config(args.config)
    changes: dict[str, Any] = {}
    if args.address:
        changes.update(tcp=parse_address(args.address), unix=None)
    if args.socket:
        changes.update(unix=args.socket, tcp=None)
    if args.audit_log:
        changes["audit_path"] = str(Path(args.audit_log).absolute())
    if args.http:
        http = config.server.http or HttpConfig()
        changes["http"] = attrs.evolve(http, listen=parse_address(args.http))
    if args.insecure_listen:
        changes["insecure_listen"] = True
    if args.workers is not None:
        changes["workers"] = args.workers
    return config, attrs.evolve(config.server, handle_signals=True, **changes)


def _serve(args: argparse.Namespace) -> int:
    from daemon.audit._audit import AuditLogError
    from daemon.config._config import ConfigError
    from daemon.config._security import ExposureRefused
    from daemon.config._tls import TlsConfigError
    from daemon.config._tokens import TokenFileError
    from daemon.retention import StoreError
    from daemon.server import _systemd as systemd
    from daemon.server._service import ServiceHooks, run_service
    from daemon.server._supervisor import Supervisor, WorkersFailed

    try:
        config, server_config = _load(args)
        sessions, skipped = config.build_sessions()
    except (ConfigError, ValueError) as error:
        raise RejectedInput(f"invalid configuration: {error}", code="CONFIG_INVALID") from None
    if args.check:
        from daemon.commands._config_cli import check_document

        effective = config.effective()
        effective["server"]["listen"] = (
            "" if server_config.tcp is None else f"{server_config.tcp[0]}:{server_config.tcp[1]}"
        )
        effective["server"]["socket"] = server_config.unix or ""
        effective["audit"]["path"] = server_config.audit_path
        try:  # the checks of config check, with serve's flags applied
            document = check_document(
                config, server_config, source_config=effective, inherited=systemd.listen_fds()
            )
        except ConfigError as error:
            raise RejectedInput(f"invalid configuration: {error}", code="CONFIG_INVALID") from None
        cli.emit(document)
        cli.say(f"{config.source}: valid (not started: --check)")
        return Exit.OK
    for message in skipped:
        cli.say(message)
    # A console decision-log sink owns stdout (docs/operations.md §11): the serving and error
    # documents are not written there, their stderr lines say the same.
    console = any(sink.type == "console" for sink in server_config.sinks)
    if console:
        cli.hand_over_stdout()
    origin = "--audit-log" if args.audit_log else config.source
    _make_parents(server_config.audit_path)

    def load() -> tuple[DaemonConfig, ServerConfig]:
        return _load(args)

    # One service assembly for one process and for --workers N (daemon.server._service).
    hooks = ServiceHooks.from_environment(
        load=load if args.config is not None else None, source=config.source
    )

    def ready(service: Server | Supervisor) -> None:
        if isinstance(service, Supervisor):
            _announce_workers(service, server_config, sessions, skipped, origin, emit=not console)
        else:
            _announce(service, server_config, skipped, origin, emit=not console)

    try:
        ran = run_service(
            sessions,
            server_config,
            hooks,
            inherited=systemd.listen_fds(),
            on_ready=ready,
            serving=_tune_collector,
        )
    except BaseExceptionGroup as group:  # several causes at once: report the first
        first: BaseException = group
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise _start_failure(first) from None
    except (
        AuditLogError,
        StoreError,
        OSError,
        WorkersFailed,
        ExposureRefused,
        TlsConfigError,
        TokenFileError,
    ) as error:
        raise _start_failure(error) from None
    failure = ran.audit.failure_reason if ran.audit is not None else None
    if failure is not None:
        raise CliError(
            f"stopped, but the audit log could not be written ({failure}); daemon_stop is "
            "not recorded and requests answered AUDIT_FAILED have no line",
            exit=Exit.INTERNAL,
            code="AUDIT_FAILED",
        )
    cli.say("stopped; audit log flushed")
    return Exit.OK


def _announce_workers(
    supervisor: Supervisor,
    server_config: ServerConfig,
    sessions: list[HostedSession],
    skipped: list[str],
    origin: str,
    *,
    emit: bool,
) -> None:
    """The ``serving`` document (unless a console sink owns stdout) and the stderr line of a
    ``--workers N`` daemon."""
    _tune_collector()
    listen = supervisor.bound.listen
    tlog = supervisor.transparency
    document = {
        "status": "serving",
        "tcp": listen.get("tcp"),
        "unix": listen.get("unix"),
        "http": listen.get("http"),
        "insecure_listen": supervisor.exposed,
        "audit_log": server_config.audit_path,
        "sessions": sorted(session.name for session in sessions),
        "skipped": skipped,
        "transparency": None
        if tlog is None
        else {
            "origin": tlog.origin,
            "verifier_key": tlog.signer.verifier().encode(),
            "directory": str(tlog.directory),
            "checkpoint_size": None if tlog.checkpoint is None else tlog.checkpoint.size,
        },
        "workers": supervisor.count,
    }
    if emit:
        cli.emit(document)
    where = _where(listen.get("unix"), listen.get("tcp"), listen.get("http"), server_config)
    logs.info(
        "serving",
        f"serving {', '.join(sorted(s.name for s in sessions))} on {where} with "
        f"{supervisor.count} workers; audit log {server_config.audit_path} (from {origin})",
        **listen,
        workers=supervisor.count,
        audit_log=server_config.audit_path,
        sessions=sorted(s.name for s in sessions),
    )


def _announce(
    server: Server, server_config: ServerConfig, skipped: list[str], origin: str, *, emit: bool
) -> None:
    """The ``serving`` document (unless a console sink owns stdout) and the stderr lines,
    once the server listens."""
    _tune_collector()
    document = {
        "status": "serving",
        "tcp": None
        if server.tcp_address is None
        else f"{server.tcp_address[0]}:{server.tcp_address[1]}",
        "unix": server.unix_path,
        "http": None
        if server.http_address is None
        else f"{server.http_address[0]}:{server.http_address[1]}",
        "insecure_listen": bool(server.exposed),
        "audit_log": server_config.audit_path,
        "sessions": sorted(server.sessions),
        "skipped": skipped,
        "transparency": _transparency_summary(server),
    }
    if emit:
        cli.emit(document)
    if server.transparency is not None:
        cli.say(
            f"transparency log {server.transparency.directory}: origin"
            f" {server.transparency.origin}, verifier key"
            f" {server.transparency.signer.verifier().encode()}"
        )
    tcp, http = (a and f"{a[0]}:{a[1]}" for a in (server.tcp_address, server.http_address))
    logs.info(
        "serving",
        f"serving {', '.join(sorted(server.sessions))} on "
        f"{_where(server.unix_path, tcp, http, server_config)}"
        f"; audit log {server_config.audit_path} (from {origin})",
        unix=server.unix_path,
        tcp=tcp,
        http=http,
        audit_log=server_config.audit_path,
        sessions=sorted(server.sessions),
    )


def _transparency_summary(server: Server) -> dict[str, Any] | None:
    tree = server.transparency
    if tree is None:
        return None
    return {
        "origin": tree.origin,
        "verifier_key": tree.signer.verifier().encode(),
        "directory": str(tree.directory),
        "checkpoint_size": None if tree.checkpoint is None else tree.checkpoint.size,
    }


def _tune_collector() -> None:
    """In the daemon process only (``serve``), once it is serving: freeze what start-up
    allocated (modules, mechanisms, configuration) so full collections no longer traverse it,
    and collect the young generation less often. A request leaves no cyclic garbage (its
    objects die by reference counting), so this only saves traversals: measured ~15 us per
    minimal decision at c=64 and a ~14 ms pause for each full collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


def _make_parents(path: str) -> None:
    """Create the missing parent directories of the audit log, each with mode 0700 (the log
    is private to the daemon); failure is 73."""
    missing: list[Path] = []
    parent = Path(path).absolute().parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            raise cli.OutputError(str(directory), error.strerror or str(error)) from None


def _start_failure(error: BaseException) -> BaseException:
    """Why ``serve`` could not start: a log held by another daemon is busy (75), a corrupt or
    unsafe log is rejected input (65), a socket that cannot be bound is 69."""
    from daemon.audit._audit import AuditLogCorrupt, AuditLogError, AuditLogInUse
    from daemon.config._security import ExposureRefused
    from daemon.config._tls import TlsConfigError
    from daemon.config._tokens import TokenFileError
    from daemon.retention import StoreError, StoreExtraMissing
    from daemon.server._supervisor import WorkersFailed

    if isinstance(error, ExposureRefused | TlsConfigError | TokenFileError):
        return RejectedInput(f"invalid configuration: {error}", code="CONFIG_INVALID")
    if isinstance(error, AuditLogInUse):
        return CliError(f"{error}; refusing to start", exit=Exit.BUSY, code="AUDIT_LOG_IN_USE")
    if isinstance(error, AuditLogCorrupt):
        return RejectedInput(
            f"{error}; refusing to start (the file was not truncated or overwritten)",
            code="AUDIT_LOG_CORRUPT",
        )
    from daemon.audit._transparency import TransparencyStartError

    if isinstance(error, TransparencyStartError):
        return RejectedInput(f"{error}; refusing to start", code="TRANSPARENCY_REFUSED")
    if isinstance(error, AuditLogError):
        return RejectedInput(f"{error}; refusing to start", code="AUDIT_LOG_REFUSED")
    if isinstance(error, StoreExtraMissing):
        return CliError(f"{error}; refusing to start", exit=Exit.UNREACHABLE, code=error.code)
    if isinstance(error, StoreError):
        return RejectedInput(f"{error}; refusing to start", code="STORE_REFUSED")
    if isinstance(error, WorkersFailed):
        return CliError(str(error), exit=Exit.INTERNAL, code="WORKERS_FAILED")
    if isinstance(error, OSError):
        return CliError(
            f"cannot listen: {error.strerror or error}", exit=Exit.UNREACHABLE, code="CANNOT_LISTEN"
        )
    return error


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'not a number of workers or "auto": {text!r}') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _where(unix: str | None, tcp: str | None, http: str | None, config: ServerConfig) -> str:
    """Every listener the start line names, the TCP ones as the URLs clients take: ``tls://``
    or ``tcp://`` for the binary protocol, ``https://`` or ``http://`` for HTTP (by whether the
    listener has TLS)."""
    binary = "tls" if config.security.encrypted else "tcp"
    web = "https" if config.http is not None and config.http.security.encrypted else "http"
    found = [unix, tcp and f"{binary}://{tcp}", http and f"{web}://{http}"]
    return ", ".join(place for place in found if place) or "inherited sockets"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve``."""
    serve = subparsers.add_parser("serve", help="run the daemon")
    _add_address(serve, verb="listen")
    serve.add_argument(
        "--config", metavar="FILE", help="TOML configuration (default: the embedded one)"
    )
    serve.add_argument(
        "--audit-log",
        metavar="PATH",
        help="audit log file, overriding the configuration (missing parent directories are "
        "created with mode 0700); default: the configuration's [audit] path, for the embedded "
        "one evidenced-audit.jsonl in $STATE_DIRECTORY when set, else the working directory",
    )
    serve.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve the HTTP/JSON API here too (overrides [http] listen; docs/http.md)",
    )
    serve.add_argument(
        "--insecure-listen",
        action="store_true",
        help="listen on a non-loopback address without TLS and authentication all the same "
        "(recorded in the daemon_start audit line)",
    )
    serve.add_argument(
        "--workers",
        type=_workers,
        metavar="N",
        help='serving processes sharing the listeners and one audit log ("auto": one per '
        "CPU); overrides [server] workers (docs/operations.md)",
    )
    serve.add_argument(
        "--check",
        action="store_true",
        help="validate the configuration and print the effective one; do not start",
    )
    serve.set_defaults(handler=_serve)
