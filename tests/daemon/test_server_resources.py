"""The daemon as a process under resource attacks: descriptor exhaustion by idle
connections and slow senders, memory after a burst of maximum-size submits, and snapshot
folders left by crashed processes."""

from __future__ import annotations

import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import ROOT, bytes_binding, formation_pair, start_serve

from daemon import ClientError, open_client
from mechanism.formation import formation_binding
from mechanism.snapshots import SNAPSHOT_PREFIX
from session import BoundProposition, EvidenceBounds

CLI = [sys.executable, "-m", "daemon.cli"]
ATTACKER = Path(__file__).resolve().parent / "attacker.py"


def _limit_descriptors(soft: int, hard: int | None = None) -> Any:
    def apply() -> None:
        current_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, current_hard if hard is None else hard))

    return apply


def start_daemon(
    folder: Path,
    server: str,
    *,
    soft_descriptors: int = 1024,
    hard_descriptors: int | None = None,
    env: dict[str, str] | None = None,
    sessions: str = '[sessions.formation]\nmechanisms = ["formation"]\n',
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """``evidenced serve`` with ``sessions`` (a formation session), under a descriptor soft
    limit."""
    config = folder / "daemon.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:0"\n{server}\n'
        f'[audit]\npath = "{folder / "audit.jsonl"}"\ndurability = "none"\n{sessions}'
    )
    return start_serve(
        "--config",
        str(config),
        stdin=subprocess.DEVNULL,
        env=env,
        preexec_fn=_limit_descriptors(soft_descriptors, hard_descriptors),
    )


def stop(process: subprocess.Popen[str]) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate(timeout=10)
    return err


@pytest.fixture
def daemons() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.communicate(timeout=10)


def address_of(ready: dict[str, Any]) -> tuple[str, int]:
    host, port = ready["tcp"].rsplit(":", 1)
    return host, int(port)


def minimal_binding(address: tuple[str, int]) -> tuple[BoundProposition, list[bytes]]:
    subject, certificate = formation_pair("atom")

    async def digest() -> str:
        async with open_client(tcp=address) as client:
            listed = await client.list_sessions()
        return str(listed[0]["mechanisms"][0]["mechanism_digest"])

    binding = formation_binding(subject, certificate, mechanism_digest=trio.run(digest))
    return binding, [subject, certificate]


def latencies(
    address: tuple[str, int], binding: BoundProposition, items: list[bytes], seconds: float
) -> list[float]:
    """Per-decision latencies of one well-behaved client (one connection, one request at a
    time) for ``seconds``; a refused or failed request counts as ``seconds`` long."""

    async def run() -> list[float]:
        measured: list[float] = []
        async with open_client(tcp=address, connect_timeout=5, request_timeout=5) as client:
            begin = time.perf_counter()
            while time.perf_counter() - begin < seconds:
                start = time.perf_counter()
                decision = await client.submit("formation", binding, items)
                assert decision.outcome == "PASS"
                measured.append(time.perf_counter() - start)
        return measured

    try:
        return trio.run(run)
    except ClientError:
        return [seconds]


def test_idle_connections_and_slow_senders_do_not_starve_a_well_behaved_client(
    short_dir: Path, daemons: list[subprocess.Popen[str]]
) -> None:
    """1,500 idle connections and 256 slow senders (a separate process, from two addresses)
    against a daemon started under the usual 1,024 descriptor soft limit: the well-behaved
    client keeps at least 90 % of its solo throughput.

    The machine is shared, so rounds are interleaved: the attacker is stopped (SIGSTOP; its
    connections stay open, its slow senders are cut meanwhile) for each solo round and
    resumed for each attacked round; the client sends one request at a time, so its
    throughput is 1 / its median latency in a round; the figure is the median over four pairs
    of adjacent rounds of (attacked / solo). Load from other work on the machine moves single
    rounds by several times, so up to three such figures are taken and the best counts; the
    daemon before this protection served the client nothing at all under this attack."""
    process, ready = start_daemon(short_dir, "", soft_descriptors=1024)
    daemons.append(process)
    address = address_of(ready)
    binding, items = minimal_binding(address)
    latencies(address, binding, items, 0.3)  # warm-up
    attacker = subprocess.Popen(
        [sys.executable, str(ATTACKER), address[0], str(address[1]), "1500", "256", "60"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    figures: list[tuple[float, list[tuple[int, int]]]] = []
    try:
        assert attacker.stdout is not None
        opened = attacker.stdout.readline().split()
        assert opened == ["ready", "1500", "256"], opened
        # The opening wave: slow senders take their slots and are cut at the minimum rate,
        # idle connections are held or refused, the attacking peers are penalized.
        time.sleep(2.5)
        while len(figures) < 3 and not any(ratio >= 0.9 for ratio, _ in figures):
            pairs: list[tuple[float, float]] = []  # (solo, attacked) decisions/s
            for _ in range(4):
                under = latencies(address, binding, items, 0.3)
                attacker.send_signal(signal.SIGSTOP)
                time.sleep(1.1)  # its slow senders are cut by the minimum rate meanwhile
                alone = latencies(address, binding, items, 0.3)
                attacker.send_signal(signal.SIGCONT)
                time.sleep(0.2)
                pairs.append((1 / statistics.median(alone), 1 / statistics.median(under)))
            figures.append(
                (
                    statistics.median(attacked / solo for solo, attacked in pairs),
                    [(round(solo), round(attacked)) for solo, attacked in pairs],
                )
            )
        health = _health(address)
    finally:
        attacker.send_signal(signal.SIGCONT)
        attacker.communicate(timeout=20)  # closes its stdin: it stops
    err = stop(process)
    for ratio, rounded in figures:
        print(f"decisions/s (solo, attacked) per pair of rounds: {rounded}; median {ratio:.2f}")
    print(health["peers"])
    assert max(ratio for ratio, _ in figures) >= 0.9, (figures, health)
    assert health["max_connections"] == 1024  # the soft limit was raised, not the cap lowered
    assert health["peers"]["refused_connections"] > 0
    assert health["peers"]["refused_requests"] > 0  # slow senders hit the per-peer cap
    assert "accept failed" not in err, err


def _health(address: tuple[str, int]) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with open_client(tcp=address) as client:
            return await client.health()

    return trio.run(run)


def test_connection_cap_is_sized_below_a_low_descriptor_limit(
    short_dir: Path, daemons: list[subprocess.Popen[str]]
) -> None:
    process, ready = start_daemon(short_dir, "", soft_descriptors=200, hard_descriptors=200)
    daemons.append(process)
    health = _health(address_of(ready))
    stop(process)
    # 200 descriptors less the headroom (64, and two per evaluation worker).
    assert health["max_connections"] == 200 - 64 - 2 * 2


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
def test_memory_returns_near_baseline_after_a_burst_of_maximum_size_submits(
    short_dir: Path, daemons: list[subprocess.Popen[str]]
) -> None:
    """300 concurrent submits of the session's maximum size (512 KiB), then a pause: the
    daemon's RSS is at most 1.5 x its baseline + 32 MB (it went 53 -> 351 MB and stayed)."""
    process, ready = start_daemon(
        short_dir,
        "max_in_flight = 512\nmax_in_flight_per_peer = 512\nmax_connections_per_peer = 512",
        sessions='[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
        "max_evidence_items = 1\nmax_evidence_bytes = 524288\n",
    )
    daemons.append(process)
    address = address_of(ready)
    item = b"m" * 524_288
    binding = bytes_binding(item, bounds=EvidenceBounds(1, 524_288))

    async def burst() -> list[str]:
        outcomes: list[str] = []

        async def one() -> None:
            async with open_client(tcp=address, request_timeout=60) as client:
                outcomes.append((await client.submit("bytes", binding, [item])).outcome)

        async with trio.open_nursery() as nursery:
            for _ in range(300):
                nursery.start_soon(one)
        return outcomes

    _health(address)
    baseline = _rss_kib(process.pid)
    outcomes = trio.run(burst)
    time.sleep(1.0)
    _health(address)  # the pause: nothing in flight
    after = _rss_kib(process.pid)
    stop(process)
    print(f"RSS baseline {baseline / 1024:.1f} MiB, after the burst {after / 1024:.1f} MiB")
    assert outcomes == ["PASS"] * 300  # every one read and decided, none refused
    assert after <= 1.5 * baseline + 32 * 1024, (baseline, after)


def test_snapshot_folders_left_by_a_killed_process_are_removed_at_start(
    short_dir: Path, daemons: list[subprocess.Popen[str]]
) -> None:
    """Defect 10: a process killed while it held a snapshot folder (here SIGKILL right after
    making it, with a payload inside) leaves it behind; the next daemon start removes it, and
    nothing that is not provably such a leftover."""
    tmp = short_dir / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    crashed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, pathlib\n"
            "from mechanism.snapshots import make_snapshot_directory\n"
            "folder = pathlib.Path(make_snapshot_directory())\n"
            "(folder / 'weights.safetensors').write_bytes(b'payload')\n"
            "print(folder, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=30,
    )
    assert crashed.returncode == -signal.SIGKILL
    stale = Path(crashed.stdout.strip())
    assert stale.parent == tmp and stale.name.startswith(SNAPSHOT_PREFIX) and stale.exists()
    live = tmp / f"{SNAPSHOT_PREFIX}{os.getpid()}-alive1"  # this (running) test's own
    live.mkdir()
    foreign = tmp / "t81-weights-abc123"  # not our name
    foreign.mkdir()
    lookalike = tmp / f"{SNAPSHOT_PREFIX}999999999-x.y"  # our prefix, not our form
    lookalike.mkdir()
    target = short_dir / "precious"
    target.mkdir()
    (target / "keep").write_bytes(b"keep")
    link = tmp / f"{SNAPSHOT_PREFIX}999999998-link"  # a dead pid, but a symlink
    link.symlink_to(target)
    process, _ = start_daemon(short_dir, "", env=env)
    daemons.append(process)
    err = stop(process)
    assert not stale.exists()
    assert "removed 1 stale snapshot folder" in err
    assert live.is_dir() and foreign.is_dir() and lookalike.is_dir()
    assert link.is_symlink() and (target / "keep").read_bytes() == b"keep"
