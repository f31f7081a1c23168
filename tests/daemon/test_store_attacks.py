"""Evidence stores under attack: a FIFO or a symlink planted in an ``fs:`` store, and a store
that hangs (``docs/retention.md`` §2 and §6; issue "hold under attack, second round").

Real daemon processes (``evidenced serve``), real files, a real FIFO and symlink, a real TCP
endpoint that accepts and never answers; the CLI's ``replay`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import bytes_binding

from daemon import RejectedError, open_client, tail
from daemon.retention import FilesystemStore, UnsafeStorePath, name_of
from daemon.retention._retainer import STORE_THREADS
from daemon.retention._store import ObjectCorrupt


def _serve(
    short_dir: Path,
    spec: str,
    *,
    env: dict[str, str] | None = None,
    deadline: float = 30.0,
) -> subprocess.Popen[str]:
    config = short_dir / "evidenced.toml"
    config.write_text(
        f'[server]\nlisten = ""\nsocket = "{short_dir}/sock"\nrequest_deadline = {deadline}\n'
        f'[audit]\npath = "{short_dir}/audit.jsonl"\n'
        '[sessions.b]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
        f'retain = "all"\nstore = "{spec}"\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    ready = process.stdout.readline()
    assert ready, process.stderr.read() if process.stderr else ""
    return process


def _stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    try:
        _, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        pytest.fail(f"the daemon did not stop on SIGTERM: {stderr}")
    return process.returncode, stderr


async def _submit(sock: str, item: bytes) -> Any:
    async with open_client(unix=sock, request_timeout=120) as client:
        try:
            return await client.submit("b", bytes_binding(item), [item])
        except RejectedError as error:
            return error


async def _submit_many(sock: str, items: list[bytes]) -> list[Any]:
    answers: list[Any] = [None] * len(items)

    async def one(index: int) -> None:
        answers[index] = await _submit(sock, items[index])

    async with trio.open_nursery() as nursery:
        for index in range(len(items)):
            nursery.start_soon(one, index)
    return answers


async def _health(sock: str) -> dict[str, Any]:
    async with open_client(unix=sock) as client:
        return await client.health()


def _object_path(root: Path, item: bytes) -> Path:
    hexdigest = name_of(item).removeprefix("sha256:")
    return root / hexdigest[:2] / hexdigest[2:4] / hexdigest


def test_fifo_planted_at_an_object_is_refused_at_once_and_ties_up_no_store_thread(
    short_dir: Path,
) -> None:
    """More submits of the FIFO's evidence than there are store threads: every one answered
    AUDIT_FAILED naming the FIFO (the old store blocked one thread per submit in ``open``,
    forever, then every decision with new evidence waited out its deadline); a decision with
    other evidence is answered PASS right after; health names the corrupt object; SIGTERM
    stops the process."""
    root = short_dir / "evidence"
    root.mkdir(mode=0o700)
    item = b"evidence whose object is a FIFO"
    path = _object_path(root, item)
    path.parent.mkdir(parents=True, mode=0o700)
    os.mkfifo(path, 0o600)
    process = _serve(short_dir, f"fs:{root}")
    sock = str(short_dir / "sock")
    try:
        refused = trio.run(_submit_many, sock, [item] * (STORE_THREADS + 1))
        health = trio.run(_health, sock)
        other = trio.run(_submit, sock, b"other evidence")
        stuck = trio.run(_health, sock)["retention"]["stores"][0]["stuck"]
    finally:
        code, stderr = _stop(process)
    assert all(isinstance(answer, RejectedError) for answer in refused)
    assert {answer.code for answer in refused} == {"AUDIT_FAILED"}
    assert all("a FIFO" in str(answer) for answer in refused)
    assert health["status"] == "degraded" and "not a regular file" in health["reason"]
    assert other.outcome == "PASS" and stuck == 0
    assert code == 0, stderr
    decisions = [
        line for line in tail(short_dir / "audit.jsonl", 1000) if line["event"] == "decision"
    ]
    assert [line["decision_id"] for line in decisions] == [other.decision_id]
    assert path.is_fifo()  # kept as found, never replaced


def test_replay_of_a_decision_whose_object_became_a_fifo_reports_it_corrupt(
    short_dir: Path,
) -> None:
    """A retained decision's object replaced by a FIFO afterwards: ``replay`` answers (the
    object is corrupt) instead of blocking forever in ``open``."""
    root = short_dir / "evidence"
    item = b"evidence replaced by a FIFO later"
    process = _serve(short_dir, f"fs:{root}")
    try:
        answer = trio.run(_submit, short_dir.joinpath("sock").as_posix(), item)
    finally:
        _stop(process)
    assert answer.outcome == "PASS"
    path = _object_path(root, item)
    path.unlink()
    os.mkfifo(path, 0o600)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "daemon.cli",
            "replay",
            "--log",
            str(short_dir / "audit.jsonl"),
            "--store",
            f"fs:{root}",
            "--all",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    document = json.loads(done.stdout)
    assert done.returncode != 0, done.stdout
    assert "a FIFO" in json.dumps(document), document


def test_symlink_at_an_intermediate_store_directory_writes_nothing_outside_the_root(
    short_dir: Path,
) -> None:
    """``ln -s /elsewhere store/ab``: the decision is AUDIT_FAILED with STORE_PATH_UNSAFE and
    nothing lands in /elsewhere (the old store followed the link: only the last component
    was opened ``O_NOFOLLOW``); other evidence is still stored and answered."""
    root = short_dir / "evidence"
    root.mkdir(mode=0o700)
    elsewhere = short_dir / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    item = b"evidence redirected by a link"
    hexdigest = name_of(item).removeprefix("sha256:")
    (root / hexdigest[:2]).symlink_to(elsewhere)
    process = _serve(short_dir, f"fs:{root}")
    sock = str(short_dir / "sock")
    try:
        refused = trio.run(_submit, sock, item)
        health = trio.run(_health, sock)
        other = trio.run(_submit, sock, b"other evidence, another directory")
    finally:
        _stop(process)
    assert isinstance(refused, RejectedError) and refused.code == "AUDIT_FAILED"
    assert "STORE_PATH_UNSAFE" in str(refused) and "symbolic link" in str(refused)
    assert health["status"] == "degraded" and "STORE_PATH_UNSAFE" in health["reason"]
    assert list(elsewhere.rglob("*")) == []
    assert (
        other.outcome == "PASS"
        and _object_path(root, b"other evidence, another directory").is_file()
    )


@pytest.mark.parametrize("depth", [1, 2])
def test_symlinked_store_directory_is_refused_by_every_store_operation(
    short_dir: Path, depth: int
) -> None:
    """Every operation walks from the root's descriptor: put, get, delete and listing all
    refuse a link at ``ab`` or ``ab/cd`` (STORE_PATH_UNSAFE), and read or write nothing
    through it."""
    root = short_dir / "evidence"
    store = FilesystemStore(root)
    item = b"an object behind a link"
    elsewhere = short_dir / "elsewhere"
    planted = FilesystemStore(elsewhere)  # a real store of the same layout, outside the root
    planted.put(item)
    hexdigest = name_of(item).removeprefix("sha256:")
    if depth == 1:
        (root / hexdigest[:2]).symlink_to(elsewhere / hexdigest[:2])
    else:
        (root / hexdigest[:2]).mkdir(mode=0o700)
        (root / hexdigest[:2] / hexdigest[2:4]).symlink_to(
            elsewhere / hexdigest[:2] / hexdigest[2:4]
        )
    before = sorted((p.as_posix(), p.stat().st_mtime_ns) for p in elsewhere.rglob("*"))
    for operation in (
        lambda: store.put(item),
        lambda: store.get(name_of(item)),
        lambda: store.delete(name_of(item)),
        lambda: list(store.objects()),
    ):
        with pytest.raises(UnsafeStorePath) as refused:
            operation()
        assert refused.value.code == "STORE_PATH_UNSAFE"
    assert sorted((p.as_posix(), p.stat().st_mtime_ns) for p in elsewhere.rglob("*")) == before
    store.close()
    planted.close()


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_special_file_at_an_object_is_corrupt_without_blocking(short_dir: Path, kind: str) -> None:
    """A FIFO or a socket in an object's place: put and get are ObjectCorrupt at once."""
    store = FilesystemStore(short_dir / "evidence")
    item = b"a special file in an object's place"
    path = _object_path(short_dir / "evidence", item)
    path.parent.mkdir(parents=True, mode=0o700)
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    else:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
    try:
        with pytest.raises(ObjectCorrupt, match="not a regular file"):
            store.put(item)
        with pytest.raises(ObjectCorrupt, match="not a regular file"):
            store.get(name_of(item))
    finally:
        if kind != "fifo":
            listener.close()
        store.close()


class SilentEndpoint:
    """A TCP endpoint that accepts connections and never answers (a hung S3 endpoint); it
    counts the connections it accepted."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.listener.close()
        for connection in self.accepted:
            connection.close()


@pytest.fixture
def silent() -> Iterator[SilentEndpoint]:
    endpoint = SilentEndpoint()
    yield endpoint
    endpoint.close()


def test_hung_s3_endpoint_degrades_health_and_stop_does_not_wait_for_it(
    short_dir: Path, silent: SilentEndpoint
) -> None:
    """An S3 endpoint that accepts and never answers: the decision is AUDIT_FAILED at its
    deadline; health is ``degraded`` naming the stuck store (the old daemon said ``serving``
    once the deadline passed); SIGTERM ends the process while the hung request is still the
    only one the endpoint ever saw (the old daemon joined its store threads at exit, so it
    stayed alive through the SDK's read timeouts and retries)."""
    env = {
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{silent.port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "3",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    process = _serve(short_dir, "s3://hung-bucket/evidence", env=env, deadline=1.0)
    sock = str(short_dir / "sock")
    try:
        refused = trio.run(_submit, sock, b"evidence for a hung store")
        health = trio.run(_health, sock)
    finally:
        code, stderr = _stop(process)
        accepted = len(silent.accepted)
    assert isinstance(refused, RejectedError) and refused.code == "AUDIT_FAILED"
    assert health["status"] == "degraded" and "stuck" in health["reason"], health
    assert health["retention"]["stores"][0]["stuck"] == 1
    assert accepted == 1, f"the daemon waited for the SDK's retries ({accepted} connections)"
    assert code == 0, stderr
