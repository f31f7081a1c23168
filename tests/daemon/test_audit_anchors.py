"""Durable heads, ``SEQ:DIGEST`` anchors, and the seq/digest every decision answer carries."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import clirun
import pytest
import trio
from daemon_testkit import UnencodableMechanism, binding_for, bytes_binding

from daemon import (
    AuditLog,
    HostedSession,
    ServiceUnavailable,
    open_client,
    open_server,
    parse_anchor,
    tail,
    verify_log,
)
from daemon.wire._protocol import (
    ClientConnection,
    Decision,
    HelloAccepted,
    ProtocolError,
    ServerConnection,
)
from session import BytesDigestMechanism


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """An ``evidenced`` command, in-process (``tests/test_cli_contract.py`` and
    ``tests/daemon/test_process.py`` keep the real-process smoke tests)."""
    return clirun.in_process_text(args)


async def write_log(path: Path, count: int) -> None:
    log = AuditLog.open(path)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        for index in range(count):
            await log.record("decision", decision_id=f"d{index}")
        await log.close()


async def test_head_taken_while_lines_are_pending_is_no_false_alarm_after_a_crash(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path, durability="none")  # answered before written: lines pend
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        for index in range(2):
            await log.record("decision", decision_id=f"written-{index}")
        with trio.fail_after(5):
            while log.pending:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()  # the writer stops: what follows stays pending
    for index in range(3):
        await log.record("decision", decision_id=f"pending-{index}")
    status = log.status()  # what an operator copies from `evidenced health`
    log.close_sync()  # the daemon is killed: pending lines never reach the file
    assert status["pending"] == 3 and status["seq"] == 2
    assert status["anchor"] == f"2:{status['head']}"
    for anchor in (status["head"], status["anchor"]):
        report = verify_log(path, anchors=(anchor,))
        assert report.intact, report.reason


async def test_decision_answer_carries_the_seq_and_digest_of_its_line(short_dir: Path) -> None:
    sessions = [HostedSession("bytes", (BytesDigestMechanism(),))]
    audit = short_dir / "audit.jsonl"
    async with (
        open_server(sessions, tcp=None, unix=str(short_dir / "s"), audit_path=str(audit)) as server,
        open_client(unix=server.unix_path) as client,
    ):
        results = [await client.submit("bytes", bytes_binding(b"x"), [b"x"]) for _ in range(3)]
        health = await client.health()
    lines = {r.get("decision_id"): r for r in tail(audit, 100)}
    for result in results:
        line = lines[result.decision_id]
        assert (result.seq, result.line_digest) == (line["seq"], line["line_digest"])
        assert result.to_dict()["seq"] == result.seq and result.anchor is not None
    assert health["audit"]["anchor"] == results[-1].anchor  # durable once answered (fsync)
    assert verify_log(audit, anchors=tuple(r.anchor or "" for r in results)).intact


async def test_unencodable_decision_leaves_no_line_and_no_gap(short_dir: Path) -> None:
    bad = UnencodableMechanism()
    sessions = [HostedSession("bad", (bad,)), HostedSession("bytes", (BytesDigestMechanism(),))]
    audit = short_dir / "audit.jsonl"
    async with open_server(sessions, tcp=None, unix=str(short_dir / "s"), audit_path=str(audit)):
        async with open_client(unix=str(short_dir / "s")) as client:
            with pytest.raises(ServiceUnavailable) as caught:
                await client.submit("bad", binding_for(bad, [b"a"]), [b"a"])
        assert caught.value.code == "INTERNAL"
    events = [(r["event"], r.get("code")) for r in tail(audit, 100)]
    assert events == [("daemon_start", None), ("refusal", "INTERNAL"), ("daemon_stop", None)]
    assert verify_log(audit).intact


def test_decision_frame_round_trips_seq_and_digest_and_refuses_half_or_bad_values() -> None:
    digest = "sha256:" + "a" * 64
    decision = Decision(3, "id", "bytes", {"outcome": "PASS"}, 7, digest)
    client = ClientConnection()
    accepted = HelloAccepted(1, "evidenced/test", {})
    client.receive_data(ServerConnection.send(accepted) + ServerConnection.send(decision))
    assert client.next_event() == accepted
    assert client.next_event() == decision
    header: dict[str, Any] = {
        "kind": "decision",
        "request_id": 3,
        "decision_id": "id",
        "session": "bytes",
        "result": {},
    }
    assert Decision.from_header(header).seq is None  # an older server's header
    for seq, line_digest in (
        (7, None),
        (None, digest),
        (0, digest),
        (7, "sha256:xyz"),
        (True, digest),
    ):
        with pytest.raises(ProtocolError):
            Decision.from_header({**header, "seq": seq, "line_digest": line_digest})


def test_anchor_forms() -> None:
    digest = "sha256:" + "0f" * 32
    assert parse_anchor(f"12:{digest}") == (12, digest)
    assert parse_anchor(digest) == (None, digest)
    for bad in (
        "",
        "12",
        f"0:{digest}",
        f"-1:{digest}",
        f"12:{digest[:-1]}",
        f"x:{digest}",
        "sha256:",
    ):
        with pytest.raises(ValueError):
            parse_anchor(bad)


async def test_cli_malformed_anchor_is_a_usage_error_not_broken(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 2)
    result = run_cli("audit", "verify", str(path), "--anchor", "not-a-digest")
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["code"] == "USAGE"
    assert "SEQ:sha256" in result.stderr and "Traceback" not in result.stderr


async def test_cli_anchor_beyond_the_end_reports_a_cut_back_log_without_line_none(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 4)
    anchor = f"4:{verify_log(path).head}"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]))  # whole lines cut off the end
    result = run_cli("audit", "verify", str(path), "--anchor", anchor)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["status"] == "BROKEN" and report["first_bad_line"] is None
    assert "ends at seq 2" in report["reason"]
    assert "None" not in result.stderr and "cut back" in result.stderr


async def test_cli_seq_anchor_with_another_digest_names_the_rewritten_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    forged = "2:sha256:" + "ee" * 32
    result = run_cli("audit", "verify", str(path), "--anchor", forged)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["first_bad_line"] == 2 and "rewritten" in report["reason"]
    genuine = tail(path, 3)[1]
    assert run_cli("audit", "verify", str(path), "--anchor", genuine["line_digest"]).returncode == 0


async def test_cli_anchor_before_the_given_files_is_not_vouched_for(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path, rotate_bytes=200)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        first = await log.record("decision", decision_id="old")
        for index in range(3):
            await log.record("decision", decision_id=f"d{index}")
        await log.close()
    assert first is not None and log.rotations >= 1
    result = run_cli("audit", "verify", str(path), "--anchor", first.anchor)
    assert result.returncode == 1 and "earlier rotated files" in result.stderr
