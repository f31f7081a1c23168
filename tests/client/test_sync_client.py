"""The blocking client (``daemon/client/_sync.py``): the async client's API without an event
loop, on a kept connection, with the same retry rule, against real daemons."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest
from clientkit import (
    CERTIFICATE,
    CONFIG,
    QUICK,
    SUBJECT,
    Holders,
    busy_refusals,
    decisions_of,
)
from daemon_testkit import bytes_binding
from forwarder import forwarding
from http_testkit import LiveDaemon

from daemon import ClientError, ServiceUnavailable, SubmitResult, SyncClient


@pytest.fixture(scope="module")
def daemon() -> Iterator[LiveDaemon]:
    live = LiveDaemon(config_text=CONFIG)
    try:
        yield live
    finally:
        live.stop()
        live.cleanup()


def test_an_evd1_client_keeps_its_one_connection(daemon: LiveDaemon) -> None:
    host, port = daemon.started["tcp"].rsplit(":", 1)
    with forwarding((host, int(port))) as seen, SyncClient(seen.tcp) as client:
        for n in range(5):
            item = f"sync kept {n}".encode()
            assert client.submit("bytes", bytes_binding(item), [item]).outcome == "PASS"
        assert client.submit_files("formation", SUBJECT, CERTIFICATE).outcome == "PASS"
        assert client.health()["status"] == "serving"
        assert client.connections_opened == 1
    assert seen.connections == 1


def test_an_http_client_keeps_its_connection_and_asks_sessions_once(daemon: LiveDaemon) -> None:
    with forwarding(daemon.http) as seen, SyncClient(seen.url) as client:
        for _ in range(3):
            assert client.submit_files("formation", SUBJECT, CERTIFICATE).outcome == "PASS"
    assert seen.requests == [
        ("GET", "/v1/sessions"),
        *[("POST", "/v1/sessions/formation/decisions")] * 3,
    ]
    assert seen.connections == 1


@pytest.mark.parametrize("protocol", ["evd1", "http"])
def test_a_busy_daemon_is_retried_and_decides_once(daemon: LiveDaemon, protocol: str) -> None:
    item = f"sync busy {protocol}".encode()
    binding = bytes_binding(item)
    holders = Holders(daemon, 4)
    retried: list[str] = []

    def on_retry(error: ClientError, delay: float) -> None:
        retried.append(getattr(error, "code", "?"))
        holders.release()

    before = busy_refusals(daemon)
    url = daemon.base if protocol == "http" else f"unix:{daemon.socket}"
    try:
        with SyncClient(daemon.base, retry=None) as probe:
            deadline = time.monotonic() + 10
            while probe.health()["in_flight"] < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
        with SyncClient(url, retry=QUICK, on_retry=on_retry) as client:
            result = client.submit("bytes", binding, [item])
    finally:
        holders.release()
    assert result.outcome == "PASS" and retried and set(retried) == {"BUSY"}
    assert len(decisions_of(daemon, binding.digest())) == 1
    assert busy_refusals(daemon) - before == len(retried)


def test_without_retries_the_busy_pairs_of_a_batch_are_returned(daemon: LiveDaemon) -> None:
    with SyncClient(f"unix:{daemon.socket}", retry=None) as client:
        results = client.submit_batch(
            "bytes", [(None, [f"sync norety {n}".encode()]) for n in range(8)]
        )
    refused = [r for r in results if isinstance(r, ServiceUnavailable)]
    assert refused and {r.code for r in refused} == {"BUSY"}
    assert len(refused) + sum(isinstance(r, SubmitResult) for r in results) == 8


def test_a_connection_the_daemon_closed_while_idle_is_replaced_unsent() -> None:
    live = LiveDaemon(idle=1.0)
    try:
        with SyncClient(unix=live.socket, retry=None, keepalive_expiry=60) as client:
            assert client.submit("bytes", bytes_binding(b"s1"), [b"s1"]).outcome == "PASS"
            time.sleep(1.6)  # past the daemon's idle_timeout: it answers IDLE_TIMEOUT, closes
            assert client.submit("bytes", bytes_binding(b"s2"), [b"s2"]).outcome == "PASS"
            assert client.connections_opened == 2
    finally:
        live.stop()
        live.cleanup()


def test_a_connection_idle_past_keepalive_expiry_is_replaced(daemon: LiveDaemon) -> None:
    with SyncClient(unix=daemon.socket, keepalive_expiry=0) as client:
        client.health()
        client.health()
        assert client.connections_opened == 2


def test_a_client_never_closed_is_closed_when_collected(daemon: LiveDaemon) -> None:
    """The old ``SyncClient`` opened a connection per call and needed no close; the kept one
    is closed by a finalizer (an unclosed socket would be a ResourceWarning: an error here)."""
    for url in (f"unix:{daemon.socket}", daemon.base):
        client = SyncClient(url)
        assert client.health()["status"] == "serving"
        del client
        gc.collect()


def test_a_malformed_address_fails_before_anything_is_connected() -> None:
    with pytest.raises(ValueError, match="scheme"):
        SyncClient("ftp://127.0.0.1:1")
    with pytest.raises(ValueError, match="exactly one"):
        SyncClient("tcp://127.0.0.1:1", unix="/nowhere")
