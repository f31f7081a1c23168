"""Finding an audit line by log index, decision id or line digest (``daemon.tlog._lookup``):
offline across rotated files, never a torn final line, whatever the read chunk size; and the
daemon's index over a real audit log (rebuilt at start, fed by the writer, read back from disk,
within its budget)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import uuid
from pathlib import Path

import pytest
import trio

from daemon import AuditLog
from daemon.audit._transparency import attach_index
from daemon.tlog import _lookup
from daemon.tlog._lookup import (
    BUCKET_LOAD,
    IndexRebuilding,
    LineIndex,
    LineLookup,
    LineNotFound,
    LineQuery,
    LookupBudget,
    LookupBusy,
    LookupInvalid,
    _Table,
    find_line,
)
from daemon.tlog._served_files import FileReads


def _line(seq: int) -> bytes:
    fields = {
        "decision_id": str(uuid.UUID(int=seq, version=4)),
        "line_digest": "sha256:" + f"{seq:064x}",
        "pad": "x" * (seq % 7) * 40,
        "seq": seq,
    }
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def _log(tmp_path: Path, *, rotated_at: tuple[int, ...], last: int, torn: bool) -> list[Path]:
    """Files LOG.<first>-<last>... then LOG, holding lines 1..last (and a torn tail)."""
    files, first = [], 1
    for end in rotated_at:
        path = tmp_path / f"audit.jsonl.{first:012d}-{end:012d}"
        path.write_bytes(b"".join(_line(seq) + b"\n" for seq in range(first, end + 1)))
        files.append(path)
        first = end + 1
    live = tmp_path / "audit.jsonl"
    data = b"".join(_line(seq) + b"\n" for seq in range(first, last + 1))
    live.write_bytes(data + (_line(last + 1)[:-3] if torn else b""))
    return [*files, live]


@pytest.mark.parametrize("chunk", [16, 97, 1 << 16])
def test_every_line_is_found_by_each_key_across_rotated_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(_lookup, "_CHUNK", chunk)
    files = _log(tmp_path, rotated_at=(3, 9), last=14, torn=True)
    for seq in range(1, 15):
        line = _line(seq)
        record = json.loads(line)
        assert find_line(files, LineQuery(index=seq - 1)) == (seq - 1, line)
        assert find_line(files, LineQuery(decision_id=record["decision_id"])) == (seq - 1, line)
        assert find_line(files, LineQuery(line_digest=record["line_digest"])) == (seq - 1, line)


@pytest.mark.parametrize("chunk", [16, 1 << 16])
def test_a_torn_final_line_is_never_an_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """A crash mid-write leaves a torn tail; it holds the next decision's id, but it is not a
    durable line and has no place in the tree."""
    monkeypatch.setattr(_lookup, "_CHUNK", chunk)
    files = _log(tmp_path, rotated_at=(), last=5, torn=True)
    torn = json.loads(_line(6).decode())
    with pytest.raises(LineNotFound):
        find_line(files, LineQuery(decision_id=torn["decision_id"]))
    with pytest.raises(LineNotFound):
        find_line(files, LineQuery(index=5))


def test_a_line_that_is_not_the_leaf_it_should_be_is_not_found(tmp_path: Path) -> None:
    """The index names the line by its place; a file whose lines do not carry the expected
    ``seq`` (a missing rotated file) answers nothing rather than the wrong line."""
    files = _log(tmp_path, rotated_at=(3,), last=6, torn=False)
    with pytest.raises(LineNotFound):
        find_line(files[1:], LineQuery(index=0))  # the rotated file holding seq 1 is gone


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"index": 1, "decision_id": str(uuid.uuid4())},
        {"index": -1},
        {"index": True},
        {"decision_id": "not-a-uuid"},
        {"decision_id": str(uuid.uuid4()).upper()},
        {"line_digest": "sha256:" + "0" * 63},
        {"line_digest": "md5:" + "0" * 64},
    ],
)
def test_a_malformed_query_is_refused_before_a_file_is_read(query: dict[str, object]) -> None:
    with pytest.raises(LookupInvalid):
        LineQuery(**query)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the daemon's index


async def _record(log: AuditLog, count: int, tag: str) -> None:
    for number in range(count):
        await log.record(
            "decision",
            decision_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{tag}{number}")),
            outcome="PASS",
            note=f"{tag} {number}",
        )


async def _write(path: Path, count: int, *, rotate_bytes: int = 0, tag: str = "") -> None:
    log = AuditLog.open(path, rotate_bytes=rotate_bytes)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await _record(log, count, tag)
        await log.close()


def _lines(path: Path) -> list[bytes]:
    files = [*sorted(path.parent.glob(path.name + ".*-*")), path]
    return [line for file in files for line in file.read_bytes().split(b"\n")[:-1]]


def _index(path: Path) -> LineIndex:
    """The index a daemon starting on ``path`` attaches (not yet rebuilt)."""
    log = AuditLog.open(path)
    try:
        return attach_index(log)
    finally:
        log.close_sync()


def _queries(line: bytes) -> list[LineQuery]:
    record = json.loads(line)
    queries = [LineQuery(index=record["seq"] - 1), LineQuery(line_digest=record["line_digest"])]
    if "decision_id" in record:
        queries.append(LineQuery(decision_id=record["decision_id"]))
    return queries


async def test_the_index_finds_lines_written_before_a_restart_and_after_it(
    tmp_path: Path,
) -> None:
    """Lines on disk at start (across rotated files) come from the rebuild, lines committed
    afterwards from the writer, and a rotation meanwhile changes nothing: every line is
    found by each of its keys, read back from disk."""
    path = tmp_path / "audit.jsonl"
    await _write(path, 40, rotate_bytes=2000, tag="before")
    log = AuditLog.open(path, rotate_bytes=2000)
    index = attach_index(log)
    index.rebuild()
    lookup = LineLookup(index, FileReads())
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await _record(log, 40, "after")
        await log.close()
    lines = _lines(path)
    assert len(lines) > 80 and len(list(tmp_path.glob("audit.jsonl.*-*"))) > 3
    for line in lines:
        for query in _queries(line):
            assert await lookup.find(query) == (json.loads(line)["seq"] - 1, line), query
    assert index.status()["lines"] == len(lines) and index.status()["rebuilt"] is True


async def test_an_absent_id_costs_no_read_and_is_not_found(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await _write(path, 300)
    index = _index(path)
    index.rebuild()
    absent = [LineQuery(decision_id=str(uuid.uuid4())) for _ in range(2000)]
    absent += [LineQuery(index=300), LineQuery(line_digest="sha256:" + "ab" * 32)]
    assert [query for query in absent if index.candidates(query)] == []
    with pytest.raises(LineNotFound):
        await LineLookup(index, FileReads()).find(absent[0])


async def test_a_lookup_before_the_rebuild_is_done_is_busy_never_not_found(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    await _write(path, 5)
    index = _index(path)
    line = _lines(path)[2]
    for query in _queries(line):
        with pytest.raises(IndexRebuilding):
            index.candidates(query)
    index.rebuild()
    for query in _queries(line):
        assert await LineLookup(index, FileReads()).find(query) == (2, line)


async def test_a_fingerprint_collision_costs_a_read_never_a_wrong_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every line under one fingerprint: each lookup reads the candidates and answers only
    the line whose field is the value asked."""
    monkeypatch.setattr(LineIndex, "_fingerprint", lambda self, person, value: 7)
    path = tmp_path / "audit.jsonl"
    await _write(path, 12)
    index = _index(path)
    index.rebuild()
    lookup = LineLookup(index, FileReads())
    for line in _lines(path):
        for query in _queries(line)[1:]:
            assert await lookup.find(query) == (json.loads(line)["seq"] - 1, line)
    with pytest.raises(LineNotFound):
        await lookup.find(LineQuery(decision_id=str(uuid.uuid4())))


async def test_a_line_rotated_away_before_the_index_saw_the_rotation_is_still_found(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    await _write(path, 6)
    index = _index(path)
    index.rebuild()
    lines = _lines(path)
    os.link(path, tmp_path / "audit.jsonl.000000000001-000000000006")
    path.unlink()
    path.write_bytes(b"")  # a new live file (a rotation's rename) the index has not seen
    assert await LineLookup(index, FileReads()).find(LineQuery(index=3)) == (3, lines[3])


def test_the_table_splits_one_bucket_at_a_time_and_finds_every_entry() -> None:
    table = _Table()
    rng = random.Random(5)
    entries = [(rng.getrandbits(32), seq) for seq in range(1, 50_001)]
    for fingerprint, seq in entries:
        table.add(fingerprint, seq)
    buckets = len(table._seqs)
    assert BUCKET_LOAD * (buckets - 1) < len(entries) <= BUCKET_LOAD * buckets
    for fingerprint, seq in entries:
        assert seq in table.find(fingerprint)
    assert table.find(1 << 31 | 12345) == [s for f, s in entries if f == 1 << 31 | 12345]


def test_one_peer_never_takes_every_lookup_slot() -> None:
    budget = LookupBudget(slots=4, per_peer=2)
    with contextlib.ExitStack() as held:
        held.enter_context(budget.slot("attacker"))
        held.enter_context(budget.slot("attacker"))
        with pytest.raises(LookupBusy):
            held.enter_context(budget.slot("attacker"))
        held.enter_context(budget.slot("other"))
        with budget.slot("honest"):
            pass
        held.enter_context(budget.slot("honest"))
        with pytest.raises(LookupBusy):
            held.enter_context(budget.slot("honest"))  # all four taken
    assert budget.taken == 0
