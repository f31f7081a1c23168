"""A full disk under the real daemon: fill, refuse, free, recover, verify.

Two real ways to make the audit log's disk full, run against ``evidenced serve`` as a child
process: a small tmpfs mounted for the test (needs root; skipped where ``mount`` is not
allowed, e.g. CI containers) and ``RLIMIT_FSIZE`` set on the daemon with ``prlimit`` (runs
anywhere on Linux; CPython ignores ``SIGXFSZ``, so the write itself fails with ``EFBIG`` after
a partial write, which is exactly a full disk's torn append).
"""

from __future__ import annotations

import contextlib
import errno
import json
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clirun
import pytest
import trio
from daemon_testkit import ROOT, formation_pair

from daemon import RejectedError, SubmitResult, open_client, tail, verify_log
from mechanism.formation import formation_binding

CLI = [sys.executable, "-m", "daemon.cli"]


class TmpfsDisk:
    """A 512 KiB tmpfs; ``fill`` writes a filler file until ``ENOSPC``."""

    def __init__(self, base: Path) -> None:
        self.directory = base / "disk"
        self.directory.mkdir()
        try:
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(self.directory)],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError) as error:
            pytest.skip(f"cannot run mount here ({error}); the rlimit form runs")
        if mounted.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); rlimit form runs")
        self.filler = self.directory / "filler"

    def fill(self, pid: int, log: Path) -> None:
        with self.filler.open("wb", buffering=0) as handle:
            try:
                while True:
                    handle.write(b"\0" * 4096)
            except OSError as error:
                assert error.errno == errno.ENOSPC

    def free(self) -> None:
        self.filler.unlink()

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.directory)], check=False)


class RlimitDisk:
    """The daemon's ``RLIMIT_FSIZE``: ``fill`` lets the log grow 300 more bytes."""

    def __init__(self, base: Path) -> None:
        if not hasattr(resource, "prlimit"):
            pytest.skip("no prlimit on this platform")
        self.directory = base
        self.pid = 0

    def fill(self, pid: int, log: Path) -> None:
        self.pid = pid
        _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (log.stat().st_size + 300, hard))

    def free(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # (a daemon that already exited)
            _, hard = resource.prlimit(self.pid, resource.RLIMIT_FSIZE)
            resource.prlimit(self.pid, resource.RLIMIT_FSIZE, (hard, hard))

    def close(self) -> None:
        pass


@pytest.fixture(params=["tmpfs", "rlimit"])
def disk(request: pytest.FixtureRequest, short_dir: Path) -> Iterator[TmpfsDisk | RlimitDisk]:
    made = TmpfsDisk(short_dir) if request.param == "tmpfs" else RlimitDisk(short_dir)
    try:
        yield made
    finally:
        made.close()


@contextlib.contextmanager
def serving(short_dir: Path, log: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [*CLI, "serve", "--socket", str(short_dir / "s"), "--audit-log", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        assert json.loads(process.stdout.readline())["status"] == "serving"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)


class Client:
    """One connection per call (an error answer closes the connection)."""

    def __init__(self, sock: str) -> None:
        self.sock = sock
        self.subject, self.certificate = formation_pair("atom")
        self.binding: dict[str, Any] | None = None

    async def submit(self, session: str = "formation") -> SubmitResult | RejectedError:
        async with open_client(unix=self.sock) as client:
            if self.binding is None:
                listed = {s["name"]: s for s in await client.list_sessions()}
                digest = listed["formation"]["mechanisms"][0]["mechanism_digest"]
                self.binding = formation_binding(
                    self.subject, self.certificate, mechanism_digest=digest
                ).to_dict()
            try:
                return await client.submit(session, self.binding, [self.subject, self.certificate])
            except RejectedError as error:
                return error

    async def health(self) -> dict[str, Any]:
        async with open_client(unix=self.sock) as client:
            return await client.health()


def refused(answer: SubmitResult | RejectedError) -> bool:
    return isinstance(answer, RejectedError) and answer.code == "AUDIT_FAILED"


def test_full_disk_refuses_then_recovers_and_the_log_counts_every_refusal(
    disk: TmpfsDisk | RlimitDisk, short_dir: Path
) -> None:
    log = disk.directory / "audit.jsonl"
    with serving(short_dir, log) as process:
        client = Client(str(short_dir / "s"))
        seen: dict[str, Any] = {}

        async def scenario() -> None:
            before = [await client.submit() for _ in range(2)]
            assert all(isinstance(a, SubmitResult) and a.outcome == "PASS" for a in before)
            disk.fill(process.pid, log)
            answers: list[SubmitResult | RejectedError] = []
            while not answers or not refused(answers[-1]):  # tmpfs: the last page fills first
                answers.append(await client.submit())
                assert len(answers) < 20
            answered = [a for a in answers if isinstance(a, SubmitResult)]
            refusals = [answers[-1], await client.submit(), await client.submit()]
            unknown = await client.submit("no-such-session")
            refusals.append(unknown)
            assert all(refused(a) for a in refusals)
            assert all(a.decision_id is None for a in refusals if isinstance(a, RejectedError))
            assert isinstance(unknown, RejectedError) and "UNKNOWN_SESSION" in unknown.message
            health = await client.health()
            assert health["status"] == "degraded"
            assert "cannot be written" in health["reason"]
            assert health["audit"]["failure"]["refused"] == 4
            on_disk = verify_log(log)  # whole lines only, while the disk is still full
            assert on_disk.intact
            assert health["audit"]["anchor"] == f"{on_disk.last_seq}:{on_disk.head}"
            last = (before + answered)[-1]
            assert isinstance(last, SubmitResult) and last.seq == on_disk.last_seq
            disk.free()
            with trio.fail_after(15):
                while (health := await client.health())["status"] != "serving":
                    await trio.sleep(0.05)
            assert health["reason"] is None and health["refusals"] == 4
            after = await client.submit()
            assert isinstance(after, SubmitResult) and after.outcome == "PASS"
            assert after.seq == on_disk.last_seq + 2  # audit_recovered, then this decision
            seen.update(decided=len(before) + len(answered) + 1, anchor=after.anchor)

        trio.run(scenario)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "flushed" in err
    report = verify_log(log, anchors=(seen["anchor"],))
    assert report.intact, report
    records = tail(log, 10_000)
    recovered = [r for r in records if r["event"] == "audit_recovered"]
    assert len(recovered) == 1
    assert recovered[0]["refused"] == 4 and recovered[0]["lost"] == 0
    assert recovered[0]["unrecorded"] == {"decision": 3, "refusal": 1}
    assert recovered[0]["error"] and recovered[0]["attempts"] >= 1
    if isinstance(disk, RlimitDisk):  # each failed write left 300 bytes, all cut back
        assert recovered[0]["truncated_bytes"] == 300 * recovered[0]["attempts"]
    assert sum(r["event"] == "decision" for r in records) == seen["decided"]
    assert [r["event"] for r in records][-1] == "daemon_stop"


def _daemon_part(err: str) -> str:
    """The daemon's stderr without coverage.py's own failure to save its data at exit: under
    ``make coverage`` the child is measured too, and under RLIMIT_FSIZE its data file cannot
    be written either (that traceback is coverage's, printed after the daemon has exited)."""
    head, marker, tail = err.partition("Exception ignored in atexit callback")
    return head if marker and "coverage/control.py" in tail else err


def test_sigterm_during_an_outage_exits_70_and_does_not_claim_flushed(
    disk: TmpfsDisk | RlimitDisk, short_dir: Path
) -> None:
    log = disk.directory / "audit.jsonl"
    with serving(short_dir, log) as process:
        client = Client(str(short_dir / "s"))

        async def scenario() -> None:
            disk.fill(process.pid, log)
            with trio.fail_after(20):
                while not refused(await client.submit()):
                    pass

        trio.run(scenario)
        before = log.read_bytes()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 70, err
    assert "flushed" not in err and "could not be written" in err
    assert "Traceback" not in _daemon_part(err)
    assert log.read_bytes() == before  # nothing torn, no daemon_stop pretending
    assert verify_log(log).intact
    assert tail(log, 1)[0]["event"] != "daemon_stop"
    disk.free()
    with serving(short_dir, log) as process:  # and it starts again on its own log
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert verify_log(log).intact
    assert [r["event"] for r in tail(log, 2)] == ["daemon_start", "daemon_stop"]


def test_client_sees_audit_failed_as_a_service_fault_not_a_decision(short_dir: Path) -> None:
    """The CLI maps AUDIT_FAILED to exit 70 with decision_id null (nothing pretends to be
    logged)."""
    disk = RlimitDisk(short_dir)
    log = short_dir / "audit.jsonl"
    with serving(short_dir, log) as process:
        disk.fill(process.pid, log)
        subject, certificate = (
            ROOT / "fixtures" / "formation" / "atom.subject.json",
            ROOT / "fixtures" / "formation" / "atom.certificate.json",
        )
        result = clirun.in_process_text(
            ["submit", "--socket", short_dir / "s", "--session", "formation", subject, certificate]
        )
        disk.free()
    assert result.returncode == 70, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "AUDIT_FAILED" and error["decision_id"] is None
