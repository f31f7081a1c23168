"""The clients: import time, and what a call costs on a kept connection (``docs/client.md``).

Runs a real daemon (``evidenced serve --config``: a Unix socket, loopback TCP and HTTP) as a
child process and prints:

1. **Import time** of the async client (``from daemon import open_client``), of the blocking
   one (``from daemon import SyncClient``) and of its EVD1 transport alone (what a one-shot
   ``evidenced submit`` over the socket loads), each in a fresh interpreter (median of
   ``--imports`` runs, the interpreter's own start-up excluded). With ``--base DIR`` (another
   checkout, e.g. ``git archive <commit> | tar -x -C DIR``) the same statements are timed
   there too, in the same rounds, for a before/after.
2. **A call on a kept connection**: one ``sessions`` request over the Unix socket through the
   blocking client (a plain socket), against the same call through the async client driven from
   blocking code by an anyio blocking portal (a thread with an event loop: the other way to
   make a blocking client) — the choice ``docs/client.md`` explains — and, for context, the
   async client's own call under asyncio and under trio, the blocking client on a new
   connection per call, and (with ``--base``) the old ``SyncClient`` there: ``trio.run``, a
   connection and a ``hello`` per call.
3. The portal's own start and stop (a thread and an event loop per client).

Never asserts on time. Usage: ``python benchmarks/bench_client.py [--quick] [--json PATH]
[--base DIR]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _harness import Report, main
from anyio.from_thread import start_blocking_portal

from daemon import SyncClient, open_client

ROOT = Path(__file__).resolve().parents[1]
IMPORTS = {
    "async client (from daemon import open_client)": "from daemon import open_client",
    "blocking client (from daemon import SyncClient)": "from daemon import SyncClient",
    "one-shot EVD1 transport (daemon.client._blocking)": "import daemon.client._blocking",
}
CONFIG = """
[server]
listen = "127.0.0.1:0"
socket = "s"
[http]
listen = "127.0.0.1:0"
[audit]
path = "audit.jsonl"
durability = "none"
[sessions.bytes]
mechanisms = ["bytes-sha256"]
"""


def import_seconds(statement: str, where: Path) -> float:
    code = f"import time\nt = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=where, capture_output=True, text=True, check=True
    )
    return float(done.stdout)


def imports(report: Report, runs: int, base: Path | None) -> None:
    for label, statement in IMPORTS.items():
        after: list[float] = []
        before: list[float] = []
        for _ in range(runs):  # interleaved: load that drifts hits both alike
            after.append(import_seconds(statement, ROOT))
            if base is not None:
                before.append(import_seconds(statement, base))
        report.value(f"import, {label}", statistics.median(after), "s", spread=after)
        if base is not None:
            report.value(f"import before, {label}", statistics.median(before), "s", spread=before)


OLD_CALLS = """
import statistics, sys, time
from daemon import SyncClient
client = SyncClient(unix=sys.argv[1])
samples = []
for _ in range(7):
    start = time.perf_counter()
    for _ in range(20):
        client.list_sessions()
    samples.append((time.perf_counter() - start) / 20)
print(statistics.median(samples))
"""


def calls(report: Report, socket: str, base: Path | None) -> None:
    if base is not None:  # the old SyncClient: trio.run, a connection and a hello per call
        done = subprocess.run(
            [sys.executable, "-c", OLD_CALLS, socket],
            cwd=base,
            capture_output=True,
            text=True,
            check=True,
        )
        report.value("sessions, the old SyncClient (base checkout)", float(done.stdout), "s")
    with SyncClient(unix=socket, retry=None) as kept:
        report.time("sessions, blocking client, kept connection", kept.list_sessions)

    def fresh() -> object:
        with SyncClient(unix=socket, retry=None) as once:
            return once.list_sessions()

    report.time("sessions, blocking client, new connection per call (the old way)", fresh)

    with start_blocking_portal() as portal:
        client = portal.call(lambda: open_client(unix=socket, retry=None).__aenter__())
        report.time(
            "sessions, async client through an anyio portal",
            lambda: portal.call(client.list_sessions),
        )
        portal.call(client.aclose)

    def portal_life() -> None:
        with start_blocking_portal():
            pass

    report.time("an anyio portal started and stopped", portal_life, min_sample=0.05)

    for backend in ("asyncio", "trio"):

        async def loop(count: int = 200) -> float:
            async with open_client(unix=socket, retry=None) as client:
                start = time.perf_counter()
                for _ in range(count):
                    await client.list_sessions()
                return (time.perf_counter() - start) / count

        per_call = [anyio.run(loop, backend=backend) for _ in range(5)]
        report.value(
            f"sessions, async client under {backend}",
            statistics.median(per_call),
            "s",
            spread=per_call,
        )


def run(report: Report, args: argparse.Namespace) -> None:
    base = Path(args.base).resolve() if args.base else None
    imports(report, 5 if report.quick else args.imports, base)
    with tempfile.TemporaryDirectory(prefix="evbc", dir="/tmp") as directory:
        folder = Path(directory)
        (folder / "d.toml").write_text(CONFIG)
        process = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "serve", "--config", "d.toml"],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert process.stdout is not None
            started = json.loads(process.stdout.readline())
            calls(report, started["unix"], base)
        finally:
            process.terminate()
            process.wait(30)
            assert process.stdout is not None
            process.stdout.close()


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", help="another checkout to time the imports in (before/after)")
    parser.add_argument("--imports", type=int, default=15, help="runs per import statement")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=options))
