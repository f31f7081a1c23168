"""CLI commands ``serve``, ``submit``, ``sessions``, ``health`` and ``audit``.

The :mod:`cli` contract applies (one JSON document on stdout on every path, errors as
``{"error": {"code", "message", "exit"}}``, one-line messages on stderr); per command:

* ``serve [--listen HOST:PORT | --socket PATH] [--config FILE] [--audit-log PATH]
  [--http HOST:PORT] [--insecure-listen]`` prints ``{"status": "serving", "tcp", "unix",
  "http", "insecure_listen", "audit_log", "sessions", "skipped"}`` once it listens,
  serves until SIGINT/SIGTERM, then shuts down gracefully. Exit 0 after a clean shutdown;
  65 for an invalid configuration (``CONFIG_INVALID``: also an unusable TLS or tokens file, or
  a non-loopback TCP listener without TLS and authentication unless ``--insecure-listen``)
  or a corrupt or unsafe audit log (never truncated); 75 when another daemon holds the audit
  log (``AUDIT_LOG_IN_USE``); 69 when it cannot listen; 70 (not 0) when it stops while its
  audit log cannot be written.
* ``submit [--connect URL | --socket PATH] --session NAME FILE... [--binding FILE]``
  (``URL``: ``HOST:PORT``, ``tcp://``, ``tls://``, ``http://``, ``https://``; with
  ``--token-file FILE``, ``--tls-ca``, ``--tls-cert``, ``--tls-key``)
  prints the decision (``decision_id``, ``session``, the ``EvaluatedProposition`` fields and
  the audit line's ``seq`` and ``line_digest``).
  Without ``--binding`` it asks the server for the session's mechanism and builds the honest
  binding from the files with the installed provider of that mechanism id
  (``MechanismProvider.client_binding`` over what the server announced: its digest, the
  parameters it announced as ``pinned`` — the host's policy digest for a descriptor session —
  and the mechanism's ``accepted_bounds``, lowered by a host that lowered a limit).
  Exit 0 PASS, 1 FAIL, 3 UNKNOWN; 2 for the wrong number of files, or a mechanism no
  installed provider builds bindings for (pass ``--binding``); 65 refused (by the server, with
  its code and ``decision_id``; ``UNKNOWN_SESSION`` when the server hosts no such
  session; ``BINDING_UNBUILDABLE`` when the files cannot be bound), 69 unreachable, 75
  busy/timeout/shutting down, 70 server-side failure.
* ``sessions`` / ``health`` (same address flags) print the server's answer; exit 0, 69, 75.
* ``audit verify PATH... [--anchor SEQ:DIGEST]...``: one file, or rotated files oldest
  first (the chain must continue from each file into the next). Exit 0 intact, 1 broken
  (naming ``bad_file``, ``first_bad_line`` and ``reason``; or an anchor recorded earlier that
  the files contradict, which is how a rewritten or cut-back log shows). A malformed anchor
  is a usage error (exit 2); a missing path is 66, one that is not a regular file 65.
  ``audit tail PATH [-n N]``: the last N lines as a JSON array (unverified), exit 0.
  ``audit report LOG``: a JSON (or HTML) report of the log (``daemon/commands/_report_cli.py``).
  ``audit rotate PATH``: with the daemon stopped, give the current file its archive name and
  start a new one whose first line (``audit_rotated``) links it; exit 0, 65 when the log
  does not verify, 75 when a daemon holds it, 73 when it cannot be written.

Files named on the command line (``submit`` evidence and ``--binding``) are read with
:func:`cli.read_input` (``-`` is stdin): more than 16 MiB (eight times the default frame cap) is
rejected input, exit 65 with the cap in the message; a missing file is 66.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import trio

import cli
from cli import CliError, Exit, RejectedInput, UsageError
from daemon import logs
from daemon.client._client import (
    Client,
    ClientError,
    ClientTimeout,
    RejectedError,
    ServerProtocolError,
    ServiceUnavailable,
    SubmitResult,
    TransportError,
)
from daemon.client._connect import open_client
from daemon.client._receipts import ReceiptUnavailable, fetch_receipt
from daemon.client._targets import DEFAULT_TCP_PORT as DEFAULT_PORT
from daemon.client._targets import parse_target
from daemon.commands._batch_cli import add_pair_arguments, submit_pairs
from daemon.commands._report_cli import add_report_command
from session import Announcement, BoundProposition, EvidenceCountError, providers_for_mechanism

# The client commands (submit, sessions, health) never load the server, the configuration or
# the audit log: ``serve`` and ``audit`` import them when run (docs/benchmarks.md, "The CLI's
# imports").
if TYPE_CHECKING:
    from daemon.config._config import DaemonConfig
    from daemon.config._hosting import HostedSession, ServerConfig
    from daemon.server._server import Server
    from daemon.server._supervisor import Supervisor

_OUTCOME_EXIT: Final = {"PASS": Exit.OK, "FAIL": Exit.FAIL, "UNKNOWN": Exit.UNKNOWN}
_SERVICE_EXIT: Final = {"AUDIT_FAILED": Exit.INTERNAL, "INTERNAL": Exit.INTERNAL}

_Usage = UsageError


# --------------------------------------------------------------------------- addresses


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def _add_address(parser: argparse.ArgumentParser, *, verb: str) -> None:
    group = parser.add_mutually_exclusive_group()
    if verb == "connect":
        group.add_argument(
            "--connect",
            dest="address",
            metavar="URL",
            help=f"HOST:PORT, or a tcp://, tls://, http:// or https:// URL (default: "
            f"127.0.0.1:{DEFAULT_PORT})",
        )
    else:
        group.add_argument(
            "--listen",
            dest="address",
            metavar="HOST:PORT",
            help=f"TCP address (default: 127.0.0.1:{DEFAULT_PORT})",
        )
    group.add_argument("--socket", metavar="PATH", help="Unix socket path (instead of TCP)")
    if verb == "connect":
        parser.add_argument(
            "--token-file",
            metavar="FILE",
            help="a file whose first line is the bearer token (docs/http.md)",
        )
        parser.add_argument("--tls-ca", metavar="FILE", help="CA bundle to verify the server")
        parser.add_argument("--tls-cert", metavar="FILE", help="client certificate (PEM)")
        parser.add_argument("--tls-key", metavar="FILE", help="client certificate's key (PEM)")


def _add_timeout(parser: argparse.ArgumentParser, default: float) -> None:
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=default,
        metavar="SECONDS",
        help="connect and request timeout",
    )


def _client_target(args: argparse.Namespace) -> dict[str, Any]:
    """``open_client`` keywords from the address, token and TLS flags."""
    options: dict[str, Any] = {
        "tls_ca": args.tls_ca,
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "token": _read_token(args.token_file) if args.token_file else None,
    }
    if args.socket:
        return {"unix": args.socket, **options}
    address = args.address or f"127.0.0.1:{DEFAULT_PORT}"
    try:
        parse_target(address)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return {"url": address, **options}


def _read_token(path: str) -> str:
    """The first line of ``path``, stripped (``--token-file``)."""
    lines = cli.read_input(path).decode("utf-8", "replace").splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise UsageError(f"--token-file {path}: no token on its first line")
    return token


def _client_failure(error: ClientError) -> CliError:
    """The contract's error for a client failure: a server refusal keeps its code and
    ``decision_id``; transport failures are UNREACHABLE (69), TIMEOUT (75) or PROTOCOL (70)."""
    if isinstance(error, RejectedError):
        if isinstance(error, ServiceUnavailable):
            exit_code = _SERVICE_EXIT.get(error.code, Exit.BUSY)
        else:
            exit_code = Exit.REJECTED
        return CliError(
            f"refused: {error.code}: {error.message}",
            exit=exit_code,
            code=error.code,
            details={"decision_id": error.decision_id},
        )
    if isinstance(error, ClientTimeout):
        return CliError(str(error), exit=Exit.BUSY, code="TIMEOUT", details={"decision_id": None})
    if isinstance(error, TransportError):
        return CliError(
            str(error), exit=Exit.UNREACHABLE, code="UNREACHABLE", details={"decision_id": None}
        )
    code = "PROTOCOL" if isinstance(error, ServerProtocolError) else "INTERNAL"
    return CliError(str(error), exit=Exit.INTERNAL, code=code, details={"decision_id": None})


# --------------------------------------------------------------------------- serve


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
            _announce_workers(service, server_config, sessions, skipped, origin)
        else:
            _announce(service, server_config, skipped, origin)

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
) -> None:
    """The ``serving`` document and the stderr line of a ``--workers N`` daemon."""
    _tune_collector()
    listen = supervisor.bound.listen
    tlog = supervisor.transparency
    cli.emit(
        {
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
    )
    where = _where(listen.get("unix"), listen.get("tcp"), listen.get("http"))
    logs.info(
        "serving",
        f"serving {', '.join(sorted(s.name for s in sessions))} on {where} with "
        f"{supervisor.count} workers; audit log {server_config.audit_path} (from {origin})",
        **listen,
        workers=supervisor.count,
        audit_log=server_config.audit_path,
        sessions=sorted(s.name for s in sessions),
    )


def _announce(server: Server, server_config: ServerConfig, skipped: list[str], origin: str) -> None:
    """The ``serving`` document and the stderr lines, once the server listens."""
    _tune_collector()
    cli.emit(
        {
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
    )
    if server.transparency is not None:
        cli.say(
            f"transparency log {server.transparency.directory}: origin"
            f" {server.transparency.origin}, verifier key"
            f" {server.transparency.signer.verifier().encode()}"
        )
    tcp, http = (a and f"{a[0]}:{a[1]}" for a in (server.tcp_address, server.http_address))
    logs.info(
        "serving",
        f"serving {', '.join(sorted(server.sessions))} on {_where(server.unix_path, tcp, http)}"
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
    from daemon.retention import StoreError
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
    if isinstance(error, StoreError):
        return RejectedInput(f"{error}; refusing to start", code="STORE_REFUSED")
    if isinstance(error, WorkersFailed):
        return CliError(str(error), exit=Exit.INTERNAL, code="WORKERS_FAILED")
    if isinstance(error, OSError):
        return CliError(
            f"cannot listen: {error.strerror or error}", exit=Exit.UNREACHABLE, code="CANNOT_LISTEN"
        )
    return error


# --------------------------------------------------------------------------- client commands


def _honest_binding(mechanism: dict[str, Any], files: list[bytes]) -> BoundProposition:
    """The honest binding for a session whose mechanism the server announced: built by the
    installed provider of that mechanism id from what the server announced about it
    (``MechanismProvider.client_binding`` over a :class:`session.Announcement`: the digest,
    the ``pinned`` parameters of a host's non-default policy, and the ``accepted_bounds`` a
    host that lowered a limit accepts). No provider, or several, is a usage error (pass
    ``--binding``)."""
    mechanism_id = mechanism["mechanism_id"]
    found = providers_for_mechanism(mechanism_id)
    if not found:
        raise _Usage(f"no installed provider for mechanism {mechanism_id!r}; pass --binding FILE")
    if len(found) > 1:
        names = sorted(f"{entry.name} ({entry.distribution})" for entry, _ in found)
        raise _Usage(f"mechanism {mechanism_id!r} has several providers {names}; pass --binding")
    ((_, provider),) = found
    announcement = Announcement.from_wire(mechanism)
    try:
        return provider.client_binding(files, announcement)
    except EvidenceCountError as error:
        raise UsageError(str(error)) from None


T = TypeVar("T")


def _run_submitting(main: Callable[[], Awaitable[T]]) -> T:
    """``trio.run(main)`` for ``submit``: a client failure as its exit, a CLI error as is, and
    a ``ValueError`` (the honest binding cannot be built from these files) as rejected input."""
    try:
        return trio.run(main)
    except ClientError as error:
        raise _client_failure(error) from None
    except CliError:
        raise
    except ValueError as error:
        raise RejectedInput(
            f"cannot build the honest binding: {type(error).__name__}: {error}",
            code="BINDING_UNBUILDABLE",
        ) from None


def _submit(args: argparse.Namespace) -> int:
    if args.pairs or args.batch:  # many pairs (daemon/commands/_batch_cli.py)
        return submit_pairs(
            args,
            target=_client_target(args),
            honest_binding=_honest_binding,
            run=_run_submitting,
            outcome_exit=_OUTCOME_EXIT,
        )
    if not args.files:
        raise UsageError("the evidence FILE... (or --pair A B, or --batch FILE) is required")
    target = _client_target(args)
    files = [cli.read_input(name) for name in args.files]
    binding_wire: dict[str, Any] | None = None
    if args.binding:
        try:
            loaded = json.loads(cli.read_input(args.binding).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise RejectedInput(f"binding file {args.binding} is not JSON: {error}") from None
        if not isinstance(loaded, dict):
            raise RejectedInput(f"binding file {args.binding} is not a JSON object")
        binding_wire = loaded

    log_key = None
    if args.receipt and args.key:
        from daemon.commands._log_cli import read_verifier_key

        log_key = read_verifier_key(args.key)  # an unreadable or malformed key: 65/66
    receipt: dict[str, Any] = {}

    async def main() -> SubmitResult:
        async with open_client(
            **target, connect_timeout=args.timeout, request_timeout=args.timeout
        ) as client:
            result = await submit_once(client)
            if args.receipt:
                try:
                    receipt.update(await fetch_receipt(client, result, log_key=log_key))
                except ReceiptUnavailable as error:
                    receipt["error"] = str(error)
            return result

    async def honest_wire(client: Client) -> dict[str, Any]:
        sessions = {item["name"]: item for item in await client.list_sessions()}
        session = sessions.get(args.session)
        if session is None:
            raise RejectedInput(
                f"the server hosts no session {args.session!r} (it hosts {sorted(sessions)})",
                code="UNKNOWN_SESSION",
            )
        mechanisms = session["mechanisms"]
        if len(mechanisms) != 1:
            raise UsageError("the session hosts several mechanisms; pass --binding FILE")
        return _honest_binding(mechanisms[0], files).to_dict()

    async def submit_once(client: Client) -> SubmitResult:
        wire = binding_wire if binding_wire is not None else await honest_wire(client)
        return await client.submit(args.session, wire, files)

    if args.print_binding:
        if args.binding or args.receipt:
            raise UsageError("--print-binding builds the binding: no --binding or --receipt")

        async def build() -> dict[str, Any]:
            async with open_client(
                **target, connect_timeout=args.timeout, request_timeout=args.timeout
            ) as client:
                return await honest_wire(client)

        cli.emit(_run_submitting(build))
        return Exit.OK

    result = _run_submitting(main)
    cli.emit(result.to_dict())
    outcome = result.outcome
    details = result.result.get("details") or ""
    cli.say(f"{outcome}{': ' + details if details else ''} (decision {result.decision_id})")
    if args.receipt:
        if "error" in receipt:
            raise CliError(
                f"no receipt: {receipt['error']}", exit=Exit.INTERNAL, code="RECEIPT_UNAVAILABLE"
            )
        from daemon.tlog import encode_receipt

        target_file = Path(args.receipt)
        temporary = target_file.with_name(f".{target_file.name}.tmp-{os.getpid()}")
        cli.write_output(temporary, encode_receipt(receipt))
        try:
            os.replace(temporary, target_file)
        except OSError as error:
            raise cli.OutputError(str(target_file), error.strerror or str(error)) from None
        cli.say(f"receipt for log index {receipt['log_index']} written to {target_file}")
    return _OUTCOME_EXIT.get(outcome, Exit.INTERNAL)


def _query(method: str) -> Any:
    def handler(args: argparse.Namespace) -> int:
        target = _client_target(args)

        async def main() -> Any:
            async with open_client(
                **target, connect_timeout=args.timeout, request_timeout=args.timeout
            ) as client:
                if method == "sessions":
                    return {"sessions": await client.list_sessions()}
                return await client.health()

        try:
            document = trio.run(main)
        except ClientError as error:
            raise _client_failure(error) from None
        cli.emit(document)
        return Exit.OK

    return handler


# --------------------------------------------------------------------------- audit


def _regular_files(paths: list[str]) -> None:
    """Refuse the first path that is not a readable regular file: missing or unreadable is
    66, another kind of file (a directory, a FIFO) is 65."""
    import stat

    for name in paths:
        try:
            mode = Path(name).stat().st_mode
        except OSError as error:
            raise cli.InputError(name, error.strerror or str(error)) from None
        if not stat.S_ISREG(mode):
            raise RejectedInput(f"{name} is not a regular file", code="NOT_A_FILE")


def _audit_verify(args: argparse.Namespace) -> int:
    from daemon.audit._audit import parse_anchor, verify_log

    try:
        anchors = tuple(parse_anchor(text) for text in args.anchors)
    except ValueError as error:
        raise UsageError(str(error)) from None
    _regular_files(args.paths)
    report = verify_log(*args.paths, anchors=anchors)
    cli.emit(report.to_dict())
    if report.intact:
        cli.say(
            f"audit log intact: {report.lines} lines in {report.files} file(s), seq "
            f"{report.first_seq or 0}..{report.last_seq}, anchor {report.last_seq}:{report.head}"
        )
        return Exit.OK
    cli.say(report.describe_failure())
    return Exit.FAIL


def _audit_rotate(args: argparse.Namespace) -> int:
    from daemon.audit._audit import AuditLog, AuditLogError, AuditLogInUse, tail

    _regular_files([args.path])

    async def main() -> tuple[AuditLog, bool]:
        log = AuditLog.open(args.path)
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            started = log.rotate()
            await log.close()
        return log, started

    try:
        log, started = trio.run(main)
    except AuditLogInUse as error:
        raise CliError(
            f"{error}; stop the daemon first, or set [audit] rotate_bytes",
            exit=Exit.BUSY,
            code="AUDIT_LOG_IN_USE",
        ) from None
    except AuditLogError as error:
        raise RejectedInput(str(error), code="AUDIT_LOG_REFUSED") from None
    if not started:
        raise RejectedInput(f"audit log {args.path} is empty; nothing to rotate", code="EMPTY")
    if log.failure_reason is not None or log.rotations != 1:
        raise CliError(
            f"audit log {args.path} could not be rotated: {log.failure_reason}",
            exit=Exit.CANNOT_WRITE,
            code="ROTATE_FAILED",
        )
    first = tail(args.path, 1)[0]
    cli.emit(
        {
            "status": "ROTATED",
            "path": args.path,
            "previous_file": first["previous_file"],
            "previous_seq": first["previous_seq"],
            "previous_head": first["previous_head"],
            "anchor": log.durable.anchor,
        }
    )
    cli.say(f"rotated: {first['previous_file']} holds seq ..{first['previous_seq']}")
    return Exit.OK


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


def _non_negative(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be non-negative: {text!r}")
    return value


def _audit_tail(args: argparse.Namespace) -> int:
    from daemon.audit._audit import tail

    _regular_files([args.path])
    cli.emit(tail(args.path, args.lines))
    return Exit.OK


# --------------------------------------------------------------------------- registration


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve``, ``submit``, ``sessions``, ``health`` and ``audit``."""
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

    submit = subparsers.add_parser("submit", help="submit an evidence pair to a session")
    _add_address(submit, verb="connect")
    submit.add_argument(
        "--session", required=True, metavar="NAME", help="the hosted session to submit to"
    )
    submit.add_argument(
        "--binding",
        metavar="FILE",
        help="bound proposition JSON (to_dict form; default: the honest binding of the files)",
    )
    _add_timeout(submit, 60.0)
    submit.add_argument(
        "files", nargs="*", metavar="FILE", help="evidence items, in order ('-': stdin)"
    )
    add_pair_arguments(submit)
    submit.add_argument(
        "--receipt", metavar="FILE", help="save a transparency-log receipt of the decision"
    )
    submit.add_argument("--key", metavar="VKEY", help="verify the receipt under this log key")
    submit.add_argument(
        "--print-binding",
        action="store_true",
        help="print the honest binding of the files, pinned to what the session announces "
        "(the JSON an HTTP client sends as 'binding'), and submit nothing",
    )
    submit.set_defaults(handler=_submit)

    for name, help_text in (("sessions", "list hosted sessions"), ("health", "server health")):
        parser = subparsers.add_parser(name, help=help_text)
        _add_address(parser, verb="connect")
        _add_timeout(parser, 10.0)
        parser.set_defaults(handler=_query(name))

    audit = subparsers.add_parser("audit", help="verify or read an audit log")
    audit_commands = audit.add_subparsers(dest="audit_command", metavar="COMMAND")
    verify = audit_commands.add_parser("verify", help="verify the hash chain")
    verify.add_argument(
        "paths", nargs="+", metavar="PATH", help="the log, or rotated files oldest first"
    )
    verify.add_argument(
        "--anchor",
        dest="anchors",
        action="append",
        default=[],
        metavar="SEQ:DIGEST",
        help="a head recorded earlier (health's audit.anchor, a decision's seq:line_digest) "
        "that the log must still contain; a bare DIGEST is checked anywhere in the chain",
    )
    verify.set_defaults(handler=_audit_verify)
    rotate = audit_commands.add_parser(
        "rotate", help="start a new file linked to the current one (daemon stopped)"
    )
    rotate.add_argument("path", metavar="PATH", help="the audit log")
    rotate.set_defaults(handler=_audit_rotate)
    tail_parser = audit_commands.add_parser("tail", help="print the last lines as JSON")
    tail_parser.add_argument("path", metavar="PATH", help="the audit log")
    tail_parser.add_argument(
        "-n", dest="lines", type=_non_negative, default=10, metavar="N", help="how many lines"
    )
    tail_parser.set_defaults(handler=_audit_tail)
    add_report_command(audit_commands)


def _where(unix: str | None, tcp: str | None, http: str | None) -> str:
    """Every listener the start line names (the HTTP one as a URL)."""
    found = [unix, tcp, http and f"http://{http}"]
    return ", ".join(place for place in found if place) or "inherited sockets"
