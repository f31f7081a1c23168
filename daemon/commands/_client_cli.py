"""CLI commands ``submit``, ``sessions`` and ``health`` (they never load the server, the
configuration or the audit log: docs/benchmarks.md, "The CLI's imports").

The :mod:`cli` contract applies (one JSON document on stdout on every path, errors as
``{"error": {"code", "message", "exit"}}``, one-line messages on stderr); per command:

* ``submit [--connect URL | --socket PATH] --session NAME FILE... [--binding FILE]``
  (``URL``: ``HOST:PORT``, ``tcp://``, ``tls://``, ``http://``, ``https://``,
  ``http+unix:PATH``; with ``--token-file FILE``, ``--tls-ca``, ``--tls-cert``,
  ``--tls-key``) prints the decision (``decision_id``, ``session``, the
  ``EvaluatedProposition`` fields and the audit line's ``seq`` and ``line_digest``).
  Without ``--binding`` it builds the honest binding from the files with the installed
  provider of the session's mechanism id (``daemon.client._honest``:
  ``MechanismProvider.client_binding`` over what the server announced: its digest, the
  parameters it announced as ``pinned`` — the host's policy digest for a descriptor session —
  and the mechanism's ``accepted_bounds``, lowered by a host that lowered a limit), from the
  server's ``sessions`` answer, or from ``--sessions FILE`` (that answer saved by ``evidenced
  sessions``: nothing is asked). The server's answer is kept for ``--sessions-ttl`` seconds
  (60) per address between invocations (:mod:`daemon.client._sessions_cache`). Every call
  goes through the library's blocking client (``daemon.client._sync``) on one kept
  connection: one ``sessions`` request when no fresh answer is kept, then one request per
  pair, so a ``submit`` is one request (behind a round-robin balancer, decisions spread over
  the replicas). A ``BUSY`` is retried as the library retries it
  (``daemon.client._retry``), then exits 75.
  Exit 0 PASS, 1 FAIL, 3 UNKNOWN; 2 for the wrong number of files, or a mechanism no
  installed provider builds bindings for (pass ``--binding``); 65 refused (by the server, with
  its code and ``decision_id``; ``UNKNOWN_SESSION`` when the server hosts no such
  session; ``BINDING_UNBUILDABLE`` when the files cannot be bound), 69 unreachable, 75
  busy/timeout/shutting down, 70 server-side failure.
* ``sessions`` / ``health`` (same address flags) print the server's answer; exit 0, 69, 75.

Files named on the command line (``submit`` evidence and ``--binding``) are read with
:func:`cli.read_input` (``-`` is stdin): more than 16 MiB (eight times the default frame cap) is
rejected input, exit 65 with the cap in the message; a missing file is 66.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from daemon.client import _sessions_cache
from daemon.client._honest import HonestBindingError
from daemon.client._outcomes import (
    ClientError,
    ClientTimeout,
    RejectedError,
    ServerProtocolError,
    ServiceUnavailable,
    SubmitResult,
    TransportError,
)
from daemon.client._targets import DEFAULT_TCP_PORT as DEFAULT_PORT
from daemon.client._targets import parse_target
from daemon.commands._batch_cli import add_pair_arguments, submit_pairs
from session import cli
from session.cli import CliError, Exit, RejectedInput, UsageError

if TYPE_CHECKING:
    from daemon.client._sync import SyncClient

# The client commands never load the server, the configuration or the audit log. They make
# their calls with the library's blocking client (daemon.client._sync.SyncClient), whose
# binary-protocol transport loads no event loop and no HTTP client: over a Unix socket or TCP
# a one-shot call costs the codec and the socket (docs/benchmarks.md, "The CLI's imports");
# httpx loads for an http:// or https:// address only.


_OUTCOME_EXIT: Final = {"PASS": Exit.OK, "FAIL": Exit.FAIL, "UNKNOWN": Exit.UNKNOWN}
_SERVICE_EXIT: Final = {"AUDIT_FAILED": Exit.INTERNAL, "INTERNAL": Exit.INTERNAL}


def _seconds(text: str, *, zero: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        kind = "number of seconds >= 0" if zero else "positive number of seconds"
        raise argparse.ArgumentTypeError(f"must be a {kind}: {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    return _seconds(text)


def _non_negative_seconds(text: str) -> float:
    return _seconds(text, zero=True)


def _add_address(parser: argparse.ArgumentParser, *, verb: str) -> None:
    group = parser.add_mutually_exclusive_group()
    if verb == "connect":
        group.add_argument(
            "--connect",
            dest="address",
            metavar="URL",
            help=f"HOST:PORT, or a tcp://, tls://, http://, https:// or http+unix: URL "
            f"(default: 127.0.0.1:{DEFAULT_PORT})",
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
    """The client's keywords from the address, token and TLS flags."""
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


def _client(args: argparse.Namespace) -> SyncClient:
    """The command's one client (the library's, blocking): every call of the command goes
    through it, on its kept connection."""
    from daemon.client._sync import SyncClient

    return SyncClient(
        **_client_target(args), connect_timeout=args.timeout, request_timeout=args.timeout
    )


def _address(args: argparse.Namespace) -> str:
    """The server's address as given: what the kept ``sessions`` answer is filed under."""
    if args.socket:
        return f"unix:{args.socket}"
    return str(args.address or f"127.0.0.1:{DEFAULT_PORT}")


def _prepare_sessions(args: argparse.Namespace, client: SyncClient) -> list[dict[str, Any]] | None:
    """Where the honest bindings are built from: ``--sessions FILE``; else the answer kept for
    this address while fresh (:mod:`daemon.client._sessions_cache`), so a submit is one
    request; else the server's, asked now and kept. Nothing with ``--binding``. The kept
    answer when one was used (else ``None``)."""
    if args.sessions_file is not None:
        try:
            document = json.loads(cli.read_input(args.sessions_file).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise RejectedInput(f"--sessions {args.sessions_file} is not JSON: {error}") from None
        hosted = _sessions_cache.sessions_list(document)
        if hosted is None:
            raise RejectedInput(
                f"--sessions {args.sessions_file} is not a sessions answer (evidenced sessions)"
            )
        client.use_sessions(hosted)
        return None
    if getattr(args, "binding", None) or args.sessions_ttl <= 0:
        return None  # no binding to build, or the client asks for each invocation as before
    address = _address(args)
    kept = _sessions_cache.load(address, args.session, args.sessions_ttl)
    if kept is not None:
        client.use_sessions(kept)
        return kept
    _sessions_cache.save(address, client.list_sessions(), args.sessions_ttl)
    return None


def _announcement(hosted: list[dict[str, Any]], session: str) -> Any:
    return next((item for item in hosted if item["name"] == session), None)


def _check_kept(
    args: argparse.Namespace, client: SyncClient, kept: list[dict[str, Any]], outcome: str
) -> None:
    """A binding built from a kept answer was not decided PASS: ask the server again, and when
    its announcement of the session changed since (a restart or reload with another mechanism
    or policy), keep the new one and say that the decision was bound to the old (rule 4 of
    :mod:`daemon.client._sessions_cache`)."""
    current = client.list_sessions()
    _sessions_cache.save(_address(args), current, args.sessions_ttl)
    if _announcement(current, args.session) != _announcement(kept, args.session):
        cli.say(
            f"{outcome} was decided on a binding built from the sessions answer kept from an "
            f"earlier submit; session {args.session!r} is announced differently now (the "
            "server's configuration changed): submit again to bind to the new announcement",
            "warning",
        )


def _read_token(path: str) -> str:
    """The first line of ``path``, stripped (``--token-file``)."""
    lines = cli.read_input(path).decode("utf-8", "replace").splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise UsageError(f"--token-file {path}: no token on its first line")
    return token


def _client_failure(error: ClientError) -> CliError:
    """The contract's error for a client failure: a server refusal keeps its code and
    ``decision_id``; transport failures are UNREACHABLE (69), TIMEOUT (75) or PROTOCOL (70);
    a binding that cannot be built is the caller's (usage, or rejected input)."""
    if isinstance(error, HonestBindingError):
        return _binding_failure(error)
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


def _binding_failure(error: HonestBindingError) -> CliError:
    if error.reason == "UNKNOWN_SESSION":
        return RejectedInput(str(error), code="UNKNOWN_SESSION")
    if error.reason == "EVIDENCE_COUNT":
        return UsageError(str(error))
    return UsageError(f"{error}; pass --binding FILE")


T = TypeVar("T")


def _submitting(call: Callable[[], T]) -> T:
    """``call()`` for ``submit``: a client failure as its exit, a CLI error as is, and a
    ``ValueError`` (the honest binding cannot be built from these files) as rejected input."""
    try:
        return call()
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
            client=lambda: _client(args),
            prepare=lambda client: _prepare_sessions(args, client),
            run=_submitting,
        )
    if not args.files:
        raise UsageError("the evidence FILE... (or --pair A B, or --batch FILE) is required")
    if args.print_binding and (args.binding or args.receipt):
        raise UsageError("--print-binding builds the binding: no --binding or --receipt")
    _client_target(args)  # a malformed address is a usage error before a file is read
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

    def call() -> SubmitResult | dict[str, Any]:
        with _client(args) as client:
            kept = _prepare_sessions(args, client)
            # One request per pair: the decision's, after one ``sessions`` answer when the
            # honest binding must be built and none is kept (none with --binding).
            wire = binding_wire
            if wire is None:
                wire = client.honest_binding(args.session, files).to_dict()
            if args.print_binding:
                return wire
            result = client.submit(args.session, wire, files)
            if kept is not None and result.outcome != "PASS":
                _check_kept(args, client, kept, result.outcome)
            if args.receipt:
                from daemon.client._receipts import ReceiptUnavailable, fetch_receipt_sync

                try:
                    receipt.update(fetch_receipt_sync(client, result, log_key=log_key))
                except ReceiptUnavailable as error:
                    receipt["error"] = str(error)
            return result

    answer = _submitting(call)
    if isinstance(answer, dict):
        cli.emit(answer)
        return Exit.OK
    return _print_decision(args, answer, receipt)


def _print_decision(args: argparse.Namespace, result: SubmitResult, receipt: dict[str, Any]) -> int:
    """Print a single ``submit``'s decision (and save its receipt); its exit code."""
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
        try:
            with _client(args) as client:
                document = {"sessions": client.list_sessions()} if method == "sessions" else None
                if document is None:
                    document = client.health()
        except ClientError as error:
            raise _client_failure(error) from None
        cli.emit(document)
        return Exit.OK

    return handler


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``submit``, ``sessions`` and ``health``."""
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
        "--sessions",
        dest="sessions_file",
        metavar="FILE",
        help="build the honest binding from this saved 'evidenced sessions' answer instead of "
        "asking the server (each submit is then one request)",
    )
    submit.add_argument(
        "--sessions-ttl",
        type=_non_negative_seconds,
        default=_sessions_cache.DEFAULT_TTL,
        metavar="SECONDS",
        help="reuse the server's sessions answer kept from an earlier submit to the same "
        "address for this long, so a submit is one request (default: %(default)g; 0: ask "
        "every time; kept under $EVIDENCED_CACHE_DIR or ~/.cache/evidenced)",
    )
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
