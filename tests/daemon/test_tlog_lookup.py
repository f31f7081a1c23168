"""Finding an audit line by log index, decision id or line digest (``daemon.tlog._lookup``):
across rotated files, never a torn final line, whatever the read chunk size."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from daemon.tlog import _lookup
from daemon.tlog._lookup import LineNotFound, LineQuery, LookupInvalid, find_line


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
