"""``evidenced serve --workers 2`` as real processes (docs/adr/0015): N serving processes,
one audit log with one ``seq`` history, one transparency log; a killed worker is restarted
and loses no acknowledged decision; SIGTERM drains every worker and writes one
``daemon_stop``; ``health`` shows every worker.

Every daemon here is a real ``evidenced serve`` process; clients are the real client over
TCP and the Unix socket.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import ROOT, bytes_binding, start_serve

from daemon import ClientError, SubmitResult, open_client, verify_log
from daemon.cli import main as cli_main
from daemon.config._config import ConfigError, parse_config
from daemon.tlog import (
    VerifierKey,
    encode_receipt,
    make_receipt,
    open_checkpoint,
    verify_directory,
    verify_receipt,
)

CLI = [sys.executable, "-m", "daemon.cli"]
ORIGIN = "test.example/evidenced/workers"


def write_config(short_dir: Path, *, transparency: bool = False) -> Path:
    config = short_dir / "daemon.toml"
    text = (
        f'[server]\nlisten = "127.0.0.1:0"\nsocket = "{short_dir / "s"}"\nworkers = 2\n'
        "worker_processes = 1\nshutdown_grace = 5.0\n"
        f'[audit]\npath = "{short_dir / "audit.jsonl"}"\ndurability = "fsync"\n'
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
    )
    if transparency:
        text += (
            f'[transparency]\nkey_file = "log.key"\norigin = "{ORIGIN}"\n'
            "checkpoint_interval = 0.2\n"
        )
    config.write_text(text)
    return config


@pytest.fixture
def daemon_proc(short_dir: Path) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)


def start(
    started: list[subprocess.Popen[str]], config: Path
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    process, ready = start_serve("--config", str(config))
    started.append(process)
    return process, ready


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return err


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def tcp_of(ready: dict[str, Any]) -> tuple[str, int]:
    host, port = ready["tcp"].rsplit(":", 1)
    return host, int(port)


async def health_of(sock: str) -> dict[str, Any]:
    async with open_client(unix=sock) as client:
        return await client.health()


async def both_workers(sock: str) -> dict[str, Any]:
    """``health`` once it lists two live workers (their figures arrive within a push)."""
    with trio.fail_after(30):
        return await _both_workers(sock)


async def _both_workers(sock: str) -> dict[str, Any]:
    while True:
        health = await health_of(sock)
        if len([w for w in health["workers"] if w["alive"]]) == 2:
            return health
        await trio.sleep(0.05)


async def restarted(sock: str, index: int) -> None:
    """Wait until worker ``index`` runs again, restarted once."""
    with trio.fail_after(30):
        while True:
            health = await health_of(sock)
            again = [w for w in health["workers"] if w["index"] == index]
            if again and again[0]["restarts"] == 1 and again[0]["alive"]:
                return
            await trio.sleep(0.05)


def assert_answers_are_their_lines(answered: list[SubmitResult], log: list[dict[str, Any]]) -> None:
    """Every acknowledged decision is the line at its ``seq``, with its digest."""
    by_seq = {line["seq"]: line for line in log}
    for result in answered:
        assert result.seq is not None
        line = by_seq[result.seq]
        assert line["event"] == "decision"
        assert line["decision_id"] == result.decision_id
        assert line["line_digest"] == result.line_digest


def test_two_workers_serve_a_burst_over_tcp_and_unix_as_one_history(
    short_dir: Path, capsys: pytest.CaptureFixture[str], daemon_proc: list[subprocess.Popen[str]]
) -> None:
    assert cli_main(["log", "keygen", "--origin", ORIGIN, "--out", str(short_dir / "log.key")]) == 0
    key = VerifierKey.parse(json.loads(capsys.readouterr().out)["verifier_key"])
    process, ready = start(daemon_proc, write_config(short_dir, transparency=True))
    assert ready["workers"] == 2
    sock, tcp = str(short_dir / "s"), tcp_of(ready)
    answered: list[SubmitResult] = []

    async def burst() -> dict[str, Any]:
        async def client(number: int) -> None:
            target: dict[str, Any] = {"unix": sock} if number % 2 else {"tcp": tcp}
            async with open_client(**target) as connection:
                for i in range(12):
                    payload = b"client %d item %d" % (number, i)
                    result = await connection.submit("bytes", bytes_binding(payload), [payload])
                    assert result.result["outcome"] == "PASS"
                    answered.append(result)

        async with trio.open_nursery() as nursery:
            for number in range(16):
                nursery.start_soon(client, number)
        health = await both_workers(sock)
        async with open_client(tcp=tcp) as connection:  # proofs from the parent's one tree
            while True:  # the checkpoint is signed at most every 0.2 s
                note = await connection.checkpoint()
                size = open_checkpoint(note, key).checkpoint.size
                if size >= max(result.seq or 0 for result in answered):
                    break
                await trio.sleep(0.05)
            for result in answered[:: len(answered) // 4]:
                assert result.log_index is not None and result.audit_line is not None
                proof = await connection.inclusion_proof(result.log_index, size)
                receipt = make_receipt(
                    result.audit_line.encode(), result.log_index, size, proof, note
                )
                assert verify_receipt(encode_receipt(receipt), key).verified
        return health

    health = trio.run(burst)
    assert len(answered) == 16 * 12
    assert health["status"] == "serving" and len(health["workers"]) == 2
    assert {w["pid"] for w in health["workers"]}.isdisjoint({process.pid})
    stop(process)
    log = lines_of(short_dir / "audit.jsonl")
    assert [line["seq"] for line in log] == list(range(1, len(log) + 1))
    assert [line["event"] for line in log].count("decision") == len(answered)
    assert len({result.decision_id for result in answered}) == len(answered)
    assert_answers_are_their_lines(answered, log)
    for result in answered:
        assert result.log_index == (result.seq or 0) - 1
        assert json.loads(result.audit_line or "{}")["seq"] == result.seq
    assert verify_log(short_dir / "audit.jsonl").intact
    final = open_checkpoint((short_dir / "audit.jsonl.tlog" / "checkpoint").read_bytes(), key)
    assert final.checkpoint.size == len(log)  # the tree covers every line, daemon_stop too
    assert verify_directory(
        short_dir / "audit.jsonl.tlog", [short_dir / "audit.jsonl"], key
    ).verified


def test_killed_worker_is_restarted_and_no_acknowledged_decision_is_lost(
    short_dir: Path, daemon_proc: list[subprocess.Popen[str]]
) -> None:
    process, _ = start(daemon_proc, write_config(short_dir))
    sock = str(short_dir / "s")
    answered: list[SubmitResult] = []
    killed: list[int] = []

    async def load() -> dict[str, Any]:
        async def client(number: int, stop_at: trio.Event) -> None:
            i = 0
            while not stop_at.is_set():
                try:  # a client of the killed worker reconnects (the listener never closed)
                    async with open_client(unix=sock) as connection:
                        while not stop_at.is_set():
                            i += 1
                            payload = b"client %d item %d" % (number, i)
                            answered.append(
                                await connection.submit("bytes", bytes_binding(payload), [payload])
                            )
                except ClientError:
                    await trio.sleep(0.01)

        health = await both_workers(sock)
        victim = health["workers"][0]
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            for number in range(8):
                nursery.start_soon(client, number, done)
            with trio.fail_after(30):
                while len(answered) < 100:
                    await trio.sleep(0.01)
            os.kill(victim["pid"], signal.SIGKILL)
            killed.extend((victim["index"], victim["pid"]))
            await restarted(sock, victim["index"])
            after = len(answered)
            with trio.fail_after(30):
                while len(answered) < after + 100:
                    await trio.sleep(0.01)
            done.set()
        return await both_workers(sock)

    health = trio.run(load)
    index, pid = killed
    assert pid not in {w["pid"] for w in health["workers"]}
    err = stop(process)
    assert f"worker {index} (pid {pid}) exited; restarting it" in err
    log = lines_of(short_dir / "audit.jsonl")
    assert [line["seq"] for line in log] == list(range(1, len(log) + 1))
    assert_answers_are_their_lines(answered, log)
    assert verify_log(short_dir / "audit.jsonl").intact


def test_sigterm_drains_both_workers_and_writes_one_daemon_stop(
    short_dir: Path, daemon_proc: list[subprocess.Popen[str]]
) -> None:
    process, _ = start(daemon_proc, write_config(short_dir))
    sock = str(short_dir / "s")

    async def some() -> dict[str, Any]:
        async with open_client(unix=sock) as connection:
            for i in range(20):
                payload = b"item %d" % i
                await connection.submit("bytes", bytes_binding(payload), [payload])
        return await both_workers(sock)

    health = trio.run(some)
    pids = [worker["pid"] for worker in health["workers"]]
    err = stop(process)
    assert "draining 2 workers" in err
    log = lines_of(short_dir / "audit.jsonl")
    events = [line["event"] for line in log]
    assert events.count("daemon_start") == 1 and events.count("daemon_stop") == 1
    assert events[0] == "daemon_start" and events[-1] == "daemon_stop"
    assert log[0]["pid"] == process.pid
    assert log[-1]["decisions"] == 20
    for pid in pids:  # every worker is gone with the daemon
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not (short_dir / "s").exists()


def test_exposed_listener_with_workers_is_refused_before_anything_starts(
    short_dir: Path,
) -> None:
    config = short_dir / "exposed.toml"
    config.write_text(
        '[server]\nlisten = "0.0.0.0:0"\nworkers = 2\n'
        f'[audit]\npath = "{short_dir / "audit.jsonl"}"\n'
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
    )
    result = subprocess.run(
        [*CLI, "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 65, result.stderr
    assert json.loads(result.stdout)["error"]["code"] == "CONFIG_INVALID"
    assert not (short_dir / "audit.jsonl").exists()  # nothing opened, nothing recorded


@pytest.mark.parametrize("value", ["0", "-1", '"many"', "true", "1.5"])
def test_workers_that_are_not_a_count_or_auto_are_refused(value: str, tmp_path: Path) -> None:
    text = f'[server]\nworkers = {value}\n[sessions.b]\nmechanisms = ["bytes-sha256"]\n'
    with pytest.raises(ConfigError, match="workers"):
        parse_config(text, base=tmp_path, source="t.toml")


def test_workers_auto_is_one_per_cpu(tmp_path: Path) -> None:
    text = '[server]\nworkers = "auto"\n[sessions.b]\nmechanisms = ["bytes-sha256"]\n'
    config = parse_config(text, base=tmp_path, source="t.toml")
    assert config.server.serving_count() == max(1, os.cpu_count() or 1)
    one = parse_config('[sessions.b]\nmechanisms = ["bytes-sha256"]\n', base=tmp_path, source="t")
    assert one.server.serving_count() == 1


def test_sigterm_with_a_configuration_file_ends_every_worker_without_a_kill(
    short_dir: Path, daemon_proc: list[subprocess.Popen[str]]
) -> None:
    """With ``--config`` every worker runs a reloader beside its server; the reloader kept the
    worker's nursery open after its server stopped, so each stop waited out the shutdown
    grace and SIGKILLed the workers (and a supervisor killed meanwhile left them running)."""
    process, _ = start(daemon_proc, write_config(short_dir))
    sock = str(short_dir / "s")

    async def some() -> dict[str, Any]:
        async with open_client(unix=sock) as connection:
            payload = b"one item"
            await connection.submit("bytes", bytes_binding(payload), [payload])
        return await both_workers(sock)

    pids = [worker["pid"] for worker in trio.run(some)["workers"]]
    err = stop(process)
    assert "workers_killed_at_stop" not in err and "did not end" not in err, err
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
