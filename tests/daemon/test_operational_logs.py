"""Operational logs (docs/operations.md, daemon/wire/_logs.py): every message the daemon and the CLI
print for humans is one structlog event with a name, a level, a timestamp and fields, rendered
as console text or as JSON lines; the audit log is untouched.

Real processes: ``evidenced serve`` is started, signalled and read back from its stderr.
"""

from __future__ import annotations

import ast
import io
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from daemon_testkit import ROOT, read_stderr_until

from daemon.wire import _logs as logs

CLI = [sys.executable, "-m", "daemon.cli"]
EVENT_CALL = re.compile(r"logs\.(?:(?:debug|info|warning|error)\(|log\(\s*\w+,)\s*\"([a-z_]+)\"")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JOURNAL_STREAM",)}
    env.pop("EVIDENCED_LOG_FORMAT", None)
    env.pop("EVIDENCED_LOG_LEVEL", None)
    env.update(extra)
    return env


def _serve(
    short_dir: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    process = subprocess.Popen(
        [*CLI, "serve", "--socket", str(short_dir / "s"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=short_dir,
        env=env or _env(),
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise AssertionError(f"serve did not start: {process.communicate(timeout=10)[1]!r}")
    return process, json.loads(line)


def _hup(process: subprocess.Popen[bytes], ready: dict[str, Any]) -> bytes:
    """SIGHUP once the daemon answers (its signal handlers are in place by then); returns its
    stderr up to the ``reload_unavailable`` line, so a SIGTERM sent next comes after it
    (:func:`daemon_testkit.read_stderr_until`: two signals may be handled out of order)."""
    health = [*CLI, "health", "--socket", ready["unix"]]
    assert subprocess.run(health, capture_output=True, env=_env(), timeout=60).returncode == 0
    process.send_signal(signal.SIGHUP)
    return read_stderr_until(process, b"reload_unavailable")


def _stop(process: subprocess.Popen[bytes], before: bytes = b"") -> str:
    """SIGTERM, then the daemon's whole stderr (``before``: what was already read of it)."""
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return (before + err).decode()


def _json_lines(err: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in err.splitlines()]  # every line is one JSON object
    for event in events:
        assert {"event", "level", "timestamp", "message", "logger", "pid"} <= event.keys(), event
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", event["timestamp"])
    return events


def test_the_daemons_messages_are_events_with_names_and_fields_not_sentences_only(
    short_dir: Path,
) -> None:
    """19 plain ``sys.stderr.write("evidenced: ...")`` lines, no timestamp, level
    or structure. Under ``--log-format json`` every stderr line of a daemon's life is a JSON
    event: the start (naming its listeners and sessions), a SIGHUP it cannot act on, the
    stop."""
    audit = short_dir / "audit.jsonl"
    process, ready = _serve(
        short_dir,
        "--log-format",
        "json",
        "--audit-log",
        str(audit),
        "--http",
        "127.0.0.1:0",
    )
    err = _stop(process, _hup(process, ready))  # the SIGHUP handled before the SIGTERM
    events = _json_lines(err)
    names = [event["event"] for event in events]
    assert "serving" in names and "reload_unavailable" in names and "shutdown" in names, names
    serving = events[names.index("serving")]
    assert serving["unix"] == ready["unix"] and serving["http"] == ready["http"]
    assert serving["sessions"] == ready["sessions"] and serving["level"] == "info"
    assert events[names.index("reload_unavailable")]["level"] == "warning"
    assert events[names.index("shutdown")]["signal"] == "SIGTERM"
    # the audit log is no operational log: its lines are its own, hash-chained
    lines = [json.loads(line) for line in audit.read_bytes().splitlines()]
    assert lines and all("line_digest" in line and "level" not in line for line in lines)


def test_under_systemd_journal_stream_the_default_is_json(short_dir: Path) -> None:
    """``$JOURNAL_STREAM`` names the stream systemd connected as ``DEVICE:INODE``: here the
    file the daemon's stderr is, as the journal's socket would be."""
    err = short_dir / "stderr"
    with err.open("wb") as stream:
        info = os.fstat(stream.fileno())
        process = subprocess.Popen(
            [*CLI, "serve", "--socket", str(short_dir / "s"), "--audit-log", "a.jsonl"],
            stdout=subprocess.PIPE,
            stderr=stream,
            cwd=short_dir,
            env=_env(JOURNAL_STREAM=f"{info.st_dev}:{info.st_ino}"),
        )
        assert process.stdout is not None and process.stdout.readline()
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == 0
    events = _json_lines(err.read_text())
    assert [e["event"] for e in events][:1] == ["serving"]


def test_an_inherited_journal_stream_that_is_not_stderr_keeps_the_console(
    short_dir: Path,
) -> None:
    """A shell started by a service inherits ``$JOURNAL_STREAM``, not the stream."""
    process, _ = _serve(short_dir, "--audit-log", "a.jsonl", env=_env(JOURNAL_STREAM="8:1"))
    err = _stop(process)
    assert err and not err.startswith("{") and "event=serving" in err


def test_log_level_warning_drops_the_info_events(short_dir: Path) -> None:
    process, ready = _serve(
        short_dir, "--audit-log", "a.jsonl", "--log-level", "warning", "--log-format", "json"
    )
    events = _json_lines(_stop(process, _hup(process, ready)))
    assert [e["event"] for e in events] == ["reload_unavailable"]


def test_the_console_rendering_has_a_timestamp_a_level_and_the_event_name(
    short_dir: Path,
) -> None:
    process, ready = _serve(short_dir, "--audit-log", "a.jsonl")
    err = _stop(process)
    serving = next(line for line in err.splitlines() if "event=serving" in line)
    assert re.match(r"\d{4}-\d\d-\d\dT[\d:.]+Z \[info\s*\] serving ", serving), serving
    assert f"unix={ready['unix']}" in serving and "[evidenced]" in serving


def test_serve_start_line_names_the_http_address(short_dir: Path) -> None:
    """With an HTTP listener, the stderr line named only the socket."""
    process, ready = _serve(short_dir, "--audit-log", "a.jsonl", "--http", "127.0.0.1:0")
    err = _stop(process)
    assert ready["http"] and f"http://{ready['http']}" in err, err


def test_serve_check_ends_with_a_newline(short_dir: Path) -> None:
    """``serve --check`` printed no trailing newline."""
    done = subprocess.run(
        [*CLI, "serve", "--check", "--socket", str(short_dir / "s")],
        capture_output=True,
        cwd=short_dir,
        env=_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(b"\n") and done.stderr.endswith(b"\n")
    assert json.loads(done.stdout)["status"] == "VALID"


def test_a_cli_message_becomes_a_json_event_and_stdout_keeps_its_one_document(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "missing.jsonl"
    done = subprocess.run(
        [*CLI, "audit", "verify", str(missing), "--log-format", "json"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert done.returncode == 66
    assert json.loads(done.stdout)["error"]["code"] == "INPUT_UNREADABLE"
    (event,) = _json_lines(done.stderr)
    assert event["event"] == "cli_message" and event["command"] == "evidenced audit verify"
    assert str(missing) in event["message"] and event["level"] == "error"


def test_an_unknown_log_format_is_a_usage_error() -> None:
    done = subprocess.run(
        [*CLI, "--log-format", "xml", "health"], capture_output=True, text=True, env=_env()
    )
    assert done.returncode == 2 and "--log-format" in json.loads(done.stdout)["error"]["message"]


def test_a_peer_text_cannot_forge_a_second_console_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    try:
        logs.configure("console", "info")
        hostile = "boom\n2026-01-01T00:00:00Z [error    ] forged\x1b[31m"
        logs.error("connection_failed", f"connection failed: {hostile}", error=hostile)
        logs.configure("json", "info")
        logs.error("connection_failed", hostile, error=hostile)
    finally:
        logs.configure()
    console, line = stream.getvalue().splitlines()
    assert "forged" in console and "\x1b" not in console
    assert json.loads(line)["error"] == hostile


def test_a_closed_stderr_loses_the_line_not_the_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    stream.close()
    monkeypatch.setattr(sys, "stderr", stream)
    logs.error("audit_write_failed", "closed stderr", error="ENOSPC")  # nothing raised


def test_no_daemon_module_writes_to_stderr_around_the_logs_room() -> None:
    """Every operational message goes through ``daemon.wire._logs`` (the old code had 19
    ``sys.stderr.write`` sites in the rooms)."""
    found = []
    for path in sorted((ROOT / "daemon").rglob("*.py")):
        if path.name == "_logs.py" and path.parent.name == "wire":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "write":
                target = node.value
                if isinstance(target, ast.Attribute) and target.attr == "stderr":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_every_event_the_code_writes_is_documented() -> None:
    names = set()
    for path in (ROOT / "daemon").rglob("*.py"):
        names |= set(EVENT_CALL.findall(path.read_text()))
    assert len(names) >= 15, names
    documented = (ROOT / "docs" / "operations.md").read_text()
    assert sorted(n for n in names if f"`{n}`" not in documented) == []
    assert "`cli_message`" in documented


def _reload_config(path: Path, mechanisms: str) -> None:
    path.write_text(
        '[server]\nlisten = ""\nsocket = "s"\nworker_processes = 1\n[audit]\npath = "a.jsonl"\n'
        f"[sessions.bytes]\nmechanisms = {mechanisms}\n"
    )


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_refused_reload_is_a_warning_and_an_applied_one_info(
    short_dir: Path, workers: str
) -> None:
    """A refused reload was logged at ``info`` (docs/operations.md says warning), without
    its ``status``. Refused: ``warning``, ``REFUSED``; applied: ``info``, ``APPLIED``."""
    config = short_dir / "evidenced.toml"
    _reload_config(config, '["bytes-sha256"]')
    process = subprocess.Popen(
        [*CLI, "serve", "--config", str(config), "--workers", workers, "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=short_dir,
        env=_env(),
    )
    assert process.stdout is not None and process.stdout.readline()
    seen = read_stderr_until(process, b'"event": "serving"')
    _reload_config(config, "3")  # not an array: refused
    process.send_signal(signal.SIGHUP)
    seen += read_stderr_until(process, b'"status": "REFUSED"')
    _reload_config(config, '["bytes-sha256"]')
    process.send_signal(signal.SIGHUP)
    seen += read_stderr_until(process, b'"status": "APPLIED"')
    events = _json_lines(_stop(process, seen))
    reloads = [(e["level"], e["status"]) for e in events if e["event"] == "config_reload"]
    assert ("warning", "REFUSED") in reloads and ("info", "APPLIED") in reloads, reloads
    assert all(level == ("warning" if status == "REFUSED" else "info") for level, status in reloads)


@pytest.mark.parametrize(
    ("argv", "exit_code", "level"),
    [
        (["health", "--socket", "/nonexistent/evidenced.sock"], 69, "error"),
        (["audit", "verify", "/"], 65, "warning"),  # not a regular file: refused input
        (["formation", "produce", "-"], 1, "warning"),  # not JSON: an INVALID verdict
        (["audit", "verify", "--anchor", "nonsense", "x"], 2, "warning"),
    ],
    ids=["unreachable", "rejected input", "invalid", "usage"],
)
def test_a_cli_failure_is_logged_at_warning_or_error(
    argv: list[str], exit_code: int, level: str
) -> None:
    """A CLI failure (exit 69) was an ``info`` event: the message an error ends a command with
    is ``error`` when the command could not do its work, ``warning`` when its input or request
    was refused (usage, rejected input, a verdict)."""
    done = subprocess.run(
        [*CLI, *argv, "--log-format", "json"],
        input="not json",
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert done.returncode == exit_code, done.stderr
    events = [e for e in _json_lines(done.stderr) if e["event"] == "cli_message"]
    assert events[-1]["level"] == level, events


def _console_serving_line(short_dir: Path, **env: str) -> bytes:
    """``serve``'s ``serving`` line as it is written to a terminal (a real pty for stderr)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [*CLI, "serve", "--socket", str(short_dir / "s"), "--audit-log", "a.jsonl"],
        stdout=subprocess.PIPE,
        stderr=terminal,
        cwd=short_dir,
        env=_env(**env),
    )
    os.close(terminal)
    try:
        assert process.stdout is not None and process.stdout.readline()
        seen = b""
        while b"serving" not in seen or not seen.endswith(b"\n"):
            readable, _, _ = select.select([controller], [], [], 30)
            assert readable, seen
            seen += os.read(controller, 65536)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
        os.close(controller)
    return next(line for line in seen.splitlines() if b"serving" in line)


def test_the_console_renderer_honours_no_color(short_dir: Path) -> None:
    """https://no-color.org: with ``NO_COLOR`` set (to anything but empty) no ANSI colour is
    written, even to a terminal; without it a terminal gets colours."""
    coloured = _console_serving_line(short_dir)
    assert b"\x1b[" in coloured, coloured
    plain = _console_serving_line(short_dir, NO_COLOR="1")
    assert b"\x1b[" not in plain and b"serving" in plain, plain
    assert b"\x1b[" in _console_serving_line(short_dir, NO_COLOR="")  # empty: as unset
