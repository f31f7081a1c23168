"""The transparency log over HTTP (``docs/http.md``, ``docs/transparency.md §2``, ``§5``) on a
live ``evidenced serve``: the C2SP tlog-tiles read API with its caching headers, read by Go's
``golang.org/x/mod/sumdb/tlog`` (an implementation that is not this project's), proofs, and
receipts asked at submit time and after the fact, over HTTP, the Unix socket and a static tile
directory."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import ROOT, bytes_binding
from http_testkit import LiveDaemon, read_answer

from daemon import Client, SyncClient, open_client
from daemon.tlog import (
    MemoryTree,
    VerifierKey,
    leaf_hash,
    peek_checkpoint,
    verify_inclusion,
    verify_receipt,
)

CLI = [sys.executable, "-m", "daemon.cli"]
ORIGIN = "test.example/evidenced/http-tlog"
GO_CLIENT = Path(__file__).parent / "go" / "tlog_http_client.go"
GO_PATH = Path("/usr/share/gocode")  # Debian's golang-golang-x-mod-dev
#: More than one full tile (256 leaves), so full and partial tiles are both served.
DECISIONS = 300


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=60)
    if check:
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done


class Log:
    def __init__(self, daemon: LiveDaemon, key: str, early_note: bytes) -> None:
        self.daemon = daemon
        self.key = key
        self.early_note = early_note
        self.tlog = daemon.directory / "audit.jsonl.tlog"


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Log]:
    keys = tmp_path_factory.mktemp("keys")
    made = run_cli("log", "keygen", "--origin", ORIGIN, "--out", str(keys / "log.key"))
    key = json.loads(made.stdout)["verifier_key"]
    transparency = (
        f'\n[transparency]\nkey_file = "{keys / "log.key"}"\norigin = "{ORIGIN}"\n'
        "checkpoint_interval = 0.05\nentry_bundles = true\n"
    )
    daemon = LiveDaemon(http_extra=transparency)
    try:
        yield Log(daemon, key, trio.run(_submit_all, daemon.base))
    finally:
        code = daemon.stop()
        stderr = daemon.stderr()
        daemon.cleanup()
        assert code == 0, stderr
        assert "failed" not in stderr, stderr


async def _submit_all(base: str) -> bytes:
    """Submit DECISIONS decisions over one keep-alive connection; the checkpoint signed after
    the first ten (kept for the consistency proof)."""
    async with open_client(base, request_timeout=30) as client:
        for number in range(DECISIONS):
            item = b"decision %d" % number
            await client.submit("bytes", bytes_binding(item), [item])
            if number == 9:
                early = await _wait_for_size(client, 10)
        await _wait_for_size(client, DECISIONS)
    return early


async def _wait_for_size(client: Client, size: int) -> bytes:
    with trio.fail_after(20):
        while True:
            note = await client.checkpoint()
            if peek_checkpoint(note).size >= size:
                return note
            await trio.sleep(0.05)


def get(log: Log, path: str) -> Any:
    return log.daemon.get(path)


def _checkpoint_at_rest(log: Log) -> Any:
    """The served checkpoint once the file on disk no longer moves under the read: another
    test of the module may have just submitted a decision whose checkpoint is being signed
    (the file is replaced atomically, so what was served was on disk a moment before)."""
    deadline = time.monotonic() + 10
    while True:
        before = (log.tlog / "checkpoint").read_bytes()
        served = get(log, "/checkpoint")
        if served.body == before == (log.tlog / "checkpoint").read_bytes():
            return served
        if time.monotonic() > deadline:
            return served  # the caller's assertion says what differs
        time.sleep(0.1)


def test_checkpoint_and_tiles_are_served_as_on_disk_with_the_caching_the_layout_needs(
    log: Log,
) -> None:
    checkpoint = _checkpoint_at_rest(log)
    assert checkpoint.status == 200
    assert checkpoint.headers["content-type"].startswith("text/plain")
    assert checkpoint.headers["cache-control"] == "no-cache"
    assert checkpoint.body == (log.tlog / "checkpoint").read_bytes()
    full = get(log, "/tile/0/000")
    assert full.status == 200
    assert full.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert full.body == (log.tlog / "tile/0/000").read_bytes()
    size = peek_checkpoint(checkpoint.body).size
    partial = get(log, f"/tile/0/001.p/{size - 256}")
    assert partial.status == 200
    assert partial.headers["cache-control"] == "public, max-age=60"
    assert partial.body == (log.tlog / f"tile/0/001.p/{size - 256}").read_bytes()
    bundle = get(log, "/tile/entries/000")
    assert bundle.status == 200 and bundle.body == (log.tlog / "tile/entries/000").read_bytes()


def test_go_sumdb_tlog_client_verifies_the_log_over_http(log: Log) -> None:
    go = shutil.which("go")
    if go is None or not (GO_PATH / "src/golang.org/x/mod/sumdb/tlog").is_dir():
        pytest.skip("needs go and Debian's golang-golang-x-mod-dev (apt-get install ...)")
    build = log.daemon.directory / "gobuild"
    build.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": str(GO_PATH),
        "GOCACHE": str(build / "cache"),
        "GOFLAGS": "",
    }
    binary = build / "tlog_http_client"
    subprocess.run(
        [go, "build", "-o", str(binary), str(GO_CLIENT)],
        check=True,
        env=env,
        capture_output=True,
        timeout=300,
    )
    early = peek_checkpoint(log.early_note)
    old = f"{early.size}:{base64.b64encode(early.root).decode()}"
    done = subprocess.run(
        [str(binary), log.daemon.base, log.key, old], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["origin"] == ORIGIN
    assert report["size"] >= DECISIONS
    assert report["proved"] == report["size"]  # every entry, proved under the signed root
    assert report["consistent"] is True
    assert report["tiles"]["tile/0/000"] == "public, max-age=31536000, immutable"


def test_go_client_refuses_a_checkpoint_under_another_key(log: Log, tmp_path: Path) -> None:
    go = shutil.which("go")
    if go is None or not (GO_PATH / "src/golang.org/x/mod/sumdb/tlog").is_dir():
        pytest.skip("needs go and Debian's golang-golang-x-mod-dev")
    binary = log.daemon.directory / "gobuild" / "tlog_http_client"
    if not binary.exists():
        pytest.skip("built by test_go_sumdb_tlog_client_verifies_the_log_over_http")
    other = run_cli("log", "keygen", "--origin", ORIGIN, "--out", str(tmp_path / "k"))
    done = subprocess.run(
        [
            str(binary),
            log.daemon.base,
            json.loads(other.stdout)["verifier_key"],
            "1:" + base64.b64encode(bytes(32)).decode(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "checkpoint" in done.stderr


def test_proofs_over_http_are_the_binary_protocols(log: Log) -> None:
    http, binary = SyncClient(log.daemon.base), SyncClient(unix=log.daemon.socket)
    note = http.checkpoint()
    size = peek_checkpoint(note).size
    assert note == binary.checkpoint()
    assert http.inclusion_proof(5, size) == binary.inclusion_proof(5, size)
    assert http.consistency_proof(10, size) == binary.consistency_proof(10, size)


def test_log_reads_are_refused_without_growing_the_log_or_closing_the_connection(
    log: Log,
) -> None:
    before = len(log.daemon.audit())
    bad = [
        "/tile/0/999",  # not written (yet)
        "/tile/0/1",  # not a tile path
        "/tile/../checkpoint",
        "/tile/0/000.p/256",
        "/v1/log/inclusion-proof?index=1",
        "/v1/log/inclusion-proof?index=1&tree_size=99999",
        "/v1/log/inclusion-proof?index=01&tree_size=5",
        "/v1/log/consistency-proof?old_size=1&new_size=2&new_size=3",
        "/v1/log/entry?index=1&decision_id=x",
        "/v1/log/entry?decision_id=00000000-0000-4000-8000-000000000000",
        "/v1/log/entry?line_digest=sha256:zz",
    ]
    with socket.create_connection(log.daemon.http, timeout=10) as sock:
        for path in bad:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            answer = read_answer(sock, close_wait=0.05)
            sock.settimeout(10)
            assert answer.status in (400, 404), (path, answer.status)
            assert answer.json()["error"]["code"] in {
                "UNKNOWN_KIND",
                "HEADER_INVALID",
                "PROOF_RANGE",
            }, path
            assert not answer.closed and "connection" not in answer.headers, path
        sock.sendall(b"GET /checkpoint HTTP/1.1\r\nHost: t\r\n\r\n")  # the same connection
        assert read_answer(sock, close_wait=0.05).status == 200
    assert _lines_but_noise(log, before) == []  # the malformed ones are noise (summarised)


def _lines_but_noise(log: Log, before: int) -> list[dict[str, Any]]:
    """The audit lines written since the first ``before``, but the periodic ``noise``
    summary (a minute's noise, whenever its minute ends)."""
    return [line for line in log.daemon.audit()[before:] if line["event"] != "noise"]


def test_submit_receipt_over_http_is_not_lost(log: Log, tmp_path: Path) -> None:
    """The issue's row: ``submit --connect http://… --receipt`` logged the decision, then
    exited 70 ``INTERNAL`` and lost the answer."""
    item = tmp_path / "item"
    item.write_bytes(b"over http with a receipt")
    receipt = tmp_path / "r.json"
    done = run_cli(
        "submit",
        "--connect",
        log.daemon.base,
        "--session",
        "bytes",
        str(item),
        "--receipt",
        str(receipt),
        "--key",
        log.key,
    )
    answer = json.loads(done.stdout)
    assert answer["decision_id"]
    report = verify_receipt(receipt.read_bytes(), VerifierKey.parse(log.key))
    assert report.verified, report
    assert (
        json.loads(json.loads(receipt.read_text())["line"])["decision_id"] == answer["decision_id"]
    )


@pytest.mark.parametrize("source", ["http", "socket", "dir"])
@pytest.mark.parametrize("by", ["index", "decision-id", "line-digest"])
def test_log_receipt_fetches_a_past_decisions_receipt(log: Log, source: str, by: str) -> None:
    line = log.daemon.audit_path.read_text().splitlines()[41]
    record = json.loads(line)
    value = {
        "index": str(record["seq"] - 1),
        "decision-id": record["decision_id"],
        "line-digest": record["line_digest"],
    }[by]
    where = {
        "http": ["--connect", log.daemon.base],
        "socket": ["--socket", log.daemon.socket],
        "dir": ["--dir", str(log.tlog)],
    }[source]
    done = run_cli("log", "receipt", f"--{by}", value, *where, "--key", log.key)
    receipt = json.loads(done.stdout)
    assert receipt["line"] == line
    assert receipt["log_index"] == record["seq"] - 1
    assert verify_receipt(done.stdout.encode(), VerifierKey.parse(log.key)).verified


def test_log_receipt_for_no_such_decision_is_rejected_input(log: Log) -> None:
    done = run_cli(
        "log",
        "receipt",
        "--decision-id",
        "00000000-0000-4000-8000-000000000000",
        "--connect",
        log.daemon.base,
        check=False,
    )
    assert done.returncode == 65, done.stderr
    done = run_cli("log", "receipt", "--index", "99999999", "--dir", str(log.tlog), check=False)
    assert done.returncode == 65, done.stderr


def test_log_receipt_under_the_wrong_key_is_invalid(log: Log, tmp_path: Path) -> None:
    other = run_cli("log", "keygen", "--origin", ORIGIN, "--out", str(tmp_path / "k"))
    done = run_cli(
        "log",
        "receipt",
        "--index",
        "3",
        "--connect",
        log.daemon.base,
        "--key",
        json.loads(other.stdout)["verifier_key"],
        check=False,
    )
    assert done.returncode == 1
    assert json.loads(done.stdout)["status"] == "INVALID"


def test_a_proof_for_a_size_no_checkpoint_was_signed_at_is_served_not_internal(
    log: Log,
) -> None:
    """Found by schemathesis: ``inclusion-proof?index=0&tree_size=6`` was ``500 INTERNAL``
    (``TileError``: the partial tiles of size 6 exist only if a checkpoint was signed at 6),
    over HTTP and over the binary protocol alike."""
    signed = set()
    for name in (log.tlog / "tile" / "0").glob("000.p/*"):
        signed.add(int(name.name))
    size = next(n for n in range(3, 256) if n not in signed)
    http, binary = SyncClient(log.daemon.base), SyncClient(unix=log.daemon.socket)
    assert http.inclusion_proof(0, size) == binary.inclusion_proof(0, size)
    assert http.consistency_proof(2, size) == binary.consistency_proof(2, size)
    with socket.create_connection(log.daemon.http, timeout=10) as sock:
        sock.sendall(f"GET /v1/log/inclusion-proof?index=0&tree_size={size} HTTP/1.1\r\n".encode())
        sock.sendall(b"Host: t\r\n\r\n")
        assert read_answer(sock, close_wait=0.05).status == 200
    lines = [line.encode() for line in log.daemon.audit_path.read_text().splitlines()]
    tree = MemoryTree.from_entries(lines[:size])
    proof = http.inclusion_proof(1, size)
    assert verify_inclusion(leaf_hash(lines[1]), 1, size, proof, tree.root(size))


def test_the_log_routes_need_the_listeners_token(tmp_path: Path) -> None:
    """The audit lines name requesters: a listener with a ``tokens_file`` serves its log (and
    the entry lookup) only to a bearer of one of its tokens; ``log receipt --token-file``
    is one."""
    token = "a-token-for-the-log-routes"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{hashlib.sha256(token.encode()).hexdigest()} reader\n")
    tokens.chmod(0o600)
    (tmp_path / "token").write_text(token + "\n")
    made = run_cli("log", "keygen", "--origin", ORIGIN, "--out", str(tmp_path / "log.key"))
    key = json.loads(made.stdout)["verifier_key"]
    daemon = LiveDaemon(
        http_extra=(
            f'tokens_file = "{tokens}"\n[transparency]\nkey_file = "{tmp_path / "log.key"}"\n'
            f'origin = "{ORIGIN}"\ncheckpoint_interval = 0.05\n'
        )
    )
    try:
        for path in ("/checkpoint", "/tile/0/000.p/1", "/v1/log/entry?index=0"):
            answer = daemon.get(path)
            assert answer.status == 401, path
            assert answer.json()["error"]["code"] == "UNAUTHENTICATED"
        done = run_cli(
            "log",
            "receipt",
            "--index",
            "0",
            "--connect",
            daemon.base,
            "--token-file",
            str(tmp_path / "token"),
            "--key",
            key,
        )
        assert json.loads(done.stdout)["log_index"] == 0
        refused = run_cli("log", "receipt", "--index", "0", "--connect", daemon.base, check=False)
        assert refused.returncode == 65
        assert "UNAUTHENTICATED" in refused.stdout
    finally:
        daemon.stop()
        daemon.cleanup()


def test_an_integer_of_5000_digits_or_a_path_over_path_max_is_refused_as_noise(log: Log) -> None:
    """The issue's row: each of these was ``500 INTERNAL`` (Python's int conversion limit, or
    ``ENAMETOOLONG``) and an error line on stderr, no strike. Each is now refused before a
    number is converted — ``UNKNOWN_KIND`` for a tile path, ``HEADER_INVALID`` for a query —
    on a connection that stays open, counted as noise, with no error line and no audit line."""
    digits = "7" * 5000
    bad = {
        "/tile/0/" + "x123/" * 1700 + "456": 404,  # 5,103 digits
        "/tile/0/" + "x001/" * 1000 + "000": 404,  # 5,008 characters: over PATH_MAX
        "/tile/entries/" + "x001/" * 1000 + "000.p/7": 404,
        f"/v1/log/inclusion-proof?index={digits}&tree_size=1": 400,
        f"/v1/log/consistency-proof?old_size=1&new_size={digits}": 400,
        f"/v1/log/entry?index={digits}": 400,
        "/v1/log/entry?index=99999999999999999999": 400,  # 20 digits: over 2^63 - 1
    }
    before_lines = len(log.daemon.audit())
    before_noise = log.daemon.get("/health").json()["status"]["noise"]["total"]
    before_stderr = log.daemon.stderr()
    with socket.create_connection(log.daemon.http, timeout=10) as sock:
        for path, status in bad.items():
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            answer = read_answer(sock, close_wait=0.05)
            sock.settimeout(10)
            code = "UNKNOWN_KIND" if status == 404 else "HEADER_INVALID"
            assert (answer.status, answer.json()["error"]["code"]) == (status, code), path[:40]
            assert not answer.closed, path[:40]
    noise = log.daemon.get("/health").json()["status"]["noise"]["total"]
    assert noise - before_noise == len(bad)
    assert _lines_but_noise(log, before_lines) == []
    added = log.daemon.stderr()[len(before_stderr) :]
    assert "error" not in added and "connection_failed" not in added, added[:2000]
