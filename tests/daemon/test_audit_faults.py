"""Write faults inside the audit log writer, with a fault-injecting file wrapper.

:class:`FailingDisk` is a :class:`~daemon.audit._audit.FileOps` that really writes to the real file
until its budget of bytes is spent, then writes what fits (a partial write) and fails with
``ENOSPC``, as a full disk does; ``fsync`` can be made to fail with ``EIO``. Everything else
(the file, truncation, the writer task, trio) is real.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import trio

from daemon import AuditLog, AuditLogError, verify_log
from daemon.audit._audit import FileOps


class FailingDisk(FileOps):
    def __init__(self) -> None:
        self.budget: int | None = None  # bytes still writable; None: unlimited
        self.fsync_error = False
        self.writes = 0

    def write(self, fd: int, data: memoryview) -> int:
        self.writes += 1
        if self.budget is None:
            return os.write(fd, data)
        if self.budget == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = os.write(fd, data[: self.budget])
        self.budget -= written
        return written

    def fsync(self, fd: int) -> None:
        if self.fsync_error:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        os.fsync(fd)


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


async def test_partial_write_is_cut_back_to_the_last_whole_line_and_refused(
    tmp_path: Path,
) -> None:
    path, disk = tmp_path / "audit.jsonl", FailingDisk()
    log = AuditLog.open(path, file_ops=disk, retry_initial=60)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        first = await log.record("decision", decision_id="kept")
        before = path.read_bytes()
        disk.budget = 25  # the next line is torn after 25 bytes
        with pytest.raises(AuditLogError, match="No space left"):
            await log.record("decision", decision_id="torn")
        assert path.read_bytes() == before  # nothing of the torn line is left
        assert log.durable == first and log.last_seq == first.seq  # no seq was spent
        status = log.status()
        assert status["failed"] and status["failure"]["truncated_bytes"] == 25
        assert status["anchor"] == first.anchor
        log.close_sync()
        nursery.cancel_scope.cancel()
    assert verify_log(path).intact


async def test_records_during_an_outage_are_refused_at_once_and_counted(tmp_path: Path) -> None:
    path, disk = tmp_path / "audit.jsonl", FailingDisk()
    log = AuditLog.open(path, file_ops=disk, retry_initial=60)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        disk.budget = 0
        with pytest.raises(AuditLogError):
            await log.record("decision", decision_id="a")
        writes = disk.writes
        for event in ("decision", "refusal", "daemon_stop"):
            with pytest.raises(AuditLogError, match="cannot be written since"):
                await log.record(event, n=1)
        assert disk.writes == writes  # refused without touching the disk
        assert log.failure_reason is not None and "3 requests refused" in log.failure_reason
        log.close_sync()
        nursery.cancel_scope.cancel()


async def test_outage_ends_with_an_audit_recovered_line_and_no_seq_gap(tmp_path: Path) -> None:
    path, disk = tmp_path / "audit.jsonl", FailingDisk()
    log = AuditLog.open(path, file_ops=disk, retry_initial=0.01, retry_max=0.02)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await log.record("decision", decision_id="before")
        disk.budget = 7
        with pytest.raises(AuditLogError):
            await log.record("decision", decision_id="lost-1")
        with pytest.raises(AuditLogError):
            await log.record("refusal", decision_id="lost-2")
        with trio.fail_after(5):  # retries keep failing while the disk is still full
            while log.status()["failure"]["attempts"] < 2:
                await trio.sleep(0.01)
        assert log.failure_reason is not None
        disk.budget = None  # space freed
        with trio.fail_after(5):
            while log.failure_reason is not None:
                await trio.sleep(0.01)
        after = await log.record("decision", decision_id="after")
        await log.close()
    lines = records(path)
    assert [line["event"] for line in lines] == ["decision", "audit_recovered", "decision"]
    assert [line["seq"] for line in lines] == [1, 2, 3] and after is not None and after.seq == 3
    recovered = lines[1]
    assert recovered["refused"] == 2 and recovered["lost"] == 0
    assert recovered["unrecorded"] == {"decision": 1, "refusal": 1}
    assert recovered["truncated_bytes"] == 7 and recovered["attempts"] >= 2
    assert "No space left" in str(recovered["error"])
    assert verify_log(path).intact


async def test_failed_fsync_is_an_outage_and_its_written_line_is_cut_back(tmp_path: Path) -> None:
    path, disk = tmp_path / "audit.jsonl", FailingDisk()
    log = AuditLog.open(path, file_ops=disk, retry_initial=60)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await log.record("decision", decision_id="kept")
        before = path.read_bytes()
        disk.fsync_error = True
        with pytest.raises(AuditLogError, match="Input/output error"):
            await log.record("decision", decision_id="unsynced")
        assert path.read_bytes() == before  # written but never durable: not kept
        log.close_sync()
        nursery.cancel_scope.cancel()


async def test_lines_rendered_behind_a_failing_batch_fail_with_it(tmp_path: Path) -> None:
    path, disk = tmp_path / "audit.jsonl", FailingDisk()
    log = AuditLog.open(path, file_ops=disk, retry_initial=60)
    outcomes: list[str] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        disk.budget = 0

        async def one(index: int) -> None:
            try:
                await log.record("decision", decision_id=f"d{index}")
                outcomes.append("written")
            except AuditLogError:
                outcomes.append("refused")

        async with trio.open_nursery() as writers:
            for index in range(50):
                writers.start_soon(one, index)
        assert outcomes == ["refused"] * 50
        assert log.last_seq == 0 and log.status()["failure"]["refused"] == 50
        log.close_sync()
        nursery.cancel_scope.cancel()
    assert path.read_bytes() == b""


async def test_durability_none_counts_answered_lines_a_failure_lost(tmp_path: Path) -> None:
    path, disk = tmp_path / "audit.jsonl", FailingDisk()
    log = AuditLog.open(path, durability="none", file_ops=disk, retry_initial=0.01)
    async with trio.open_nursery() as nursery:
        disk.budget = 0
        for index in range(3):  # answered at once: durability none
            assert await log.record("decision", decision_id=f"d{index}") is not None
        await nursery.start(log.run)
        with trio.fail_after(5):
            while log.failure_reason is None:
                await trio.sleep(0.01)
        disk.budget = None
        with trio.fail_after(5):
            while log.failure_reason is not None:
                await trio.sleep(0.01)
        await log.close()
    recovered = records(path)[0]
    assert recovered["event"] == "audit_recovered" and recovered["seq"] == 1
    assert recovered["lost"] == 3 and recovered["refused"] == 0


async def test_close_during_an_outage_is_not_clean_and_writes_nothing(tmp_path: Path) -> None:
    path, disk = tmp_path / "audit.jsonl", FailingDisk()
    log = AuditLog.open(path, file_ops=disk, retry_initial=60)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await log.record("decision", decision_id="kept")
        disk.budget = 0
        with pytest.raises(AuditLogError):
            await log.record("decision", decision_id="lost")
        before = path.read_bytes()
        assert not await log.recover()  # one more try, as shutdown makes: still full
        await log.close()
    assert log.failure_reason is not None and "cannot be written" in log.failure_reason
    assert path.read_bytes() == before


async def test_unencodable_answer_withdraws_its_line_without_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)

        def unencodable(ref: object) -> bytes:
            raise ValueError("cannot be encoded")

        with pytest.raises(ValueError):
            await log.record_answer("decision", unencodable, decision_id="never")
        ref, answer = await log.record_answer(
            "decision", lambda line: f"answer for {line}", decision_id="kept"
        )
        await log.close()
    assert ref is not None and ref.seq == 1 and answer.startswith("answer for AuditRef(seq=1")
    assert [r["decision_id"] for r in records(path)] == ["kept"]
    assert verify_log(path).intact
