"""``evidenced log`` offline: keygen, verify, verify-receipt, cosign and monitor on a static
directory, with the attacks it defends against (``docs/spec/transparency.md §6``–``§9``). Each
attack test asserts the exit code, the stable code, and that nothing was changed."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.cli import main
from daemon.tlog import (
    SIG_COSIGNATURE,
    KeyFileError,
    SignerKey,
    TransparencyLog,
    encode_receipt,
    load_signer,
    make_receipt,
    write_key_file,
)

ORIGIN = "test.example/evidenced/audit"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if captured.out.strip() else None, captured.err


def audit_lines(count: int, tag: str = "decision") -> list[bytes]:
    return [
        json.dumps(
            {"event": tag, "outcome": "PASS", "decision_id": f"id-{i}", "seq": i},
            separators=(",", ":"),
        ).encode()
        for i in range(1, count + 1)
    ]


def build(root: Path, signer: SignerKey, lines: list[bytes], *, bundles: bool = False) -> Path:
    """An audit log LOG and its transparency directory LOG.tlog."""
    log = root / "audit.jsonl"
    log.write_bytes(b"".join(line + b"\n" for line in lines))

    def source(first: int) -> Iterator[bytes]:
        return iter(lines[first - 1 :])

    TransparencyLog.open(
        root / "audit.jsonl.tlog",
        signer,
        log_size=len(lines),
        lines=source,
        sync=False,
        entry_bundles=bundles,
    )
    return log


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def signer() -> SignerKey:
    return SignerKey.generate(ORIGIN)


def receipt_for(root: Path, signer: SignerKey, lines: list[bytes], index: int) -> Path:
    directory = root / "audit.jsonl.tlog"
    log = TransparencyLog.open(
        directory, signer, log_size=len(lines), lines=lambda first: iter(lines[first - 1 :])
    )
    assert log.checkpoint_note is not None
    receipt = make_receipt(
        lines[index],
        index,
        len(lines),
        log.inclusion_proof(index, len(lines)),
        log.checkpoint_note,
    )
    path = root / f"receipt-{index}.json"
    path.write_bytes(encode_receipt(receipt))
    return path


# --------------------------------------------------------------------------- keys


def test_keygen_writes_0600_prints_verifier_key_and_refuses_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "log.key"
    status, document, _ = run(capsys, "log", "keygen", "--origin", ORIGIN, "--out", str(key_file))
    assert status == 0
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    signer = load_signer(key_file)
    assert document["verifier_key"] == signer.verifier().encode()
    assert document["origin"] == ORIGIN
    before = key_file.read_bytes()
    status, document, err = run(capsys, "log", "keygen", "--origin", ORIGIN, "--out", str(key_file))
    assert status == 65 and document["error"]["exit"] == 65
    assert "refusing to overwrite" in err
    assert key_file.read_bytes() == before


def test_keygen_default_origin_names_host_and_log_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "audit.jsonl"
    status, document, _ = run(
        capsys, "log", "keygen", "--audit-log", str(log), "--out", str(tmp_path / "k")
    )
    assert status == 0
    assert document["origin"].endswith("/evidenced/" + str(log).lstrip("/"))


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_key_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    key_file = write_key_file(tmp_path / "log.key", SignerKey.generate(ORIGIN))
    os.chmod(key_file, mode)
    with pytest.raises(KeyFileError, match="group or others"):
        load_signer(key_file)


def test_key_file_that_is_not_a_key_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "log.key"
    key_file.write_text("PRIVATE+KEY+x+00000000+AAAA\n")
    key_file.chmod(0o600)
    with pytest.raises(KeyFileError, match="not a signer key"):
        load_signer(key_file)


# --------------------------------------------------------------------------- log verify


def test_intact_log_verifies_with_its_rotated_files_default(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(600)
    build(tmp_path, signer, lines, bundles=True)
    # rotate: the first 300 lines move to the archive name the audit log uses
    (tmp_path / "audit.jsonl.000000000001-000000000300").write_bytes(
        b"".join(line + b"\n" for line in lines[:300])
    )
    (tmp_path / "audit.jsonl").write_bytes(b"".join(line + b"\n" for line in lines[300:]))
    vkey = signer.verifier().encode()
    status, document, _ = run(
        capsys, "log", "verify", str(tmp_path / "audit.jsonl.tlog"), "--key", vkey
    )
    assert status == 0, document
    assert document["status"] == "VERIFIED"
    assert document["lines"] == 600 and document["checkpoint_size"] == 600
    assert document["tiles_checked"] >= 4
    assert len(document["files"]) == 2


def _verify(
    capsys: pytest.CaptureFixture[str], root: Path, key: str, *extra: str
) -> tuple[int, Any]:
    before = snapshot(root)
    status, document, _ = run(
        capsys,
        "log",
        "verify",
        str(root / "audit.jsonl.tlog"),
        "--key",
        key,
        "--log",
        str(root / "audit.jsonl"),
        *extra,
    )
    assert snapshot(root) == before
    return status, document


def test_rewritten_line_is_refused(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(300)
    log = build(tmp_path, signer, lines)
    data = log.read_bytes().replace(b'"decision_id":"id-17"', b'"decision_id":"id-71"')
    log.write_bytes(data)
    status, document = _verify(capsys, tmp_path, signer.verifier().encode())
    assert (status, document["status"], document["code"]) == (1, "INVALID", "TILES_EDITED")


def test_rewritten_line_in_the_last_partial_tile_is_refused(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(300)
    log = build(tmp_path, signer, lines)
    log.write_bytes(log.read_bytes().replace(b'"decision_id":"id-299"', b'"decision_id":"id-992"'))
    status, document = _verify(capsys, tmp_path, signer.verifier().encode())
    assert (status, document["code"]) == (1, "LOG_REWRITTEN")


def test_whole_log_rewritten_with_a_new_key_fails_the_pinned_key(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(300)
    build(tmp_path, signer, lines)
    pinned = signer.verifier().encode()
    shutil.rmtree(tmp_path / "audit.jsonl.tlog")
    forger = SignerKey.generate(ORIGIN)  # same origin, new key: everything consistent
    build(tmp_path, forger, audit_lines(300, tag="forged"))
    status, document = _verify(capsys, tmp_path, pinned)
    assert (status, document["code"]) == (1, "NOTE_UNVERIFIED")
    status, document = _verify(capsys, tmp_path, forger.verifier().encode())
    assert status == 0  # it is self-consistent: only the pinned key exposes it


def test_log_cut_back_fails_against_the_older_checkpoint(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(500)
    build(tmp_path, signer, lines)
    old = tmp_path / "seen.checkpoint"
    shutil.copy(tmp_path / "audit.jsonl.tlog" / "checkpoint", old)
    # the operator cuts the log back to 400 lines and re-signs with the real key
    shutil.rmtree(tmp_path / "audit.jsonl.tlog")
    build(tmp_path, signer, lines[:400])
    key = signer.verifier().encode()
    assert _verify(capsys, tmp_path, key)[0] == 0  # alone, the cut log looks fine
    status, document = _verify(capsys, tmp_path, key, "--since", str(old))
    assert (status, document["code"]) == (1, "LOG_CUT_BACK")


def test_log_cut_back_and_regrown_is_a_fork_against_the_older_checkpoint(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(500)
    build(tmp_path, signer, lines)
    old = tmp_path / "seen.checkpoint"
    shutil.copy(tmp_path / "audit.jsonl.tlog" / "checkpoint", old)
    shutil.rmtree(tmp_path / "audit.jsonl.tlog")
    build(tmp_path, signer, [*lines[:400], *audit_lines(700, tag="regrown")[400:]])
    status, document = _verify(capsys, tmp_path, signer.verifier().encode(), "--since", str(old))
    assert (status, document["code"]) == (1, "LOG_FORKED")


def test_consistent_growth_verifies_since_an_older_checkpoint(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(700)
    build(tmp_path, signer, lines[:300])
    old = tmp_path / "seen.checkpoint"
    shutil.copy(tmp_path / "audit.jsonl.tlog" / "checkpoint", old)
    build(tmp_path, signer, lines)
    status, document = _verify(capsys, tmp_path, signer.verifier().encode(), "--since", str(old))
    assert status == 0 and document["since_size"] == 300


@pytest.mark.parametrize("damage", ["missing", "edited"])
def test_tiles_missing_or_edited_are_refused(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    build(tmp_path, signer, audit_lines(600))
    tile = tmp_path / "audit.jsonl.tlog" / "tile" / "0" / "001"
    if damage == "missing":
        tile.unlink()
    else:
        tile.write_bytes(tile.read_bytes()[:-1] + b"\x00")
    status, document = _verify(capsys, tmp_path, signer.verifier().encode())
    assert (status, document["code"]) == (
        1,
        "TILES_MISSING" if damage == "missing" else "TILES_EDITED",
    )


# --------------------------------------------------------------------------- receipts


def test_receipt_verifies_offline(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(77)
    build(tmp_path, signer, lines)
    receipt = receipt_for(tmp_path, signer, lines, 41)
    status, document, _ = run(
        capsys, "log", "verify-receipt", str(receipt), "--key", signer.verifier().encode()
    )
    assert status == 0
    assert document["status"] == "VERIFIED"
    assert (document["log_index"], document["decision_id"]) == (41, "id-42")


def test_receipt_whose_proof_is_for_another_index_is_refused(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(77)
    build(tmp_path, signer, lines)
    receipt = json.loads(receipt_for(tmp_path, signer, lines, 41).read_text())
    other = json.loads(receipt_for(tmp_path, signer, lines, 40).read_text())
    key = signer.verifier().encode()
    swapped = tmp_path / "swapped.json"
    # the line of 41 with the proof of 40, claimed at index 41 and then at 40
    for index, code in ((41, "RECEIPT_PROOF"), (40, "RECEIPT_INDEX")):
        swapped.write_text(
            json.dumps({**receipt, "inclusion_proof": other["inclusion_proof"], "log_index": index})
        )
        status, document, _ = run(capsys, "log", "verify-receipt", str(swapped), "--key", key)
        assert (status, document["code"]) == (1, code)


def test_receipt_with_a_checkpoint_by_an_unknown_key_only_is_refused(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(20)
    build(tmp_path, signer, lines)
    receipt = receipt_for(tmp_path, signer, lines, 3)
    stranger = SignerKey.generate(ORIGIN).verifier().encode()
    status, document, _ = run(capsys, "log", "verify-receipt", str(receipt), "--key", stranger)
    assert (status, document["code"]) == (1, "NOTE_UNVERIFIED")


def test_witness_cosignatures_meet_or_miss_the_threshold(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(20)
    build(tmp_path, signer, lines)
    receipt = receipt_for(tmp_path, signer, lines, 3)
    witnesses = []
    for name in ("w1.example/witness", "w2.example/witness", "w3.example/witness"):
        key_file = tmp_path / f"{name.split('/')[0]}.key"
        status, document, _ = run(
            capsys, "log", "keygen", "--witness", "--origin", name, "--out", str(key_file)
        )
        witnesses.append((key_file, document["verifier_key"]))
    key = signer.verifier().encode()
    for key_file, _ in witnesses[:2]:
        status, document, _ = run(
            capsys, "log", "cosign", str(receipt), "--key", str(key_file), "--log-key", key
        )
        assert status == 0 and document["status"] == "COSIGNED"
    flags = [arg for _, vkey in witnesses for arg in ("--witness", vkey)]
    ok = run(
        capsys, "log", "verify-receipt", str(receipt), "--key", key, *flags, "--threshold", "2"
    )
    assert ok[0] == 0 and ok[1]["cosignatures"] == 2
    short = run(
        capsys, "log", "verify-receipt", str(receipt), "--key", key, *flags, "--threshold", "3"
    )
    assert (short[0], short[1]["code"]) == (1, "WITNESS_THRESHOLD")


def test_cosign_refuses_a_checkpoint_the_log_key_does_not_sign(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(5)
    build(tmp_path, signer, lines)
    receipt = receipt_for(tmp_path, signer, lines, 0)
    witness = write_key_file(tmp_path / "w.key", SignerKey.generate("w.example", SIG_COSIGNATURE))
    before = receipt.read_bytes()
    stranger = SignerKey.generate(ORIGIN).verifier().encode()
    status, document, _ = run(
        capsys, "log", "cosign", str(receipt), "--key", str(witness), "--log-key", stranger
    )
    assert (status, document["code"]) == (1, "NOTE_UNVERIFIED")
    assert receipt.read_bytes() == before


# --------------------------------------------------------------------------- monitor


def _monitor(capsys: pytest.CaptureFixture[str], root: Path, key: str) -> tuple[int, Any]:
    status, document, _ = run(
        capsys,
        "log",
        "monitor",
        "--dir",
        str(root / "audit.jsonl.tlog"),
        "--key",
        key,
        "--state",
        str(root / "monitor.state"),
        "--evidence",
        str(root / "evidence"),
        "--count",
        "1",
    )
    return status, document


def test_monitor_follows_consistent_growth(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = audit_lines(900)
    key = signer.verifier().encode()
    build(tmp_path, signer, lines[:100])
    assert _monitor(capsys, tmp_path, key) == (0, _monitor_summary(100, "FIRST"))
    build(tmp_path, signer, lines)
    status, document = _monitor(capsys, tmp_path, key)
    assert (status, document["status"], document["size"]) == (0, "CONSISTENT", 900)
    assert document["observed"] == {"GREW": 1}


def _monitor_summary(size: int, seen: str) -> dict[str, Any]:
    return {
        "status": "CONSISTENT",
        "message": None,
        "polls": 1,
        "observed": {seen: 1},
        "size": size,
        "evidence": None,
    }


def test_forked_log_is_reported_and_both_notes_kept(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    key = signer.verifier().encode()
    build(tmp_path, signer, audit_lines(300))
    first = (tmp_path / "audit.jsonl.tlog" / "checkpoint").read_bytes()
    assert _monitor(capsys, tmp_path, key)[0] == 0
    shutil.rmtree(tmp_path / "audit.jsonl.tlog")
    build(tmp_path, signer, audit_lines(300, tag="fork"))  # same size, other root
    second = (tmp_path / "audit.jsonl.tlog" / "checkpoint").read_bytes()
    status, document = _monitor(capsys, tmp_path, key)
    assert (status, document["status"]) == (1, "FORK")
    evidence = Path(document["evidence"])
    assert (evidence / "previous.checkpoint").read_bytes() == first
    assert (evidence / "current.checkpoint").read_bytes() == second
    assert (tmp_path / "monitor.state").read_bytes() == first  # still the last consistent one


def test_forked_log_of_a_larger_size_fails_the_consistency_proof(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    key = signer.verifier().encode()
    build(tmp_path, signer, audit_lines(300))
    assert _monitor(capsys, tmp_path, key)[0] == 0
    shutil.rmtree(tmp_path / "audit.jsonl.tlog")
    build(tmp_path, signer, audit_lines(400, tag="fork"))
    status, document = _monitor(capsys, tmp_path, key)
    assert (status, document["status"]) == (1, "FORK")
    assert (Path(document["evidence"]) / "consistency.proof").is_file()


def test_rolled_back_log_is_reported(
    tmp_path: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    key = signer.verifier().encode()
    lines = audit_lines(300)
    build(tmp_path, signer, lines)
    assert _monitor(capsys, tmp_path, key)[0] == 0
    shutil.rmtree(tmp_path / "audit.jsonl.tlog")
    build(tmp_path, signer, lines[:200])
    status, document = _monitor(capsys, tmp_path, key)
    assert (status, document["status"]) == (1, "ROLLBACK")
