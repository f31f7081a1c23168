"""The daemon's transparency start-up over real audit files (``docs/spec/transparency.md
§6.3``, ``§6.4``): lines read backwards from the end or forwards across rotated files, key
and origin refusals. Each refusal leaves the directory as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from daemon.audit._transparency import (
    TransparencyConfig,
    TransparencyStartError,
    audit_files,
    line_source,
    open_transparency,
)
from daemon.tlog import MemoryTree, SignerKey, write_key_file


def write_log(path: Path, first: int, last: int, *, torn: bool = False) -> list[bytes]:
    lines = [
        json.dumps({"seq": seq, "pad": "x" * (seq % 97)}).encode() for seq in range(first, last + 1)
    ]
    path.write_bytes(b"".join(line + b"\n" for line in lines) + (b'{"seq":' if torn else b""))
    return lines


def test_lines_are_read_backwards_forwards_and_across_rotated_files(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    old = write_log(tmp_path / "audit.jsonl.000000000001-000000001500", 1, 1500)
    new = write_log(log, 1501, 3000, torn=True)
    (tmp_path / "audit.jsonl.head").write_text("not a rotated file")
    assert audit_files(log) == [tmp_path / "audit.jsonl.000000000001-000000001500", log]
    everything = old + new
    lines = line_source(log, 3000)
    for first in (3000, 2990, 1501, 1490, 1, 2):
        assert list(lines(first)) == everything[first - 1 :]


def test_forward_rebuild_over_the_tail_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import daemon.audit._transparency as module

    monkeypatch.setattr(module, "_TAIL_LIMIT", 10)
    log = tmp_path / "audit.jsonl"
    lines = write_log(log, 1, 300)
    assert list(line_source(log, 300)(5)) == lines[4:]


def test_missing_rotated_files_leave_the_rebuild_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import daemon.audit._transparency as module

    monkeypatch.setattr(module, "_TAIL_LIMIT", 10)
    log = tmp_path / "audit.jsonl"
    write_log(log, 101, 300)  # the archive with 1..100 is gone
    assert list(line_source(log, 300)(1)) == []


def _key(tmp_path: Path, name: str, mode: int = 0o600) -> Path:
    path = write_key_file(tmp_path / "log.key", SignerKey.generate(name))
    os.chmod(path, mode)
    return path


def test_daemon_start_builds_the_tree_of_an_existing_log(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    lines = write_log(log, 1, 700)
    config = TransparencyConfig(
        key_file=str(_key(tmp_path, "o.example/log")), origin="o.example/log"
    )
    tlog = open_transparency(config, log, 700, sync=False)
    assert tlog.checkpoint is not None
    assert tlog.checkpoint.root == MemoryTree.from_entries(lines).root()
    assert (tmp_path / "audit.jsonl.tlog" / "checkpoint").is_file()


def test_key_file_mode_0644_is_refused_at_start(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    write_log(log, 1, 10)
    config = TransparencyConfig(
        key_file=str(_key(tmp_path, "o.example/log", 0o644)), origin="o.example/log"
    )
    with pytest.raises(TransparencyStartError, match="group or others"):
        open_transparency(config, log, 10, sync=False)
    assert not (tmp_path / "audit.jsonl.tlog").exists()


def test_key_named_for_another_origin_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    write_log(log, 1, 10)
    config = TransparencyConfig(key_file=str(_key(tmp_path, "other.example/log")))
    with pytest.raises(TransparencyStartError, match="origin"):
        open_transparency(config, log, 10, sync=False)
    assert not (tmp_path / "audit.jsonl.tlog").exists()


@pytest.mark.parametrize("interval", [0, -1, "1", 10_000])
def test_bad_checkpoint_interval_is_refused(interval: object) -> None:
    with pytest.raises(ValueError):
        TransparencyConfig(key_file="k", checkpoint_interval=interval)  # type: ignore[arg-type]


def test_a_long_torn_tail_is_never_a_line(tmp_path: Path) -> None:
    import daemon.audit._transparency as module

    log = tmp_path / "audit.jsonl"
    lines = write_log(log, 1, 50)
    with log.open("ab") as handle:
        handle.write(b'{"seq":51,"torn":"' + b"y" * 200_000)
    assert module._tail([log], 10) == lines[-10:]
    assert module._tail([log], 100) == lines
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert module._tail([tmp_path / "empty.jsonl"], 3) == []
