"""CLI commands ``serve``, ``submit``, ``sessions``, ``health`` and ``audit``.

Contract (stdout: exactly one JSON document; stderr: one-line messages, never a traceback):

* ``serve [--listen HOST:PORT | --socket PATH] [--config FILE] [--audit-log PATH]`` prints
  ``{"status": "serving", "tcp", "unix", "audit_log", "sessions", "skipped"}`` once it listens,
  serves until SIGINT/SIGTERM, then shuts down gracefully. Exit 0 after a clean shutdown;
  65 for an invalid configuration or a broken/locked audit log (never truncated);
  69 when it cannot listen.
* ``submit [--connect HOST:PORT | --socket PATH] --session NAME FILE... [--binding FILE]``
  prints the decision (``decision_id``, ``session``, the ``EvaluatedProposition`` fields and
  the audit line's ``seq`` and ``line_digest``).
  Without ``--binding`` it asks the server for the session's mechanism and builds the honest
  binding from the files with the installed provider of that mechanism id
  (``MechanismProvider.honest_binding``, default options), pinning the digest the server
  announced; no such provider is a refusal (65) that asks for ``--binding``. Exit 0 PASS,
  1 FAIL, 3 UNKNOWN, 65 refused (the error document is printed), 69 unreachable, 75
  busy/timeout/shutting down, 70 server-side failure.
* ``sessions`` / ``health`` (same address flags) print the server's answer; exit 0, 69, 75.
* ``audit verify PATH... [--anchor SEQ:DIGEST]...``: one file, or rotated files oldest
  first (the chain must continue from each file into the next). Exit 0 intact, 1 broken
  (naming ``bad_file``, ``first_bad_line`` and ``reason``; or an anchor recorded earlier that
  the files contradict, which is how a rewritten or cut-back log shows). A malformed anchor
  is a usage error (exit 2); a path that is not a regular file is rejected input (65).
  ``audit tail PATH [-n N]``: the last N lines as a JSON array (unverified), exit 0.
  ``audit report LOG``: an HTML or JSON report of the log (``daemon/_report_cli.py``).
  ``audit rotate PATH``: with the daemon stopped, give the current file its archive name and
  start a new one whose first line (``audit_rotated``) links it; exit 0, 65 when the log
  does not verify, 75 when a daemon holds it, 70 when it cannot be written.
* ``serve`` exits 70 (not 0) when it stops while its audit log cannot be written, saying so.

Files named on the command line (``submit`` evidence and ``--binding``, ``--config``) are read
with :func:`session.read_capped`: more than 16 MiB (eight times the default frame cap) is
unreadable input, exit 65 with the cap in the message.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Final

import attrs
import trio

from session import BoundProposition, providers_for_mechanism, read_capped

from ._audit import (
    AuditLog,
    AuditLogCorrupt,
    AuditLogError,
    AuditLogInUse,
    parse_anchor,
    tail,
    verify_log,
)
from ._client import (
    Client,
    ClientError,
    ClientTimeout,
    RejectedError,
    ServerProtocolError,
    ServiceUnavailable,
    SubmitResult,
    TransportError,
    open_client,
)
from ._config import ConfigError, load_config, parse_address
from ._receipts import ReceiptUnavailable, fetch_receipt
from ._report_cli import add_report_command
from ._server import DEFAULT_PORT, Server
from .retention import StoreError
from .tlog import encode_receipt

EXIT_PASS: Final = 0
EXIT_FAIL: Final = 1
EXIT_USAGE: Final = 2
EXIT_UNKNOWN: Final = 3
EXIT_REJECTED: Final = 65
EXIT_UNREACHABLE: Final = 69
EXIT_INTERNAL: Final = 70
EXIT_BUSY: Final = 75

_OUTCOME_EXIT: Final = {"PASS": EXIT_PASS, "FAIL": EXIT_FAIL, "UNKNOWN": EXIT_UNKNOWN}
_SERVICE_EXIT: Final = {"AUDIT_FAILED": EXIT_INTERNAL, "INTERNAL": EXIT_INTERNAL}


def _emit(document: Any) -> None:
    sys.stdout.write(json.dumps(document, ensure_ascii=False, sort_keys=True) + "\n")
    sys.stdout.flush()


def _say(message: str) -> None:
    sys.stderr.write(f"evidenced: {message}\n")
    sys.stderr.flush()


class _Usage(Exception):
    pass


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
    group.add_argument(
        "--connect" if verb == "connect" else "--listen",
        dest="address",
        metavar="HOST:PORT",
        help=f"TCP address (default 127.0.0.1:{DEFAULT_PORT})",
    )
    group.add_argument("--socket", metavar="PATH", help="Unix socket path")


def _client_target(args: argparse.Namespace) -> dict[str, Any]:
    if args.socket:
        return {"unix": args.socket}
    try:
        return {"tcp": parse_address(args.address or f"127.0.0.1:{DEFAULT_PORT}")}
    except ConfigError as error:
        raise _Usage(str(error)) from None


def _client_failure(error: ClientError) -> int:
    if isinstance(error, RejectedError):
        _emit(
            {
                "error": {
                    "code": error.code,
                    "message": error.message,
                    "decision_id": error.decision_id,
                }
            }
        )
        _say(f"refused: {error.code}: {error.message}")
        if isinstance(error, ServiceUnavailable):
            return _SERVICE_EXIT.get(error.code, EXIT_BUSY)
        return EXIT_REJECTED
    code = (
        "TIMEOUT"
        if isinstance(error, ClientTimeout)
        else "PROTOCOL"
        if isinstance(error, ServerProtocolError)
        else "UNREACHABLE"
    )
    _emit({"error": {"code": code, "message": str(error), "decision_id": None}})
    _say(str(error))
    if isinstance(error, ClientTimeout):
        return EXIT_BUSY
    if isinstance(error, TransportError):
        return EXIT_UNREACHABLE
    return EXIT_INTERNAL


# --------------------------------------------------------------------------- serve


def _serve(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
        server_config = config.server
        changes: dict[str, Any] = {}
        if args.address:
            changes.update(tcp=parse_address(args.address), unix=None)
        if args.socket:
            changes.update(unix=args.socket, tcp=None)
        if args.audit_log:
            changes["audit_path"] = args.audit_log
        server_config = attrs.evolve(server_config, handle_signals=True, **changes)
        sessions, skipped = config.build_sessions()
    except ConfigError as error:
        _say(f"invalid configuration: {error}")
        return EXIT_REJECTED
    for message in skipped:
        _say(message)
    server = Server(sessions, server_config)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            _tune_collector()
            _emit(
                {
                    "status": "serving",
                    "tcp": None
                    if server.tcp_address is None
                    else f"{server.tcp_address[0]}:{server.tcp_address[1]}",
                    "unix": server.unix_path,
                    "audit_log": server_config.audit_path,
                    "sessions": sorted(server.sessions),
                    "skipped": skipped,
                    "transparency": _transparency_summary(server),
                }
            )
            if server.transparency is not None:
                _say(
                    f"transparency log {server.transparency.directory}: origin"
                    f" {server.transparency.origin}, verifier key"
                    f" {server.transparency.signer.verifier().encode()}"
                )
            where = server.unix_path or (
                f"{server.tcp_address[0]}:{server.tcp_address[1]}" if server.tcp_address else "?"
            )
            _say(f"serving {', '.join(sorted(server.sessions))} on {where}")

    try:
        trio.run(main)
    except AuditLogError as error:
        return _audit_refusal(error)
    except StoreError as error:
        _say(f"{error}; refusing to start")
        return EXIT_REJECTED
    except OSError as error:
        _say(f"cannot listen: {error.strerror or error}")
        return EXIT_UNREACHABLE
    except BaseExceptionGroup as group:  # from the nursery: report the first cause
        first = group.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        if isinstance(first, AuditLogError):
            return _audit_refusal(first)
        if isinstance(first, StoreError):
            _say(f"{first}; refusing to start")
            return EXIT_REJECTED
        if isinstance(first, OSError):
            _say(f"cannot listen: {first.strerror or first}")
            return EXIT_UNREACHABLE
        raise first from None
    failure = server.audit.failure_reason if server.audit is not None else None
    if failure is not None:
        _say(
            f"stopped, but the audit log could not be written ({failure}); daemon_stop is "
            "not recorded and requests answered AUDIT_FAILED have no line"
        )
        return EXIT_INTERNAL
    _say("stopped; audit log flushed")
    return EXIT_PASS


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


def _audit_refusal(error: AuditLogError) -> int:
    if isinstance(error, AuditLogCorrupt):
        _say(f"{error}; refusing to start (the file was not truncated or overwritten)")
    else:
        _say(f"{error}; refusing to start")
    return EXIT_REJECTED


# --------------------------------------------------------------------------- client commands


def _honest_binding(mechanism: dict[str, Any], files: list[bytes]) -> BoundProposition:
    """The honest binding for a session whose mechanism the server announced: built by the
    installed provider of that mechanism id with its default options, pinning the digest the
    server announced. No provider, or several, is a usage error (pass ``--binding``)."""
    mechanism_id = mechanism["mechanism_id"]
    found = providers_for_mechanism(mechanism_id)
    if not found:
        raise _Usage(f"no installed provider for mechanism {mechanism_id!r}; pass --binding FILE")
    if len(found) > 1:
        names = sorted(f"{entry.name} ({entry.distribution})" for entry, _ in found)
        raise _Usage(f"mechanism {mechanism_id!r} has several providers {names}; pass --binding")
    ((_, provider),) = found
    binding = provider.honest_binding(files, provider.default_options())
    return attrs.evolve(binding, mechanism_digest=mechanism["mechanism_digest"])


def _submit(args: argparse.Namespace) -> int:
    target = _client_target(args)
    files = [read_capped(name) for name in args.files]
    binding_wire: dict[str, Any] | None = None
    if args.binding:
        try:
            loaded = json.loads(read_capped(args.binding).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            _say(f"binding file {args.binding} is not JSON: {error}")
            return EXIT_REJECTED
        if not isinstance(loaded, dict):
            _say(f"binding file {args.binding} is not a JSON object")
            return EXIT_REJECTED
        binding_wire = loaded

    log_key = None
    if args.receipt and args.key:
        from ._log_cli import read_verifier_key

        try:
            log_key = read_verifier_key(args.key)
        except Exception as error:  # _Refused: an unreadable or malformed key
            _say(str(error))
            return EXIT_REJECTED
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

    async def submit_once(client: Client) -> SubmitResult:
        wire = binding_wire
        if wire is None:
            sessions = {item["name"]: item for item in await client.list_sessions()}
            session = sessions.get(args.session)
            if session is None:
                raise _Usage(
                    f"the server hosts no session {args.session!r} (it hosts {sorted(sessions)})"
                )
            mechanisms = session["mechanisms"]
            if len(mechanisms) != 1:
                raise _Usage("the session hosts several mechanisms; pass --binding FILE")
            wire = _honest_binding(mechanisms[0], files).to_dict()
        return await client.submit(args.session, wire, files)

    try:
        result = trio.run(main)
    except ClientError as error:
        return _client_failure(error)
    except _Usage as error:
        _say(str(error))
        return EXIT_REJECTED
    except ValueError as error:  # the honest binding cannot be built from these files
        _say(f"cannot build the honest binding: {type(error).__name__}: {error}")
        return EXIT_REJECTED
    _emit(result.to_dict())
    outcome = result.outcome
    details = result.result.get("details") or ""
    _say(f"{outcome}{': ' + details if details else ''} (decision {result.decision_id})")
    if args.receipt:
        if "error" in receipt:
            _say(f"no receipt: {receipt['error']}")
            return EXIT_INTERNAL
        target_file = Path(args.receipt)
        temporary = target_file.with_name(f".{target_file.name}.tmp-{os.getpid()}")
        temporary.write_bytes(encode_receipt(receipt))
        os.replace(temporary, target_file)
        _say(f"receipt for log index {receipt['log_index']} written to {target_file}")
    return _OUTCOME_EXIT.get(outcome, EXIT_INTERNAL)


def _query(method: str) -> Any:
    def handler(args: argparse.Namespace) -> int:
        try:
            target = _client_target(args)
        except _Usage as error:
            _say(str(error))
            return EXIT_USAGE

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
            return _client_failure(error)
        _emit(document)
        return EXIT_PASS

    return handler


# --------------------------------------------------------------------------- audit


def _regular_files(paths: list[str]) -> str | None:
    """The first path that is not a readable regular file, with why (None: all are)."""
    import stat

    for name in paths:
        try:
            mode = Path(name).stat().st_mode
        except OSError as error:
            return f"{name}: {error.strerror or error}"
        if not stat.S_ISREG(mode):
            return f"{name} is not a regular file"
    return None


def _audit_verify(args: argparse.Namespace) -> int:
    try:
        anchors = tuple(parse_anchor(text) for text in args.anchors)
    except ValueError as error:
        raise _Usage(str(error)) from None
    problem = _regular_files(args.paths)
    if problem is not None:
        _say(problem)
        return EXIT_REJECTED
    report = verify_log(*args.paths, anchors=anchors)
    _emit(report.to_dict())
    if report.intact:
        _say(
            f"audit log intact: {report.lines} lines in {report.files} file(s), seq "
            f"{report.first_seq or 0}..{report.last_seq}, anchor {report.last_seq}:{report.head}"
        )
        return EXIT_PASS
    _say(report.describe_failure())
    return EXIT_FAIL


def _audit_rotate(args: argparse.Namespace) -> int:
    problem = _regular_files([args.path])
    if problem is not None:
        _say(problem)
        return EXIT_REJECTED

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
        _say(f"{error}; stop the daemon first, or set [audit] rotate_bytes")
        return EXIT_BUSY
    except AuditLogError as error:
        _say(str(error))
        return EXIT_REJECTED
    if not started:
        _say(f"audit log {args.path} is empty; nothing to rotate")
        return EXIT_REJECTED
    if log.failure_reason is not None or log.rotations != 1:
        _say(f"audit log {args.path} could not be rotated: {log.failure_reason}")
        return EXIT_INTERNAL
    first = tail(args.path, 1)[0]
    _emit(
        {
            "status": "ROTATED",
            "path": args.path,
            "previous_file": first["previous_file"],
            "previous_seq": first["previous_seq"],
            "previous_head": first["previous_head"],
            "anchor": log.durable.anchor,
        }
    )
    _say(f"rotated: {first['previous_file']} holds seq ..{first['previous_seq']}")
    return EXIT_PASS


def _audit_tail(args: argparse.Namespace) -> int:
    if args.lines < 0:
        _say("-n must be non-negative")
        return EXIT_USAGE
    problem = _regular_files([args.path])
    if problem is not None:
        _say(problem)
        return EXIT_REJECTED
    _emit(tail(args.path, args.lines))
    return EXIT_PASS


# --------------------------------------------------------------------------- registration


def _wrap(handler: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            result: int = handler(args)
            return result
        except _Usage as error:
            _say(str(error))
            return EXIT_USAGE

    return run


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve``, ``submit``, ``sessions``, ``health`` and ``audit``."""
    serve = subparsers.add_parser("serve", help="run the daemon")
    _add_address(serve, verb="listen")
    serve.add_argument("--config", metavar="FILE", help="TOML configuration (default: embedded)")
    serve.add_argument("--audit-log", metavar="PATH", help="audit log file (overrides config)")
    serve.set_defaults(handler=_wrap(_serve))

    submit = subparsers.add_parser("submit", help="submit an evidence pair to a session")
    _add_address(submit, verb="connect")
    submit.add_argument("--session", required=True, metavar="NAME")
    submit.add_argument("--binding", metavar="FILE", help="bound proposition JSON (to_dict form)")
    submit.add_argument("--timeout", type=_positive_seconds, default=60.0, metavar="SECONDS")
    submit.add_argument("files", nargs="+", metavar="FILE", help="evidence items, in order")
    submit.add_argument(
        "--receipt", metavar="FILE", help="save a transparency-log receipt of the decision"
    )
    submit.add_argument("--key", metavar="VKEY", help="verify the receipt under this log key")
    submit.set_defaults(handler=_wrap(_submit))

    for name, help_text in (("sessions", "list hosted sessions"), ("health", "server health")):
        parser = subparsers.add_parser(name, help=help_text)
        _add_address(parser, verb="connect")
        parser.add_argument("--timeout", type=_positive_seconds, default=10.0, metavar="SECONDS")
        parser.set_defaults(handler=_wrap(_query(name)))

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
    verify.set_defaults(handler=_wrap(_audit_verify))
    rotate = audit_commands.add_parser(
        "rotate", help="start a new file linked to the current one (daemon stopped)"
    )
    rotate.add_argument("path", metavar="PATH")
    rotate.set_defaults(handler=_wrap(_audit_rotate))
    tail_parser = audit_commands.add_parser("tail", help="print the last lines as JSON")
    tail_parser.add_argument("path", metavar="PATH")
    tail_parser.add_argument("-n", dest="lines", type=int, default=10, metavar="N")
    tail_parser.set_defaults(handler=_wrap(_audit_tail))
    add_report_command(audit_commands)
