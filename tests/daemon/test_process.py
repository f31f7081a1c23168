"""The daemon as a process: CLI exit codes, SIGTERM with requests in flight, SIGKILL under
load then restart, and a malformed audit log at startup.

Every daemon here is a real ``evidenced serve`` process. The client commands talking to it
(``submit``, ``sessions``, ``health``, ``audit``) run in-process through ``daemon.cli.main``;
``test_cli_unreachable_daemon_exits_69`` runs the client as a real process too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clirun
import pytest
import testdata
import trio
from daemon_testkit import (
    FORMATION_FIXTURES,
    ROOT,
    binding_for,
    formation_pair,
    read_stderr_until,
    start_serve,
)

from daemon import ClientError, open_client, verify_log
from daemon.audit._audit import tail
from mechanism.formation import formation_binding

CLI = [sys.executable, "-m", "daemon.cli"]


def stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    return process.returncode, err


def run_cli(*args: str) -> clirun.CliResult:
    """A client command, in-process (the daemon it talks to is a real process)."""
    return clirun.in_process(args)


def run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    """``evidenced serve`` as a process that is expected to exit at once."""
    return subprocess.run(
        [*CLI, "serve", *args], capture_output=True, text=True, cwd=ROOT, timeout=60
    )


@pytest.fixture
def daemon_proc(short_dir: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    process, ready = start_serve(
        "--socket", str(short_dir / "s"), "--audit-log", str(short_dir / "audit.jsonl")
    )
    try:
        yield process, ready
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)


def test_cli_submit_exit_codes_and_one_json_document(
    daemon_proc: tuple[subprocess.Popen[str], dict[str, Any]], short_dir: Path
) -> None:
    process, ready = daemon_proc
    sock = ready["unix"]
    cases = {"atom": 0, "tampered": 1, "unsupported-profile": 3}
    for name, code in cases.items():
        result = run_cli(
            "submit", "--socket", sock, "--session", "formation",
            str(FORMATION_FIXTURES / f"{name}.subject.json"),
            str(FORMATION_FIXTURES / f"{name}.certificate.json"),
        )  # fmt: skip
        assert result.returncode == code, result.err
        document = json.loads(result.stdout)
        assert document["decision_id"] and document["session"] == "formation"
        assert "Traceback" not in result.err
    big = short_dir / "big.bin"
    big.write_bytes(b"z" * 300_000)
    oversize = run_cli("submit", "--socket", sock, "--session", "formation", str(big), str(big))
    # the honest binding cannot be built for non-formation bytes: rejected input
    assert oversize.returncode == 65
    binding = short_dir / "binding.json"
    subject, certificate = formation_pair("atom")
    binding.write_text(json.dumps(formation_binding(subject, certificate).to_dict()))
    refused = run_cli(
        "submit", "--socket", sock, "--session", "formation", "--binding", str(binding),
        str(big), str(big),
    )  # fmt: skip
    assert refused.returncode == 65
    assert json.loads(refused.stdout)["error"]["code"] == "EVIDENCE_BYTES_EXCEEDED"
    sessions = run_cli("sessions", "--socket", sock)
    assert sessions.returncode == 0
    assert {s["name"] for s in json.loads(sessions.stdout)["sessions"]} >= {"formation"}
    health = run_cli("health", "--socket", sock)
    assert health.returncode == 0 and json.loads(health.stdout)["decisions"] == 3
    code, err = stop(process)
    assert code == 0, err
    audit = ready["audit_log"]
    verified = run_cli("audit", "verify", audit)
    assert verified.returncode == 0 and json.loads(verified.stdout)["status"] == "INTACT"
    tailed = run_cli("audit", "tail", audit, "-n", "2")
    assert [r["event"] for r in json.loads(tailed.stdout)] == ["refusal", "daemon_stop"]


def test_cli_unreachable_daemon_exits_69(short_dir: Path) -> None:
    args = ("health", "--socket", str(short_dir / "nobody"))
    result = clirun.subprocess_run(args, cwd=ROOT)
    assert result.returncode == 69
    assert json.loads(result.stdout)["error"]["code"] == "UNREACHABLE"
    assert result == run_cli(*args)


def test_cli_audit_verify_names_the_first_bad_line(short_dir: Path) -> None:
    audit = short_dir / "audit.jsonl"
    process, _ = start_serve("--socket", str(short_dir / "s"), "--audit-log", str(audit))
    assert stop(process)[0] == 0
    head = json.loads(run_cli("audit", "verify", str(audit)).stdout)["head"]
    assert run_cli("audit", "verify", str(audit), "--anchor", head).returncode == 0
    foreign = "sha256:" + "ab" * 32
    unanchored = run_cli("audit", "verify", str(audit), "--anchor", foreign)
    assert unanchored.returncode == 1 and foreign in json.loads(unanchored.stdout)["reason"]
    lines = audit.read_bytes().splitlines(keepends=True)
    audit.write_bytes(lines[0].replace(b'"daemon_start"', b'"daemon_stort"') + b"".join(lines[1:]))
    result = run_cli("audit", "verify", str(audit))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["status"] == "BROKEN" and report["first_bad_line"] == 1


def test_malformed_audit_log_at_startup_is_reported_never_truncated(short_dir: Path) -> None:
    audit = short_dir / "audit.jsonl"
    process, _ = start_serve("--socket", str(short_dir / "s"), "--audit-log", str(audit))
    assert stop(process)[0] == 0
    # An edited whole line (unlike a torn tail, which start-up moves aside: test_audit_files).
    audit.write_bytes(audit.read_bytes().replace(b'"daemon_stop"', b'"daemon_stap"'))
    before = audit.read_bytes()
    result = subprocess.run(
        [*CLI, "serve", "--socket", str(short_dir / "s"), "--audit-log", str(audit)],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 65
    assert "line 2" in result.stderr and "Traceback" not in result.stderr
    assert audit.read_bytes() == before


# The test kit and the data locator it imports, for daemons started from a script.
TEST_SUPPORT_PATHS = [str(Path(__file__).resolve().parent), str(Path(testdata.__file__).parent)]


def start_slow_host(short_dir: Path, seconds: float) -> subprocess.Popen[str]:
    """A host-API daemon (``daemon.serve`` with ``handle_signals``) whose mechanism sleeps."""
    script = short_dir / "host.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, trio
            from functools import partial
            sys.path[:0] = {TEST_SUPPORT_PATHS!r}
            from daemon_testkit import SlowMechanism
            from daemon import HostedSession, ServerConfig, serve

            async def main():
                config = ServerConfig(tcp=None, unix={str(short_dir / "s")!r},
                                      audit_path={str(short_dir / "audit.jsonl")!r},
                                      worker_processes=8, inline_max_bytes=0)
                mechanism = SlowMechanism(seconds={seconds!r})
                sessions = [HostedSession("slow", (mechanism,))]
                async with trio.open_nursery() as nursery:
                    await nursery.start(partial(serve, sessions, config, handle_signals=True))
                    print("ready", flush=True)

            trio.run(main)
            """
        )
    )
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def test_sigterm_with_requests_in_flight_finishes_them(short_dir: Path) -> None:
    """SIGTERM while 6 requests evaluate: all 6 are answered, logged, and the exit is 0."""
    process = start_slow_host(short_dir, 1.0)
    results: list[Any] = []
    from daemon_testkit import SlowMechanism

    slow = SlowMechanism()

    async def main() -> None:
        async def one(index: int) -> None:
            async with open_client(unix=str(short_dir / "s")) as client:
                item = bytes([index])
                results.append(await client.submit("slow", binding_for(slow, [item]), [item]))

        async with trio.open_nursery() as nursery:
            for index in range(6):
                nursery.start_soon(one, index)
            async with open_client(unix=str(short_dir / "s")) as client:
                with trio.fail_after(5):
                    while (await client.health())["in_flight"] < 6:
                        await trio.sleep(0.02)
            process.send_signal(signal.SIGTERM)

    trio.run(main)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert [r.outcome for r in results] == ["PASS"] * 6
    records = tail(short_dir / "audit.jsonl", 100)
    logged = {r.get("decision_id") for r in records}
    assert {r.decision_id for r in results} <= logged
    assert records[-1]["event"] == "daemon_stop"
    assert verify_log(short_dir / "audit.jsonl").intact


def test_sigkill_under_load_then_restart_keeps_every_acknowledged_decision(
    short_dir: Path,
) -> None:
    audit = short_dir / "audit.jsonl"
    sock = str(short_dir / "s")
    process, _ = start_serve("--socket", sock, "--audit-log", str(audit))
    subject, certificate = formation_pair("atom")
    acknowledged: list[str] = []

    async def load() -> None:
        async def client_loop() -> None:
            try:
                async with open_client(unix=sock) as client:
                    digest = (await client.list_sessions())[-1]["mechanisms"][0]
                    binding = formation_binding(
                        subject, certificate, mechanism_digest=digest["mechanism_digest"]
                    )
                    while True:
                        decision = await client.submit("formation", binding, [subject, certificate])
                        acknowledged.append(decision.decision_id)
            except ClientError:
                return

        async with trio.open_nursery() as nursery:
            for _ in range(32):
                nursery.start_soon(client_loop)
            while len(acknowledged) < 200:
                await trio.sleep(0.01)
            os.kill(process.pid, signal.SIGKILL)

    trio.run(load)
    process.communicate(timeout=10)
    assert process.returncode == -signal.SIGKILL
    report = verify_log(audit)
    assert report.intact, report
    logged = {r.get("decision_id") for r in tail(audit, 10**6)}
    missing = [d for d in acknowledged if d not in logged]
    assert not missing
    # Restart on the same log: the chain continues.
    process, _ = start_serve("--socket", sock, "--audit-log", str(audit))
    code, err = stop(process)
    assert code == 0, err
    after = verify_log(audit)
    assert after.intact and after.lines == report.lines + 2


def test_invalid_config_is_rejected_input(short_dir: Path) -> None:
    config = short_dir / "bad.toml"
    config.write_text('[server]\nlisten = 7433\n[sessions.x]\nmechanisms = ["formation"]\n')
    result = run_serve("--config", str(config))
    assert result.returncode == 65 and "server.listen" in result.stderr


def test_listen_on_a_busy_address_is_unavailable(short_dir: Path) -> None:
    first, ready = start_serve(
        "--listen", "127.0.0.1:0", "--audit-log", str(short_dir / "a1.jsonl")
    )
    try:
        result = run_serve("--listen", ready["tcp"], "--audit-log", str(short_dir / "a2.jsonl"))
        assert result.returncode == 69
    finally:
        stop(first)


def test_second_sigterm_cancels_in_flight_requests_and_still_exits_cleanly(
    short_dir: Path,
) -> None:
    process = start_slow_host(short_dir, 20.0)
    from daemon_testkit import SlowMechanism

    slow = SlowMechanism()
    outcome: list[str] = []

    async def main() -> None:
        async def stuck() -> None:
            try:
                async with open_client(unix=str(short_dir / "s")) as client:
                    await client.submit("slow", binding_for(slow, [b"x"]), [b"x"])
                    outcome.append("answered")
            except ClientError as error:
                outcome.append(type(error).__name__)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stuck)
            async with open_client(unix=str(short_dir / "s")) as client:
                with trio.fail_after(5):
                    while (await client.health())["in_flight"] < 1:
                        await trio.sleep(0.02)
            process.send_signal(signal.SIGTERM)
            # the second only once the first was handled (two signals may be taken out of
            # order, and the same signal twice before it is handled counts once)
            await trio.to_thread.run_sync(read_stderr_until, process, b"SIGTERM received")
            process.send_signal(signal.SIGTERM)

    trio.run(main)
    _, err = process.communicate(timeout=15)
    assert process.returncode == 0, err
    assert "second SIGTERM" in err
    assert outcome == ["TransportError"]
    records = tail(short_dir / "audit.jsonl", 10)
    assert records[-1]["event"] == "daemon_stop"
    cancelled = [r for r in records if r.get("code") == "SHUTTING_DOWN"]
    assert len(cancelled) == 1 and cancelled[0]["session"] == "slow"
    assert verify_log(short_dir / "audit.jsonl").intact
