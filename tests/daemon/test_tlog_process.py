"""The transparency log with real ``evidenced serve`` processes
(``docs/spec/transparency.md §6.4``, ``§7``, ``§9``): SIGKILL under load then restart (every
answered decision's receipt verifies against a checkpoint signed after the restart), and the
command-line path an operator and a client take: keygen, serve, ``submit --receipt``,
``log verify-receipt``, ``log monitor --socket``, ``log verify``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import clirun
import pytest
import trio
from daemon_testkit import bytes_binding, start_serve

from daemon import ClientError, SubmitResult, open_client
from daemon.cli import main as cli_main
from daemon.tlog import (
    VerifierKey,
    encode_receipt,
    make_receipt,
    open_checkpoint,
    verify_directory,
    verify_receipt,
)

CLI = [sys.executable, "-m", "daemon.cli"]
ORIGIN = "test.example/evidenced/process"


def setup(short_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, VerifierKey]:
    assert cli_main(["log", "keygen", "--origin", ORIGIN, "--out", str(short_dir / "log.key")]) == 0
    key = VerifierKey.parse(json.loads(capsys.readouterr().out)["verifier_key"])
    config = short_dir / "daemon.toml"
    config.write_text(
        f'[server]\nlisten = ""\nsocket = "{short_dir / "s"}"\n'
        f'[audit]\npath = "{short_dir / "audit.jsonl"}"\ndurability = "fsync"\n'
        f'[transparency]\nkey_file = "log.key"\norigin = "{ORIGIN}"\n'
        "checkpoint_interval = 0.2\n"
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
    )
    return config, key


def start(config: Path) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    return start_serve("--config", str(config))


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    assert process.returncode == 0


def test_sigkill_under_load_every_answered_decision_has_a_receipt_after_restart(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, key = setup(short_dir, capsys)
    process, ready = start(config)
    assert ready["transparency"]["origin"] == ORIGIN
    assert ready["transparency"]["verifier_key"] == key.encode()
    sock = str(short_dir / "s")
    answered: list[SubmitResult] = []

    async def load() -> None:
        async def client_loop(worker: int) -> None:
            try:
                async with open_client(unix=sock) as client:
                    for i in range(10**6):
                        payload = b"worker %d item %d" % (worker, i)
                        answered.append(
                            await client.submit("bytes", bytes_binding(payload), [payload])
                        )
            except ClientError:
                return

        async with trio.open_nursery() as nursery:
            for worker in range(16):
                nursery.start_soon(client_loop, worker)
            while len(answered) < 300:
                await trio.sleep(0.01)
            os.kill(process.pid, signal.SIGKILL)

    trio.run(load)
    process.communicate(timeout=10)
    assert process.returncode == -signal.SIGKILL
    before = (short_dir / "audit.jsonl.tlog" / "checkpoint").read_bytes()
    # The checkpoint on disk lags the answers (signed at most every 0.2 s): the restart must
    # rehash the rest from the lines and sign them.
    process, _ = start(config)
    try:

        async def receipts() -> tuple[bytes, list[dict[str, Any]]]:
            async with open_client(unix=sock) as client:
                note = await client.checkpoint()
                size = open_checkpoint(note, key).checkpoint.size
                made = []
                for result in answered:
                    assert result.log_index is not None and result.audit_line is not None
                    proof = await client.inclusion_proof(result.log_index, size)
                    made.append(
                        make_receipt(
                            result.audit_line.encode(), result.log_index, size, proof, note
                        )
                    )
                return note, made

        note, made = trio.run(receipts)
    finally:
        stop(process)
    assert note != before
    failures = [
        report
        for report in (verify_receipt(encode_receipt(receipt), key) for receipt in made)
        if not report.verified
    ]
    assert failures == [] and len(made) >= 300
    report = verify_directory(
        short_dir / "audit.jsonl.tlog", [short_dir / "audit.jsonl"], key, since=before
    )
    assert report.verified, report


def test_operator_and_client_command_lines(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, key = setup(short_dir, capsys)
    payload = short_dir / "item.bin"
    payload.write_bytes(b"evidence")
    process, _ = start(config)
    sock = str(short_dir / "s")
    try:
        monitor = [
            "log", "monitor", "--socket", sock, "--key", key.encode(),
            "--state", str(short_dir / "monitor.state"),
            "--evidence", str(short_dir / "evidence"), "--count", "1",
        ]  # fmt: skip
        assert cli_main(monitor) == 0
        first = json.loads(capsys.readouterr().out)
        assert first["observed"] == {"FIRST": 1}
        receipt = short_dir / "decision.receipt.json"
        submit = [
            "submit", "--socket", sock, "--session", "bytes", str(payload),
            "--receipt", str(receipt), "--key", key.encode(),
        ]  # fmt: skip
        status = cli_main(submit)
        decision = json.loads(capsys.readouterr().out)
        assert status == 0 and decision["log_index"] == decision["seq"] - 1
        assert cli_main(["log", "verify-receipt", str(receipt), "--key", key.encode()]) == 0
        checked = json.loads(capsys.readouterr().out)
        assert (checked["status"], checked["decision_id"]) == ("VERIFIED", decision["decision_id"])
        assert cli_main(monitor) == 0
        second = json.loads(capsys.readouterr().out)
        assert second["observed"] == {"GREW": 1}
    finally:
        stop(process)
    assert (
        cli_main(["log", "verify", str(short_dir / "audit.jsonl.tlog"), "--key", key.encode()]) == 0
    )
    assert json.loads(capsys.readouterr().out)["status"] == "VERIFIED"


def test_serve_refuses_a_world_readable_key_with_exit_65(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _ = setup(short_dir, capsys)
    os.chmod(short_dir / "log.key", 0o644)
    result = clirun.in_process_text(["serve", "--config", config])
    assert result.returncode == 65
    assert "group or others" in result.stderr
    assert json.loads(result.stdout)["error"]["code"] == "TRANSPARENCY_REFUSED"
    assert not (short_dir / "audit.jsonl.tlog").exists()
