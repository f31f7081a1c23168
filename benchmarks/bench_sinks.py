"""Decision-log sinks (``[[audit.sinks]]``): their cost to decisions, how fast one ships.

Three real daemons (``evidenced serve``, fsync'd audit, one ``bytes-sha256`` session) run side
by side: one without sinks, one whose ``http`` sink points at a closed port (every upload
refused, retried every 50 ms: a dead receiver, retried more often than the default backoff
would) and one shipping to a live receiver (``tests/daemon/sink_receiver.py``, in a process
of its own so its gunzip and JSON parsing do not share this process's GIL with the client).
Each sample submits a batch of ``--batch`` decisions of distinct evidence over the Unix
socket; the three are measured in interleaved rounds (``benchmarks/_harness.py``), the daemon
without sinks the baseline: time per decision with a dead sink, and with a live one, over
time per decision without (goal for the dead sink: <= 1.10, "decisions are unchanged").

Then shipping throughput: one ``Shipper`` (the daemon's own class) reads the no-sink daemon's
log from its first line and ships its decisions to the live receiver (batches of 500, gzip
JSON arrays over one kept connection), until caught up: decisions shipped per second.

Both sides share this machine's cores. Never asserts on time.

Usage: ``python benchmarks/bench_sinks.py [--quick] [--json PATH] [--batch 200]``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path

from _harness import Op, Report, at_most, main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "daemon"))

from sink_receiver import Receiver  # noqa: E402

from daemon import SubmitResult, SyncClient  # noqa: E402
from daemon.audit._shipper import Shipper  # noqa: E402
from daemon.audit._shipping_config import SinkConfig  # noqa: E402
from daemon.audit._sinks import HttpSink  # noqa: E402

CONFIG = """
[server]
listen = ""
socket = "{directory}/s"
max_in_flight = 512

[audit]
path = "{directory}/audit.jsonl"

{sink}

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
max_evidence_bytes = 4096
"""

SINK = """
[[audit.sinks]]
name = "bench"
type = "http"
url = "{url}"
flush_interval = 0.05
backoff_min = 0.05
backoff_max = 0.05
timeout = 5.0
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=200, help="decisions per sample")


def _serve_receiver(pipe: Connection) -> None:
    """The child process: a live receiver; answers ``count`` with its events, ends on EOF."""
    receiver = Receiver()
    pipe.send(receiver.url)
    with contextlib.suppress(EOFError):
        while pipe.recv() == "count":
            with receiver.lock:
                pipe.send(len(receiver.events))
    receiver.close()


@contextlib.contextmanager
def live_receiver() -> Iterator[tuple[str, Callable[[], int]]]:
    """A receiver in a process of its own: its URL, and how many events it holds."""
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    child = multiprocessing.get_context("fork").Process(target=_serve_receiver, args=(theirs,))
    child.start()
    url: str = ours.recv()

    def count() -> int:
        ours.send("count")
        return int(ours.recv())

    try:
        yield url, count
    finally:
        ours.close()
        child.join(10)


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/logs"  # nothing listens: every upload is refused


def start(directory: Path, sink: str) -> subprocess.Popen[str]:
    directory.mkdir()
    config = directory / "d.toml"
    config.write_text(CONFIG.format(directory=directory, sink=sink))
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert process.stdout is not None
    json.loads(process.stdout.readline())  # the serving document
    return process


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(60)


def submitter(directory: Path, batch: int) -> Callable[[], None]:
    """One sample: ``batch`` decisions of evidence never sent before."""
    numbers = itertools.count()
    client = SyncClient(unix=str(directory / "s"))

    def submit() -> None:
        pairs = [(None, [f"decision {next(numbers)}\n".encode()]) for _ in range(batch)]
        results = client.submit_batch("bytes", pairs)
        assert all(isinstance(r, SubmitResult) and r.outcome == "PASS" for r in results)

    return submit


def run(report: Report, args: argparse.Namespace) -> None:
    batch = 50 if report.quick else args.batch
    with (
        tempfile.TemporaryDirectory(prefix="bench-sinks-") as temp,
        live_receiver() as (
            url,
            received,
        ),
    ):
        base = Path(temp)
        daemons = {
            "none": start(base / "none", ""),
            "dead": start(base / "dead", SINK.format(url=closed_port_url())),
            "live": start(base / "live", SINK.format(url=url)),
        }
        try:
            calls = {name: submitter(base / name, batch) for name in daemons}
            report.compare_many(
                calls["none"],
                [
                    Op(
                        f"{batch} decisions, a dead http sink (refused, retried every 50 ms)",
                        calls["dead"],
                        goal=at_most(1.10),
                        true_floor=False,
                    ),
                    Op(
                        f"{batch} decisions, a live http sink shipping them",
                        calls["live"],
                        true_floor=False,
                    ),
                ],
                floor_name="the same daemon without sinks",
                rounds=11,
                max_seconds=30.0,
            )
        finally:
            for process in daemons.values():
                stop(process)

        log = base / "none" / "audit.jsonl"
        lines = log.read_bytes().splitlines()
        decisions = sum(json.loads(line)["event"] == "decision" for line in lines)
        durable = int(json.loads(lines[-1])["seq"])
        config = SinkConfig("throughput", "http", url=url, flush_interval=0.005, batch_lines=500)
        shipped: list[float] = []

        def ship_all() -> None:
            config.cursor_path(log).unlink(missing_ok=True)
            before = received()
            shipper = Shipper(
                config, log, lambda: durable, {"id": "bench"}, sink=HttpSink(config, "bench")
            )
            began = time.perf_counter()
            shipper.start()
            while shipper.status()["lag_lines"]:
                time.sleep(0.002)
            shipped.append(decisions / (time.perf_counter() - began))
            shipper.stop(time.monotonic() + 5)
            shipper.join(10)
            assert received() - before == decisions, "the receiver missed decisions"

        rounds = 3 if report.quick else 7
        for _ in range(rounds):
            ship_all()
        shipped.sort()
        report.value(
            f"shipping {decisions:,} decisions to a live receiver (batches of 500)",
            shipped[len(shipped) // 2],
            "decisions/s",
            spread=shipped,
        )


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=configure))
