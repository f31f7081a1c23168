"""``evidenced replay``: every outcome of daemon/replay/_replay.py, the refusals of
_replay_run.py, selection, the process pool, both store backends and a 10,000-decision log.

Logs are written the daemon's way by ``retention_kit.LogWriter`` (real mechanisms, real
stores, lines sealed by the audit format); the CLI runs in-process (``clirun``) except where
the real process matters (a terminal's progress bar)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clirun
import pytest
from daemon_testkit import bytes_binding, formation_pair
from retention_kit import (
    LogWriter,
    VersionedMechanism,
    moto_server,
    offer_provider,
    use_s3,
    versioned_binding,
    withdraw_provider,
)

from daemon.retention import FilesystemStore, name_of, open_store
from mechanism.formation import FormationPathCertificateMechanism, formation_binding

FORMATION = ("formation",)
DIGEST = FormationPathCertificateMechanism().mechanism_digest
CASES = ("atom", "compose", "tampered", "unsupported-profile")


@pytest.fixture
def versioned(monkeypatch: Any) -> type[VersionedMechanism]:
    """The ``test-versioned`` mechanism name, at build 1, for this test."""
    offer_provider(monkeypatch)
    monkeypatch.setattr(VersionedMechanism, "digest_version", 1)
    monkeypatch.setattr(VersionedMechanism, "behaviour", 1)
    return VersionedMechanism


def _formation_log(
    tmp_path: Path, store: Any = None, repeat: int = 1
) -> tuple[Path, Any, list[dict[str, Any]]]:
    store = store if store is not None else FilesystemStore(tmp_path / "store")
    writer = LogWriter(tmp_path / "audit.jsonl", store, {"formation": FORMATION})
    writer.start()
    lines = []
    for _ in range(repeat):
        for name in CASES:
            subject, certificate = formation_pair(name)
            binding = formation_binding(subject, certificate, mechanism_digest=DIGEST)
            lines.append(
                writer.decide("formation", binding, [subject, certificate], reuse=repeat > 1)
            )
    return writer.flush(), store, lines


def _replay(log: Path, store: Any, *args: str) -> clirun.CliResult:
    return clirun.in_process(["replay", "--log", log, "--store", store.id, *args])


def test_every_decision_of_an_intact_log_is_reproduced(tmp_path: Path) -> None:
    log, store, lines = _formation_log(tmp_path)
    assert [line["outcome"] for line in lines] == ["PASS", "PASS", "FAIL", "UNKNOWN"]
    done = _replay(log, store, "--all", "--workers", "1")
    assert done.returncode == 0, done.err
    summary = done.document()
    assert summary["status"] == "REPRODUCED" and summary["decisions"] == 4
    assert summary["counts"]["REPRODUCED"] == 4 and summary["problems"] == []
    assert summary["log"]["last_seq"] == 5 and summary["store"] == store.id
    assert done.err == ""  # not a terminal: no progress bar


def test_one_decision_is_replayed_by_seq_or_by_decision_id(tmp_path: Path) -> None:
    log, store, lines = _formation_log(tmp_path)
    failed = lines[2]
    for target in (str(failed["seq"]), failed["decision_id"]):
        done = _replay(log, store, target)
        assert done.returncode == 0, done.err
        report = done.document()
        assert report["status"] == "REPRODUCED"
        assert (report["seq"], report["decision_id"]) == (failed["seq"], failed["decision_id"])


def test_missing_evidence_is_unavailable_and_names_the_digest(tmp_path: Path) -> None:
    log, store, lines = _formation_log(tmp_path)
    certificate = lines[0]["evidence"][1]["digest"]
    assert store.delete(certificate)
    done = _replay(log, store, str(lines[0]["seq"]))
    assert done.returncode == 1
    report = done.document()
    assert report["status"] == "EVIDENCE_UNAVAILABLE"
    assert [(item["digest"], item["problem"]) for item in report["evidence"]] == [
        (certificate, "missing")
    ]
    assert "replayed" not in report


def test_corrupt_evidence_is_never_evaluated(tmp_path: Path) -> None:
    log, store, lines = _formation_log(tmp_path)
    subject = lines[1]["evidence"][0]
    hexdigest = subject["digest"].removeprefix("sha256:")
    path = store.root / hexdigest[:2] / hexdigest[2:4] / hexdigest
    data = bytearray(path.read_bytes())
    data[10] ^= 0x01  # one flipped bit, same length
    path.write_bytes(bytes(data))
    done = _replay(log, store, "--all", "--workers", "1")
    assert done.returncode == 1
    summary = done.document()
    assert summary["counts"]["EVIDENCE_CORRUPT"] == 1
    assert summary["counts"]["REPRODUCED"] == 3
    (problem,) = summary["problems"]
    assert problem["seq"] == lines[1]["seq"] and problem["status"] == "EVIDENCE_CORRUPT"
    assert problem["evidence"][0]["digest"] == subject["digest"]
    assert problem["evidence"][0]["problem"] == "corrupt"
    assert "replayed" not in problem


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda line: line.replace(b'"PASS"', b'"FAIL"', 1), "edited"),
        (lambda line: b"", "dropped"),
    ],
)
def test_log_that_does_not_verify_is_refused_naming_the_first_bad_line(
    tmp_path: Path, edit: Any, reason: str
) -> None:
    log, store, _ = _formation_log(tmp_path)
    raw = log.read_bytes().splitlines(keepends=True)
    raw[2] = edit(raw[2])
    log.write_bytes(b"".join(raw))
    done = _replay(log, store, "--all")
    assert done.returncode == 65
    document = done.document()
    assert document["status"] == "REFUSED" and document["reason"] == "LOG_BROKEN"
    assert document["verify"]["first_bad_line"] == 3
    assert "line 3" in done.err


def test_decision_logged_other_than_decided_now_is_different_with_both(
    tmp_path: Path, versioned: type[VersionedMechanism]
) -> None:
    """The mechanism's behaviour changed but its digest did not (its digest does not capture
    what it does): the replay shows both decisions and which fields differ."""
    store = FilesystemStore(tmp_path / "store")
    writer = LogWriter(tmp_path / "audit.jsonl", store, {"v": ("test-versioned",)})
    writer.start()
    passed = writer.decide("v", versioned_binding(b"ok 1"), [b"ok 1"])
    failed = writer.decide("v", versioned_binding(b"no"), [b"no"])
    log = writer.flush()
    versioned.behaviour = 2
    done = _replay(log, store, "--all", "--workers", "1")
    assert done.returncode == 1
    summary = done.document()
    assert summary["counts"]["DIFFERENT"] == 1 and summary["counts"]["REPRODUCED"] == 1
    (problem,) = summary["problems"]
    assert problem["seq"] == passed["seq"] and problem["status"] == "DIFFERENT"
    assert problem["differences"] == ["outcome", "details", "reason_codes", "result_digest"]
    assert problem["logged"]["outcome"] == "PASS" and problem["replayed"]["outcome"] == "FAIL"
    assert problem["logged"]["result_digest"] == passed["result_digest"]
    assert failed["outcome"] == "FAIL"


def test_changed_mechanism_is_refused_unless_allowed(
    tmp_path: Path, versioned: type[VersionedMechanism]
) -> None:
    store = FilesystemStore(tmp_path / "store")
    writer = LogWriter(tmp_path / "audit.jsonl", store, {"v": ("test-versioned",)})
    writer.start()
    old_digest = VersionedMechanism().mechanism_digest
    kept = writer.decide("v", versioned_binding(b"no"), [b"no"])
    changed = writer.decide("v", versioned_binding(b"ok"), [b"ok"])
    log = writer.flush()
    versioned.digest_version = 2  # a new build, which also decides differently
    versioned.behaviour = 2
    new_digest = VersionedMechanism().mechanism_digest

    refused = _replay(log, store, "--all", "--workers", "1")
    assert refused.returncode == 1
    summary = refused.document()
    assert summary["counts"]["MECHANISM_CHANGED"] == 2
    for problem in summary["problems"]:
        assert problem["evaluated"] is False and "replayed" not in problem
        assert problem["change"]["logged_digest"] == old_digest
        assert problem["change"]["running_digest"] == new_digest
        provider = problem["change"]["provider"]  # the same package, changed in place
        assert provider["name"] == "test-versioned"
        assert provider["logged"] == provider["running"] is not None
        assert "--allow-mechanism-change" in problem["reason"]

    allowed = _replay(log, store, "--all", "--workers", "1", "--allow-mechanism-change")
    assert allowed.returncode == 1
    reports = {p["seq"]: p for p in allowed.document()["problems"]}
    assert reports[kept["seq"]]["evaluated"] is True
    assert reports[kept["seq"]]["same_decision"] is True
    assert reports[changed["seq"]]["same_decision"] is False
    assert reports[changed["seq"]]["differences"] == ["outcome", "details", "reason_codes"]
    assert reports[changed["seq"]]["logged"]["outcome"] == "PASS"
    assert reports[changed["seq"]]["replayed"]["outcome"] == "FAIL"


def test_session_the_log_cannot_rebuild_is_not_replayable(tmp_path: Path) -> None:
    store = FilesystemStore(tmp_path / "store")
    writer = LogWriter(
        tmp_path / "audit.jsonl",
        store,
        {"host": ("bytes-sha256",), "old": ("bytes-sha256",)},
        host_built=frozenset({"host"}),
    )
    writer.start()
    item = b"evidence"
    host = writer.decide("host", bytes_binding(item), [item])
    writer.replay_fields = False  # a line as written before replay support
    old = writer.decide("old", bytes_binding(item), [item])
    log = writer.flush()
    done = _replay(log, store, "--all", "--workers", "1")
    assert done.returncode == 1
    reports = {p["seq"]: p for p in done.document()["problems"]}
    assert reports[host["seq"]]["status"] == "NOT_REPLAYABLE"
    assert "records no configuration for session 'host'" in reports[host["seq"]]["reason"]
    assert reports[old["seq"]]["status"] == "NOT_REPLAYABLE"
    assert "records no binding" in reports[old["seq"]]["reason"]


def test_mechanism_no_longer_installed_is_not_replayable(
    tmp_path: Path, versioned: type[VersionedMechanism], monkeypatch: Any
) -> None:
    store = FilesystemStore(tmp_path / "store")
    writer = LogWriter(tmp_path / "audit.jsonl", store, {"v": ("test-versioned",)})
    writer.start()
    line = writer.decide("v", versioned_binding(b"ok"), [b"ok"])
    log = writer.flush()
    withdraw_provider(monkeypatch)
    done = _replay(log, store, str(line["seq"]))
    assert done.returncode == 1
    report = done.document()
    assert report["status"] == "NOT_REPLAYABLE"
    assert "'test-versioned' cannot be built now" in report["reason"]


@pytest.mark.parametrize(
    ("target", "reason"), [("1", "NOT_A_DECISION"), ("99", "NOT_FOUND"), ("nope", "NOT_FOUND")]
)
def test_target_that_is_not_a_decision_of_the_log_is_refused(
    tmp_path: Path, target: str, reason: str
) -> None:
    log, store, _ = _formation_log(tmp_path)
    done = _replay(log, store, target)
    assert done.returncode == 65
    assert done.document()["reason"] == reason


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["3", "--all"],
        ["3", "--session", "formation"],
        ["--all", "--since", "yesterday"],
        ["--all", "--workers", "0"],
    ],
)
def test_ambiguous_or_malformed_selection_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    log, store, _ = _formation_log(tmp_path)
    done = _replay(log, store, *args)
    assert done.returncode == 2
    assert clirun.error_of(done)["code"] == "USAGE"


def test_unopenable_store_is_refused_before_any_evaluation(tmp_path: Path) -> None:
    log, _, _ = _formation_log(tmp_path)
    done = clirun.in_process(["replay", "--log", log, "--store", f"fs:{tmp_path}/absent", "--all"])
    assert done.returncode == 65
    assert done.document()["reason"] == "STORE_UNAVAILABLE"
    assert not (tmp_path / "absent").exists()


def test_session_and_since_select_among_all(tmp_path: Path) -> None:
    store = FilesystemStore(tmp_path / "store")
    writer = LogWriter(
        tmp_path / "audit.jsonl", store, {"a": ("bytes-sha256",), "b": ("bytes-sha256",)}
    )
    writer.start()
    lines = [
        writer.decide(session, bytes_binding(item), [item])
        for session, item in [("a", b"1"), ("b", b"2"), ("a", b"3"), ("b", b"4")]
    ]
    writer.refusal()
    log = writer.flush()
    only_a = _replay(log, store, "--all", "--session", "a", "--workers", "1").document()
    assert only_a["decisions"] == 2 and only_a["status"] == "REPRODUCED"
    since = lines[2]["timestamp"]
    recent = _replay(log, store, "--all", "--since", since, "--workers", "1").document()
    assert recent["decisions"] == 2
    nothing = _replay(log, store, "--all", "--session", "c")
    assert nothing.returncode == 1 and nothing.document()["status"] == "NO_DECISIONS"


def test_rotated_log_replays_with_its_earlier_files(tmp_path: Path) -> None:
    """The current file alone lacks the daemon_start its decisions were made under: those
    are NOT_REPLAYABLE until the earlier file is given too (oldest first)."""
    log, store, _ = _formation_log(tmp_path)
    rotated = clirun.in_process(["audit", "rotate", log])
    assert rotated.returncode == 0, rotated.err
    (archive,) = sorted(tmp_path.glob("audit.jsonl.0*"))
    last = log.read_bytes().splitlines()[-1]
    writer = LogWriter(log, store, {"formation": FORMATION})
    writer.seq = int(last.split(b'"seq":')[1].split(b",")[0])
    writer.head = last.rsplit(b'"line_digest":"', 1)[1][:-2].decode()
    writer.built["formation"] = (FormationPathCertificateMechanism(),)
    subject, certificate = formation_pair("atom")
    writer.decide(
        "formation",
        formation_binding(subject, certificate, mechanism_digest=DIGEST),
        [
            subject,
            certificate,
        ],
    )
    writer.flush()
    alone = _replay(log, store, "--all", "--workers", "1").document()
    assert alone["counts"]["NOT_REPLAYABLE"] == 1
    assert "no daemon_start" in alone["problems"][0]["reason"]
    done = clirun.in_process(
        ["replay", "--log", archive, "--log", log, "--store", store.id, "--all"]
    )
    assert done.returncode == 0, done.err
    assert done.document()["decisions"] == 5


def test_worker_pool_reports_exactly_what_one_process_reports(tmp_path: Path) -> None:
    log, store, lines = _formation_log(tmp_path, repeat=60)  # 240 decisions: two chunks
    store.delete(lines[2]["evidence"][0]["digest"])  # every "tampered" decision: 60 problems
    pooled = _replay(log, store, "--all", "--workers", "2").document()
    alone = _replay(log, store, "--all", "--workers", "1").document()
    assert pooled["workers"] == 2 and alone["workers"] == 1
    assert pooled["decisions"] == alone["decisions"] == 240
    assert pooled["counts"] == alone["counts"]
    assert pooled["counts"]["EVIDENCE_UNAVAILABLE"] == 60
    assert pooled["problems"] == alone["problems"]  # the same reports, in log order
    assert [p["seq"] for p in pooled["problems"]] == sorted(p["seq"] for p in pooled["problems"])


def test_ten_thousand_decisions_replay_in_a_worker_pool(tmp_path: Path) -> None:
    """A 10,000-decision log replays whole, streamed, in two processes: every decision
    fetches and re-hashes its evidence (10 distinct objects: a synced object write costs
    milliseconds here, a fetch microseconds). benchmarks/bench_replay.py measures the rate
    against the in-process evaluation floor."""
    store = FilesystemStore(tmp_path / "store")
    writer = LogWriter(tmp_path / "audit.jsonl", store, {"bytes": ("bytes-sha256",)})
    writer.start()
    for number in range(10_000):
        item = b"evidence %d" % (number % 10)
        writer.decide("bytes", bytes_binding(item), [item], reuse=True)
        if number % 1000 == 999:
            writer.flush()
    log = writer.flush()
    done = _replay(log, store, "--all", "--workers", "2")
    assert done.returncode == 0, done.err
    summary = done.document()
    assert summary["counts"]["REPRODUCED"] == 10_000 and summary["decisions"] == 10_000
    assert summary["log"]["lines"] == 10_001


def test_progress_bar_appears_only_on_a_terminal(tmp_path: Path) -> None:
    log, store, _ = _formation_log(tmp_path)
    controller, terminal = pty.openpty()
    try:
        command = [sys.executable, "-m", "daemon.cli", "replay", "--log", str(log)]
        done = subprocess.run(
            [*command, "--store", store.id, "--all", "--workers", "1"],
            stdout=terminal,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == 0
    assert b"replay" in done.stderr and b"%|" in done.stderr


@pytest.fixture(scope="module")
def moto() -> Iterator[Any]:
    with moto_server() as server:
        yield server


def test_replay_from_the_s3_store(tmp_path: Path, moto: Any, monkeypatch: Any) -> None:
    store = open_store(use_s3(monkeypatch, moto, f"ev-{uuid.uuid4().hex[:16]}"))
    log, _, lines = _formation_log(tmp_path, store)
    done = _replay(log, store, "--all", "--workers", "1")
    assert done.returncode == 0, done.err
    assert done.document()["counts"]["REPRODUCED"] == 4
    store.delete(lines[3]["evidence"][0]["digest"])
    missing = _replay(log, store, str(lines[3]["seq"])).document()
    assert missing["status"] == "EVIDENCE_UNAVAILABLE"
    assert missing["evidence"][0]["digest"] == lines[3]["evidence"][0]["digest"]
    assert name_of(formation_pair("unsupported-profile")[0]) == missing["evidence"][0]["digest"]
    store.close()


def _refused_mode_log(tmp_path: Path) -> tuple[Path, Any, list[dict[str, Any]]]:
    """A healthy ``retain = "refused"`` store: the passed decisions kept no evidence, by
    design (``retained: false``), the others kept theirs."""
    store = FilesystemStore(tmp_path / "store")
    writer = LogWriter(tmp_path / "audit.jsonl", store, {"formation": FORMATION}, retain="refused")
    writer.start()
    lines = []
    for name in CASES:
        subject, certificate = formation_pair(name)
        binding = formation_binding(subject, certificate, mechanism_digest=DIGEST)
        kept = name not in ("atom", "compose")  # the two PASS pairs
        lines.append(writer.decide("formation", binding, [subject, certificate], store=kept))
    return writer.flush(), store, lines


def test_replay_all_is_not_red_on_a_healthy_retain_refused_store(tmp_path: Path) -> None:
    """``replay --all`` on an intact ``retain = "refused"`` store exited 1,
    ``NOT_REPRODUCED``: the passed decisions, by design not retained, counted as
    ``EVIDENCE_UNAVAILABLE``, so a scheduled replay job was red on every healthy run."""
    log, store, lines = _refused_mode_log(tmp_path)
    assert [line["retained"] for line in lines] == [False, False, True, True]
    done = _replay(log, store, "--all", "--workers", "1")
    assert done.returncode == 0, done.err
    summary = done.document()
    assert summary["status"] == "REPRODUCED" and summary["decisions"] == 4
    assert summary["counts"]["NOT_RETAINED"] == 2 and summary["counts"]["REPRODUCED"] == 2
    assert summary["counts"]["EVIDENCE_UNAVAILABLE"] == 0 and summary["problems"] == []
    one = _replay(log, store, str(lines[0]["seq"]))
    assert one.returncode == 0 and one.document()["status"] == "NOT_RETAINED"


def test_kept_evidence_that_is_missing_is_still_a_fault_beside_not_retained(
    tmp_path: Path,
) -> None:
    log, store, lines = _refused_mode_log(tmp_path)
    assert store.delete(lines[2]["evidence"][0]["digest"])
    done = _replay(log, store, "--all", "--workers", "1")
    assert done.returncode == 1
    summary = done.document()
    assert summary["status"] == "NOT_REPRODUCED"
    assert summary["counts"]["EVIDENCE_UNAVAILABLE"] == 1
    assert summary["counts"]["NOT_RETAINED"] == 2
    assert [p["seq"] for p in summary["problems"]] == [lines[2]["seq"]]


async def test_replay_all_over_the_real_daemons_retain_refused_log_is_green(
    short_dir: Path,
) -> None:
    """The same row through the real daemon: a ``retain = "refused"`` session answers one
    PASS (not retained, by design) and one FAIL (retained); ``replay --all`` exits 0."""
    from daemon import open_client, open_server
    from daemon.config._config import parse_config

    config = parse_config(
        f'[server]\nlisten = ""\nsocket = "{short_dir}/sock"\n'
        f'[audit]\npath = "{short_dir}/audit.jsonl"\n'
        '[sessions.b]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
        'retain = "refused"\nstore = "fs:evidence"\n',
        base=short_dir,
        source="test.toml",
    )
    hosted, _ = config.build_sessions()
    async with (
        open_server(hosted, config.server) as server,
        open_client(unix=server.unix_path) as client,
    ):
        passed = await client.submit("b", bytes_binding(b"fine"), [b"fine"])
        failed = await client.submit(
            "b", bytes_binding(b"bad", expected="sha256:" + "0" * 64), [b"bad"]
        )
    assert (passed.outcome, failed.outcome) == ("PASS", "FAIL")
    store = FilesystemStore(short_dir / "evidence")
    done = _replay(short_dir / "audit.jsonl", store, "--all", "--workers", "1")
    assert done.returncode == 0, done.err
    summary = done.document()
    assert summary["status"] == "REPRODUCED"
    assert summary["counts"]["NOT_RETAINED"] == 1 and summary["counts"]["REPRODUCED"] == 1
