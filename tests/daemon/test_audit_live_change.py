"""The audit log changed under a running writer (``daemon/audit/_audit.py`` rule 10).

Truncated, grown, deleted, renamed over: the writer notices before its next group commit
(one ``fstat`` and one ``lstat``), writes nothing more to the file — no repair, no cut, no
``audit_recovered`` — refuses every request ``AUDIT_FAILED`` until an operator stops it,
records its durable end in the sidecar so the next start refuses the changed file, and raises
the alarm (``health`` ``degraded``, ``/ready`` 503, one ``audit_alarm`` line on stderr).

First on the writer itself (real files, real trio), then on ``evidenced serve`` as a child
process, with one serving process and with ``--workers 2`` (the sequencer owns the log).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import start_serve
from http_testkit import CONFIG, ROOT, LiveDaemon, atom, json_body

from daemon import AuditLog, AuditLogError, verify_log
from daemon.audit._audit import FileOps
from daemon.audit._audit_files import read_checkpoint
from daemon.audit._audit_startup import open_verified

SUBMIT = "/v1/sessions/formation/decisions"


# --------------------------------------------------------------------------- the writer


def _truncate(path: Path) -> None:
    os.truncate(path, 0)


def _cut_last_line(path: Path) -> None:
    data = path.read_bytes()
    os.truncate(path, data.rstrip(b"\n").rfind(b"\n") + 1)


def _grow(path: Path) -> None:
    with path.open("ab") as handle:
        handle.write(b'{"forged":true}\n')


def _delete(path: Path) -> None:
    path.unlink()


def _rename_over(path: Path) -> None:
    copy = path.with_name("forged.jsonl")
    shutil.copyfile(path, copy)
    os.replace(copy, path)


CHANGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated to 0": (_truncate, "truncated"),
    "last line cut off": (_cut_last_line, "truncated"),
    "grown by a foreign line": (_grow, "grown"),
    "deleted": (_delete, "deleted"),
    "replaced by a rename": (_rename_over, "replaced"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
async def test_a_log_changed_under_the_writer_is_never_written_again(
    tmp_path: Path, change: str
) -> None:
    make, word = CHANGES[change]
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path, retry_initial=0.01, retry_max=0.01)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        kept = [await log.record("decision", decision_id=str(n)) for n in range(3)][-1]
        assert kept is not None
        make(path)
        after = path.read_bytes() if path.exists() else None
        for n in range(5):  # the next commit notices; every later record is refused at once
            with pytest.raises(AuditLogError, match=f"changed under the daemon.*{word}"):
                await log.record("decision", decision_id=f"late {n}")
        await trio.sleep(0.1)  # ten retry intervals of a disk-full outage: none is tried
        assert not await log.recover()
        status = log.status()
        assert status["failed"] and status["failure"]["changed"].startswith(word)
        assert status["failure"]["refused"] == 5 and status["failure"]["attempts"] == 0
        assert log.alarm is not None and log.alarm == log.failure_reason
        assert status["anchor"] == kept.anchor  # the durable end it knows
        await log.close()
        nursery.cancel_scope.cancel()
    assert log.failure_reason is not None  # the close was not clean: no daemon_stop to write
    assert (path.read_bytes() if path.exists() else None) == after  # nothing written on top
    checkpoint = read_checkpoint(path)
    assert checkpoint is not None and (checkpoint.seq, checkpoint.head) == kept
    if word != "replaced":  # a faithful copy renamed over it is the operator's to accept
        with pytest.raises(AuditLogError):
            open_verified(path)  # the next start refuses the changed file


class TruncatingDisk(FileOps):
    """Writes as the system does, except that once armed it truncates the log to 0 bytes
    right before the next write: a ``truncate`` (``copytruncate``) that lands between the
    writer's check of the file and its write, as the chaos soak's did."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.armed = False

    def write(self, fd: int, data: memoryview) -> int:
        if self.armed:
            self.armed = False
            os.truncate(self.path, 0)
        return super().write(fd, data)


async def test_a_truncation_between_the_check_and_the_write_acknowledges_nothing(
    tmp_path: Path,
) -> None:
    """The batch written into the cut file is refused (it used to be acknowledged: a line
    in neither the copy taken before the cut nor the chain the sidecar records)."""
    path = tmp_path / "audit.jsonl"
    disk = TruncatingDisk(path)
    log = AuditLog.open(path, file_ops=disk, retry_initial=0.01, retry_max=0.01)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        kept = [await log.record("decision", decision_id=str(n)) for n in range(3)][-1]
        assert kept is not None
        disk.armed = True
        with pytest.raises(AuditLogError, match=r"changed under the daemon.*truncated"):
            await log.record("decision", decision_id="into the cut file")
        with pytest.raises(AuditLogError, match="changed under the daemon"):
            await log.record("decision", decision_id="after it")
        assert log.alarm is not None and "truncated" in log.alarm
        assert log.status()["anchor"] == kept.anchor  # the durable end it acknowledged
        await log.close()
        nursery.cancel_scope.cancel()
    assert b"after it" not in path.read_bytes()  # one batch landed; nothing after it
    checkpoint = read_checkpoint(path)
    assert checkpoint is not None and (checkpoint.seq, checkpoint.head) == kept


async def test_a_log_truncated_during_a_disk_full_outage_is_never_recovered(
    tmp_path: Path,
) -> None:
    """The recovery line of an outage is written only after the same check (rule 10)."""
    from test_audit_faults import FailingDisk

    path, disk = tmp_path / "audit.jsonl", FailingDisk()
    log = AuditLog.open(path, file_ops=disk, retry_initial=0.01, retry_max=0.01)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await log.record("decision", decision_id="kept")
        disk.budget = 0
        with pytest.raises(AuditLogError, match="No space left"):
            await log.record("decision", decision_id="full")
        _truncate(path)
        disk.budget = None
        with trio.fail_after(10):
            while log.alarm is None:
                await trio.sleep(0.01)
        assert "truncated" in log.alarm and log.status()["failure"]["changed"]
        writes = disk.writes
        await trio.sleep(0.1)
        assert disk.writes == writes and path.read_bytes() == b""
        await log.close()
        nursery.cancel_scope.cancel()


async def test_an_untouched_log_rotates_and_keeps_serving(tmp_path: Path) -> None:
    """The control: the check never fires on the writer's own rotation or lines."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(path, rotate_bytes=300)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        for n in range(20):
            await log.record("decision", decision_id=str(n))
        assert log.rotations >= 2 and log.failure_reason is None and log.alarm is None
        await log.close()
        nursery.cancel_scope.cancel()
    files = [*sorted(tmp_path.glob("audit.jsonl.0*")), path]
    assert verify_log(*files).intact


# --------------------------------------------------------------------------- the daemon


@pytest.fixture(params=[1, 2], ids=["one process", "two workers"])
def daemon(request: pytest.FixtureRequest) -> Iterator[LiveDaemon]:
    config = CONFIG.format(idle=5.0, header=2.0, http_extra="")
    if request.param > 1:
        config = config.replace("[server]\n", f"[server]\nworkers = {request.param}\n", 1)
    live = LiveDaemon(config_text=config)
    try:
        yield live
    finally:
        live.stop()
        live.cleanup()


def _submit(daemon: LiveDaemon) -> tuple[int, dict[str, Any]]:
    subject, certificate, binding = atom()
    answer = daemon.post(SUBMIT, json_body(binding, subject, certificate))
    return answer.status, answer.json()


def _health(daemon: LiveDaemon) -> dict[str, Any]:
    """``health`` once it says ``degraded``: under ``--workers`` the answering worker hears the
    sequencer's state within its next push (docs/operations.md §8: at most 0.25 s old)."""
    found: dict[str, Any] = {}

    def degraded() -> bool:
        answer = daemon.get("/health")
        assert answer.status == 200
        found.update(answer.json()["status"])
        return bool(found["status"] == "degraded")

    _wait_for(degraded)
    return found


def _wait_for(predicate: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def _restart(daemon: LiveDaemon) -> subprocess.CompletedProcess[str]:
    """``serve`` again on the same configuration: it must refuse (exit 65) before serving."""
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(daemon.config_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_audit_log_truncated_while_serving_is_refused_until_operator_acts(
    daemon: LiveDaemon,
) -> None:
    answered = [_submit(daemon) for _ in range(2)]
    assert [status for status, _ in answered] == [200, 200]
    assert daemon.get("/ready").status == 200
    os.truncate(daemon.audit_path, 0)
    later = [_submit(daemon) for _ in range(5)]
    # 5 of 5 later submits refused (they used to be answered PASS into the cut file)
    assert [status for status, _ in later] == [500] * 5
    assert {document["error"]["code"] for _, document in later} == {"AUDIT_FAILED"}
    assert {document["error"]["decision_id"] for _, document in later} == {None}
    health = _health(daemon)
    assert health["status"] == "degraded"
    assert "changed under the daemon" in health["reason"] and "truncated" in health["reason"]
    assert health["audit"]["failure"]["changed"].startswith("truncated")
    ready = daemon.get("/ready")
    assert ready.status == 503 and ready.error["code"] == "AUDIT_FAILED"
    assert daemon.stderr().count("ALARM audit log") == 1
    # a reload is not the operator's act: it changes nothing of the log (docs/operations.md)
    daemon.process.send_signal(signal.SIGHUP)
    _wait_for(lambda: "config_reload" in daemon.stderr() or "reloaded" in daemon.stderr())
    assert _submit(daemon)[0] == 500
    assert daemon.get("/ready").status == 503
    assert daemon.audit_path.read_bytes() == b""  # nothing was written on top
    assert daemon.stop() == 70  # the stop is not clean: daemon_stop could not be recorded
    assert "daemon_stop is not recorded" in daemon.stderr()
    assert daemon.audit_path.read_bytes() == b""
    refused = _restart(daemon)
    assert refused.returncode == 65, refused.stderr
    assert "missing or empty" in refused.stderr


def test_audit_log_replaced_by_rename_while_serving_is_refused(daemon: LiveDaemon) -> None:
    for _ in range(3):
        assert _submit(daemon)[0] == 200
    forged = daemon.audit_path.with_name("forged.jsonl")
    lines = daemon.audit_path.read_bytes().splitlines(keepends=True)
    forged.write_bytes(b"".join(lines[:-1]))  # the same history, its last decision removed
    os.replace(forged, daemon.audit_path)
    status, document = _submit(daemon)
    assert status == 500 and document["error"]["code"] == "AUDIT_FAILED"
    health = _health(daemon)
    assert health["status"] == "degraded" and "replaced" in health["reason"]
    assert daemon.get("/ready").status == 503
    assert daemon.audit_path.read_bytes() == b"".join(lines[:-1])
    assert daemon.stop() == 70
    refused = _restart(daemon)
    assert refused.returncode == 65, refused.stderr
    assert "cut back" in refused.stderr or "rewritten" in refused.stderr


def _open_descriptor_of(pid: int, path: Path) -> Path:
    """The ``/proc/PID/fd`` entry of ``pid``'s open, deleted audit log."""
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        with_suffix = f"{path} (deleted)"
        try:
            if os.readlink(entry) == with_suffix:
                return entry
        except OSError:
            continue
    raise AssertionError(f"{pid} holds no deleted {path}")


def test_audit_log_deleted_while_serving_is_refused_and_restored_from_the_open_descriptor(
    daemon: LiveDaemon,
) -> None:
    decided = [_submit(daemon)[1] for _ in range(3)]
    daemon.audit_path.unlink()
    status, document = _submit(daemon)
    assert status == 500 and document["error"]["code"] == "AUDIT_FAILED"
    health = _health(daemon)
    assert health["status"] == "degraded" and "deleted" in health["reason"]
    assert daemon.get("/ready").status == 503
    assert not daemon.audit_path.exists()  # never re-created
    # docs/operations.md §15: copy every line back from the daemon's descriptor, then stop
    held = _open_descriptor_of(daemon.process.pid, daemon.audit_path)
    shutil.copyfile(held, daemon.audit_path.with_name("restored.jsonl"))
    assert daemon.stop() == 70
    assert _restart(daemon).returncode == 65  # the sidecar names lines: no new chain
    os.replace(daemon.audit_path.with_name("restored.jsonl"), daemon.audit_path)
    anchor = f"{decided[-1]['seq']}:{decided[-1]['line_digest']}"
    assert verify_log(daemon.audit_path, anchors=(anchor,)).intact
    process, ready = start_serve("--config", str(daemon.config_path))
    assert ready["status"] == "serving"
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert verify_log(daemon.audit_path, anchors=(anchor,)).intact
