"""A real daemon's wall clock stepped back 100 days under load, then ``store gc``.

The daemon runs under libfaketime (``LD_PRELOAD``; the offset read from a file at every clock
call, so the test steps it while the daemon serves; the monotonic clock is left alone, as a
real step leaves it). ``store gc --max-age 30d`` then runs on the real clock: it used to
delete the evidence of every decision made after the step (its lines said 100 days old). Now
the age window is a position in the log (``daemon/replay/_gc.py`` rule 3) and the daemon
reports the step (``daemon/audit/_audit.py`` rule 11).

Skipped, saying why, where libfaketime is not installed (``make faketime`` installs it);
``tests/daemon/test_retention_gc.py`` holds the same rules on synthetic logs everywhere.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import clirun
import pytest
import trio
from daemon_testkit import bytes_binding, start_serve

from daemon import open_client, tail, verify_log
from daemon.retention import FilesystemStore, name_of

LIBRARIES = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
LIBFAKETIME = next((path for path in LIBRARIES if os.path.exists(path)), None)
pytestmark = pytest.mark.skipif(
    LIBFAKETIME is None, reason="libfaketime is not installed (run make faketime)"
)
DAY = 86400.0

CONFIG = """
[server]
listen = ""
socket = "s"
worker_processes = 1

[audit]
path = "audit.jsonl"

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
retain = "all"
store = "fs:evidence"
"""


@pytest.fixture
def clock(short_dir: Path) -> Iterator[Path]:
    spec = short_dir / "clock"
    spec.write_text("-200d\n")
    yield spec


def _age_days(line: dict[str, Any]) -> float:
    stamp = datetime.fromisoformat(line["timestamp"])
    return (datetime.now(UTC) - stamp).total_seconds() / DAY


def test_wall_clock_stepped_back_100_days_under_load_never_lets_gc_delete_fresh_evidence(
    short_dir: Path, clock: Path
) -> None:
    (short_dir / "daemon.toml").write_text(CONFIG)
    assert LIBFAKETIME is not None
    environment = dict(
        os.environ,
        LD_PRELOAD=LIBFAKETIME,
        FAKETIME_TIMESTAMP_FILE=str(clock),
        FAKETIME_NO_CACHE="1",
        FAKETIME_DONT_RESET="1",
        FAKETIME_DONT_FAKE_MONOTONIC="1",
    )
    process, ready = start_serve("--config", str(short_dir / "daemon.toml"), env=environment)
    log, socket = short_dir / "audit.jsonl", str(short_dir / "s")
    decided: dict[str, list[int]] = {"old": [], "before": [], "after": []}
    steps: dict[str, Any] = {}

    async def submit(data: bytes) -> int:
        async with open_client(unix=socket) as client:
            answer = await client.submit("bytes", bytes_binding(data), [data])
        assert answer.outcome == "PASS" and answer.seq is not None
        return answer.seq

    async def load(phase: str, count: int, clients: int = 4) -> None:
        async def one(client: int) -> None:
            for n in range(count):
                decided[phase].append(await submit(b"%s %d %d" % (phase.encode(), client, n)))

        async with trio.open_nursery() as nursery:
            for client in range(clients):
                nursery.start_soon(one, client)

    async def scenario() -> None:
        await load("old", 1, clients=1)  # a decision made while the clock said 200 days ago
        clock.write_text("+0\n")  # the right time
        await load("before", 5)
        clock.write_text("-100d\n")  # stepped back 100 days, four clients submitting
        await load("after", 5)
        async with open_client(unix=socket) as client:
            steps.update((await client.health())["audit"])

    try:
        assert ready["status"] == "serving"
        trio.run(scenario)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    lines = {line["seq"]: line for line in tail(log, 10_000)}
    assert all(_age_days(lines[seq]) > 199 for seq in decided["old"])
    assert all(_age_days(lines[seq]) < 1 for seq in decided["before"])
    assert all(99 < _age_days(lines[seq]) < 101 for seq in decided["after"])
    # the daemon saw the step: counted in health, and one warning (at most one a minute)
    assert steps["clock_steps_back"] == 1 and steps["clock_largest_step_back_s"] > 99 * DAY
    assert err.count("event=audit_clock_step_back") == 1
    assert verify_log(log).intact
    store = FilesystemStore(short_dir / "evidence")
    before = {item.name for item in store.objects()}
    assert len(before) == 1 + 20 + 20
    command: list[str | Path] = [
        "store",
        "gc",
        "--store",
        store.id,
        "--log",
        log,
        "--max-age",
        "30d",
    ]
    gc = clirun.in_process([*command, "--grace", "0", "--apply"])
    assert gc.returncode == 0, gc.err
    document = gc.document()
    old = {name_of(b"old 0 0")}
    assert set(document["delete"]["names"]) == old  # only the line before the mark
    assert {item.name for item in store.objects()} == before - old  # 20 + 20 kept
    assert document["cutoff"]["age_seq"] == min(decided["before"])
    assert document["timestamps"]["out_of_order"] == 1
    assert document["timestamps"]["first_seq"] == min(decided["after"])
