"""The daemon with a transparency log (``docs/spec/transparency.md §6``, ``§10``): answers
carry the leaf, receipts verify offline, proofs come over the wire with bounds, a monitor
follows the daemon, restarts continue the tree, and start-up refuses what it must."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import bytes_binding

from daemon import HostedSession, RejectedError, open_client, open_server
from daemon.audit._transparency import TransparencyConfig, TransparencyStartError
from daemon.cli import main as cli_main
from daemon.client._receipts import fetch_receipt
from daemon.tlog import (
    SignerKey,
    encode_receipt,
    open_checkpoint,
    peek_checkpoint,
    verify_consistency,
    verify_directory,
    verify_inclusion,
    verify_receipt,
    write_key_file,
)
from daemon.tlog._merkle import leaf_hash
from session import BytesDigestMechanism

ORIGIN = "test.example/evidenced/daemon"


def sessions() -> list[HostedSession]:
    return [HostedSession("bytes", (BytesDigestMechanism(),))]


@pytest.fixture
def signer(short_dir: Path) -> SignerKey:
    key = SignerKey.generate(ORIGIN)
    write_key_file(short_dir / "log.key", key)
    return key


def options(short_dir: Path, durability: str = "fsync", **transparency: Any) -> dict[str, Any]:
    return {
        "tcp": None,
        "unix": str(short_dir / "sock"),
        "audit_path": str(short_dir / "audit.jsonl"),
        "audit_durability": durability,
        "transparency": TransparencyConfig(
            key_file=str(short_dir / "log.key"),
            origin=ORIGIN,
            checkpoint_interval=transparency.pop("checkpoint_interval", 0.05),
            **transparency,
        ),
    }


async def start_refused(short_dir: Path) -> str:
    """Start the daemon expecting a refusal; the message (the start raises in a nursery)."""
    messages: list[str] = []
    try:
        async with open_server(sessions(), **options(short_dir)):
            pass
    except* TransparencyStartError as group:
        messages.extend(str(error) for error in group.exceptions)
    assert messages, "the daemon started"
    return messages[0]


async def submit(client: Any, payload: bytes) -> Any:
    return await client.submit("bytes", bytes_binding(payload), [payload])


async def test_answers_carry_the_leaf_and_receipts_verify_offline(
    short_dir: Path, signer: SignerKey
) -> None:
    async with (
        open_server(sessions(), **options(short_dir)),
        open_client(unix=str(short_dir / "sock")) as client,
    ):
        results = [await submit(client, b"item %d" % i) for i in range(5)]
        for result in results:
            assert result.log_index == result.seq - 1
            assert result.audit_line is not None
            assert json.loads(result.audit_line)["decision_id"] == result.decision_id
        receipt = await fetch_receipt(client, results[2], log_key=signer.verifier())
    report = verify_receipt(encode_receipt(receipt), signer.verifier())
    assert report.verified and report.log_index == results[2].log_index
    # the line in the receipt is byte for byte the line on disk
    lines = (short_dir / "audit.jsonl").read_bytes().split(b"\n")
    assert lines[results[2].log_index] == receipt["line"].encode()


async def test_proofs_over_the_wire_verify_and_out_of_range_is_refused(
    short_dir: Path, signer: SignerKey
) -> None:
    async with (
        open_server(sessions(), **options(short_dir)),
        open_client(unix=str(short_dir / "sock")) as client,
    ):
        await submit(client, b"first")
        await trio.sleep(0.2)
        first = peek_checkpoint(await client.checkpoint())
        assert first.size >= 2  # daemon_start and the first decision
        for i in range(20):
            await submit(client, b"more %d" % i)
        await trio.sleep(0.2)
        note = await client.checkpoint()
        signed = open_checkpoint(note, signer.verifier()).checkpoint
        assert signed.size > first.size
        proof = await client.consistency_proof(first.size, signed.size)
        assert verify_consistency(first.size, signed.size, proof, first.root, signed.root)
        lines = (short_dir / "audit.jsonl").read_bytes().split(b"\n")
        index = signed.size - 1
        proof = await client.inclusion_proof(index, signed.size)
        assert verify_inclusion(leaf_hash(lines[index]), index, signed.size, proof, signed.root)
        for method, args in (
            ("inclusion_proof", (signed.size + 5, signed.size + 6)),
            ("inclusion_proof", (3, 3)),
            ("consistency_proof", (0, 1)),
            ("consistency_proof", (2, 1)),
        ):
            async with open_client(unix=str(short_dir / "sock")) as client:
                with pytest.raises(RejectedError) as caught:
                    await getattr(client, method)(*args)
                assert caught.value.code == "PROOF_RANGE"


async def test_restart_continues_the_tree_and_verify_checks_everything(
    short_dir: Path, signer: SignerKey, capsys: pytest.CaptureFixture[str]
) -> None:
    for run in range(2):
        async with (
            open_server(sessions(), **options(short_dir, "write")),
            open_client(unix=str(short_dir / "sock")) as client,
        ):
            for i in range(150):
                await submit(client, b"run %d item %d" % (run, i))
        if run == 0:
            kept = (short_dir / "audit.jsonl.tlog" / "checkpoint").read_bytes()
    (short_dir / "old.checkpoint").write_bytes(kept)
    report = verify_directory(
        short_dir / "audit.jsonl.tlog",
        [short_dir / "audit.jsonl"],
        signer.verifier(),
        since=kept,
    )
    assert report.verified, report
    lines = (short_dir / "audit.jsonl").read_bytes().count(b"\n")
    assert report.checkpoint_size == lines  # the clean stop signed the daemon_stop line too
    status = cli_main(
        [
            "log",
            "verify",
            str(short_dir / "audit.jsonl.tlog"),
            "--key",
            signer.verifier().encode(),
            "--since",
            str(short_dir / "old.checkpoint"),
        ]
    )
    assert status == 0, capsys.readouterr()


async def test_health_reports_the_transparency_log(short_dir: Path, signer: SignerKey) -> None:
    async with (
        open_server(sessions(), **options(short_dir)),
        open_client(unix=str(short_dir / "sock")) as client,
    ):
        health = await client.health()
    tree = health["transparency"]
    assert tree["origin"] == ORIGIN
    assert tree["verifier_key"] == signer.verifier().encode()
    assert tree["failed"] is None and tree["size"] >= 1  # daemon_start


async def test_key_file_mode_0644_refuses_start(short_dir: Path, signer: SignerKey) -> None:
    os.chmod(short_dir / "log.key", 0o644)
    assert "group or others" in await start_refused(short_dir)
    assert not (short_dir / "audit.jsonl.tlog").exists()


async def test_checkpoint_by_another_key_refuses_start(short_dir: Path, signer: SignerKey) -> None:
    async with open_server(sessions(), **options(short_dir)):
        pass
    before = (short_dir / "audit.jsonl.tlog" / "checkpoint").read_bytes()
    (short_dir / "log.key").unlink()
    write_key_file(short_dir / "log.key", SignerKey.generate(ORIGIN))
    assert "CHECKPOINT_KEY" in await start_refused(short_dir)
    assert (short_dir / "audit.jsonl.tlog" / "checkpoint").read_bytes() == before


async def test_log_cut_back_below_the_checkpoint_refuses_start(
    short_dir: Path, signer: SignerKey
) -> None:
    async with (
        open_server(sessions(), **options(short_dir)),
        open_client(unix=str(short_dir / "sock")) as client,
    ):
        for i in range(10):
            await submit(client, b"x %d" % i)
    log = short_dir / "audit.jsonl"
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(b"\n".join(lines[:5]) + b"\n")
    (short_dir / "audit.jsonl.head").unlink(missing_ok=True)
    assert "LOG_CUT_BACK" in await start_refused(short_dir)


async def test_entry_bundles_are_written_and_verified(short_dir: Path, signer: SignerKey) -> None:
    async with (
        open_server(sessions(), **options(short_dir, "write", entry_bundles=True)),
        open_client(unix=str(short_dir / "sock")) as client,
    ):
        for i in range(300):
            await submit(client, b"bundled %d" % i)
    bundles = short_dir / "audit.jsonl.tlog" / "tile" / "entries"
    assert (bundles / "000").is_file()
    report = verify_directory(
        short_dir / "audit.jsonl.tlog", [short_dir / "audit.jsonl"], signer.verifier()
    )
    assert report.verified and report.tiles_checked >= 3, report


async def test_tile_write_failure_degrades_the_tree_not_the_decisions(
    short_dir: Path, signer: SignerKey
) -> None:
    # A directory where the first full tile must go: its rename fails.
    (short_dir / "audit.jsonl.tlog" / "tile" / "0" / "000").mkdir(parents=True)
    async with (
        open_server(sessions(), **options(short_dir, "write")),
        open_client(unix=str(short_dir / "sock")) as client,
    ):
        for i in range(300):
            result = await submit(client, b"degraded %d" % i)
            assert result.outcome == "PASS"
        health = await client.health()
        stuck = peek_checkpoint(await client.checkpoint()).size
    assert health["transparency"]["failed"] is not None
    assert health["status"] == "serving"  # the audit log is fine
    assert stuck < 256
    (short_dir / "audit.jsonl.tlog" / "tile" / "0" / "000").rmdir()
    async with open_server(sessions(), **options(short_dir)):  # the next start repairs
        pass
    report = verify_directory(
        short_dir / "audit.jsonl.tlog", [short_dir / "audit.jsonl"], signer.verifier()
    )
    assert report.verified and report.checkpoint_size == report.lines, report
