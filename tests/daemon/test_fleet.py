"""Publishing a log as static tiles and following a fleet of logs from where they are
published (``docs/deployment.md``; :mod:`daemon.retention._publish`, :mod:`daemon.fleet._fleet`).

Every log here is built the daemon's way (:func:`test_tlog_cli.build`), published with the
real CLI to a real directory or a real S3 API (moto's server), and read back only from there."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from retention_kit import moto_server, raw_s3_client, use_s3
from test_tlog_cli import audit_lines, build, receipt_for, run

from daemon.retention._publish import Publisher, PublishLoop, open_target
from daemon.tlog import SIG_COSIGNATURE, SignerKey, TileReader, write_key_file
from daemon.tlog._checkpoint import peek_checkpoint
from daemon.tlog._merkle import tree_root

ORIGINS = ("a.example/evidenced", "b.example/evidenced")


def _tlog(root: Path) -> Path:
    return root / "audit.jsonl.tlog"


def _publish(capsys: pytest.CaptureFixture[str], root: Path, to: str) -> tuple[int, Any]:
    status, document, _ = run(capsys, "log", "publish", "--dir", str(_tlog(root)), "--to", to)
    return status, document


def _fleet_file(path: Path, logs: list[tuple[SignerKey, str]], witnesses: str = "") -> Path:
    text = "".join(
        f'[[log]]\nkey = "{signer.verifier().encode()}"\ntiles = "{tiles}"\n\n'
        for signer, tiles in logs
    )
    path.write_text(text + witnesses)
    return path


def _monitor(capsys: pytest.CaptureFixture[str], fleet: Path) -> tuple[int, Any]:
    status, document, _ = run(
        capsys,
        "log",
        "monitor",
        "--fleet",
        str(fleet),
        "--state",
        str(fleet.parent / "state"),
        "--evidence",
        str(fleet.parent / "evidence"),
        "--count",
        "1",
    )
    return status, document


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[list[tuple[SignerKey, Path]]]:
    made = []
    for origin in ORIGINS:
        root = tmp_path / origin.split(".")[0]
        root.mkdir()
        made.append((SignerKey.generate(origin), root))
    yield made


def test_published_tiles_prove_the_published_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signer = SignerKey.generate(ORIGINS[0])
    lines = audit_lines(600)  # two full level-0 tiles and a partial one
    build(tmp_path, signer, lines, bundles=True)
    out = tmp_path / "public"
    assert _publish(capsys, tmp_path, f"fs:{out}") == (
        0,
        {"status": "PUBLISHED", "target": f"fs:{out}", "size": 600},
    )
    published = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert {"checkpoint", "tile/0/000", "tile/0/001", "tile/0/002.p/88"} <= published
    assert {"tile/entries/000", "tile/entries/002.p/88", "tile/1/000.p/2"} <= published
    assert not [name for name in published if ".tmp-" in name]
    checkpoint = peek_checkpoint((out / "checkpoint").read_bytes())
    tiles = open_target(f"fs:{out}")
    from daemon.retention._publish import TargetTiles

    reader = TileReader(TargetTiles(tiles), 600)  # type: ignore[arg-type]
    assert tree_root(reader.node, 600) == checkpoint.root


def test_a_full_tile_edited_at_the_target_is_never_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signer = SignerKey.generate(ORIGINS[0])
    build(tmp_path, signer, audit_lines(300))
    out = tmp_path / "public"
    out.joinpath("tile/0").mkdir(parents=True)
    out.joinpath("tile/0/000").write_bytes(b"\0" * 8192)
    status, document = _publish(capsys, tmp_path, f"fs:{out}")
    assert (status, document["error"]["code"]) == (65, "TILE_CONFLICT")
    assert out.joinpath("tile/0/000").read_bytes() == b"\0" * 8192
    assert not out.joinpath("checkpoint").exists()  # the checkpoint is never published first


def test_a_tile_lost_at_the_target_is_published_again_by_the_next_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signer = SignerKey.generate(ORIGINS[0])
    build(tmp_path, signer, audit_lines(520))
    out = tmp_path / "public"
    assert _publish(capsys, tmp_path, f"fs:{out}")[0] == 0
    original = out.joinpath("tile/0/001").read_bytes()
    out.joinpath("tile/0/001").unlink()
    assert _publish(capsys, tmp_path, f"fs:{out}")[0] == 0
    assert out.joinpath("tile/0/001").read_bytes() == original


def test_a_failing_target_is_retried_with_backoff_and_reported(tmp_path: Path) -> None:
    signer = SignerKey.generate(ORIGINS[0])
    build(tmp_path, signer, audit_lines(10))
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the target directory should be")
    loop = PublishLoop(Publisher(_tlog(tmp_path), open_target(f"fs:{blocker}/out")))
    assert loop.pass_once() is False
    failed = loop.status()
    assert (failed.failures, failed.published_size, failed.local_size) == (1, None, 10)
    assert failed.last_error is not None and failed.last_error.startswith("TARGET_FAILED")
    blocker.unlink()
    assert loop.pass_once() is True
    assert loop.status().to_dict() | {"last_success": None} == {
        "target": f"fs:{blocker}/out",
        "published_size": 10,
        "local_size": 10,
        "lag": 0,
        "failures": 1,
        "last_error": None,
        "last_success": None,
    }


def test_fleet_follows_every_replica_from_one_bucket(
    tmp_path: Path,
    replicas: list[tuple[SignerKey, Path]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with moto_server() as server:
        use_s3(monkeypatch, server, "fleet")
        logs = []
        for number, (signer, root) in enumerate(replicas):
            build(root, signer, audit_lines(300 + number))
            prefix = f"s3://fleet/tlog/{root.name}/"
            assert _publish(capsys, root, prefix)[0] == 0
            logs.append((signer, prefix))
        fleet = _fleet_file(tmp_path / "fleet.toml", logs)
        status, document = _monitor(capsys, fleet)
        assert status == 0 and document["status"] == "CONSISTENT"
        assert [log["status"] for log in document["logs"]] == ["FIRST", "FIRST"]
        head = raw_s3_client().head_object(Bucket="fleet", Key="tlog/a/tile/0/000")
        assert head["CacheControl"] == "public, max-age=31536000, immutable"
        for number, (signer, root) in enumerate(replicas):
            build(root, signer, audit_lines(700 + number))
            assert _publish(capsys, root, logs[number][1])[0] == 0
        status, document = _monitor(capsys, fleet)
        assert status == 0
        assert [(log["status"], log["size"]) for log in document["logs"]] == [
            ("GREW", 700),
            ("GREW", 701),
        ]


def test_fleet_monitor_catches_a_forked_replica(
    tmp_path: Path, replicas: list[tuple[SignerKey, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    logs = []
    for signer, root in replicas:
        build(root, signer, audit_lines(300))
        assert _publish(capsys, root, f"fs:{root}/public")[0] == 0
        logs.append((signer, f"fs:{root}/public"))
    fleet = _fleet_file(tmp_path / "fleet.toml", logs)
    assert _monitor(capsys, fleet)[0] == 0
    signer, root = replicas[1]
    first = (root / "public" / "checkpoint").read_bytes()
    shutil.rmtree(_tlog(root))
    shutil.rmtree(root / "public")
    build(root, signer, audit_lines(400, tag="fork"))  # re-signed history, larger
    assert _publish(capsys, root, f"fs:{root}/public")[0] == 0
    status, document = _monitor(capsys, fleet)
    assert (status, document["status"]) == (1, "ALARM")
    good, forked = document["logs"]
    assert (good["status"], forked["status"]) == ("SAME", "FORK")
    evidence = Path(forked["evidence"])
    assert (evidence / "previous.checkpoint").read_bytes() == first


def test_fleet_monitor_catches_a_rolled_back_replica(
    tmp_path: Path, replicas: list[tuple[SignerKey, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    signer, root = replicas[0]
    lines = audit_lines(500)
    build(root, signer, lines)
    assert _publish(capsys, root, f"fs:{root}/public")[0] == 0
    fleet = _fleet_file(tmp_path / "fleet.toml", [(signer, f"fs:{root}/public")])
    assert _monitor(capsys, fleet)[0] == 0
    shutil.rmtree(_tlog(root))
    build(root, signer, lines[:200])
    (root / "public" / "checkpoint").unlink()
    assert _publish(capsys, root, f"fs:{root}/public")[0] == 0
    status, document = _monitor(capsys, fleet)
    assert (status, document["logs"][0]["status"]) == (1, "ROLLBACK")


def test_a_checkpoint_short_of_witness_cosignatures_fails_the_fleet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    signer = SignerKey.generate(ORIGINS[0])
    build(tmp_path, signer, audit_lines(50))
    witness = SignerKey.generate("w.example/witness", SIG_COSIGNATURE)
    write_key_file(tmp_path / "w.key", witness)
    assert _publish(capsys, tmp_path, f"fs:{tmp_path}/public")[0] == 0
    fleet = _fleet_file(
        tmp_path / "fleet.toml",
        [(signer, f"fs:{tmp_path}/public")],
        f'[witnesses]\nkeys = ["{witness.verifier().encode()}"]\nthreshold = 1\n',
    )
    status, document = _monitor(capsys, fleet)
    assert (status, document["logs"][0]["status"]) == (1, "COSIGNATURES_SHORT")
    checkpoint = tmp_path / "public" / "checkpoint"
    cosigned = run(
        capsys,
        "log",
        "cosign",
        str(checkpoint),
        "--key",
        str(tmp_path / "w.key"),
        "--log-key",
        signer.verifier().encode(),
    )
    assert cosigned[0] == 0
    status, document = _monitor(capsys, fleet)
    assert (status, document["logs"][0]["status"], document["logs"][0]["cosignatures"]) == (
        0,
        "SAME",
        1,
    )


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "no [[log]]"),
        ('[[log]]\nkey = "KEY"\n', "needs key and tiles"),
        ('[[log]]\nkey = "KEY"\ntiles = "fs:x"\nweight = 2\n', "only"),
        ('[[log]]\nkey = "KEY"\ntiles = "fs:x"\n[[log]]\nkey = "KEY"\ntiles = "fs:y"\n', "share"),
        ('[[log]]\nkey = "KEY"\ntiles = "fs:x"\n[witnesses]\nthreshold = 1\n', "threshold"),
        ("[[log]\n", "Expected"),
    ],
)
def test_a_malformed_fleet_file_is_refused_whole(
    tmp_path: Path, text: str, complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = SignerKey.generate(ORIGINS[0]).verifier().encode()
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(text.replace("KEY", key))
    status, document = _monitor(capsys, fleet)
    assert (status, document["error"]["code"]) == (65, "FLEET_INVALID")
    assert complaint in document["error"]["message"]
    assert not (tmp_path / "state").exists()


def test_a_receipt_from_any_replica_verifies_against_the_fleet_and_a_stranger_does_not(
    tmp_path: Path, replicas: list[tuple[SignerKey, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    logs, receipts = [], []
    for signer, root in replicas:
        lines = audit_lines(40)
        build(root, signer, lines)
        receipts.append(receipt_for(root, signer, lines, 7))
        logs.append((signer, f"fs:{root}/public"))
    fleet = _fleet_file(tmp_path / "fleet.toml", logs)
    for receipt, (signer, _) in zip(receipts, replicas, strict=True):
        status, document, _ = run(
            capsys, "log", "verify-receipt", str(receipt), "--fleet", str(fleet)
        )
        assert (status, document["status"], document["origin"]) == (0, "VERIFIED", signer.name)
    stranger_root = tmp_path / "stranger"
    stranger_root.mkdir()
    stranger = SignerKey.generate("c.example/evidenced")
    lines = audit_lines(40)
    build(stranger_root, stranger, lines)
    forged = receipt_for(stranger_root, stranger, lines, 7)
    status, document, _ = run(capsys, "log", "verify-receipt", str(forged), "--fleet", str(fleet))
    assert (status, document["code"]) == (1, "RECEIPT_LOG_UNKNOWN")
    impostor = SignerKey.generate(ORIGINS[0])  # claims replica a's origin, other key
    impostor_root = tmp_path / "impostor"
    impostor_root.mkdir()
    build(impostor_root, impostor, lines)
    forged = receipt_for(impostor_root, impostor, lines, 7)
    status, document, _ = run(capsys, "log", "verify-receipt", str(forged), "--fleet", str(fleet))
    assert (status, document["status"]) == (1, "INVALID")


def _replica_with_decisions(root: Path, signer: SignerKey, store: Any) -> int:
    """A replica's audit log of real formation decisions (evidence retained in ``store``) and
    its transparency log with entry bundles, as the daemon writes them."""
    from daemon_testkit import formation_pair
    from retention_kit import LogWriter

    from mechanism.formation import FormationPathCertificateMechanism, formation_binding

    digest = FormationPathCertificateMechanism().mechanism_digest
    writer = LogWriter(root / "audit.jsonl", store, {"formation": ("formation",)})
    writer.start()
    for name in ("atom", "compose", "tampered"):
        subject, certificate = formation_pair(name)
        binding = formation_binding(subject, certificate, mechanism_digest=digest)
        writer.decide("formation", binding, [subject, certificate])
    lines = [line.rstrip(b"\n") for line in writer.lines]
    writer.flush()
    build(root, signer, lines, bundles=True)
    return len(lines)


def test_replay_fleet_reproduces_every_replica_from_the_bucket_alone(
    tmp_path: Path,
    replicas: list[tuple[SignerKey, Path]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from daemon.retention import open_store

    with moto_server() as server:
        spec = use_s3(monkeypatch, server, "fleet")
        store = open_store(spec)
        logs = []
        for signer, root in replicas:
            _replica_with_decisions(root, signer, store)
            prefix = f"s3://fleet/tlog/{root.name}/"
            assert _publish(capsys, root, prefix)[0] == 0
            logs.append((signer, prefix))
            shutil.rmtree(root)  # from the bucket alone
        fleet = _fleet_file(tmp_path / "fleet.toml", logs)
        status, document, _ = run(capsys, "replay", "--fleet", str(fleet), "--store", spec, "--all")
        assert (status, document["status"], document["decisions"]) == (0, "REPRODUCED", 6)
        assert [log["origin"] for log in document["logs"]] == list(ORIGINS)


def test_an_entry_bundle_edited_in_the_bucket_is_not_replayed(
    tmp_path: Path, replicas: list[tuple[SignerKey, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    from daemon.retention import FilesystemStore

    store = FilesystemStore(tmp_path / "store")
    signer, root = replicas[0]
    _replica_with_decisions(root, signer, store)
    assert _publish(capsys, root, f"fs:{root}/public")[0] == 0
    bundle = root / "public" / "tile" / "entries" / "000.p" / "4"
    bundle.write_bytes(bundle.read_bytes().replace(b'"PASS"', b'"FAIL"', 1))
    fleet = _fleet_file(tmp_path / "fleet.toml", [(signer, f"fs:{root}/public")])
    status, document, _ = run(capsys, "replay", "--fleet", str(fleet), "--store", store.id, "--all")
    assert (status, document["status"]) == (1, "NOT_REPRODUCED")
    assert document["logs"][0]["reason"] == "FLEET_LOG"
    assert "is not the log's" in document["logs"][0]["message"]


def test_a_decision_s_receipt_is_made_from_the_bucket_and_verifies_against_the_fleet(
    tmp_path: Path, replicas: list[tuple[SignerKey, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from daemon.fleet._fleet import fleet_receipt, load_fleet
    from daemon.retention import FilesystemStore
    from daemon.tlog import encode_receipt

    store = FilesystemStore(tmp_path / "store")
    logs, wanted = [], []
    for signer, root in replicas:
        _replica_with_decisions(root, signer, store)
        decision = json.loads((root / "audit.jsonl").read_bytes().splitlines()[2])
        wanted.append(decision["decision_id"])
        assert _publish(capsys, root, f"fs:{root}/public")[0] == 0
        logs.append((signer, f"fs:{root}/public"))
    fleet_path = _fleet_file(tmp_path / "fleet.toml", logs)
    fleet = load_fleet(fleet_path)
    for (signer, _), decision_id in zip(replicas, wanted, strict=True):
        receipt = fleet_receipt(fleet, decision_id=decision_id)
        assert receipt is not None and receipt["log_index"] == 2
        path = tmp_path / f"{decision_id}.json"
        path.write_bytes(encode_receipt(receipt))
        status, document, _ = run(
            capsys, "log", "verify-receipt", str(path), "--fleet", str(fleet_path)
        )
        assert (status, document["origin"]) == (0, signer.name)
    assert fleet_receipt(fleet, decision_id="00000000-0000-4000-8000-000000000000") is None
    status, document, _ = run(
        capsys, "log", "receipt", "--fleet", str(fleet_path), "--decision-id", wanted[1]
    )
    assert (status, document["log_index"]) == (0, 2)
    line = json.loads(document["line"])
    status, by_digest, _ = run(
        capsys, "log", "receipt", "--fleet", str(fleet_path), "--line-digest", line["line_digest"]
    )
    assert (status, by_digest) == (0, document)
    status, missing, _ = run(
        capsys,
        "log",
        "receipt",
        "--fleet",
        str(fleet_path),
        "--decision-id",
        "00000000-0000-4000-8000-000000000000",
    )
    assert (status, missing["error"]["code"]) == (65, "LINE_NOT_FOUND")


def _published_daemon(tmp_path: Path, publish: str) -> Any:
    from http_testkit import LiveDaemon

    signer = SignerKey.generate("daemon.test/evidenced")
    write_key_file(tmp_path / "log.key", signer)
    config = (
        '[server]\nlisten = "127.0.0.1:0"\nsocket = "s"\n[http]\nlisten = "127.0.0.1:0"\n'
        '[audit]\npath = "audit.jsonl"\n'
        f'[transparency]\nkey_file = "{tmp_path / "log.key"}"\norigin = "{signer.name}"\n'
        f'checkpoint_interval = 0.1\nentry_bundles = true\npublish = "{publish}"\n'
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
    )
    return signer, LiveDaemon(config_text=config)


def _decide(daemon: Any, count: int) -> list[str]:
    from daemon_testkit import bytes_binding

    from daemon import SyncClient

    client = SyncClient(unix=daemon.socket)
    decided = []
    for number in range(count):
        item = f"artifact {number}".encode()
        result = client.submit("bytes", bytes_binding(item), [item])
        decided.append(result.decision_id)
    return decided


def test_a_daemon_publishes_its_log_and_its_last_checkpoint_at_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import time

    from daemon import SyncClient

    public = tmp_path / "public"
    signer, daemon = _published_daemon(tmp_path, f"fs:{public}")
    try:
        decided = _decide(daemon, 20)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            health = SyncClient(unix=daemon.socket).health()
            published = health["transparency"]["publish"]
            if (published["published_size"] or 0) >= 21 and published["lag"] == 0:
                break
            time.sleep(0.1)
        assert published["target"] == f"fs:{public}"
        assert published["failures"] == 0 and published["last_error"] is None
        assert published["published_size"] >= 21  # daemon_start and 20 decisions
        assert daemon.stop() == 0
    finally:
        daemon.stop()
        local = (daemon.directory / "audit.jsonl.tlog" / "checkpoint").read_bytes()
        daemon.cleanup()
    assert (public / "checkpoint").read_bytes() == local  # the last one (daemon_stop) too
    fleet = _fleet_file(tmp_path / "fleet.toml", [(signer, f"fs:{public}")])
    for decision_id in decided:
        status, document, _ = run(
            capsys, "log", "receipt", "--fleet", str(fleet), "--decision-id", decision_id
        )
        assert status == 0 and json.loads(document["line"])["decision_id"] == decision_id


def test_a_failing_publish_target_never_fails_a_decision(tmp_path: Path) -> None:
    import time

    from daemon import SyncClient

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the published tiles should go")
    _, daemon = _published_daemon(tmp_path, f"fs:{blocker}/tiles")
    try:
        assert len(_decide(daemon, 5)) == 5  # every one answered
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            health = SyncClient(unix=daemon.socket).health()
            published = health["transparency"]["publish"]
            if published["failures"] and (published["local_size"] or 0) >= 6:
                break
            time.sleep(0.1)
        assert published["failures"] >= 1 and published["published_size"] is None
        assert published["last_error"].startswith("TARGET_FAILED")
        assert published["lag"] >= 6  # daemon_start and 5 decisions, none published
        metrics = SyncClient(unix=daemon.socket).health()["metrics"]
        lag = [m for m in metrics if m["name"] == "evidenced_publish_lag_leaves"]
        assert lag and lag[0]["value"] >= 6
    finally:
        assert daemon.stop() == 0
        assert "publish_failed" in daemon.stderr()  # the last checkpoint could not go either
        daemon.cleanup()


def test_two_replicas_whose_origins_share_a_log_tag_are_refused_in_one_fleet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two origins found by a birthday search whose SHA-256 share their first 4 bytes: their
    # decision ids would carry the same tag, so a lookup by id could not tell them apart.
    first, second = "r142083.example/evidenced", "r152660.example/evidenced"
    from daemon.tlog._names import log_tag

    assert log_tag(first) == log_tag(second)
    fleet = _fleet_file(
        tmp_path / "fleet.toml",
        [(SignerKey.generate(first), "fs:a"), (SignerKey.generate(second), "fs:b")],
    )
    status, document = _monitor(capsys, fleet)
    assert (status, document["error"]["code"]) == (65, "FLEET_INVALID")
    assert "share a log tag" in document["error"]["message"]


def test_a_decision_id_names_the_replica_whose_log_proves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import uuid

    from daemon import SyncClient
    from daemon.tlog._names import log_tag, tag_of

    public = tmp_path / "public"
    signer, daemon = _published_daemon(tmp_path, f"fs:{public}")
    try:
        decided = _decide(daemon, 5)
        health = SyncClient(unix=daemon.socket).health()
        assert daemon.stop() == 0
        lines = [
            json.loads(line)
            for line in (daemon.directory / "audit.jsonl").read_bytes().splitlines()
        ]
    finally:
        daemon.stop()
        daemon.cleanup()
    tag = log_tag(signer.name)
    assert health["transparency"]["origin"] == signer.name
    assert health["transparency"]["log_tag"] == tag
    start = lines[0]
    assert (start["event"], start["origin"], start["log_tag"]) == ("daemon_start", signer.name, tag)
    for decision_id in decided:
        assert uuid.UUID(decision_id).version == 8
        assert tag_of(decision_id) == tag
    assert len(set(decided)) == len(decided)
    # The fleet lists a log whose published tiles are unreadable first: a lookup by a tagged
    # id goes straight to the log its tag names and never reads the broken one ...
    broken = tmp_path / "broken"
    broken.mkdir()
    stranger = SignerKey.generate("broken.example/evidenced")
    fleet = _fleet_file(
        tmp_path / "fleet.toml", [(stranger, f"fs:{broken}"), (signer, f"fs:{public}")]
    )
    for decision_id in decided:
        status, document, _ = run(
            capsys, "log", "receipt", "--fleet", str(fleet), "--decision-id", decision_id
        )
        assert status == 0 and json.loads(document["line"])["decision_id"] == decision_id
    # ... while an id without a tag has to be looked for in every log, the broken one first.
    status, document, _ = run(
        capsys,
        "log",
        "receipt",
        "--fleet",
        str(fleet),
        "--decision-id",
        "00000000-0000-4000-8000-000000000000",
    )
    assert (status, document["error"]["code"]) == (65, "FLEET_INVALID")
    assert "broken.example/evidenced" in document["error"]["message"]


def test_a_daemon_without_a_transparency_log_names_decisions_with_random_v4_ids() -> None:
    import uuid

    from daemon.tlog._names import DecisionIds, tag_of

    ids = DecisionIds(None)
    made = {ids() for _ in range(1000)}
    assert len(made) == 1000 and ids.tag is None
    assert {uuid.UUID(one).version for one in made} == {4}
    assert {tag_of(one) for one in made} == {None}
