"""The fleet commands: ``log publish``, ``log monitor --fleet``, ``log receipt --fleet``,
``log verify-receipt --fleet`` and ``replay --fleet`` (the library: :mod:`daemon.commands.
_fleet`; ``docs/transparency.md`` §6, ``docs/deployment.md``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from daemon.fleet._fleet import (
    FleetError,
    fleet_key_for_receipt,
    fleet_receipt,
    load_fleet,
    materialize,
    monitor_fleet,
    publish,
)
from daemon.retention._publish import PublishError, open_target
from session import cli

__all__ = [
    "receipt_from_fleet",
    "register_publish",
    "replay_fleet",
    "run_fleet_monitor",
    "verify_receipt_in_fleet",
]


def receipt_from_fleet(
    args: Any, decision_id: str | None, line_digest: str | None
) -> dict[str, Any]:
    """``log receipt --fleet F (--decision-id ID | --line-digest D)``: the receipt, verified
    under the key of the log that holds the line (exit 65 when no log of the fleet has it)."""
    from daemon.tlog import verify_receipt
    from daemon.tlog._receipt import encode_receipt

    try:
        fleet = load_fleet(Path(args.fleet))
    except FleetError as error:
        raise cli.RejectedInput(str(error), code=FleetError.code) from None
    if decision_id is None and line_digest is None:
        raise cli.UsageError("log receipt --fleet: give --decision-id or --line-digest")
    try:
        receipt = fleet_receipt(fleet, decision_id=decision_id, line_digest=line_digest)
    except FleetError as error:
        raise cli.RejectedInput(str(error), code=FleetError.code) from None
    if receipt is None:
        raise cli.RejectedInput("no log of the fleet holds that line", code="LINE_NOT_FOUND")
    data = encode_receipt(receipt)
    key = fleet_key_for_receipt(data, fleet)
    assert key is not None  # the receipt was made under one of the fleet's checkpoints
    report = verify_receipt(data, key, witnesses=list(fleet.witnesses), threshold=fleet.threshold)
    if not report.verified:
        raise cli.RejectedInput(f"{report.code}: {report.message}", code=report.code)
    return receipt


def replay_fleet(args: Any) -> int:
    """``replay --fleet F --store S --all``: every fleet log's decisions, read from its
    published log (proved by :func:`materialize`), replayed against the shared store."""
    import tempfile

    from daemon.replay._replay_run import ReplayRefused, ReplayRequest, run_replay

    if not args.all or args.target is not None or args.log:
        raise cli.UsageError("replay --fleet takes --all (and no --log or target)")
    try:
        fleet = load_fleet(Path(args.fleet))
    except FleetError as error:
        raise cli.RejectedInput(str(error), code=FleetError.code) from None
    documents = []
    with tempfile.TemporaryDirectory(prefix="evidenced-fleet-") as scratch:
        for number, log in enumerate(fleet.logs):
            path = Path(scratch) / f"log-{number}.jsonl"
            try:
                materialize(log, open_target(log.tiles), path)
                document = run_replay(
                    ReplayRequest(logs=(path,), store=args.store, workers=args.workers or 1)
                )
            except (FleetError, PublishError) as error:
                document = {"status": "REFUSED", "reason": "FLEET_LOG", "message": str(error)}
            except ReplayRefused as refused:
                document = refused.document
            document.pop("log", None)
            documents.append({"origin": log.origin, **document})
    good = all(d["status"] == "REPRODUCED" for d in documents)
    cli.emit(
        {
            "status": "REPRODUCED" if good else "NOT_REPRODUCED",
            "decisions": sum(d.get("decisions", 0) for d in documents),
            "logs": documents,
        }
    )
    return int(cli.Exit.OK if good else cli.Exit.FAIL)


def _publish_command(args: Any) -> int:

    directory = Path(args.dir)
    while True:
        try:
            cli.emit(publish(directory, args.to))
        except PublishError as error:
            raise cli.RejectedInput(str(error), code=error.code) from None
        if not args.watch:
            return int(cli.Exit.OK)
        time.sleep(args.interval)


def run_fleet_monitor(args: Any) -> int:
    """``log monitor --fleet F``: ``--count`` passes over the fleet (0: until an alarm)."""

    try:
        fleet = load_fleet(Path(args.fleet))
    except FleetError as error:
        raise cli.RejectedInput(str(error), code=FleetError.code) from None
    state_dir = Path(args.state or "evidenced-fleet-state")
    passes = 0
    while True:
        good, results = monitor_fleet(fleet, state_dir, Path(args.evidence))
        passes += 1
        for result in results:
            cli.say(f"{result['origin']}: {result['status']}: {result.get('message') or ''}")
        alarm = any(r["status"] in {"FORK", "ROLLBACK"} for r in results)
        if alarm or (args.count and passes >= args.count):
            break
        time.sleep(args.interval)
    cli.emit({"status": "CONSISTENT" if good else "ALARM", "passes": passes, "logs": results})
    return int(cli.Exit.OK if good else cli.Exit.FAIL)


def verify_receipt_in_fleet(args: Any) -> int:
    """``log verify-receipt --fleet F``: the key is the fleet log named by the receipt's
    checkpoint; the witnesses and threshold are the fleet's."""
    from daemon.tlog import verify_receipt

    try:
        fleet = load_fleet(Path(args.fleet))
    except FleetError as error:
        raise cli.RejectedInput(str(error), code=FleetError.code) from None
    data = cli.read_input(args.receipt)
    key = fleet_key_for_receipt(data, fleet)
    if key is None:
        report = {
            "status": "INVALID",
            "code": "RECEIPT_LOG_UNKNOWN",
            "message": "the receipt's checkpoint names no log of the fleet",
        }
        cli.emit(report)
        return int(cli.Exit.FAIL)
    verified = verify_receipt(data, key, witnesses=list(fleet.witnesses), threshold=fleet.threshold)
    cli.emit(verified.to_dict())
    return int(cli.Exit.OK if verified.verified else cli.Exit.FAIL)


def register_publish(commands: Any) -> None:
    """``evidenced log publish --dir DIR --to TARGET [--watch]``."""
    parser = commands.add_parser("publish", help="copy the log's tiles to fs:PATH or s3://…")
    parser.add_argument("--dir", required=True, help="the local transparency directory")
    parser.add_argument("--to", required=True, help="fs:PATH or s3://BUCKET/PREFIX/")
    parser.add_argument("--watch", action="store_true", help="keep publishing every --interval")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between passes")
    parser.set_defaults(handler=_publish_command)
