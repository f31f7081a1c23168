"""Following a real audit log's committed lines for the sinks, and their cursors
(``daemon/audit/_follow.py``, ``daemon/audit/_shipper.py``).

The logs are written by the real writer (``AuditLog``, rotation included); a shipper ships to
the real HTTP receiver of ``sink_receiver``. Each test is named after the fault it stops.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import trio
from sink_receiver import Receiver

from daemon import AuditLog
from daemon.audit._follow import (
    START,
    CursorError,
    Follower,
    FollowError,
    Position,
    read_cursor,
    start_of,
    write_cursor,
)
from daemon.audit._shipper import Shipper
from daemon.audit._shipping_config import SinkConfig
from daemon.audit._sinks import HttpSink, event_of
from daemon.audit._transparency import audit_files


async def _write(path: Path, count: int, *, rotate_bytes: int = 0, first: int = 0) -> int:
    """``count`` decision lines (every fifth a refusal) appended by the real writer; the
    durable ``seq`` after them."""
    log = AuditLog.open(path, rotate_bytes=rotate_bytes)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        for n in range(first, first + count):
            if n % 5 == 4:
                await log.record("refusal", code="BUSY", n=n)
            else:
                await log.record("decision", decision_id=f"d-{n:05d}", outcome="PASS", n=n)
        await log.close()
    return log.durable.seq


def _lines(path: Path) -> list[bytes]:
    return [line for file in audit_files(path) for line in file.read_bytes().splitlines()]


def _everything(line: bytes, fields: dict[str, object]) -> bytes:
    return line


def _follow_all(follower: Follower, upto: int, batch: int) -> list[bytes]:
    got: list[bytes] = []
    while follower.position.seq < upto:
        before = follower.position
        got += follower.read(upto, _everything, max_events=batch, max_bytes=1 << 20).events
        assert follower.position != before
    return got


async def test_the_follower_crosses_every_rotation_and_reads_each_committed_line_once(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.jsonl"
    durable = await _write(log, 300, rotate_bytes=3000)
    assert len(audit_files(log)) >= 5
    follower = Follower(log, start_of(log))
    try:
        got = _follow_all(follower, durable, 7)
    finally:
        follower.close()
    assert got == _lines(log)
    assert [json.loads(line)["seq"] for line in got] == list(range(1, durable + 1))


async def test_bytes_after_the_durable_line_are_never_read(tmp_path: Path) -> None:
    """What a write in progress (or a failed one the writer cuts back) leaves after the
    committed lines is not read: the follower stops at the durable seq."""
    log = tmp_path / "audit.jsonl"
    durable = await _write(log, 20)
    forged = json.dumps({"event": "decision", "seq": durable + 1, "prev": "sha256:" + "0" * 64})
    with log.open("ab") as handle:
        handle.write(forged.encode() + b"\n" + b'{"event":"decision","se')
    follower = Follower(log, START)
    try:
        got = _follow_all(follower, durable, 100)
        assert len(got) == durable and follower.position.seq == durable
        with pytest.raises(FollowError, match="does not continue after seq 20"):
            follower.read(durable + 1, _everything, max_events=10, max_bytes=1 << 20)
        assert follower.position.seq == durable  # nothing of the forged line was taken
    finally:
        follower.close()


async def test_a_cursor_in_a_file_that_was_rotated_since_resumes_on_its_next_line(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.jsonl"
    await _write(log, 40, rotate_bytes=2500)
    follower = Follower(log, START)
    _follow_all(follower, 25, 25)
    follower.close()
    cursor = tmp_path / "cursor"
    write_cursor(cursor, "central", follower.position)
    durable = await _write(log, 160, rotate_bytes=2500, first=40)  # many rotations later
    saved = read_cursor(cursor, "central")
    assert saved == follower.position and saved.file < len(_lines(log))
    resumed = Follower(log, saved)
    try:
        got = _follow_all(resumed, durable, 50)
    finally:
        resumed.close()
    assert [json.loads(line)["seq"] for line in got] == list(range(26, durable + 1))


async def test_a_cursor_of_another_log_is_refused_never_followed(tmp_path: Path) -> None:
    """Two logs with the same seqs (a log moved aside and a new one started): a cursor taken
    on one does not ship the other's lines as if they continued it."""
    one, other = tmp_path / "one.jsonl", tmp_path / "other.jsonl"
    await _write(one, 30)
    durable = await _write(other, 30)
    follower = Follower(one, START)
    _follow_all(follower, 10, 10)
    follower.close()
    stranger = Follower(other, follower.position)
    try:
        with pytest.raises(FollowError, match="cursor belongs to another log"):
            stranger.read(durable, _everything, max_events=10, max_bytes=1 << 20)
    finally:
        stranger.close()


def test_an_edited_or_foreign_cursor_file_is_refused(tmp_path: Path) -> None:
    cursor = tmp_path / "cursor"
    write_cursor(cursor, "central", Position(41, "sha256:" + "a" * 64, 30, 9000))
    assert read_cursor(cursor, "central") == Position(41, "sha256:" + "a" * 64, 30, 9000)
    with pytest.raises(CursorError, match="belongs to sink 'central', not 'other'"):
        read_cursor(cursor, "other")
    cursor.write_bytes(cursor.read_bytes().replace(b'"seq":41', b'"seq":91'))
    with pytest.raises(CursorError, match="damaged"):
        read_cursor(cursor, "central")
    assert read_cursor(tmp_path / "none", "central") is None


async def test_removed_rotated_files_are_passed_over_and_counted_not_waited_for(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.jsonl"
    durable = await _write(log, 200, rotate_bytes=3000)
    oldest = audit_files(log)[0]
    removed = len(oldest.read_bytes().splitlines())
    gaps: list[tuple[int, int]] = []
    follower = Follower(log, START, on_gap=lambda first, last, file: gaps.append((first, last)))
    oldest.unlink()
    try:
        got = _follow_all(follower, durable, 64)
    finally:
        follower.close()
    assert follower.skipped == removed and gaps == [(1, removed)]
    assert [json.loads(line)["seq"] for line in got] == list(range(removed + 1, durable + 1))


def test_an_event_carries_the_exact_line_and_the_labels() -> None:
    line = b'{"decision_id":"d-1","event":"decision","seq":7,"timestamp":"t","x":"\\u202e"}'
    event = json.loads(event_of(line, json.loads(line), {"id": "i", "version": "v"}))
    assert event == {
        "decision_id": "d-1",
        "event": "decision",
        "labels": {"id": "i", "version": "v"},
        "line": line.decode(),
        "seq": 7,
        "timestamp": "t",
    }


def _shipper(log: Path, durable: int, receiver: Receiver, **options: object) -> Shipper:
    config = SinkConfig(
        "central",
        "http",
        url=receiver.url,
        flush_interval=0.02,
        backoff_min=0.02,
        backoff_max=0.05,
        timeout=5.0,
        **options,  # type: ignore[arg-type]
    )
    return Shipper(
        config, log, lambda: durable, {"id": "t"}, sink=HttpSink(config, "evidenced/test")
    )


async def test_a_sink_that_never_gets_through_holds_one_batch_and_leaves_the_rest_in_the_log(
    tmp_path: Path,
) -> None:
    """A dead receiver: the shipper keeps resending one batch (never more in memory), no
    cursor is written, and once the receiver is back every decision arrives in order."""
    log = tmp_path / "audit.jsonl"
    durable = await _write(log, 2000)
    receiver = Receiver()
    receiver.mode = "fail"
    shipper = _shipper(log, durable, receiver, batch_lines=50)
    shipper.start()
    try:
        receiver.wait_for(lambda r: r.failed_posts >= 5)
        status = shipper.status()
        assert status["state"] == "retrying" and status["lag_lines"] == durable
        assert shipper.in_flight is not None and len(shipper.in_flight.events) <= 50
        assert status["cursor_seq"] == 0 and not shipper.cursor_path.exists()
        receiver.mode = "ok"
        receiver.wait_for(lambda r: shipper.status()["lag_lines"] == 0)
    finally:
        shipper.stop(time.monotonic() + 5)
        assert shipper.join(10)
        receiver.close()
    ids = [event["decision_id"] for event in receiver.decisions()]
    assert ids == [f"d-{n:05d}" for n in range(2000) if n % 5 != 4]
    assert shipper.status()["state"] == "stopped" and shipper.batches == len(ids) // 50
    cursor = read_cursor(shipper.cursor_path, "central")
    assert cursor is not None and cursor.seq == durable


async def test_a_sink_that_starts_now_ships_only_what_comes_after_its_first_start(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.jsonl"
    before = await _write(log, 50)
    receiver = Receiver()
    durable = [before]
    config = SinkConfig("central", "http", url=receiver.url, flush_interval=0.02, start_at="now")
    shipper = Shipper(
        config, log, lambda: durable[0], {"id": "t"}, sink=HttpSink(config, "evidenced/test")
    )
    shipper.start()
    try:
        receiver.wait_for(lambda r: shipper.cursor_path.exists())
        saved = read_cursor(shipper.cursor_path, "central")
        assert saved is not None and saved.seq == before  # remembered at once
        durable[0] = await _write(log, 20, first=50)
        receiver.wait_for(lambda r: shipper.status()["lag_lines"] == 0)
    finally:
        shipper.stop(time.monotonic() + 5)
        assert shipper.join(10)
        receiver.close()
    assert [e["decision_id"] for e in receiver.decisions()] == [
        f"d-{n:05d}" for n in range(50, 70) if n % 5 != 4
    ]
