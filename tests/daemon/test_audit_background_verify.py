"""A same-length edit of an audit line that start-up trusted from the sidecar, or of a
transparency tile that start-up does not read (``docs/audit-log.md`` §7.5-7.6): the daemon
serves, verifies the rest behind itself, and turns ``degraded`` with an alarm line the moment
it finds the edit.

Real daemon processes, a real log and real tiles edited in place.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from daemon_testkit import bytes_binding

from daemon import AuditLog, open_client, verify_log
from daemon.audit._audit_startup import open_verified
from daemon.audit._transparency import (
    TransparencyConfig,
    attach,
    audit_files,
    open_transparency,
)
from daemon.tlog import SignerKey, load_signer, verify_directory, write_key_file

ORIGIN = "background.example/evidenced"


def _serve(
    short_dir: Path, *extra: str, tree: bool = False, rotate: int = 0
) -> subprocess.Popen[str]:
    config = short_dir / "evidenced.toml"
    config.write_text(
        f'[server]\nlisten = ""\nsocket = "{short_dir}/sock"\n'
        f'[audit]\npath = "{short_dir}/audit.jsonl"\nrotate_bytes = {rotate}\n'
        + (f'[transparency]\nkey_file = "{short_dir}/log.key"\norigin = "{ORIGIN}"\n' * tree)
        + '[sessions.b]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline(), process.stderr.read() if process.stderr else ""
    return process


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    return stderr


async def _decide(sock: str, count: int) -> list[str]:
    outcomes = []
    async with open_client(unix=sock) as client:
        for n in range(count):
            item = b"ok %d" % n
            outcomes.append((await client.submit("b", bytes_binding(item), [item])).outcome)
    return outcomes


async def _health_until_degraded(sock: str) -> dict[str, Any]:
    """Health, asked again until it is not ``serving`` (at most 400 times, 50 ms apart)."""
    health: dict[str, Any] = {}
    for _ in range(400):
        async with open_client(unix=sock) as client:
            health = await client.health()
        if health["status"] != "serving":
            break
        await trio.sleep(0.05)
    return health


def _edit_same_length(log: Path, line_number: int) -> None:
    lines = log.read_bytes().split(b"\n")
    line = lines[line_number - 1]
    assert b'"outcome":"PASS"' in line
    lines[line_number - 1] = line.replace(b'"outcome":"PASS"', b'"outcome":"FAIL"')
    log.write_bytes(b"\n".join(lines))


def test_same_length_edit_before_the_sidecar_point_degrades_health_with_an_alarm(
    short_dir: Path,
) -> None:
    """PASS→FAIL on an early decision line of a log that a clean stop vouched for in its
    sidecar, then start: the daemon serves (new decisions answered) and health turns
    ``degraded`` naming the line, with one ALARM line on stderr (the old daemon served and
    signed on, ``serving``, silent)."""
    log = short_dir / "audit.jsonl"
    sock = str(short_dir / "sock")
    process = _serve(short_dir)
    try:
        assert trio.run(_decide, sock, 30) == ["PASS"] * 30
    finally:
        _stop(process)
    _edit_same_length(log, 10)
    size = log.stat().st_size
    process = _serve(short_dir)
    try:
        after = trio.run(_decide, sock, 2)
        health = trio.run(_health_until_degraded, sock)
    finally:
        stderr = _stop(process)
    assert after == ["PASS", "PASS"]  # it still serves
    assert health["status"] == "degraded", health
    assert "broken at line 10" in health["reason"] and "background" in health["reason"]
    alarms = [line for line in stderr.splitlines() if "ALARM" in line]
    assert len(alarms) == 1 and "line 10" in alarms[0], stderr
    assert process.returncode == 0 and "stopped; audit log flushed" in stderr
    assert log.stat().st_size > size  # the new decisions were written after the old bytes
    assert verify_log(log).first_bad_line == 10  # still there for `audit verify` to name


def test_clean_log_verifies_in_the_background_without_an_alarm(short_dir: Path) -> None:
    """The control: the same sequence without the edit, the background verification ends
    ``verified`` and nothing is alarmed."""
    log = short_dir / "audit.jsonl"
    sock = str(short_dir / "sock")
    process = _serve(short_dir)
    try:
        trio.run(_decide, sock, 30)
    finally:
        _stop(process)
    opened = open_verified(log)
    try:
        assert opened.verified_from > 0 and opened.background is not None
        opened.background.join()
        assert (opened.background.state, opened.background.alarm) == ("verified", None)
    finally:
        os.close(opened.fd)
    process = _serve(short_dir)
    try:
        trio.run(_decide, sock, 1)
    finally:
        stderr = _stop(process)
    assert "ALARM" not in stderr


def test_a_tile_edited_on_disk_before_start_is_found_by_the_background_verification(
    short_dir: Path,
) -> None:
    """One hash flipped in the first full level-0 tile of a daemon's transparency log while
    it is stopped, then start: the start checks only the signed tail (it starts and serves,
    as the old daemon did, silently serving proofs from the edited tile), and the background
    verification of the whole tree — ``log verify``'s check — turns health ``degraded``
    naming the tile, with one ALARM line; the stop is clean."""
    log = short_dir / "audit.jsonl"
    sock = str(short_dir / "sock")
    key = write_key_file(short_dir / "log.key", SignerKey.generate(ORIGIN))
    process = _serve(short_dir, tree=True)
    try:
        assert trio.run(_decide, sock, 300) == ["PASS"] * 300  # > 256 leaves: a full tile
    finally:
        _stop(process)
    tile = short_dir / "audit.jsonl.tlog" / "tile" / "0" / "000"
    data = bytearray(tile.read_bytes())
    data[100] ^= 0x01  # same length: one hash of the tile is another
    tile.write_bytes(bytes(data))
    process = _serve(short_dir, tree=True)
    try:
        after = trio.run(_decide, sock, 2)
        health = trio.run(_health_until_degraded, sock)
    finally:
        stderr = _stop(process)
    assert after == ["PASS", "PASS"]  # it still serves
    assert health["status"] == "degraded", health
    reason = health["reason"]
    assert "TILES_EDITED" in reason and "tile/0/000" in reason and "background" in reason
    alarms = [line for line in stderr.splitlines() if "ALARM" in line]
    assert len(alarms) == 1 and "TILES_EDITED" in alarms[0], stderr
    assert process.returncode == 0 and "stopped; audit log flushed" in stderr
    assert verify_log(log).intact  # the chain is not what was edited
    report = verify_directory(tile.parents[2], [log], load_signer(key).verifier())
    assert report.code == "TILES_EDITED"  # still there for `log verify` to name


def test_an_untouched_tree_verifies_in_the_background_without_an_alarm(short_dir: Path) -> None:
    """The control: a daemon's log and tiles, opened as the daemon opens them; the tree's
    background verification ends ``verified``, nothing is alarmed."""
    log = short_dir / "audit.jsonl"
    sock = str(short_dir / "sock")
    write_key_file(short_dir / "log.key", SignerKey.generate(ORIGIN))
    process = _serve(short_dir, tree=True)
    try:
        trio.run(_decide, sock, 300)
    finally:
        stderr = _stop(process)
    assert "ALARM" not in stderr
    audit = AuditLog.open(log)
    try:
        config = TransparencyConfig(key_file=str(short_dir / "log.key"), origin=ORIGIN)
        attach(audit, open_transparency(config, log, audit.durable.seq, sync=False))
        assert audit.tree_background is not None
        audit.tree_background.join()
        assert (audit.tree_background.state, audit.alarm) == ("verified", None)
        assert audit.tree_background.status()["tiles"]
    finally:
        audit.close_sync()


def test_the_oldest_rotated_file_moved_away_leaves_the_tree_unverifiable_without_an_alarm(
    short_dir: Path,
) -> None:
    """The operator archived the oldest rotated audit file elsewhere: the tree cannot be
    recomputed from line 1 here, which is not an edit. The background verification says
    ``unverifiable`` and raises no alarm (health stays ``serving``)."""
    log = short_dir / "audit.jsonl"
    sock = str(short_dir / "sock")
    write_key_file(short_dir / "log.key", SignerKey.generate(ORIGIN))
    process = _serve(short_dir, tree=True, rotate=60_000)
    try:
        trio.run(_decide, sock, 300)
    finally:
        _stop(process)
    archives = audit_files(log)[:-1]
    assert len(archives) >= 2
    archives[0].rename(short_dir / "archived-elsewhere")
    audit = AuditLog.open(log)
    try:
        config = TransparencyConfig(key_file=str(short_dir / "log.key"), origin=ORIGIN)
        attach(audit, open_transparency(config, log, audit.durable.seq, sync=False))
        assert audit.tree_background is not None
        audit.tree_background.join()
        assert (audit.tree_background.state, audit.alarm) == ("unverifiable", None)
    finally:
        audit.close_sync()
