"""The audit log's files: unsafe paths refused, torn tails moved aside, the head sidecar,
rotation and cross-file verification, a log moved aside, a failed start."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
from pathlib import Path

import clirun
import pytest
import trio

from daemon import (
    AuditLog,
    AuditLogCorrupt,
    AuditLogError,
    HostedSession,
    Server,
    ServerConfig,
    tail,
    verify_log,
)
from session import BytesDigestMechanism


async def write_log(path: Path, count: int, **options: object) -> AuditLog:
    log = AuditLog.open(path, **options)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        for index in range(count):
            await log.record("decision", decision_id=f"d{index}", outcome="PASS")
        await log.close()
    return log


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """An ``evidenced`` command, in-process (``tests/test_cli_contract.py`` and
    ``tests/daemon/test_process.py`` keep the real-process smoke tests)."""
    return clirun.in_process_text(args)


def listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# --------------------------------------------------------------------------- unsafe paths


def test_dangling_symlink_is_refused_and_its_target_never_created(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    (tmp_path / "audit.jsonl").symlink_to(target)
    with pytest.raises(AuditLogError, match="symbolic link"):
        AuditLog.open(tmp_path / "audit.jsonl")
    assert not target.exists()


def test_symlink_to_an_existing_file_is_refused_and_the_file_unchanged(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_bytes(b"do not append here\n")
    (tmp_path / "audit.jsonl").symlink_to(target)
    with pytest.raises(AuditLogError, match="symbolic link"):
        AuditLog.open(tmp_path / "audit.jsonl")
    assert target.read_bytes() == b"do not append here\n"


async def test_fifo_is_refused_without_hanging_start_up(tmp_path: Path) -> None:
    fifo = tmp_path / "audit.jsonl"
    os.mkfifo(fifo)
    with trio.fail_after(10), pytest.raises(AuditLogError, match="FIFO"):
        await trio.to_thread.run_sync(AuditLog.open, fifo, abandon_on_cancel=True)


def test_dev_null_is_refused_even_with_durability_write() -> None:
    with pytest.raises(AuditLogError, match="character device"):
        AuditLog.open("/dev/null", durability="write")


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AuditLogError, match="directory"):
        AuditLog.open(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_log_owned_by_another_user_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"")
    os.chown(path, 4242, 4242)
    with pytest.raises(AuditLogError, match="owned by uid 4242"):
        AuditLog.open(path)
    assert path.read_bytes() == b""


async def test_hard_linked_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 1)
    os.link(path, tmp_path / "other-name")
    with pytest.raises(AuditLogError, match="hard links"):
        AuditLog.open(path)


# --------------------------------------------------------------------------- torn tail


async def test_torn_tail_is_moved_aside_recorded_and_the_chain_continues(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    whole = path.read_bytes()
    torn = b'{"decision_id":"half-written","eve'
    path.write_bytes(whole + torn)
    (tmp_path / "audit.jsonl.head").unlink()  # also without a sidecar (a first start)
    log = await write_log(path, 1)
    evidence = [p for p in tmp_path.iterdir() if p.name.startswith("audit.jsonl.torn-")]
    assert len(evidence) == 1 and evidence[0].read_bytes() == torn
    assert path.read_bytes().startswith(whole)
    lines = tail(path, 10)
    removed = lines[3]
    assert removed["event"] == "torn_tail_removed" and removed["seq"] == 4
    assert removed["length"] == len(torn) and removed["offset"] == len(whole)
    assert removed["digest"] == "sha256:" + hashlib.sha256(torn).hexdigest()
    assert removed["evidence_file"] == evidence[0].name
    assert lines[4]["decision_id"] == "d0" and log.torn_tail is not None
    assert verify_log(path).intact


async def test_edited_line_is_not_a_torn_tail_and_is_never_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    edited = path.read_bytes().replace(b'"d2"', b'"d9"') + b'{"torn'
    path.write_bytes(edited)
    with pytest.raises(AuditLogCorrupt) as caught:
        AuditLog.open(path)
    assert caught.value.report.first_bad_line == 3
    assert path.read_bytes() == edited
    assert not [p for p in tmp_path.iterdir() if ".torn-" in p.name]


# --------------------------------------------------------------------------- sidecar


async def test_start_up_verifies_only_what_follows_the_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 20)
    size = path.stat().st_size
    sidecar = json.loads((tmp_path / "audit.jsonl.head").read_bytes())
    assert (sidecar["seq"], sidecar["offset"], sidecar["first_seq"]) == (20, size, 1)
    log = await write_log(path, 2)
    assert log.verified_from == size
    report = verify_log(path)
    assert report.intact and report.last_seq == 22


async def test_whole_lines_cut_off_the_end_are_caught_at_start_by_the_sidecar(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 5)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]))  # the chain alone still verifies
    assert verify_log(path).intact
    before = listing(tmp_path)
    with pytest.raises(AuditLogError, match="cut back"):
        AuditLog.open(path)
    assert listing(tmp_path) == before


async def test_rewritten_line_at_the_sidecar_point_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    sidecar = tmp_path / "audit.jsonl.head"
    record = json.loads(sidecar.read_bytes())
    del record["line_digest"]
    record["head"] = "sha256:" + "ab" * 32
    from daemon.audit._audit_format import render_line

    sidecar.write_bytes(render_line(record) + b"\n")  # a consistent, re-sealed forgery
    before = listing(tmp_path)
    with pytest.raises(AuditLogError, match="rewritten"):
        AuditLog.open(path)
    assert listing(tmp_path) == before


async def test_damaged_sidecar_is_refused_with_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    sidecar = tmp_path / "audit.jsonl.head"
    sidecar.write_bytes(sidecar.read_bytes().replace(b'"seq":3', b'"seq":2'))
    with pytest.raises(AuditLogError, match="damaged"):
        AuditLog.open(path)
    sidecar.unlink()  # the documented way out: verify the whole file once
    assert (await write_log(path, 1)).verified_from == 0


async def test_log_moved_aside_is_refused_not_restarted_as_an_unlinked_chain(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    path.rename(tmp_path / "moved.jsonl")
    with pytest.raises(AuditLogError, match="moved aside or deleted"):
        AuditLog.open(path)
    assert not path.exists()  # nothing created
    path.write_bytes(b"")  # an empty file in its place is the same case
    with pytest.raises(AuditLogError, match="moved aside or deleted"):
        AuditLog.open(path)


# --------------------------------------------------------------------------- rotation


async def test_size_rotation_links_files_and_verify_checks_the_chain_across_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    log = await write_log(path, 30, rotate_bytes=1500)
    archives = sorted(p for p in tmp_path.iterdir() if p.name[len("audit.jsonl.") :][:1].isdigit())
    assert log.rotations == len(archives) >= 3
    files = [*archives, path]
    report = verify_log(*files)
    assert report.intact and report.first_seq == 1 and report.files == len(files)
    assert report.last_seq == 30 + len(archives)  # one audit_rotated line per new file
    for previous, following in itertools.pairwise(files):
        link = tail(following, 10**6)[0]
        last = tail(previous, 1)[0]
        assert link["event"] == "audit_rotated" and link["previous_file"] == previous.name
        assert (link["previous_seq"], link["previous_head"]) == (last["seq"], last["line_digest"])
    first, last_line = tail(archives[0], 10**6)[0], tail(archives[0], 1)[0]
    assert archives[0].name == f"audit.jsonl.{first['seq']:012d}-{last_line['seq']:012d}"
    current = verify_log(path)  # the current file alone verifies from its link line
    assert current.intact and current.first_seq == tail(path, 10**6)[0]["seq"]
    sidecar = json.loads((tmp_path / "audit.jsonl.head").read_bytes())
    assert sidecar["first_seq"] == current.first_seq and sidecar["seq"] == 30 + len(archives)


async def test_a_missing_middle_file_breaks_the_chain_across_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 30, rotate_bytes=1500)
    archives = sorted(p for p in tmp_path.iterdir() if p.name[len("audit.jsonl.") :][:1].isdigit())
    report = verify_log(archives[0], *archives[2:], path)
    assert not report.intact and report.bad_file == str(archives[2])
    assert report.first_bad_line == 1 and "sequence number" in (report.reason or "")


async def test_restart_continues_a_rotated_log(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 12, rotate_bytes=1500)
    (tmp_path / "audit.jsonl.head").unlink()  # the current file alone, from its link line
    await write_log(path, 2)
    assert verify_log(path).intact


async def test_interrupted_rotation_link_is_removed_at_start(tmp_path: Path) -> None:
    """A crash between the archive ``link`` and the ``rename`` leaves the live file with a
    second name: start-up removes that name rather than refusing or keeping a false archive."""
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    stale = tmp_path / f"audit.jsonl.{1:012d}-{3:012d}"
    os.link(path, stale)
    (tmp_path / "audit.jsonl.rotating").write_bytes(b"")
    await write_log(path, 1)
    assert not stale.exists() and verify_log(path).intact


async def test_cli_audit_rotate_starts_a_linked_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await write_log(path, 3)
    head = verify_log(path)
    result = await trio.to_thread.run_sync(run_cli, "audit", "rotate", str(path))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["status"] == "ROTATED"
    assert (document["previous_seq"], document["previous_head"]) == (3, head.head)
    archive = tmp_path / document["previous_file"]
    assert archive.read_bytes().count(b"\n") == 3
    verified = run_cli("audit", "verify", str(archive), str(path), "--anchor", f"3:{head.head}")
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["last_seq"] == 4
    locked = AuditLog.open(path)
    try:
        busy = await trio.to_thread.run_sync(run_cli, "audit", "rotate", str(path))
    finally:
        locked.close_sync()
    assert busy.returncode == 75 and "in use" in busy.stderr


# --------------------------------------------------------------------------- defect 12


async def test_failed_start_writes_no_daemon_stop_without_daemon_start(tmp_path: Path) -> None:
    squatter = tmp_path / "sock"
    squatter.write_text("not a socket")
    audit = tmp_path / "audit.jsonl"
    config = ServerConfig(tcp=None, unix=str(squatter), audit_path=str(audit))
    server = Server([HostedSession("bytes", (BytesDigestMechanism(),))], config)
    with pytest.raises(BaseExceptionGroup) as caught:
        await server.run()
    leaves = caught.value
    while isinstance(leaves, BaseExceptionGroup):
        leaves = leaves.exceptions[0]
    assert isinstance(leaves, OSError) and "not a socket" in str(leaves)
    assert audit.read_bytes() == b""
