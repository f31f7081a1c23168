"""CLI commands ``replay`` and ``store gc`` (``docs/retention.md``).

Contract (stdout: exactly one JSON document; stderr: one-line messages, never a traceback):

* ``replay --log LOG [--log LOG]... --store STORE (SEQ | DECISION_ID | --all [--session S]
  [--since T]) [--allow-mechanism-change] [--workers N]``. The log files (rotated ones
  oldest first) are verified first. One target prints its report; ``--all`` prints the
  summary (a progress bar on stderr only when stdout is a terminal). Exit 0 when every
  decision replayed is ``REPRODUCED``; 1 when any is not (or none was selected); 65 when the
  replay is refused (a log that does not verify, a target that is not a decision of the log,
  a store that cannot be opened); 2 usage.
* ``store gc --store STORE --log LOG [--log LOG]... [--max-age AGE] [--max-bytes SIZE]
  [--grace AGE] [--apply]``: the plan (dry run) or, with ``--apply``, the deletions. AGE is
  seconds or a number with ``s``/``m``/``h``/``d``; SIZE bytes or a number with
  ``KiB``/``MiB``/``GiB``/``TiB`` (or ``KB``/``MB``/``GB``/``TB``). Exit 0; 65 when the log does
  not verify or the store cannot be opened; 70 when a deletion failed.
* ``store gc --config FILE [--grace AGE] [--apply]``: the same for every store the daemon's
  configuration names, with its ``[stores]`` limits, over the configured audit log and its
  rotated files; prints ``{"stores": [one document per store]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from ._units import parse_age, parse_size

EXIT_OK: Final = 0
EXIT_NOT_REPRODUCED: Final = 1
EXIT_USAGE: Final = 2
EXIT_REJECTED: Final = 65
EXIT_FAILED: Final = 70


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


def _emit(document: Any) -> None:
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def _say(message: str) -> None:
    sys.stderr.write(f"evidenced: {message}\n")
    sys.stderr.flush()


def _replay(args: argparse.Namespace) -> int:
    from .._report import ReportError, parse_instant
    from ._replay_run import ReplayRefused, ReplayRequest, run_replay

    if args.all == (args.target is not None):
        _say("replay: usage error: give one SEQ or DECISION_ID, or --all")
        return EXIT_USAGE
    if args.target is not None and (args.session is not None or args.since is not None):
        _say("replay: usage error: --session and --since select among --all")
        return EXIT_USAGE
    since = None
    if args.since is not None:
        try:
            since = parse_instant(args.since).timestamp()
        except ReportError as error:
            _say(f"replay: usage error: {error}")
            return EXIT_USAGE
    workers = args.workers if args.workers is not None else max(1, os.cpu_count() or 1)
    request = ReplayRequest(
        logs=tuple(Path(item) for item in args.log),
        store=args.store,
        target=args.target,
        session=args.session,
        since=since,
        allow_change=args.allow_mechanism_change,
        workers=workers if args.all else 1,
    )
    for path in request.logs:
        if not path.is_file():
            _emit({"status": "REFUSED", "reason": "LOG_UNREADABLE", "message": f"{path}"})
            _say(f"replay: {path} is not a file")
            return EXIT_REJECTED
    bar = None
    if args.all and sys.stdout.isatty():
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # no monitor thread: workers may be forked
        bar = tqdm(total=0, unit="B", unit_scale=True, desc="replay", file=sys.stderr)
    try:

        def progress(done: int, total: int, counts: Any) -> None:
            if bar is not None:
                bar.total = total
                bar.n = done
                bar.set_postfix(
                    decisions=sum(counts.values()), reproduced=counts["REPRODUCED"], refresh=False
                )
                bar.refresh()

        document = run_replay(request, progress=progress)
    except ReplayRefused as refused:
        _emit(refused.document)
        _say(f"replay: {refused}")
        return EXIT_REJECTED
    finally:
        if bar is not None:
            bar.close()
    _emit(document)
    if document["status"] != "REPRODUCED":
        what = document["status"] if args.target is not None else _counts(document)
        _say(f"replay: not every decision was reproduced: {what}")
        return EXIT_NOT_REPRODUCED
    return EXIT_OK


def _counts(document: dict[str, Any]) -> str:
    counts = document.get("counts", {})
    shown = ", ".join(f"{key} {value}" for key, value in counts.items() if value)
    return shown or "no decision selected"


def _gc(args: argparse.Namespace) -> int:
    from ._gc import Limits

    if args.config is not None:
        if args.store is not None or args.log or args.max_age or args.max_bytes:
            _say("store gc: usage error: --config takes the stores, logs and limits from FILE")
            return EXIT_USAGE
        return _gc_config(args)
    if args.store is None or not args.log:
        _say("store gc: usage error: give --store and --log, or --config")
        return EXIT_USAGE
    try:
        limits = Limits(args.max_age, args.max_bytes, args.grace)
    except ValueError as error:
        _say(f"store gc: usage error: {error}")
        return EXIT_USAGE
    code, document = _collect(args.store, [Path(item) for item in args.log], limits, args.apply)
    if document is not None:
        _emit(document)
    return code


def _collect(
    spec: Any, logs: list[Path], limits: Any, apply: bool
) -> tuple[int, dict[str, Any] | None]:
    from ._gc import GcRefused, collect
    from ._open import open_store
    from ._store import StoreError

    for path in logs:
        if not path.is_file():
            _say(f"store gc: {path} is not a file")
            return EXIT_REJECTED, None
    try:
        store = open_store(spec, create=False)
    except (StoreError, ValueError) as error:
        _say(f"store gc: {error}")
        return EXIT_REJECTED, None
    try:
        document = collect(store, logs, limits, apply=apply)
    except GcRefused as error:
        _say(f"store gc: {error}")
        return EXIT_REJECTED, None
    except StoreError as error:
        _say(f"store gc: {error}")
        return EXIT_FAILED, None
    finally:
        store.close()
    if not apply:
        _say(
            f"store gc: {store.id}: dry run: {document['delete']['count']} objects "
            f"({document['delete']['bytes']} bytes) would be deleted; --apply deletes them"
        )
    elif document["failed"]:
        _say(f"store gc: {store.id}: {len(document['failed'])} deletions failed")
        return EXIT_FAILED, document
    return EXIT_OK, document


def _gc_config(args: argparse.Namespace) -> int:
    from .._config import ConfigError, load_config
    from .._transparency import audit_files
    from ._gc import Limits

    try:
        config = load_config(args.config)
    except ConfigError as error:
        _say(f"store gc: invalid configuration: {error}")
        return EXIT_REJECTED
    stores: dict[str, tuple[Any, Any]] = {}
    for spec in config.sessions:
        if spec.retention is not None:
            stores.setdefault(spec.retention.store.id, (spec.retention, None))
    for limits in config.stores.values():
        stores[limits.store.id] = (stores[limits.store.id][0], limits)
    if not stores:
        _say("store gc: no session of the configuration retains evidence")
        return EXIT_REJECTED
    logs = audit_files(Path(config.server.audit_path))
    documents = []
    worst = EXIT_OK
    for _, (policy, limits) in sorted(stores.items()):
        window = Limits(
            None if limits is None else limits.max_age,
            None if limits is None else limits.max_bytes,
            args.grace,
        )
        code, document = _collect(policy.store, logs, window, args.apply)
        worst = max(worst, code)
        if document is not None:
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
        required=True,
        metavar="LOG",
        help="the audit log (repeat for rotated files, oldest first)",
    )
    replay.add_argument("--store", required=True, metavar="STORE", help="fs:PATH or s3://B/P")
    replay.add_argument("target", nargs="?", metavar="SEQ|DECISION_ID")
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
