"""Noise on the port costs no audit line each (docs/audit-log.md, "Noise").

200 HTTP health probes used to write 200 fsync'd refusal lines in 0.18 s: unauthenticated
bytes could fill the disk. Now a connection whose first frame is not this protocol is counted
in ``health`` and summarised in one ``noise`` line per interval (and before ``daemon_stop``),
while a real protocol request that is refused is still audited line by line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import frame

from daemon import open_client, open_server
from daemon.audit._audit import tail
from daemon.config._hosting import HostedSession
from daemon.server._noise import MAX_PEERS, NoiseLedger
from session import BytesDigestMechanism

PROBE = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"


async def _probe(address: tuple[str, int]) -> bytes:
    stream = await trio.open_tcp_stream(*address)
    async with stream:
        await stream.send_all(PROBE)
        answer = b""
        with trio.move_on_after(10):
            while chunk := await stream.receive_some(65536):
                answer += chunk
        return answer


async def test_http_probes_are_counted_and_summarised_not_audited_each(short_dir: Path) -> None:
    log = short_dir / "audit.jsonl"
    sessions = [HostedSession("bytes", (BytesDigestMechanism(),))]
    async with open_server(
        sessions, tcp=("127.0.0.1", 0), audit_path=str(log), worker_processes=1
    ) as server:
        assert server.tcp_address is not None
        for _ in range(200):
            answer = await _probe(server.tcp_address)
            assert b"BAD_MAGIC" in answer  # still told why, then closed
        async with open_client(tcp=server.tcp_address) as client:
            health = await client.health()
        assert health["noise"] == {"total": 200, "pending": 200, "summaries": 0}
        # A real protocol request that is refused is still one line of its own.
        stream = await trio.open_tcp_stream(*server.tcp_address)
        async with stream:
            await stream.send_all(frame({"kind": "hello", "versions": [99], "client": "t"}))
            with trio.move_on_after(10):
                while await stream.receive_some(65536):
                    pass
    events = [line["event"] for line in tail(str(log), 1000)]
    assert events.count("refusal") == 1  # the handshake without a common version
    assert events.count("noise") == 1 and events[-2:] == ["noise", "daemon_stop"]
    summary = next(line for line in tail(str(log), 1000) if line["event"] == "noise")
    assert summary["count"] == 200 and summary["peers"] == {"tcp:127.0.0.1": 200}
    assert summary["other_peers"] == 0
    assert len(events) <= 5  # start, refusal, noise, stop: not 200 lines


async def test_one_summary_per_interval_and_only_when_noise_arrived(
    autojump_clock: trio.abc.Clock,
) -> None:
    ledger = NoiseLedger(interval=60.0)
    written: list[dict[str, Any]] = []

    async def record(event: str, **fields: Any) -> None:
        written.append({"event": event, **fields})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ledger.run, record)
        for peer in range(MAX_PEERS + 4):
            ledger.record(f"tcp:10.0.0.{peer}")
        ledger.record("tcp:10.0.0.0")
        await trio.sleep(61)
        await trio.sleep(600)  # quiet intervals write nothing
        ledger.record("unix:1000")
        await trio.sleep(60)
        nursery.cancel_scope.cancel()
    assert [line["count"] for line in written] == [MAX_PEERS + 5, 1]
    first = written[0]
    assert len(first["peers"]) == MAX_PEERS and first["peers"]["tcp:10.0.0.0"] == 2
    assert first["other_peers"] == 4
    assert ledger.status() == {"total": MAX_PEERS + 6, "pending": 0, "summaries": 2}


@pytest.mark.parametrize("peers", [5000])
def test_the_ledger_stays_bounded_however_many_peers(peers: int) -> None:
    ledger = NoiseLedger()
    for peer in range(peers):
        ledger.record(f"tcp:host{peer}")
    summary = ledger.take_summary()
    assert summary is not None and summary["count"] == peers
    assert len(summary["peers"]) == MAX_PEERS and summary["other_peers"] > 0
    assert ledger.take_summary() is None
