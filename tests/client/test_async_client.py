"""The async client under asyncio and under trio (every test runs on both, ``conftest.py``),
over EVD1 and over HTTP, against a real ``evidenced serve``: submits, honest bindings from
files, batches split at 64, the retry of a ``BUSY`` (single and per pair), and the rule that a
request whose connection broke after it was sent is never sent again.

The daemon admits at most 4 requests at once (``max_in_flight = 4``): a batch of 8 pairs then
finds 3 slots for its pairs, and 4 held slots make a single submit ``BUSY``, deterministically
(the slots are seen held in ``health`` before the submit is sent; a holder's evidence may wait
a minute, ``evidence_grace``, so no load can free them early). Nothing here is timed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

from daemon import (
    ClientError,
    ServiceUnavailable,
    SubmitResult,
    TransportError,
    open_client,
)
from session import MechanismOutcome

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def daemon() -> Iterator[LiveDaemon]:
    live = LiveDaemon(config_text=CONFIG)
    try:
        yield live
    finally:
        live.stop()
        live.cleanup()


@pytest.fixture(scope="module")
def roomy() -> Iterator[LiveDaemon]:
    """A daemon of the default capacity (256 in flight): batches of 64 find room."""
    live = LiveDaemon()
    try:
        yield live
    finally:
        live.stop()
        live.cleanup()


def url_of(daemon: LiveDaemon, protocol: str) -> str:
    return daemon.base if protocol == "http" else f"unix:{daemon.socket}"


async def slots_held(client: Any, count: int) -> None:
    import anyio

    with anyio.fail_after(10):
        while (await client.health())["in_flight"] < count:
            await anyio.sleep(0.02)


@pytest.mark.parametrize("protocol", ["evd1", "http"])
async def test_files_are_submitted_with_their_honest_binding_and_a_typed_result(
    daemon: LiveDaemon, protocol: str
) -> None:
    async with open_client(url_of(daemon, protocol)) as client:
        result = await client.submit_files("formation", SUBJECT, CERTIFICATE)
    assert isinstance(result, SubmitResult)
    evaluation = result.evaluation
    assert evaluation is not None and evaluation.outcome is MechanismOutcome.PASS
    assert result.outcome == "PASS" and evaluation.passed
    assert evaluation.observations.status == "CHECKED"
    assert evaluation.observations.residual_obligations  # always returned (docs/formation.md)
    assert set(evaluation.observations.reports) == {"formation_report"}
    assert [line["decision_id"] for line in decisions_of(daemon, evaluation.binding_digest)][
        -1
    ] == result.decision_id


async def test_one_sessions_request_then_one_request_per_pair_or_batch(
    roomy: LiveDaemon,
) -> None:
    """What ``submit`` costs on the wire, counted by a real forwarder: one ``sessions`` for the
    client's honest bindings, one POST per pair, one per batch of at most 64, on one kept
    connection."""
    with forwarding(roomy.http) as seen:
        async with open_client(seen.url) as client:
            for _ in range(3):
                await client.submit_files("formation", SUBJECT, CERTIFICATE)
            pairs = [(None, [f"pair {n}".encode()]) for n in range(70)]
            results = await client.submit_batch("bytes", pairs)
    assert [r.outcome for r in results if isinstance(r, SubmitResult)] == ["PASS"] * 70
    assert seen.requests == [
        ("GET", "/v1/sessions"),
        *[("POST", "/v1/sessions/formation/decisions")] * 3,
        *[("POST", "/v1/sessions/bytes/decisions:batch")] * 2,  # 64 + 6
    ]
    assert seen.connections == 1


async def test_an_evd1_client_keeps_one_connection(daemon: LiveDaemon) -> None:
    host, port = daemon.started["tcp"].rsplit(":", 1)
    with forwarding((host, int(port))) as seen:
        async with open_client(seen.tcp) as client:
            for n in range(5):
                item = f"kept {n}".encode()
                await client.submit("bytes", bytes_binding(item), [item])
            await client.submit_batch("bytes", [(None, [b"kept batch"])])
    assert seen.connections == 1


@pytest.mark.parametrize("protocol", ["evd1", "http"])
async def test_a_busy_daemon_is_retried_and_decides_once(
    daemon: LiveDaemon, protocol: str, anyio_backend: str
) -> None:
    item = f"busy single {protocol} {anyio_backend}".encode()
    binding = bytes_binding(item)
    holders = Holders(daemon, 4)
    retried: list[str] = []

    def on_retry(error: ClientError, delay: float) -> None:
        retried.append(getattr(error, "code", "?"))
        holders.release()  # room again, for the retry

    before = busy_refusals(daemon)
    try:
        async with open_client(url_of(daemon, "http"), retry=None) as probe:
            await slots_held(probe, 4)
        async with open_client(url_of(daemon, protocol), retry=QUICK, on_retry=on_retry) as client:
            result = await client.submit("bytes", binding, [item])
    finally:
        holders.release()
    assert result.outcome == "PASS"
    assert retried and set(retried) == {"BUSY"}
    assert len(decisions_of(daemon, binding.digest())) == 1
    assert busy_refusals(daemon) - before == len(retried)  # each BUSY is a refusal line


async def test_without_retries_the_first_busy_is_raised(daemon: LiveDaemon) -> None:
    holders = Holders(daemon, 4)
    try:
        async with open_client(url_of(daemon, "http"), retry=None) as client:
            await slots_held(client, 4)
            with pytest.raises(ServiceUnavailable) as refused:
                await client.submit("bytes", bytes_binding(b"no retry"), [b"no retry"])
    finally:
        holders.release()
    assert refused.value.code == "BUSY" and refused.value.retry_after == 1.0


@pytest.mark.parametrize("protocol", ["evd1", "http"])
async def test_the_busy_pairs_of_a_batch_are_sent_again_and_each_pair_is_decided_once(
    daemon: LiveDaemon, protocol: str, anyio_backend: str
) -> None:
    items = [f"batch {protocol} {anyio_backend} {n}".encode() for n in range(8)]
    retried: list[str] = []
    async with open_client(
        url_of(daemon, protocol),
        retry=QUICK,
        on_retry=lambda error, delay: retried.append(getattr(error, "code", "?")),
    ) as client:
        results = await client.submit_batch("bytes", [(None, [item]) for item in items])
    assert [r.outcome for r in results if isinstance(r, SubmitResult)] == ["PASS"] * 8
    assert retried and set(retried) == {"BUSY"}  # 4 slots: some pairs were refused first
    for item, result in zip(items, results, strict=True):
        assert isinstance(result, SubmitResult)
        assert [
            line["decision_id"] for line in decisions_of(daemon, result.result["binding_digest"])
        ] == [result.decision_id], item


@pytest.mark.parametrize("protocol", ["evd1", "http"])
async def test_a_connection_cut_after_the_submit_was_sent_is_never_resent(
    daemon: LiveDaemon, protocol: str, anyio_backend: str
) -> None:
    """The forwarder lets the whole request reach the daemon, then cuts the client off before
    the answer: the daemon decided (its line is there), so a resend would be a second
    decision. The client raises instead, on the one connection it opened."""
    item = f"cut after sending {protocol} {anyio_backend}".encode()
    binding = bytes_binding(item)
    if protocol == "http":
        upstream, marker = daemon.http, base64.b64encode(item) + b'"}]}'
    else:
        host, port = daemon.started["tcp"].rsplit(":", 1)
        upstream, marker = (host, int(port)), item
    with forwarding(upstream, cut_after=marker) as seen:
        url = seen.url if protocol == "http" else seen.tcp
        async with open_client(url, retry=QUICK) as client:
            with pytest.raises(TransportError):
                await client.submit("bytes", binding, [item])
        assert seen.cuts == 1 and seen.connections == 1
    import anyio

    with anyio.fail_after(10):
        while not decisions_of(daemon, binding.digest()):
            await anyio.sleep(0.05)
    assert len(decisions_of(daemon, binding.digest())) == 1


async def test_a_connection_the_daemon_closed_while_idle_is_replaced_unsent(
    module_dir: Path,
) -> None:
    """The daemon closes a connection idle past its ``idle_timeout`` (here 1 s; it answers
    ``IDLE_TIMEOUT`` first). The kept connection is seen closed before the next request and
    replaced: the request is sent once, on the new one, and decided."""
    import anyio

    live = LiveDaemon(idle=1.0)
    try:
        async with open_client(f"unix:{live.socket}", retry=None, keepalive_expiry=60) as client:
            first = await client.submit("bytes", bytes_binding(b"idle 1"), [b"idle 1"])
            await anyio.sleep(1.6)
            second = await client.submit("bytes", bytes_binding(b"idle 2"), [b"idle 2"])
            assert client._evd1 is not None and client._evd1.opened == 2
    finally:
        live.stop()
        live.cleanup()
    assert first.outcome == second.outcome == "PASS"


async def test_http_over_a_unix_socket(
    daemon: LiveDaemon, module_dir: Path, anyio_backend: str
) -> None:
    """``http+unix:`` reaches the HTTP API through httpx's Unix-socket transport (here a real
    forwarder listening on a Unix socket, as a sidecar or reverse proxy would)."""
    path = str(module_dir / f"http-{anyio_backend}.sock")
    with forwarding(daemon.http, listen_unix=path) as seen:
        async with open_client(f"http+unix:{path}") as client:
            result = await client.submit_files("formation", SUBJECT, CERTIFICATE)
            ready = await client.ready()
    assert result.outcome == "PASS" and ready["ready"] is True
    assert ("GET", "/v1/sessions") in seen.requests


async def test_http_only_routes_over_evd1_send_nothing(daemon: LiveDaemon) -> None:
    async with open_client(url_of(daemon, "evd1")) as client:
        with pytest.raises(TypeError, match="HTTP route"):
            await client.metrics()
        assert (await client.health())["status"] in ("serving", "degraded")


async def test_the_announcement_a_client_was_given_is_used_without_asking(
    daemon: LiveDaemon,
) -> None:
    async with open_client(daemon.base) as client:
        hosted = await client.list_sessions()
    with forwarding(daemon.http) as seen:
        async with open_client(seen.url) as client:
            client.use_sessions(json.loads(json.dumps(hosted)))
            result = await client.submit_files("formation", SUBJECT, CERTIFICATE)
    assert result.outcome == "PASS"
    assert seen.requests == [("POST", "/v1/sessions/formation/decisions")]


async def test_each_test_runs_on_the_loop_its_parameter_names(anyio_backend: str) -> None:
    """The conftest's hook holds: pytest-trio did not take the asyncio runs over."""
    import sniffio

    assert sniffio.current_async_library() == anyio_backend
