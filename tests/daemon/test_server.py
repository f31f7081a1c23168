"""A real server and the real client (or a raw socket) over TCP loopback and Unix sockets."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import (
    HELLO,
    OffVocabularyMechanism,
    SlowMechanism,
    UnencodableMechanism,
    binding_for,
    bytes_binding,
    formation_pair,
    frame,
    process_gate,
    sha,
)

from daemon import (
    DEADLINE_DETAILS,
    HostedSession,
    RejectedError,
    Server,
    ServiceUnavailable,
    SyncClient,
    TransportError,
    open_client,
    open_server,
    tail,
    verify_log,
)
from daemon.wire._protocol import MAGIC, ClientConnection, ErrorResponse, encode_header
from mechanism.formation import FormationPathCertificateMechanism, formation_binding
from session import BytesDigestMechanism, EvidenceBounds


def audit_records(server: Server) -> list[dict[str, Any]]:
    assert server.audit is not None
    return tail(server.audit.path, 1_000_000)


def by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["decision_id"]: r for r in records if "decision_id" in r}


async def raw_exchange(
    server: Server, data: bytes, *, read_timeout: float = 5.0, eof: bool = False
) -> list[Any]:
    """Send raw bytes (then end the stream if ``eof``), read every answer until the server
    closes."""
    assert server.unix_path is not None
    stream = await trio.open_unix_socket(server.unix_path)
    answers: list[Any] = []
    conn = ClientConnection()
    async with stream:
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(data)
            if eof:
                await stream.send_eof()
        with trio.move_on_after(read_timeout):
            while True:
                try:
                    chunk = await stream.receive_some(65536)
                except trio.BrokenResourceError:
                    break
                conn.receive_data(chunk)
                while True:
                    event = conn.next_event()
                    if type(event).__name__ in ("NeedData", "Closed"):
                        break
                    answers.append(event)
                if not chunk:
                    break
    return answers


def bytes_sessions(**bounds: Any) -> list[HostedSession]:
    return [HostedSession("bytes", (BytesDigestMechanism(),), **bounds)]


@pytest.fixture
def config(short_dir: Path) -> dict[str, Any]:
    return {
        "tcp": ("127.0.0.1", 0),
        "unix": str(short_dir / "sock"),
        "audit_path": str(short_dir / "audit.jsonl"),
        "inline_max_bytes": 0,  # slow test mechanisms must run in worker threads
    }


async def test_decisions_over_tcp_and_unix_are_answered_and_audited(config: dict[str, Any]) -> None:
    async with open_server(bytes_sessions(), **config) as server:
        assert server.tcp_address is not None
        results = []
        for target in ({"tcp": server.tcp_address}, {"unix": server.unix_path}):
            async with open_client(**target) as client:
                good = await client.submit("bytes", bytes_binding(b"good"), [b"good"])
                bad = await client.submit(
                    "bytes", bytes_binding(b"bad", expected=sha(b"other")), [b"bad"]
                )
                missing = await client.submit("bytes", bytes_binding(b"absent"), [b"present"])
                results += [good, bad, missing]
        assert [r.outcome for r in results] == ["PASS", "FAIL", "UNKNOWN"] * 2
        assert results[2].result["details"].startswith("evidence is unavailable")
    records = by_id(audit_records(server))
    for result in results:
        line = records[result.decision_id]
        assert line["outcome"] == result.outcome
        assert line["binding_digest"] == result.result["binding_digest"]
        assert line["mechanism_id"] == "vstd.bytes.sha256"
        assert line["metrics"]["total_ns"] > 0
    line = records[results[0].decision_id]
    assert line["evidence"] == [{"digest": sha(b"good"), "size": 4}]
    assert b"good" not in json.dumps(line).encode().replace(b'"good', b"")  # never the bytes
    assert verify_log(config["audit_path"]).intact


async def test_formation_pairs_pass_fail_unknown_through_the_socket(config: dict[str, Any]) -> None:
    sessions = [HostedSession("formation", (FormationPathCertificateMechanism(),))]
    async with (
        open_server(sessions, **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        listed = await client.list_sessions()
        digest = listed[0]["mechanisms"][0]["mechanism_digest"]
        outcomes = {}
        for name in ("atom", "tampered", "unsupported-profile"):
            subject, certificate = formation_pair(name)
            binding = formation_binding(subject, certificate, mechanism_digest=digest)
            decision = await client.submit("formation", binding, [subject, certificate])
            outcomes[name] = (decision.outcome, decision.result["details"])
    assert outcomes == {
        "atom": ("PASS", ""),
        "tampered": ("FAIL", "FORMATION_CHECK_INVALID"),
        "unsupported-profile": ("UNKNOWN", "FORMATION_PROFILE_UNSUPPORTED"),
    }


async def test_list_and_health_describe_sessions_and_counters(config: dict[str, Any]) -> None:
    async with (
        open_server(
            bytes_sessions(max_evidence_items=1, max_evidence_bytes=10), **config
        ) as server,
        open_client(unix=server.unix_path) as client,
    ):
        sessions = await client.list_sessions()
        health = await client.health()
    assert sessions == [
        {
            "name": "bytes",
            "bounds": {"max_evidence_items": 1, "max_evidence_bytes": 10},
            "declared_bounds": {"max_evidence_items": 1, "max_evidence_bytes": 10},
            "mechanisms": [
                {
                    "mechanism_id": "vstd.bytes.sha256",
                    "mechanism_digest": BytesDigestMechanism.mechanism_digest,
                    "accepted_bounds": None,
                    "catalog_entry": sessions[0]["mechanisms"][0]["catalog_entry"],
                    "pinned": {},
                }
            ],
        }
    ]
    assert health["status"] == "serving" and health["audit"]["durability"] == "fsync"


@pytest.mark.parametrize(
    ("attack", "items", "code"),
    [
        ("oversize evidence", [600_000], "EVIDENCE_BYTES_EXCEEDED"),
        ("too many items", [1, 1, 1], "EVIDENCE_ITEMS_EXCEEDED"),
        ("frame over global cap", [3 * 1024 * 1024], "FRAME_TOO_LARGE"),
    ],
)
async def test_oversize_is_refused_before_any_evidence_byte_is_sent(
    config: dict[str, Any], attack: str, items: list[int], code: str
) -> None:
    header = {
        "kind": "submit",
        "request_id": 9,
        "session": "bytes",
        "binding": bytes_binding(b"x").to_dict(),
        "items": items,
    }
    async with open_server(bytes_sessions(), **config) as server:
        # Only the header is sent: the answer arrives although no evidence byte ever does.
        answers = await raw_exchange(server, HELLO + frame(header))
    assert isinstance(answers[-1], ErrorResponse) and answers[-1].code == code
    assert answers[-1].decision_id is not None
    refusal = by_id(audit_records(server))[answers[-1].decision_id]
    assert refusal["event"] == "refusal" and refusal["code"] == code


async def test_client_oversize_submission_raises_rejected(config: dict[str, Any]) -> None:
    big = b"\0" * 600_000
    async with open_server(bytes_sessions(), **config) as server:
        async with open_client(unix=server.unix_path) as client:
            with pytest.raises(RejectedError) as caught:
                await client.submit("bytes", bytes_binding(big), [big])
        assert caught.value.code == "EVIDENCE_BYTES_EXCEEDED"
        async with open_client(unix=server.unix_path) as client:  # the server is fine
            assert (await client.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"


async def test_header_length_over_cap_is_refused_before_reading_it(config: dict[str, Any]) -> None:
    async with open_server(bytes_sessions(), **config) as server:
        answers = await raw_exchange(server, HELLO + MAGIC + struct.pack(">I", 2**31))
    assert answers[-1].code == "HEADER_TOO_LARGE"


async def test_lying_length_shorter_evidence_then_close_is_truncated_and_audited(
    config: dict[str, Any],
) -> None:
    evidence = b"0123456789"
    header = {
        "kind": "submit",
        "request_id": 1,
        "session": "bytes",
        "binding": bytes_binding(evidence).to_dict(),
        "items": [len(evidence)],
    }
    async with open_server(bytes_sessions(), **config) as server:
        assert server.unix_path is not None
        stream = await trio.open_unix_socket(server.unix_path)
        await stream.send_all(HELLO + frame(header) + evidence[:4])
        await stream.send_eof()
        with trio.fail_after(5):
            while await stream.receive_some(65536):
                pass
        await stream.aclose()
        with trio.fail_after(5):
            while not any(r.get("code") == "TRUNCATED_FRAME" for r in audit_records(server)):
                await trio.sleep(0.01)


async def test_lying_length_longer_evidence_spills_into_bad_magic(config: dict[str, Any]) -> None:
    header = {
        "kind": "submit",
        "request_id": 1,
        "session": "bytes",
        "binding": bytes_binding(b"abc").to_dict(),
        "items": [3],
    }
    async with open_server(bytes_sessions(), **config) as server:
        answers = await raw_exchange(server, HELLO + frame(header, b"abcdef"))
    assert [type(a).__name__ for a in answers] == ["HelloAccepted", "Decision", "ErrorResponse"]
    assert answers[1].result["outcome"] == "PASS" and answers[2].code == "BAD_MAGIC"


@pytest.mark.parametrize(
    ("attack", "data", "code"),
    [
        ("garbage", b"\x16\x03\x01 not a frame at all" * 10, "BAD_MAGIC"),
        ("request before hello", frame({"kind": "list", "request_id": 1}), "HANDSHAKE_REQUIRED"),
        (
            "duplicate keys",
            HELLO + MAGIC + struct.pack(">I", 44) + b'{"kind":"list","kind":"list","request_id":1}',
            "HEADER_INVALID",
        ),
        (
            "bad utf-8",
            HELLO + MAGIC + struct.pack(">I", 30) + b'{"kind":"l\xffst","request_id":1}',
            "HEADER_INVALID",
        ),
        (
            "unknown session",
            HELLO
            + frame(
                {"kind": "submit", "request_id": 1, "session": "nope", "binding": {}, "items": [1]}
            ),
            "UNKNOWN_SESSION",
        ),
        (
            "bad binding",
            HELLO
            + frame(
                {
                    "kind": "submit",
                    "request_id": 1,
                    "session": "bytes",
                    "binding": {"subject_id": 1},
                    "items": [1],
                }
            ),
            "BINDING_INVALID",
        ),
        (
            "unsupported version",
            frame({"kind": "hello", "versions": [99], "client": "x"}),
            "VERSION_UNSUPPORTED",
        ),
    ],
)
async def test_garbage_is_refused_with_a_code_and_the_server_survives(
    config: dict[str, Any], attack: str, data: bytes, code: str
) -> None:
    async with open_server(bytes_sessions(), **config) as server:
        answers = await raw_exchange(server, data)
        assert answers[-1].code == code
        async with open_client(unix=server.unix_path) as client:
            assert (await client.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"


async def test_slow_drip_client_is_dropped_at_idle_timeout_others_unaffected(
    config: dict[str, Any],
) -> None:
    data = HELLO + frame({"kind": "list", "request_id": 1})
    async with open_server(bytes_sessions(), idle_timeout=1.0, **config) as server:
        assert server.unix_path is not None
        drip = await trio.open_unix_socket(server.unix_path)
        dropped = trio.Event()
        received = bytearray()

        async def dripper() -> None:
            for byte in data:
                try:
                    await drip.send_all(bytes([byte]))
                except trio.BrokenResourceError:
                    break
                await trio.sleep(0.2)

        async def reader() -> None:
            while True:
                chunk = await drip.receive_some(65536)
                if not chunk:
                    break
                received.extend(chunk)
            dropped.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(dripper)
            nursery.start_soon(reader)
            async with open_client(unix=server.unix_path) as client:
                for index in range(20):
                    item = f"other-{index}".encode()
                    assert (
                        await client.submit("bytes", bytes_binding(item), [item])
                    ).outcome == "PASS"
            with trio.fail_after(5):
                await dropped.wait()
            nursery.cancel_scope.cancel()
        await drip.aclose()
    conn = ClientConnection()
    conn.receive_data(bytes(received))
    answer = conn.next_event()
    assert isinstance(answer, ErrorResponse) and answer.code == "IDLE_TIMEOUT"


async def test_busy_is_answered_at_once_instead_of_queueing(config: dict[str, Any]) -> None:
    gate = process_gate()
    slow = SlowMechanism(gate=gate)
    sessions = [HostedSession("slow", (slow,))]
    async with open_server(sessions, max_in_flight=1, **config) as server:
        first: list[Any] = []

        async def occupy() -> None:
            async with open_client(unix=server.unix_path) as client:
                first.append(await client.submit("slow", binding_for(slow, [b"a"]), [b"a"]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(occupy)
            with trio.fail_after(5):
                while slow.started == 0:
                    await trio.sleep(0.01)
            # retry=None: the daemon's own answer, not the client's retry of it (docs/client.md)
            async with open_client(unix=server.unix_path, retry=None) as client:
                with trio.fail_after(2), pytest.raises(ServiceUnavailable) as caught:
                    await client.submit("slow", binding_for(slow, [b"b"]), [b"b"])
            assert caught.value.code == "BUSY"
            gate.set()
        assert first[0].outcome == "PASS"


async def test_mechanism_overrunning_the_deadline_is_unknown(config: dict[str, Any]) -> None:
    slow = SlowMechanism(seconds=1.0)
    async with (
        open_server([HostedSession("slow", (slow,))], request_deadline=0.2, **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        decision = await client.submit("slow", binding_for(slow, [b"a"]), [b"a"])
    assert decision.outcome == "UNKNOWN" and decision.result["details"] == DEADLINE_DETAILS
    assert by_id(audit_records(server))[decision.decision_id]["outcome"] == "UNKNOWN"


async def test_long_evaluation_does_not_stall_other_clients(config: dict[str, Any]) -> None:
    gate = process_gate()
    slow = SlowMechanism(gate=gate)
    sessions = [HostedSession("slow", (slow,)), *bytes_sessions()]
    async with open_server(sessions, **config) as server, trio.open_nursery() as nursery:

        async def stuck() -> None:
            async with open_client(unix=server.unix_path) as client:
                await client.submit("slow", binding_for(slow, [b"a"]), [b"a"])

        nursery.start_soon(stuck)
        with trio.fail_after(5):
            while slow.started == 0:
                await trio.sleep(0.01)
        with trio.fail_after(5):
            async with open_client(unix=server.unix_path) as client:
                for index in range(10):
                    item = bytes([index])
                    assert (
                        await client.submit("bytes", bytes_binding(item), [item])
                    ).outcome == "PASS"
                assert (await client.health())["in_flight"] == 1
        gate.set()


async def test_undeliverable_decision_is_internal_and_the_server_survives(
    config: dict[str, Any],
) -> None:
    bad = UnencodableMechanism()
    sessions = [HostedSession("bad", (bad,)), *bytes_sessions()]
    async with open_server(sessions, **config) as server:
        async with open_client(unix=server.unix_path) as client:
            with pytest.raises(ServiceUnavailable) as caught:
                await client.submit("bad", binding_for(bad, [b"a"]), [b"a"])
        assert caught.value.code == "INTERNAL"
        async with open_client(unix=server.unix_path) as client:
            assert (await client.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"


async def test_handler_failure_is_internal_audited_and_the_server_survives(
    config: dict[str, Any],
) -> None:
    odd = OffVocabularyMechanism()
    sessions = [HostedSession("odd", (odd,)), *bytes_sessions()]
    async with open_server(sessions, **config) as server:
        async with open_client(unix=server.unix_path) as client:
            with pytest.raises(ServiceUnavailable) as caught:
                await client.submit("odd", binding_for(odd, [b"a"]), [b"a"])
        assert caught.value.code == "INTERNAL"
        async with open_client(unix=server.unix_path) as client:
            assert (await client.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"
            assert (await client.health())["in_flight"] == 0  # the slot was released
    assert caught.value.decision_id is not None
    assert by_id(audit_records(server))[caught.value.decision_id]["code"] == "INTERNAL"


async def test_audit_failure_means_no_decision_is_answered(config: dict[str, Any]) -> None:
    async with open_server(bytes_sessions(), **config) as server:
        assert server.audit is not None
        server.audit.close_sync()
        async with open_client(unix=server.unix_path) as client:
            with pytest.raises(ServiceUnavailable) as caught:
                await client.submit("bytes", bytes_binding(b"x"), [b"x"])
    assert caught.value.code == "AUDIT_FAILED"


async def test_200_clients_x_20_pairs_all_correct_all_audited(config: dict[str, Any]) -> None:
    answered: dict[str, tuple[str, str]] = {}

    async def one_client(index: int) -> None:
        async with open_client(unix=server.unix_path) as client:
            for pair in range(20):
                item = f"{index}:{pair}".encode()
                lie = pair % 5 == 4  # every fifth binding expects other bytes: FAIL
                binding = bytes_binding(item, expected=sha(b"other") if lie else None)
                decision = await client.submit("bytes", binding, [item])
                expected = "FAIL" if lie else "PASS"
                assert decision.outcome == expected
                answered[decision.decision_id] = (decision.outcome, sha(item))

    async with (
        open_server(bytes_sessions(), **config) as server,
        trio.open_nursery() as nursery,
    ):
        for index in range(200):
            nursery.start_soon(one_client, index)
    assert len(answered) == 4000
    report = verify_log(config["audit_path"])
    assert report.intact
    records = by_id(audit_records(server))
    for decision_id, (outcome, digest) in answered.items():
        assert records[decision_id]["outcome"] == outcome
        assert records[decision_id]["evidence"][0]["digest"] == digest


async def test_shutdown_lets_in_flight_requests_finish_and_stops_accepting(
    config: dict[str, Any],
) -> None:
    gate = process_gate()
    slow = SlowMechanism(gate=gate)
    results: list[Any] = []
    sessions = [HostedSession("slow", (slow,))]
    async with open_server(sessions, worker_processes=4, **config) as server:

        async def submit(index: int) -> None:
            async with open_client(unix=server.unix_path) as client:
                item = bytes([index])
                results.append(await client.submit("slow", binding_for(slow, [item]), [item]))

        async with trio.open_nursery() as nursery:
            for index in range(5):
                nursery.start_soon(submit, index)
            with trio.fail_after(5):
                while slow.started < 4:  # worker_processes=4: four evaluating, one queued
                    await trio.sleep(0.01)
            server.shutdown()
            await trio.sleep(0.2)
            with pytest.raises(TransportError):
                async with open_client(unix=server.unix_path, connect_timeout=1):
                    pass
            gate.set()
    assert sorted(r.outcome for r in results) == ["PASS"] * 5
    records = audit_records(server)
    assert records[-1]["event"] == "daemon_stop"
    assert {r.decision_id for r in results} <= set(by_id(records))
    assert verify_log(config["audit_path"]).intact


async def test_durability_none_still_logs_every_decision_by_shutdown(
    config: dict[str, Any],
) -> None:
    config = {**config, "audit_durability": "none"}
    async with (
        open_server(bytes_sessions(), **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        ids = [
            (await client.submit("bytes", bytes_binding(bytes([i])), [bytes([i])])).decision_id
            for i in range(10)
        ]
    assert set(ids) <= set(by_id(audit_records(server)))
    assert verify_log(config["audit_path"]).intact


async def test_binding_with_exact_types_only(config: dict[str, Any]) -> None:
    wire = bytes_binding(b"x").to_dict()
    wire["bounds"] = {"max_evidence_items": True, "max_evidence_bytes": 10}
    async with (
        open_server(bytes_sessions(), **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        with pytest.raises(RejectedError) as caught:
            await client.submit("bytes", wire, [b"x"])
    assert caught.value.code == "BINDING_INVALID"


async def test_binding_bounds_are_the_sessions_not_the_servers(config: dict[str, Any]) -> None:
    binding = bytes_binding(b"twelve bytes", bounds=EvidenceBounds(1, 4))
    async with (
        open_server(bytes_sessions(), **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        decision = await client.submit("bytes", binding, [b"twelve bytes"])
    assert (decision.outcome, decision.result["details"]) == (
        "UNKNOWN",
        "evidence byte bound exceeded",
    )


def test_header_codec_refuses_unencodable_values() -> None:
    with pytest.raises(ValueError):
        encode_header({"x": float("nan")})


async def test_sync_facade_for_scripts(config: dict[str, Any]) -> None:
    async with open_server(bytes_sessions(), **config) as server:
        assert server.tcp_address is not None
        client = SyncClient(tcp=server.tcp_address)
        decision = await trio.to_thread.run_sync(
            client.submit, "bytes", bytes_binding(b"sync"), [b"sync"]
        )
        health = await trio.to_thread.run_sync(client.health)
        listed = await trio.to_thread.run_sync(client.list_sessions)
    assert decision.outcome == "PASS" and health["decisions"] == 1
    assert [session["name"] for session in listed] == ["bytes"]
    assert decision.to_dict()["decision_id"] == decision.decision_id


async def test_connecting_to_nothing_is_a_transport_error(short_dir: Path) -> None:
    with pytest.raises(TransportError):
        async with open_client(unix=str(short_dir / "nobody"), connect_timeout=1):
            pass


async def wait_for_connections(server: Server, count: int) -> None:
    """Until the server holds ``count`` connections (accepts run in their own task)."""
    with trio.fail_after(10):
        while server.health()["connections"] != count:
            await trio.sleep(0.01)


async def test_connections_over_the_cap_are_answered_busy_when_none_can_yield(
    config: dict[str, Any],
) -> None:
    """Two connections that have not said hello yet (they are bounded by their first
    deadline, not closed for a newcomer: daemon.server._table rule 3) fill the table."""
    async with open_server(bytes_sessions(), max_connections=2, **config) as server:
        assert server.unix_path is not None
        silent = [socket.socket(socket.AF_UNIX) for _ in range(2)]
        for sock in silent:
            sock.connect(server.unix_path)
        await wait_for_connections(server, 2)
        with pytest.raises(ServiceUnavailable) as caught:
            async with open_client(unix=server.unix_path, retry=None):
                pass
        assert caught.value.code == "BUSY"
        for sock in silent:
            sock.close()
        await wait_for_connections(server, 0)
        async with open_client(unix=server.unix_path) as client:  # room again
            assert (await client.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"


async def test_a_full_table_closes_the_longest_idle_connection_for_a_newcomer(
    config: dict[str, Any],
) -> None:
    """Two idle connections (answered, waiting for their next request) held the whole table:
    a third client was refused BUSY until one of them left. Now the one idle longest is closed
    to admit it, quietly (no answer, no strike), as nginx and HAProxy do."""
    async with (
        open_server(bytes_sessions(), max_connections=2, **config) as server,
        open_client(unix=server.unix_path) as oldest,
    ):
        await oldest.health()
        async with open_client(unix=server.unix_path) as newer:
            await newer.health()
            async with open_client(unix=server.unix_path) as newcomer:
                health = await newcomer.health()
            assert (await newer.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"
            # The client replaces a kept connection the daemon closed while idle (docs/client.md).
            assert (await oldest.health())["evicted_connections"] == 1
    assert health["evicted_connections"] == 1 and health["peers"]["strikes"] == 0


async def test_mutated_requests_never_crash_the_server(config: dict[str, Any]) -> None:
    """200 deterministic byte mutations of a valid session: each is answered with a decision
    or a closed-vocabulary error (or the connection closes), and the server stays healthy."""
    import random

    from daemon.wire._protocol import ERROR_CODES, Decision, HelloAccepted

    valid = HELLO + frame(
        {
            "kind": "submit",
            "request_id": 1,
            "session": "bytes",
            "binding": bytes_binding(b"fuzz").to_dict(),
            "items": [4],
        },
        b"fuzz",
    )
    rng = random.Random(20261129)
    async with open_server(bytes_sessions(), idle_timeout=0.5, **config) as server:
        for _ in range(200):
            data = bytearray(valid)
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            answers = await raw_exchange(server, bytes(data), read_timeout=3, eof=True)
            for answer in answers:
                assert isinstance(answer, HelloAccepted | Decision | ErrorResponse)
                if isinstance(answer, ErrorResponse):
                    assert answer.code in ERROR_CODES
        async with open_client(unix=server.unix_path) as client:
            assert (await client.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"
            assert (await client.health())["connections"] == 1
    assert verify_log(config["audit_path"]).intact
