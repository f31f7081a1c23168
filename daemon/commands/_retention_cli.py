"""CLI commands ``replay`` and ``store gc`` (``docs/retention.md``).

Contract: the :mod:`cli` contract (stdout: exactly one JSON document, a failure being the error
document ``{"error": {"code", "message", "exit"}}``; stderr: one-line messages prefixed
``evidenced replay:`` / ``evidenced store gc:``, never a traceback). A replay the engine refuses
prints its ``REFUSED`` document (the command's answer), exit 65.

* ``replay --log LOG [--log LOG]... --store STORE (SEQ | DECISION_ID | --all [--session S]
  [--since T]) [--allow-mechanism-change] [--workers N]``. The log files (rotated ones
  oldest first) are verified first. One target prints its report; ``--all`` prints the
  summary (a progress bar on stderr only when stdout is a terminal). Exit 0 when every
  decision replayed is ``REPRODUCED`` (a ``NOT_RETAINED`` one, whose evidence the retention
  policy did not keep, is counted and is no failure); 1 when any is not (or none was
  selected: ``EVIDENCE_UNAVAILABLE`` is evidence that was kept and is missing); 65 when the
  replay is refused (a log that does not verify, a target that is not a decision of the log,
  a store that cannot be opened; ``LOG_UNREADABLE`` for a log that is not a file); 2 usage.
* ``store gc --store STORE --log LOG [--log LOG]... [--max-age AGE] [--max-bytes SIZE]
  [--grace AGE] [--apply]``: the plan (dry run) or, with ``--apply``, the deletions. AGE is
  seconds or a number with ``s``/``m``/``h``/``d``; SIZE bytes or a number with
  ``KiB``/``MiB``/``GiB``/``TiB`` (or ``KB``/``MB``/``GB``/``TB``). Exit 0; 65 when the log does
  not verify or the store cannot be opened; 70 when a deletion failed.
* ``store gc --config FILE [--grace AGE] [--apply]``: the same for every store the daemon's
  configuration names, with its ``[stores]`` limits, over the configured audit log and its
  rotated files; prints ``{"stores": [one document per store]}`` (a store that cannot be
  collected is ``{"store", "error": {"code", "message", "exit"}}`` there, and the exit is the
  worst of them).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from daemon.retention._units import parse_age, parse_size
from session import cli
from session.cli import CliError, Exit, RejectedInput, UsageError

if TYPE_CHECKING:
    from daemon.replay._replay_run import ReplayRequest

EXIT_OK: Final = Exit.OK
EXIT_NOT_REPRODUCED: Final = Exit.FAIL
EXIT_USAGE: Final = Exit.USAGE
EXIT_REJECTED: Final = Exit.REJECTED
EXIT_FAILED: Final = Exit.INTERNAL


def _argument(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def parsed(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parsed.__name__ = parse.__name__
    return parsed


def _grace(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0s") else parse_age(text)


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of workers: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("--workers must be at least 1")
    return value


_emit = cli.emit
_say = cli.say


def _replay(args: argparse.Namespace) -> int:
    from daemon.replay._replay_run import ReplayRefused, run_replay

    if args.fleet:
        from daemon.commands._fleet_cli import replay_fleet

        return replay_fleet(args)
    request = _replay_request(args)
    for path in request.logs:
        if not path.is_file():
            _emit({"status": "REFUSED", "reason": "LOG_UNREADABLE", "message": f"{path}"})
            _say(f"{path} is not a file")
            return EXIT_REJECTED
    bar = _replay_bar() if args.all and sys.stdout.isatty() else None
    try:
        document = run_replay(request, progress=_progress(bar))
    except ReplayRefused as refused:
        _emit(refused.document)
        _say(str(refused))
        return EXIT_REJECTED
    finally:
        if bar is not None:
            bar.close()
    _emit(document)
    if document["status"] not in ("REPRODUCED", "NOT_RETAINED"):
        what = document["status"] if args.target is not None else _counts(document)
        _say(f"not every decision was reproduced: {what}")
        return EXIT_NOT_REPRODUCED
    return EXIT_OK


def _replay_request(args: argparse.Namespace) -> ReplayRequest:
    """The request ``evidenced replay`` makes of its arguments (a usage error otherwise)."""
    from daemon.replay._replay_run import ReplayRequest
    from daemon.report._report import ReportError, parse_instant

    if not args.log:
        raise UsageError("give --log LOG (or --fleet FILE)")
    if args.all == (args.target is not None):
        raise UsageError("give one SEQ or DECISION_ID, or --all")
    if args.target is not None and (args.session is not None or args.since is not None):
        raise UsageError("--session and --since select among --all")
    since = None
    if args.since is not None:
        try:
            since = parse_instant(args.since).timestamp()
        except ReportError as error:
            raise UsageError(str(error)) from None
    workers = args.workers if args.workers is not None else max(1, os.cpu_count() or 1)
    return ReplayRequest(
        logs=tuple(Path(item) for item in args.log),
        store=args.store,
        target=args.target,
        session=args.session,
        since=since,
        allow_change=args.allow_mechanism_change,
        workers=workers if args.all else 1,
    )


def _replay_bar() -> Any:
    """The progress bar of ``replay --all`` on a terminal."""
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: workers may be forked
    return tqdm(total=0, unit="B", unit_scale=True, desc="replay", file=sys.stderr)


def _progress(bar: Any) -> Callable[[int, int, Any], None]:
    """The replay's progress callback: it moves ``bar`` (when there is one)."""

    def progress(done: int, total: int, counts: Any) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.set_postfix(
                decisions=sum(counts.values()), reproduced=counts["REPRODUCED"], refresh=False
            )
            bar.refresh()

    return progress


def _counts(document: dict[str, Any]) -> str:
    counts = document.get("counts", {})
    shown = ", ".join(f"{key} {value}" for key, value in counts.items() if value)
    return shown or "no decision selected"


def _gc(args: argparse.Namespace) -> int:
    from daemon.replay._gc import Limits

    if args.config is not None:
        if args.store is not None or args.log or args.max_age or args.max_bytes:
            raise UsageError("--config takes the stores, logs and limits from FILE")
        return _gc_config(args)
    if args.store is None or not args.log:
        raise UsageError("give --store and --log, or --config")
    try:
        limits = Limits(args.max_age, args.max_bytes, args.grace)
    except ValueError as error:
        raise UsageError(str(error)) from None
    code, document = _collect(args.store, [Path(item) for item in args.log], limits, args.apply)
    _emit(document)
    return code


def _collect(spec: Any, logs: list[Path], limits: Any, apply: bool) -> tuple[int, dict[str, Any]]:
    """(exit, document) of one store; a store that cannot be collected raises CliError."""
    from daemon.replay._gc import GcRefused, collect
    from daemon.retention._open import open_store
    from daemon.retention._store import StoreError

    for path in logs:
        if not path.is_file():
            raise cli.InputError(str(path), "not a file")
    try:
        store = open_store(spec, create=False)
    except (StoreError, ValueError) as error:
        raise RejectedInput(str(error), code="STORE_REFUSED") from None
    try:
        document = collect(store, logs, limits, apply=apply)
    except GcRefused as error:
        raise RejectedInput(str(error), code="GC_REFUSED") from None
    except StoreError as error:
        raise CliError(str(error), exit=EXIT_FAILED, code="STORE_FAILED") from None
    finally:
        store.close()
    if not apply:
        _say(
            f"{store.id}: dry run: {document['delete']['count']} objects "
            f"({document['delete']['bytes']} bytes) would be deleted; --apply deletes them"
        )
    elif document["failed"]:
        _say(f"{store.id}: {len(document['failed'])} deletions failed")
        return EXIT_FAILED, document
    return EXIT_OK, document


def _gc_config(args: argparse.Namespace) -> int:
    from daemon.audit._transparency import audit_files
    from daemon.config._config import ConfigError, load_config
    from daemon.replay._gc import Limits

    try:
        config = load_config(args.config)
    except ConfigError as error:
        raise RejectedInput(f"invalid configuration: {error}", code="CONFIG_INVALID") from None
    stores: dict[str, tuple[Any, Any]] = {}
    for spec in config.sessions:
        if spec.retention is not None:
            stores.setdefault(spec.retention.store.id, (spec.retention, None))
    for limits in config.stores.values():
        stores[limits.store.id] = (stores[limits.store.id][0], limits)
    if not stores:
        raise RejectedInput("no session of the configuration retains evidence", code="NO_STORE")
    logs = audit_files(Path(config.server.audit_path))
    documents = []
    worst: int = EXIT_OK
    for _, (policy, limits) in sorted(stores.items()):
        window = Limits(
            None if limits is None else limits.max_age,
            None if limits is None else limits.max_bytes,
            args.grace,
        )
        try:
            code, document = _collect(policy.store, logs, window, args.apply)
        except CliError as error:
            _say(error.message)
            code = error.exit
            document = {"store": policy.store.id, **cli.error_document(error)}
        worst = max(worst, code)
        documents.append(document)
    _emit({"stores": documents})
    return worst


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = subparsers.add_parser(
        "replay",
        help="re-evaluate logged decisions on their retained evidence",
        description="Rebuild decisions from the audit log, fetch their evidence from the "
        "store, evaluate them again and say whether each was reproduced.",
    )
    replay.add_argument(
        "--log",
        action="append",
        metavar="LOG",
        help="the audit log (repeat for rotated files, oldest first)",
    )
    replay.add_argument(
        "--fleet", metavar="FILE", help="replay every fleet log from its published tiles"
    )
    replay.add_argument("--store", required=True, metavar="STORE", help="fs:PATH or s3://B/P")
    replay.add_argument(
        "target", nargs="?", metavar="SEQ|DECISION_ID", help="the decision to replay (or --all)"
    )
    replay.add_argument("--all", action="store_true", help="replay every decision")
    replay.add_argument("--session", metavar="S", help="with --all: only this session")
    replay.add_argument("--since", metavar="T", help="with --all: RFC 3339 instant or date")
    replay.add_argument(
        "--allow-mechanism-change",
        action="store_true",
        help="evaluate decisions whose mechanism digest changed since the log was written",
    )
    replay.add_argument(
        "--workers", type=_workers, metavar="N", help="with --all: processes (default: CPUs)"
    )
    replay.set_defaults(handler=_replay)

    store = subparsers.add_parser("store", help="manage an evidence retention store")
    commands = store.add_subparsers(dest="store_command", metavar="COMMAND")
    gc = commands.add_parser(
        "gc",
        help="delete objects outside the retention window (dry run unless --apply)",
    )
    gc.add_argument("--store", metavar="STORE", help="fs:PATH or s3://B/P")
    gc.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="LOG",
        help="every file of the audit log, oldest first",
    )
    gc.add_argument("--config", metavar="FILE", help="every store of this daemon configuration")
    gc.add_argument("--max-age", type=_argument(parse_age), metavar="AGE", help="e.g. 30d")
    gc.add_argument("--max-bytes", type=_argument(parse_size), metavar="SIZE", help="e.g. 10GiB")
    gc.add_argument(
        "--grace", type=_argument(_grace), default=3600.0, metavar="AGE", help="default 1h"
    )
    gc.add_argument("--apply", action="store_true", help="delete (default: dry run)")
    gc.set_defaults(handler=_gc)
