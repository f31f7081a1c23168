"""A hung worker under ``--workers 2`` (``daemon/server/_heartbeat.py``): ``kill -STOP`` of one
worker while clients hold connections to it.

Real daemon processes, real signals, the real client.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import trio
from daemon_testkit import bytes_binding
from test_workers import both_workers, daemon_proc, health_of, start, stop, write_config

from daemon import ClientError, ClientTimeout, open_client
from daemon.server._heartbeat import DEADLINE

__all__ = ["daemon_proc"]  # the fixture, imported for this module's tests


async def _scenario(sock: str) -> dict[str, Any]:
    health = await both_workers(sock)
    async with trio.open_nursery() as nursery:
        connections: dict[int, list[Any]] = {}
        clients = []
        for _ in range(24):  # the kernel spreads connections over the two workers
            client = await nursery.start(_held_client, sock)
            clients.append(client)
            index = (await client.health())["worker"]
            connections.setdefault(index, []).append(client)
        victim = next(w for w in health["workers"] if len(connections.get(w["index"], [])) >= 3)
        os.kill(victim["pid"], signal.SIGSTOP)
        outcomes: list[str] = []
        degraded: list[dict[str, Any]] = []

        async def submit(client: Any, number: int) -> None:
            payload = b"to a stopped worker %d" % number
            try:
                await client.submit("bytes", bytes_binding(payload), [payload])
                outcomes.append("answered")
            except ClientTimeout:
                outcomes.append("timed out")
            except ClientError:
                outcomes.append("failed")

        async def watch_health() -> None:
            for _ in range(int(DEADLINE * 40)):
                report = await health_of(sock)
                if report["status"] == "degraded":
                    degraded.append(report)
                    return
                await trio.sleep(0.05)

        async with trio.open_nursery() as inner:
            inner.start_soon(watch_health)
            for number, client in enumerate(connections[victim["index"]][:3]):
                inner.start_soon(submit, client, number)
        for client in clients:
            client.done.set()
    after = await _restarted(sock, victim["index"], victim["pid"])
    return {"victim": victim, "outcomes": outcomes, "degraded": degraded, "after": after}


class _Held:
    """A client kept open until ``done`` is set."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.done = trio.Event()

    async def health(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.client.health()
        return result

    async def submit(self, *args: Any) -> Any:
        return await self.client.submit(*args)


async def _held_client(sock: str, task_status: trio.TaskStatus[_Held]) -> None:
    async with open_client(unix=sock, request_timeout=6 * DEADLINE) as client:
        held = _Held(client)
        task_status.started(held)
        await held.done.wait()


async def _restarted(sock: str, index: int, pid: int) -> dict[str, Any]:
    """Health once slot ``index`` serves again under another pid (at most ~60 s), as the
    parent reports it: a health answered by the new worker itself before the parent's first
    state push names only that worker, without the parent's figures (restarts, heartbeat
    kills), so the wait is also for those."""
    health: dict[str, Any] = {}
    for _ in range(1200):
        health = await health_of(sock)
        slot = [w for w in health["workers"] if w["index"] == index]
        if (
            slot
            and slot[0]["pid"] != pid
            and slot[0]["alive"]
            and "heartbeat_kills" in slot[0]
            and health["status"] == "serving"
        ):
            break
        await trio.sleep(0.05)
    return health


def test_stopped_worker_is_killed_by_the_heartbeat_and_its_connections_fail_fast(
    short_dir: Path, daemon_proc: list[subprocess.Popen[str]]
) -> None:
    """``kill -STOP`` of one of two workers with three requests in flight on its
    connections: health turns ``degraded`` naming the silent worker; the heartbeat kills it,
    so its three requests fail at once (not after the client's timeout); the slot is
    restarted under another pid and health is ``serving`` again with ``heartbeat_kills`` 1.
    (The old daemon reported the stopped worker alive and serving, and its connections hung
    until the clients timed out.)"""
    process, _ = start(daemon_proc, write_config(short_dir))
    sock = str(short_dir / "s")
    try:
        seen = trio.run(_scenario, sock)
    finally:
        err = stop(process)
    victim = seen["victim"]
    assert seen["outcomes"] == ["failed"] * 3, seen["outcomes"]
    assert seen["degraded"] and f"worker {victim['index']}" in seen["degraded"][0]["reason"]
    slot = next(w for w in seen["after"]["workers"] if w["index"] == victim["index"])
    assert slot["pid"] != victim["pid"] and slot["heartbeat_kills"] == 1 and slot["restarts"] == 1
    assert seen["after"]["status"] == "serving"
    assert f"worker {victim['index']} (pid {victim['pid']}) silent for" in err
