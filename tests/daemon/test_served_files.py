"""The one guarded way to serve a file (``daemon/tlog/_served_files.py``), and the attacks it
stops on a live daemon (issue "hold under attack, third round": a FIFO planted in ``tile/``
blocked trio's thread pool, checkpoint signing and SIGTERM; a symlink in ``tile/`` served
``/etc/passwd`` over HTTP).

Real files, a real FIFO, real symbolic links, a real Unix socket; the daemon is the real
``evidenced serve`` over HTTP.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from daemon_testkit import bytes_binding
from http_testkit import LiveDaemon, read_answer

from daemon import SyncClient
from daemon.tlog import TileDirectory, peek_checkpoint
from daemon.tlog._served_files import (
    MAX_PATH,
    FileReads,
    NotServed,
    ReadsStuck,
    read_regular,
)

ORIGIN = "test.example/evidenced/served-files"
SECRET = b"bytes outside the transparency directory\n"


# --------------------------------------------------------------------------- the guard


def _in_a_thread(fn: object, *args: object) -> object:
    """``fn(*args)`` in a thread the test does not wait on forever: a read that blocks (the
    old ``read_bytes`` of a FIFO) fails the test instead of hanging it."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(fn(*args))  # type: ignore[operator]
        except BaseException as error:  # handed to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    assert outcome, f"{fn} blocked"
    return outcome[0]


@pytest.fixture
def tiles(tmp_path: Path) -> TileDirectory:
    directory = TileDirectory(tmp_path / "log.tlog")
    directory.write_atomic("tile/0/000.p/1", b"\x01" * 32, sync=False)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "000").write_bytes(SECRET)
    return directory


def test_a_fifo_at_a_tile_is_refused_at_once_and_nothing_blocks(tiles: TileDirectory) -> None:
    os.mkfifo(tiles.root / "tile/0/001")
    assert _in_a_thread(tiles.read, 0, 1) is None
    refused = _in_a_thread(read_regular, tiles.root, "tile/0/001", 8192)
    assert isinstance(refused, NotServed) and refused.kind == "a FIFO"


def test_a_symlink_at_a_tile_or_on_its_way_is_never_followed(tiles: TileDirectory) -> None:
    root = tiles.root
    os.symlink("/etc/passwd", root / "tile/0/002")
    os.symlink(root.parent / "outside", root / "tile/1")  # a directory component
    os.symlink(root.parent / "outside", root / "tile/2", target_is_directory=True)
    assert tiles.read(0, 2) is None
    assert tiles.read(1, 0) is None and tiles.read_file("tile/2/000") is None
    for relative, kind in (("tile/0/002", "a symbolic link"), ("tile/1/000", "a symbolic link")):
        with pytest.raises(NotServed) as refused:
            read_regular(root, relative, 1 << 20)
        assert refused.value.kind == kind
    assert tiles.read(0, 0, 1) == b"\x01" * 32  # the real tile still reads


def test_a_tile_directory_linked_elsewhere_never_receives_a_write(
    tiles: TileDirectory, tmp_path: Path
) -> None:
    """A tile directory replaced by a link to another directory sent the writer's tiles there
    (``mkdir(exist_ok=True)`` and ``open`` followed it): a planted link could make the daemon
    write files anywhere it may write. The walk refuses the link, and nothing is written
    outside the root."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, tiles.root / "tile/3", target_is_directory=True)
    with pytest.raises(OSError, match="symbolic link"):
        tiles.write_atomic("tile/3/000", b"\x03" * 32, sync=True)
    os.symlink("/etc/passwd", tiles.root / "tile/0/009")  # a link at the name is replaced
    tiles.write_atomic("tile/0/009", b"\x04" * 32, sync=True)
    assert list(outside.iterdir()) == []
    assert not (tiles.root / "tile/0/009").is_symlink()
    assert tiles.read(0, 9) == b"\x04" * 32


def test_a_socket_a_directory_or_an_oversized_file_is_refused(tiles: TileDirectory) -> None:
    root = tiles.root
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "tile/0/003"))
    (root / "tile/0/004").mkdir()
    (root / "tile/0/005").write_bytes(b"\x02" * 8193)
    try:
        kinds = {}
        for name in ("003", "004", "005"):
            with pytest.raises(NotServed) as refused:
                read_regular(root, f"tile/0/{name}", 8192)
            kinds[name] = refused.value.kind
    finally:
        server.close()
    assert kinds["003"] == "a socket" and kinds["004"] == "a directory"
    assert "more than its kind holds" in kinds["005"]
    assert read_regular(root, "tile/0/005", 8193) == b"\x02" * 8193


@pytest.mark.parametrize(
    "relative",
    ["", "tile//0", "tile/../../outside/000", "./checkpoint", "tile/\0", "x" * 256, "a/" * 2049],
)
def test_a_name_that_is_not_a_plain_path_is_refused_before_a_system_call(
    tiles: TileDirectory, relative: str
) -> None:
    with pytest.raises(NotServed) as refused:
        read_regular(tiles.root, relative, 1 << 20)
    assert refused.value.kind == "not a plain path"
    assert len(("a/" * 2049).encode()) > MAX_PATH


def test_a_stuck_read_is_busy_at_its_deadline_and_never_holds_trios_own_threads() -> None:
    """Every read slot held by a read that never returns: the next read is ``BUSY`` at its
    deadline, trio's default thread pool (checkpoint signing, the audit writer's sidecar)
    still runs, and once the stuck reads return their slots serve again."""
    release = threading.Event()

    async def main() -> None:
        reads = FileReads(slots=2, deadline=0.2)
        for _ in range(2):
            with pytest.raises(ReadsStuck):
                await reads.run(release.wait)
        assert reads.limiter.borrowed_tokens == 2  # the abandoned threads keep their slots
        with pytest.raises(ReadsStuck):
            await reads.run(lambda: "never started")
        assert await trio.to_thread.run_sync(lambda: "signed") == "signed"
        release.set()
        with trio.fail_after(20):
            while reads.limiter.borrowed_tokens:
                await trio.sleep(0.01)
        assert await reads.run(lambda: "read") == "read"

    trio.run(main)


# --------------------------------------------------------------------------- on a live daemon


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[LiveDaemon]:
    key = tmp_path / "log.key"
    subprocess.run(
        [sys.executable, "-m", "daemon.cli", "log", "keygen", "--origin", ORIGIN, "--out", key],
        check=True,
        capture_output=True,
        timeout=60,
    )
    live = LiveDaemon(
        http_extra=(
            f'\n[transparency]\nkey_file = "{key}"\norigin = "{ORIGIN}"\n'
            "checkpoint_interval = 0.05\n"
        )
    )
    try:
        yield live
    finally:
        live.stop()
        live.cleanup()


def _submit(live: LiveDaemon, count: int, tag: bytes) -> list[str]:
    client = SyncClient(live.base, request_timeout=30)
    outcomes = []
    for number in range(count):
        item = b"%s %d" % (tag, number)
        outcomes.append(client.submit("bytes", bytes_binding(item), [item]).outcome)
    return outcomes


def _signed_size(live: LiveDaemon, size: int) -> int:
    """The checkpoint's size once it covers ``size`` lines (waits for the signer)."""
    client = SyncClient(live.base, request_timeout=10)
    for _ in range(400):
        found = peek_checkpoint(client.checkpoint()).size
        if found >= size:
            return found
        trio.run(trio.sleep, 0.05)
    return found


def test_fifo_planted_in_tile_dir_never_blocks_signing_decisions_or_stop(
    daemon: LiveDaemon,
) -> None:
    """More tile GETs of a planted FIFO than trio has threads (40): each is ``404`` at once;
    submits are answered, checkpoints keep being signed, SIGTERM stops the daemon (the old
    daemon answered 1 of 3 submits, stopped signing and ignored SIGTERM for 20 s)."""
    assert _submit(daemon, 3, b"before") == ["PASS"] * 3
    tlog = daemon.directory / "audit.jsonl.tlog"
    os.mkfifo(tlog / "tile/0/001")
    os.mkfifo(tlog / "tile/0/000.p/200")
    sockets = [daemon.connect(timeout=20) for _ in range(48)]
    try:
        for number, sock in enumerate(sockets):
            path = "/tile/0/001" if number % 2 else "/tile/0/000.p/200"
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        answers = [read_answer(sock, close_wait=0.05) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
    assert {(answer.status, answer.json()["error"]["code"]) for answer in answers} == {
        (404, "UNKNOWN_KIND")
    }
    before = len(daemon.audit())
    assert _submit(daemon, 5, b"after") == ["PASS"] * 5
    assert _signed_size(daemon, before + 5) >= before + 5
    assert "served_file_refused" in daemon.stderr() and "is a FIFO" in daemon.stderr()
    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.process.wait(60) == 0
    assert daemon.audit()[-1]["event"] == "daemon_stop"


def test_symlink_planted_in_tile_dir_is_never_served(daemon: LiveDaemon) -> None:
    """A symlink at a tile to ``/etc/passwd``, and a tile directory that is a symlink to a
    directory outside: ``404`` both, and not a byte of either is served (the old daemon
    served ``/etc/passwd``)."""
    _submit(daemon, 1, b"one")
    tlog = daemon.directory / "audit.jsonl.tlog"
    outside = daemon.directory / "outside"
    outside.mkdir()
    (outside / "000").write_bytes(SECRET)
    os.symlink("/etc/passwd", tlog / "tile/0/007")
    os.symlink(outside, tlog / "tile/3")
    os.symlink(outside, tlog / "tile/entries")
    passwd = Path("/etc/passwd").read_bytes()
    for path in ("/tile/0/007", "/tile/3/000", "/tile/entries/000"):
        answer = daemon.get(path)
        assert (answer.status, answer.json()["error"]["code"]) == (404, "UNKNOWN_KIND"), path
        assert SECRET not in answer.body and passwd[:16] not in answer.body
    stderr = daemon.stderr()
    assert "served_file_refused" in stderr and "tile/0/007 is a symbolic link" in stderr
