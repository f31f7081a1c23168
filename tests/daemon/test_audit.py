"""The audit log: hash chain, tamper detection, durability, group commit, restarts, overflow."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import trio

from daemon import GENESIS, AuditLog, AuditLogCorrupt, AuditLogError, AuditRef, tail, verify_log
from daemon.audit._audit import render_line, seal


async def write_log(path: Path, count: int, **options: object) -> None:
    log = AuditLog.open(path, **options)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        for index in range(count):
            await log.record("decision", decision_id=f"d{index}", outcome="PASS")
        await log.close()


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def rewrite(path: Path, new_lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in new_lines))


async def test_lines_form_a_chain_from_genesis(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    records = [json.loads(line) for line in lines(path)]
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[0]["prev"] == GENESIS
    for before, after in itertools.pairwise(records):
        assert after["prev"] == before["line_digest"]
    for raw, record in zip(lines(path), records, strict=True):
        body = {key: value for key, value in record.items() if key != "line_digest"}
        assert raw == render_line(body)  # sorted body, then the seal as the last key
        assert record["timestamp"].endswith("Z")  # RFC 3339 UTC
    report = verify_log(path)
    assert report.intact and report.lines == 3 and report.head == records[-1]["line_digest"]


async def test_edited_line_is_detected_and_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 4)
    content = lines(path)
    content[1] = content[1].replace(b'"PASS"', b'"FAIL"')
    rewrite(path, content)
    report = verify_log(path)
    assert not report.intact and report.first_bad_line == 2
    assert "edited" in (report.reason or "")


async def test_edit_with_recomputed_line_digest_breaks_the_next_link(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 4)
    content = lines(path)
    record = json.loads(content[1])
    record["outcome"] = "FAIL"
    del record["line_digest"]
    content[1] = render_line(record)  # a correctly re-sealed forgery
    rewrite(path, content)
    report = verify_log(path)
    assert not report.intact and report.first_bad_line == 3


async def test_reordered_lines_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 4)
    content = lines(path)
    content[1], content[2] = content[2], content[1]
    rewrite(path, content)
    report = verify_log(path)
    assert not report.intact and report.first_bad_line == 2


async def test_dropped_line_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 4)
    content = lines(path)
    del content[2]
    rewrite(path, content)
    report = verify_log(path)
    assert not report.intact and report.first_bad_line == 3


async def test_truncated_last_line_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    data = path.read_bytes()
    path.write_bytes(data[:-20])
    report = verify_log(path)
    assert not report.intact and report.first_bad_line == 3
    assert "truncated" in (report.reason or "")


async def test_whitespace_edit_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 2)
    content = lines(path)
    content[0] = content[0].replace(b'","', b'", "', 1)
    rewrite(path, content)
    assert verify_log(path).first_bad_line == 1
    sealed, digest = seal(b'{"a":1}')
    assert json.loads(sealed) == {"a": 1, "line_digest": digest}


async def test_restart_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 2)
    await write_log(path, 2)
    report = verify_log(path)
    assert report.intact and report.lines == 4 and report.last_seq == 4


async def test_broken_log_refuses_to_open_and_is_left_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    content = lines(path)
    del content[1]
    rewrite(path, content)
    before = path.read_bytes()
    with pytest.raises(AuditLogCorrupt) as caught:
        AuditLog.open(path)
    assert caught.value.report.first_bad_line == 2
    assert path.read_bytes() == before


async def test_second_writer_is_refused_by_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    first = AuditLog.open(path)
    try:
        with pytest.raises(AuditLogError, match="in use"):
            AuditLog.open(path)
    finally:
        first.close_sync()


async def test_concurrent_records_share_fsyncs_group_commit(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)

        async def one(index: int) -> None:
            await log.record("decision", decision_id=f"d{index}")

        async with trio.open_nursery() as writers:
            for index in range(200):
                writers.start_soon(one, index)
        fsyncs = log.fsyncs
        await log.close()
    assert verify_log(path).lines == 200
    assert 1 <= fsyncs < 200


async def test_record_returns_only_after_the_line_is_written(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        ref = await log.record("decision", decision_id="x")
        on_disk = lines(path)  # read back before close: the line is already there
        await log.close()
    assert ref is not None
    assert json.loads(on_disk[-1])["line_digest"] == ref.line_digest
    assert json.loads(on_disk[-1])["seq"] == ref.seq


async def test_drop_overflow_counts_and_logs_what_it_dropped(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path, durability="none", overflow="drop", max_pending=2)
    results = [await log.record("decision", decision_id=f"d{i}") for i in range(5)]
    assert results[2:] == [None, None, None] and log.dropped == 3
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await trio.sleep(0.05)
        await log.record("decision", decision_id="after")
        await log.close()
    records = tail(path, 10)
    overflow = [r for r in records if r["event"] == "audit_overflow"]
    assert overflow and overflow[0]["dropped"] == 3
    assert verify_log(path).intact


async def test_write_failure_fails_the_record_and_every_later_one(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        log.close_sync()  # the file is gone from under the writer
        with pytest.raises(AuditLogError):
            await log.record("decision", decision_id="lost")
        with pytest.raises(AuditLogError):
            await log.record("decision", decision_id="later")
        nursery.cancel_scope.cancel()


async def test_reserved_fields_cannot_be_forged_by_callers(tmp_path: Path) -> None:
    log = AuditLog.open(tmp_path / "audit.jsonl")
    try:
        with pytest.raises(ValueError):
            await log.record("decision", seq=1)
    finally:
        log.close_sync()


def test_tail_returns_the_last_lines_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    trio.run(write_log, path, 5)
    assert [r["decision_id"] for r in tail(path, 2)] == ["d3", "d4"]


async def test_write_durability_returns_after_write_without_fsync(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path, durability="write")
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        ref = await log.record("decision", decision_id="w")
        assert ref is not None and json.loads(lines(path)[-1])["line_digest"] == ref.line_digest
        assert log.fsyncs == 0
        await log.close()


def test_unopenable_log_is_an_audit_error_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(AuditLogError, match="cannot open"):
        AuditLog.open(tmp_path / "missing-dir" / "audit.jsonl")


async def test_cut_back_log_is_caught_by_an_anchor_recorded_earlier(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 4)
    anchor = verify_log(path).head  # e.g. read from health's audit.head and kept elsewhere
    rewrite(path, lines(path)[:3])  # whole lines cut off the end: the chain alone is intact
    assert verify_log(path).intact
    report = verify_log(path, anchors=(anchor,))
    assert not report.intact and anchor in (report.reason or "")


@pytest.mark.parametrize("durability", ["fsync", "write", "none"])
async def test_record_shielded_completes_under_cancellation_and_delivers_it_afterwards(
    tmp_path: Path, durability: str
) -> None:
    log = AuditLog.open(tmp_path / "audit.jsonl", durability=durability)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        ref: AuditRef | None = None
        with trio.CancelScope() as scope:
            scope.cancel()
            ref = await log.record_shielded("decision", n=1)
            await trio.lowlevel.checkpoint()
            pytest.fail("the pending cancellation was lost")  # pragma: no cover
        assert scope.cancelled_caught
        assert ref is not None and ref.line_digest == log.head  # it completed, then was cancelled
        if durability != "none":  # (with "none" record returns without waiting)
            with trio.CancelScope() as scope:
                scope.cancel()
                with pytest.raises(trio.Cancelled):  # the plain record stays cancellable
                    await log.record("decision", n=2)
        await log.close()
    report = verify_log(tmp_path / "audit.jsonl")
    assert report.intact and report.lines >= 1


@pytest.mark.parametrize(
    "body",
    [
        b'{"decision_id":"a","decision_id":"b","event":"decision","prev":"%s","seq":1}',
        b'{"event":"decision","decision_id":"a","prev":"%s","seq":1}',
        b'{"decision_id":"a", "event":"decision","prev":"%s","seq":1}',
        b'{"decision_id":"\\u0061","event":"decision","prev":"%s","seq":1}',
    ],
    ids=["duplicate-key", "unsorted", "whitespace", "escape-variant"],
)
def test_resealed_line_that_two_readers_could_read_differently_is_refused(
    tmp_path: Path, body: bytes
) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(seal(body % GENESIS.encode())[0] + b"\n")  # a correctly sealed forgery
    report = verify_log(path)
    assert not report.intact and report.first_bad_line == 1
    assert "canonical" in (report.reason or "")


async def test_a_clock_behind_the_logs_last_line_is_counted_and_warned_once_a_minute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule 11 of daemon/audit/_audit.py, across a restart: the file's last line was stamped
    by a clock 74 years ahead (as a wrong clock that was then set right leaves it); the next
    lines are earlier. They are written in order, counted, and warned about once."""
    path = tmp_path / "audit.jsonl"
    fields = {"event": "daemon_stop", "seq": 1, "prev": GENESIS}
    rewrite(path, [render_line({**fields, "timestamp": "2100-01-01T00:00:00Z"})])
    log = AuditLog.open(path)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        for index in range(3):
            await log.record("decision", decision_id=f"d{index}")
        status = log.status()
        await log.close()
    assert (
        status["clock_steps_back"] == 1 and status["clock_largest_step_back_s"] > 70 * 365 * 86400
    )
    err = capsys.readouterr().err
    assert err.count("audit_clock_step_back") == 1 and "seq 2" in err
    assert verify_log(path).intact and [r["seq"] for r in tail(path, 10)] == [1, 2, 3, 4]
