"""Retention in the real daemon (daemon/retention/_retainer.py): evidence stored before the
answer, the audit fields replay needs, ``retain`` modes, and the faults — a store that fails
answers ``AUDIT_FAILED`` (never a decision that looks retained), and the daemon serves again
once the store does. The S3 outage runs a real ``evidenced serve`` process against moto's S3
server, stopped and restarted mid-run."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import clirun
import pytest
import trio
from daemon_testkit import bytes_binding, formation_pair, sha
from retention_kit import moto_server, raw_s3_client, s3_environment, use_s3

from daemon import HostedSession, RejectedError, open_client, open_server, tail, verify_log
from daemon.config._config import ConfigError, parse_config
from daemon.retention import FilesystemStore, name_of, parse_spec
from daemon.retention._policy import RetentionPolicy
from mechanism.formation import FormationPathCertificateMechanism, formation_binding
from session import BoundProposition, MechanismDecision, MechanismOutcome

DIGEST = FormationPathCertificateMechanism().mechanism_digest


def _config(short_dir: Path, sessions: str) -> str:
    return (
        f'[server]\nlisten = ""\nsocket = "{short_dir}/sock"\n'
        f'[audit]\npath = "{short_dir}/audit.jsonl"\n' + sessions
    )


def _built(short_dir: Path, sessions: str) -> tuple[list[HostedSession], Any]:
    config = parse_config(_config(short_dir, sessions), base=short_dir, source="test.toml")
    hosted, _ = config.build_sessions()
    return hosted, config.server


def _lines(short_dir: Path) -> list[dict[str, Any]]:
    return tail(short_dir / "audit.jsonl", 1_000_000)


FORMATION_ALL = """
[sessions.formation]
mechanisms = ["formation"]
retain = "all"
store = "fs:evidence"
[sessions.plain]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
"""


async def test_decisions_of_a_retaining_session_replay_from_the_daemon_log(
    short_dir: Path,
) -> None:
    sessions, server_config = _built(short_dir, FORMATION_ALL)
    answers = {}
    async with (
        open_server(sessions, server_config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        for name in ("atom", "compose", "tampered", "unsupported-profile"):
            subject, certificate = formation_pair(name)
            binding = formation_binding(subject, certificate, mechanism_digest=DIGEST)
            answers[name] = await client.submit("formation", binding, [subject, certificate])
        plain = await client.submit("plain", bytes_binding(b"not kept"), [b"not kept"])
        subject, certificate = formation_pair("atom")
        again = await client.submit(  # stored a moment ago: not written again
            "formation",
            formation_binding(subject, certificate, mechanism_digest=DIGEST),
            [subject, certificate],
        )
        health = await client.health()
    assert [a.outcome for a in answers.values()] == ["PASS", "PASS", "FAIL", "UNKNOWN"]
    assert health["status"] == "serving"
    (store_status,) = health["retention"]["stores"]
    assert store_status["store"] == f"fs:{short_dir}/evidence"
    submitted = [item for name in answers for item in formation_pair(name)]
    distinct = len(set(submitted))  # a pair may share an item with another
    assert store_status["writes"] == store_status["created"] == distinct
    assert store_status["recent"] == len(submitted) - distinct + 2
    assert store_status["failures"] == 0
    assert again.outcome == "PASS"
    records = _lines(short_dir)
    lines = {line.get("decision_id"): line for line in records}
    start = next(line for line in records if line["event"] == "daemon_start")
    formation_config = start["session_config"]["formation"]
    provider = formation_config.pop("providers")["formation"]
    assert formation_config == {
        "mechanisms": ["formation"],
        "options": {"formation": {}},
        "retain": "all",
        "store": f"fs:{short_dir}/evidence",
    }
    assert provider["distribution"] == "evidenced" and provider["value"]
    assert start["session_config"]["plain"]["retain"] == "none"
    store = FilesystemStore(short_dir / "evidence")
    for name, answer in answers.items():
        line = lines[answer.decision_id]
        assert line["retained"] is True and line["store"] == store.id
        subject, certificate = formation_pair(name)
        assert (
            line["binding"]
            == formation_binding(subject, certificate, mechanism_digest=DIGEST).to_dict()
        )
        encoded = json.dumps(answer.result, sort_keys=True, separators=(",", ":"))
        assert line["result_digest"] == "sha256:" + hashlib.sha256(encoded.encode()).hexdigest()
        assert store.get(name_of(subject)) == subject
    plain_line = lines[plain.decision_id]
    for absent in ("binding", "result_digest", "retained", "store"):
        assert absent not in plain_line  # a session without retention: the line is unchanged
    assert name_of(b"not kept") not in {item.name for item in store.objects()}
    log = short_dir / "audit.jsonl"
    done = clirun.in_process(
        ["replay", "--log", log, "--store", store.id, "--all", "--session", "formation"]
    )
    assert done.returncode == 0, done.err
    assert done.document()["counts"]["REPRODUCED"] == 5


async def test_refused_mode_keeps_only_the_evidence_of_decisions_not_passed(
    short_dir: Path,
) -> None:
    sessions, server_config = _built(
        short_dir,
        '[sessions.b]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
        'retain = "refused"\nstore = "fs:evidence"\n',
    )
    async with (
        open_server(sessions, server_config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        passed = await client.submit("b", bytes_binding(b"fine"), [b"fine"])
        failed = await client.submit("b", bytes_binding(b"bad", expected=sha(b"x")), [b"bad"])
    assert (passed.outcome, failed.outcome) == ("PASS", "FAIL")
    lines = {line.get("decision_id"): line for line in _lines(short_dir)}
    assert lines[passed.decision_id]["retained"] is False
    assert lines[failed.decision_id]["retained"] is True
    assert "binding" in lines[passed.decision_id]  # replayable given the evidence elsewhere
    store = FilesystemStore(short_dir / "evidence")
    assert {item.name for item in store.objects()} == {name_of(b"bad")}


class StoreWatchingMechanism:
    """PASSes when its evidence appears in the store *while it is being evaluated* (it waits up
    to 10 s, blocking whatever runs it — here the event loop itself)."""

    mechanism_id = "test.store_watching"
    mechanism_digest = sha(b"test.store_watching")

    def __init__(self, root: Path) -> None:
        self.root = root

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        hexdigest = name_of(evidence[0]).removeprefix("sha256:")
        path = self.root / hexdigest[:2] / hexdigest[2:4] / hexdigest
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if path.exists():
                return MechanismDecision(MechanismOutcome.PASS, "stored during evaluation")
            time.sleep(0.002)
        return MechanismDecision(MechanismOutcome.FAIL, "not stored while evaluating")


async def test_store_writes_run_while_the_evaluation_does(short_dir: Path) -> None:
    root = short_dir / "evidence"
    policy = RetentionPolicy("all", parse_spec(f"fs:{root}"))
    mechanism = StoreWatchingMechanism(root)
    session = HostedSession("w", (mechanism,), 1, 1024, retention=policy)
    item = b"watched evidence"
    binding = BoundProposition(
        subject_id="s",
        predicate="p",
        expected=True,
        mechanism_id=mechanism.mechanism_id,
        mechanism_digest=mechanism.mechanism_digest,
        evidence_refs=(sha(item),),
        trust_roots=("r",),
        bounds=bytes_binding(item).bounds,
    )
    async with (
        open_server(
            [session], unix=str(short_dir / "sock"), tcp=None, audit_path=str(short_dir / "a")
        ) as server,
        open_client(unix=server.unix_path) as client,
    ):
        answer = await client.submit("w", binding, [item])
    assert (answer.outcome, answer.result["details"]) == ("PASS", "stored during evaluation")


async def test_corrupt_store_object_answers_audit_failed_until_it_is_removed(
    short_dir: Path,
) -> None:
    """The evidence cannot be retained (the object under its name holds other bytes, and is
    never rewritten): no decision is answered and no line is written; health is degraded;
    once the operator removes the object the daemon serves again."""
    sessions, server_config = _built(
        short_dir,
        '[sessions.b]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
        'retain = "all"\nstore = "fs:evidence"\n',
    )
    item = b"evidence whose object rotted"
    hexdigest = name_of(item).removeprefix("sha256:")
    path = short_dir / "evidence" / hexdigest[:2] / hexdigest[2:4] / hexdigest
    path.parent.mkdir(parents=True, mode=0o700)
    (short_dir / "evidence").chmod(0o700)
    path.write_bytes(b"x" * len(item))
    async with open_server(sessions, server_config) as server:
        sock = server.unix_path
        async with open_client(unix=sock) as client:  # an error answer closes the connection
            with pytest.raises(RejectedError) as refused:
                await client.submit("b", bytes_binding(item), [item])
        assert refused.value.code == "AUDIT_FAILED" and refused.value.decision_id is None
        assert "corrupt" in str(refused.value)
        async with open_client(unix=sock) as client:
            health = await client.health()
        assert health["status"] == "degraded" and "evidence store" in health["reason"]
        assert path.read_bytes() == b"x" * len(item)  # kept as evidence, never rewritten
        path.unlink()
        async with open_client(unix=sock) as client:
            answer = await client.submit("b", bytes_binding(item), [item])
            assert answer.outcome == "PASS"
            assert (await client.health())["status"] == "serving"
    decisions = [line for line in _lines(short_dir) if line["event"] == "decision"]
    assert [line["decision_id"] for line in decisions] == [answer.decision_id]
    assert path.read_bytes() == item


@pytest.mark.parametrize(
    ("sessions", "message"),
    [
        ('retain = "all"\n', "needs a store"),
        ('store = "fs:x"\n', "retain is 'none'"),
        ('retain = "some"\nstore = "fs:x"\n', "retain must be one of"),
        ('retain = "all"\nstore = "ftp://x"\n', "neither fs:PATH nor s3://"),
        ('retain = "all"\nstore = 5\n', "sessions.b.store: expected str, got int"),
        ('retain = "all"\nstore = "fs:x"\n[stores."fs:y"]\nmax_age = "1d"\n', "no session"),
        ('retain = "all"\nstore = "fs:x"\n[stores."fs:x"]\nmax_age = "soon"\n', "duration"),
        ('retain = "all"\nstore = "fs:x"\n[stores."fs:x"]\nkeep = 1\n', "unknown keys"),
    ],
)
def test_malformed_retention_configuration_is_refused(
    short_dir: Path, sessions: str, message: str
) -> None:
    text = _config(short_dir, '[sessions.b]\nmechanisms = ["bytes-sha256"]\n' + sessions)
    with pytest.raises(ConfigError, match=message):
        parse_config(text, base=short_dir, source="test.toml")


def test_store_limits_are_read_per_store(short_dir: Path) -> None:
    text = _config(
        short_dir,
        '[sessions.b]\nmechanisms = ["bytes-sha256"]\nretain = "all"\nstore = "fs:x"\n'
        '[stores."fs:x"]\nmax_age = "30d"\nmax_bytes = "1GiB"\n',
    )
    config = parse_config(text, base=short_dir, source="test.toml")
    limits = config.stores["fs:x"]
    assert (limits.max_age, limits.max_bytes) == (30 * 86400, 1 << 30)
    assert limits.store.id == f"fs:{short_dir}/x"


def test_unsafe_store_root_refuses_to_start(short_dir: Path) -> None:
    (short_dir / "evidence").mkdir(mode=0o755)
    (short_dir / "evidence").chmod(0o755)
    config = short_dir / "evidenced.toml"
    config.write_text(
        _config(
            short_dir,
            '[sessions.b]\nmechanisms = ["bytes-sha256"]\nretain = "all"\nstore = "fs:evidence"\n',
        )
    )
    done = clirun.in_process(["serve", "--config", config])
    assert done.returncode == 65
    assert "chmod 0700" in done.err and "refusing to start" in done.err
    assert list((short_dir / "evidence").iterdir()) == []


# -- the S3 outage, against a real daemon process


@pytest.fixture
def moto() -> Iterator[Any]:
    with moto_server() as server:
        yield server


def _serve(short_dir: Path, spec: str, environment: dict[str, str]) -> subprocess.Popen[str]:
    config = short_dir / "evidenced.toml"
    config.write_text(
        _config(
            short_dir,
            '[sessions.b]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
            f'retain = "all"\nstore = "{spec}"\n',
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **environment},
    )
    assert process.stdout is not None
    ready = process.stdout.readline()
    assert ready, process.stderr.read() if process.stderr else ""
    return process


async def _submit_all(
    sock: str, items: list[bytes], *, stop_after_first: Any = None
) -> dict[bytes, Any]:
    """Submit every item concurrently: item -> the answer (a decision or the refusal). With
    ``stop_after_first``, that server is stopped as soon as the first answer arrives, while
    the others are in flight."""
    answers: dict[bytes, Any] = {}
    first = trio.Event()

    async def stopper() -> None:
        await first.wait()
        await trio.to_thread.run_sync(stop_after_first.stop)

    async def one(item: bytes) -> None:
        async with open_client(unix=sock, request_timeout=60) as client:
            try:
                answers[item] = await client.submit("b", bytes_binding(item), [item])
            except RejectedError as error:
                answers[item] = error
            first.set()

    async with trio.open_nursery() as nursery:
        if stop_after_first is not None:
            nursery.start_soon(stopper)
        for item in items:
            nursery.start_soon(one, item)
    return answers


def test_s3_outage_answers_audit_failed_and_the_daemon_recovers(
    short_dir: Path, moto: Any, monkeypatch: Any
) -> None:
    """The sequence: 6 decisions answered while S3 is up; 24 concurrent submits during which
    moto is stopped (after the first answer); 6 more submits, all answered AUDIT_FAILED (no
    line, no decision id) with health degraded; moto started again on the same port; 6
    decisions answered and health serving. Then: every answered decision's evidence is in
    the bucket, the log holds exactly the answered decisions, and they all replay."""
    bucket = f"ev-{uuid.uuid4().hex[:16]}"
    spec = use_s3(monkeypatch, moto, bucket)
    host, port = moto.get_host_and_port()
    process = _serve(short_dir, spec, s3_environment(moto))
    sock = str(short_dir / "sock")
    restarted = None
    try:
        before = trio.run(_submit_all, sock, [b"up %d" % n for n in range(6)])
        items = [b"mid-run %d" % n for n in range(24)]
        midway = trio.run(partial(_submit_all, sock, items, stop_after_first=moto))
        during = trio.run(_submit_all, sock, [b"down %d" % n for n in range(6)])
        degraded = clirun.in_process(["health", "--socket", sock]).document()
        from moto.server import ThreadedMotoServer

        restarted = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
        restarted.start()
        after = trio.run(_submit_all, sock, [b"back %d" % n for n in range(6)])
        recovered = clirun.in_process(["health", "--socket", sock]).document()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    try:
        _check_outage(short_dir, spec, bucket, process, stderr, before, midway, during, after)
        assert degraded["status"] == "degraded" and spec.rstrip("/") in degraded["reason"]
        assert recovered["status"] == "serving"
        assert recovered["retention"]["stores"][0]["failures"] >= 6
    finally:
        if restarted is not None:
            restarted.stop()


def _check_outage(
    short_dir: Path,
    spec: str,
    bucket: str,
    process: subprocess.Popen[str],
    stderr: str,
    before: dict[bytes, Any],
    midway: dict[bytes, Any],
    during: dict[bytes, Any],
    after: dict[bytes, Any],
) -> None:
    assert process.returncode == 0, stderr
    assert all(answer.outcome == "PASS" for answer in before.values())
    assert all(
        isinstance(answer, RejectedError)
        and answer.code == "AUDIT_FAILED"
        and answer.decision_id is None
        for answer in during.values()
    )
    assert all(answer.outcome == "PASS" for answer in after.values())
    assert "evidence store" in stderr and "failed" in stderr
    client = raw_s3_client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix="evidence/").get("Contents", [])
    client.close()
    stored = {"sha256:" + item["Key"].removeprefix("evidence/") for item in listed}
    for answer in midway.values():  # answered either way, depending on when S3 went away
        assert not isinstance(answer, RejectedError) or (
            answer.code == "AUDIT_FAILED" and answer.decision_id is None
        )
    answered = {**before, **after}
    answered.update((item, a) for item, a in midway.items() if not isinstance(a, RejectedError))
    assert {name_of(item) for item in answered} <= stored
    decisions = [line for line in _lines(short_dir) if line["event"] == "decision"]
    assert {line["decision_id"] for line in decisions} == {
        answer.decision_id for answer in answered.values()
    }
    assert all(line["retained"] is True for line in decisions)
    assert verify_log(short_dir / "audit.jsonl").intact
    done = clirun.in_process(
        ["replay", "--log", short_dir / "audit.jsonl", "--store", spec, "--all", "--workers", "1"]
    )
    assert done.returncode == 0, done.err
    assert done.document()["counts"]["REPRODUCED"] == len(answered)
