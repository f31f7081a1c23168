"""Service life of ``evidenced serve``: SIGHUP reload, systemd notification and socket
activation, the embedded ``daemon.serve`` and its signals, the audit log's directories.

Every daemon here is a real ``evidenced serve`` (or ``daemon.serve``) process. systemd itself
does not run on this machine (no ``/run/systemd/system``), so the service manager is played by
the test: a datagram socket as ``NOTIFY_SOCKET`` and a listening socket passed as descriptor 3
with ``LISTEN_FDS``/``LISTEN_PID``, exactly what systemd hands a ``Type=notify`` service.
Defects this file pins: SIGHUP killed ``serve`` without a ``daemon_stop`` line; an embedded
``daemon.serve`` ignored SIGTERM (the process died with no ``daemon_stop``); ``--audit-log`` in
a missing directory failed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import clirun
import pytest
from daemon_testkit import ROOT, bytes_binding, read_stderr_until

from daemon import open_client
from daemon.audit._audit import tail
from session import EvidenceBounds

CLI = [sys.executable, "-m", "daemon.cli"]


def _config(path: Path, max_bytes: int, *, extra: str = "") -> None:
    path.write_text(
        '[server]\nlisten = ""\nsocket = "s"\nworker_processes = 1\n[audit]\npath = "audit.jsonl"\n'
        f'[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
        f"max_evidence_bytes = {max_bytes}\n{extra}"
    )


def _start(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[Any, dict[str, Any]]:
    process = subprocess.Popen(
        [*CLI, "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise AssertionError(f"serve did not start: {process.communicate(timeout=10)[1]!r}")
    return process, json.loads(line)


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _last_event(path: Path) -> dict[str, Any]:
    lines = tail(str(path), 1)
    return lines[0] if lines else {}


@pytest.fixture
def served(short_dir: Path) -> Iterator[tuple[Any, dict[str, Any], Path]]:
    config = short_dir / "evidenced.toml"
    _config(config, 4)
    process, ready = _start("--config", str(config), cwd=short_dir)
    try:
        yield process, ready, config
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


async def test_sighup_changes_a_sessions_bounds_without_dropping_a_connection(
    served: tuple[Any, dict[str, Any], Path], short_dir: Path
) -> None:
    process, ready, config = served
    audit = short_dir / "audit.jsonl"
    evidence = b"8 bytes!"
    binding = bytes_binding(evidence, bounds=EvidenceBounds(1, 10))
    async with open_client(unix=ready["unix"]) as client:
        before = {s["name"]: s["bounds"] for s in await client.list_sessions()}
        assert before["bytes"]["max_evidence_bytes"] == 4
        _config(config, 10)
        process.send_signal(signal.SIGHUP)
        _wait_for(lambda: _last_event(audit).get("event") == "config_reload", "config_reload")
        reloaded = _last_event(audit)
        assert reloaded["status"] == "APPLIED" and reloaded["source"] == str(config)
        # The same connection: the new bounds admit what the old ones refused.
        after = {s["name"]: s["bounds"] for s in await client.list_sessions()}
        assert after["bytes"]["max_evidence_bytes"] == 10
        decision = await client.submit("bytes", binding, [evidence])
        assert decision.outcome == "PASS"
        # A bad new configuration is refused with a message; the old one keeps serving.
        config.write_text("[sessions.bytes]\nmechanisms = 3\n")
        process.send_signal(signal.SIGHUP)
        _wait_for(
            lambda: _last_event(audit).get("status") == "REFUSED", "the refused config_reload"
        )
        assert "sessions.bytes.mechanisms: expected array" in _last_event(audit)["reason"]
        assert (await client.submit("bytes", binding, [evidence])).outcome == "PASS"
        # A change that needs a restart is refused too, naming the key.
        _config(config, 10)  # valid again, but for one key [server] cannot change live
        config.write_text(
            config.read_text().replace("worker_processes = 1", "worker_processes = 3")
        )
        process.send_signal(signal.SIGHUP)
        _wait_for(
            lambda: "worker_processes" in str(_last_event(audit).get("reason")),
            "the restart-only refusal",
        )
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert _last_event(audit)["event"] == "daemon_stop"
    assert b"configuration reloaded" in err and b"not reloaded" in err


def test_sighup_without_a_config_file_does_not_stop_the_daemon(short_dir: Path) -> None:
    """SIGHUP used to kill ``serve`` (the default action) with no ``daemon_stop`` line."""
    log = short_dir / "new" / "dirs" / "audit.jsonl"  # created, each directory 0700
    process, ready = _start(
        "--socket", str(short_dir / "s"), "--audit-log", str(log), cwd=short_dir
    )
    try:
        for directory in (log.parent, log.parent.parent):
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        process.send_signal(signal.SIGHUP)
        read_stderr_until(process, b"no configuration to reload")  # said, before the SIGTERM
        health = clirun.in_process(["health", "--socket", ready["unix"]])
        assert health.returncode == 0, health.stderr
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert _last_event(log)["event"] == "daemon_stop"


def test_embedded_serve_stops_gracefully_on_sigterm_by_default(short_dir: Path) -> None:
    """``daemon.serve()`` used to leave SIGTERM to Python's default: death, no ``daemon_stop``."""
    log = short_dir / "audit.jsonl"
    program = textwrap.dedent(
        f"""
        import trio, daemon
        from session import BytesDigestMechanism

        async def main():
            async with trio.open_nursery() as nursery:
                await nursery.start(lambda task_status: daemon.serve(
                    {{"bytes": [BytesDigestMechanism()]}}, tcp=None, unix={str(short_dir / "s")!r},
                    audit_path={str(log)!r}, worker_processes=1, task_status=task_status))
                print("ready", flush=True)

        trio.run(main)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
    )
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert _last_event(log)["event"] == "daemon_stop"


def _unit(name: str) -> dict[str, list[str]]:
    """The ``Key=value`` settings of a packaged unit file (comments and sections dropped)."""
    settings: dict[str, list[str]] = {}
    for line in (ROOT / "packaging" / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_the_packaged_config_example_is_valid() -> None:
    result = clirun.in_process(["config", "check", ROOT / "packaging" / "evidenced.toml"])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sessions"] == ["descriptor", "formation"]


def test_the_packaged_unit_runs_the_daemon_under_a_service_manager(short_dir: Path) -> None:
    """The unit's ExecStart, run as systemd would run it (``/run/systemd/system`` is absent
    here, so systemd-run cannot): Type=notify with NOTIFY_SOCKET, the socket unit's listener as
    descriptor 3, STATE_DIRECTORY, WATCHDOG_USEC; ExecReload's SIGHUP; SIGTERM. What the
    manager hears: READY once serving on the inherited socket, WATCHDOG pings,
    RELOADING/READY around the reload, STOPPING."""
    service, sockets = _unit("evidenced.service"), _unit("evidenced.socket")
    assert service["Type"] == ["notify"] and service["StateDirectory"] == ["evidenced"]
    assert service["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    state, run = short_dir / "state", short_dir / "run"
    state.mkdir(mode=0o700)
    config = short_dir / "evidenced.toml"
    config.write_text(
        (ROOT / "packaging" / "evidenced.toml")
        .read_text()
        .replace("/var/lib/evidenced", str(state))
        .replace("/run/evidenced", str(run))
    )
    command = service["ExecStart"][0].split()
    assert command[:2] == ["/usr/local/bin/evidenced", "serve"]
    argv = [*CLI, *command[1:]]
    argv[argv.index("/etc/evidenced/evidenced.toml")] = str(config)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(short_dir / "notify"))
    notify.settimeout(20)
    assert sockets["ListenStream"] == ["/run/evidenced.sock"]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(short_dir / "activated"))
    listener.listen(16)
    env = {
        **os.environ,
        "NOTIFY_SOCKET": str(short_dir / "notify"),
        "WATCHDOG_USEC": "200000",
        "STATE_DIRECTORY": str(state),
    }
    fd = listener.fileno()
    # What systemd does after its fork: the socket as descriptor 3, LISTEN_PID the service's
    # own pid (exec keeps it), then exec.
    launcher = (
        "import os, sys\n"
        f"os.dup2({fd}, 3)\n"
        "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1')\n"
        f"os.execv(sys.executable, {argv!r})\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", launcher],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
        pass_fds=(fd,),
    )
    try:

        def expect(state: str) -> str:
            while True:
                message = notify.recv(4096).decode()
                if state in message.split("\n"):
                    return message

        assert f"MAINPID={process.pid}" in expect("READY=1")
        assert process.stdout is not None
        assert json.loads(process.stdout.readline())["status"] == "serving"
        health = clirun.in_process(["health", "--socket", short_dir / "activated"])
        assert health.returncode == 0, health.stderr
        assert (state / "audit.jsonl").is_file()
        expect("WATCHDOG=1")
        process.send_signal(signal.SIGHUP)  # ExecReload
        expect("RELOADING=1")
        expect("READY=1")
        process.send_signal(signal.SIGTERM)  # KillSignal
        expect("STOPPING=1")
        _, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert _last_event(state / "audit.jsonl")["event"] == "daemon_stop"
        assert (short_dir / "activated").exists()  # systemd's socket: not ours to unlink
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
        notify.close()
        listener.close()
