"""Attacks and faults on a real in-process server over real sockets:
audit amplification by echoed values, resets inside a frame, socket permissions under any
umask, bounds a mechanism cannot accept, idle and slow connections, one peer hogging the
server, and evaluations that overrun or hold the GIL."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import struct
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import (
    HELLO,
    SlowMechanism,
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
    Server,
    ServiceUnavailable,
    default_sessions,
    open_client,
    open_server,
    tail,
    verify_log,
)
from daemon.wire._protocol import ClientConnection, ErrorResponse
from mechanism.formation import FormationPathCertificateMechanism, formation_binding
from session import (
    BoundProposition,
    BytesDigestMechanism,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
)

#: The issue's bound: a refusal line (and an error frame) whatever the request.
MAX_REFUSAL_BYTES = 2048


@pytest.fixture
def config(short_dir: Path) -> dict[str, Any]:
    return {
        "tcp": ("127.0.0.1", 0),
        "unix": str(short_dir / "sock"),
        "audit_path": str(short_dir / "audit.jsonl"),
    }


def bytes_sessions(**bounds: Any) -> list[HostedSession]:
    return [HostedSession("bytes", (BytesDigestMechanism(),), **bounds)]


def audit_lines(server: Server) -> list[bytes]:
    assert server.audit is not None
    return server.audit.path.read_bytes().splitlines()


async def raw_answers(path: str, data: bytes, *, eof: bool = True, wait: float = 5.0) -> bytes:
    """Send ``data`` on a fresh Unix connection (then end the stream), return all it answers."""
    stream = await trio.open_unix_socket(path)
    received = bytearray()
    async with stream:
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(data)
            if eof:
                await stream.send_eof()
        with trio.move_on_after(wait):
            while True:
                try:
                    chunk = await stream.receive_some(65536)
                except trio.BrokenResourceError:
                    break
                if not chunk:
                    break
                received += chunk
    return bytes(received)


def error_of(answer: bytes) -> ErrorResponse:
    conn = ClientConnection()
    conn.receive_data(answer)
    events = []
    while True:
        event = conn.next_event()
        if type(event).__name__ in ("NeedData", "Closed"):
            break
        events.append(event)
    assert isinstance(events[-1], ErrorResponse), events
    return events[-1]


def submit_frame(session: str, binding: dict[str, Any], items: Sequence[int]) -> bytes:
    header = {
        "kind": "submit",
        "request_id": 1,
        "session": session,
        "binding": binding,
        "items": list(items),
    }
    return frame(header)


# --------------------------------------------------------------------------- bounded echo

#: Backslash, quote, bidi override, emoji, non-ASCII, NUL: 6 characters, 19 header bytes.
_NASTY_UNIT = '\\"\u202e\U0001f600é\x00'


def _long_binding(**changes: Any) -> dict[str, Any]:
    wire = bytes_binding(b"x").to_dict()
    wire.update(changes)
    return wire


AMPLIFIERS = {
    # defect 3: a session name of DEL characters filling the 64 KiB header cap
    "session of 64,900 DEL": ("\x7f" * 64_900, _long_binding(), [1]),
    "session of mixed escapes": (_NASTY_UNIT * 3_300, _long_binding(), [1]),
    "binding with 60 KB of extra keys": (
        "bytes",
        _long_binding(**{f"k{i:05d}" + "\x7f" * 40: "" for i in range(1_200)}),
        [1],
    ),
    # the mechanism id is echoed in the refusal line of a frame cut after its header
    "binding with a 60 KB mechanism id, cut mid-frame": (
        "bytes",
        _long_binding(mechanism_id=_NASTY_UNIT * 3_300),
        [1],
    ),
}


@pytest.mark.parametrize("attack", sorted(AMPLIFIERS))
async def test_audit_amplification_by_echoed_request_values_is_bounded(
    config: dict[str, Any], attack: str
) -> None:
    session, binding, items = AMPLIFIERS[attack]
    request = HELLO + submit_frame(session, binding, items)
    assert len(request) > 50_000
    async with open_server(bytes_sessions(max_evidence_bytes=4), **config) as server:
        before = len(audit_lines(server))
        answer = await raw_answers(server.unix_path or "", request)
        lines = audit_lines(server)[before:]
    error = error_of(answer)
    refusal = [line for line in lines if b'"event":"refusal"' in line]
    assert len(refusal) == 1, lines
    assert len(refusal[0]) <= MAX_REFUSAL_BYTES, (attack, len(refusal[0]))
    assert len(answer) <= MAX_REFUSAL_BYTES + 200, (attack, len(answer))  # + the hello answer
    # The cut value still identifies the original: its length and digest are in the message.
    if attack.startswith("session of"):
        assert error.code == "UNKNOWN_SESSION"
        assert f"({len(session)} chars, sha256:" in error.message
        digest = sha(session.encode("utf-8", "surrogatepass")).removeprefix("sha256:")
        assert digest in refusal[0].decode()
    assert verify_log(config["audit_path"]).intact


async def test_unknown_kind_of_60_kb_is_echoed_bounded(config: dict[str, Any]) -> None:
    request = HELLO + frame({"kind": "\x7f" * 60_000, "request_id": 1})
    async with open_server(bytes_sessions(), **config) as server:
        answer = await raw_answers(server.unix_path or "", request)
        lines = audit_lines(server)
    assert error_of(answer).code == "UNKNOWN_KIND"
    assert max(len(line) for line in lines if b'"refusal"' in line) <= MAX_REFUSAL_BYTES


async def test_decision_for_an_unregistered_60_kb_mechanism_id_logs_a_bounded_line(
    config: dict[str, Any],
) -> None:
    binding = bytes_binding(b"x").to_dict()
    binding["mechanism_id"] = "\x7f" * 60_000
    binding["expected"] = "\x7f" * 1_000
    async with open_server(bytes_sessions(), **config) as server:
        async with open_client(unix=server.unix_path) as client:
            decision = await client.submit("bytes", binding, [b"x"])
        lines = audit_lines(server)
    assert decision.outcome == "UNKNOWN"
    line = next(line for line in lines if decision.decision_id.encode() in line)
    assert len(line) <= MAX_REFUSAL_BYTES


# --------------------------------------------------------------------------- reset mid-header


def _reset(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN (SO_LINGER 0)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.parametrize("cut", ["inside the prefix", "inside the header"])
async def test_connection_reset_inside_a_header_is_audited_like_a_close(
    config: dict[str, Any], cut: str
) -> None:
    request = submit_frame("bytes", bytes_binding(b"x").to_dict(), [1])
    partial = request[:5] if cut == "inside the prefix" else request[:40]
    async with open_server(bytes_sessions(), **config) as server:
        before = len(audit_lines(server))
        assert server.tcp_address is not None
        sock = socket.create_connection(server.tcp_address)
        sock.sendall(HELLO + partial)
        await trio.sleep(0.2)  # let the server read the hello and the partial frame
        _reset(sock)
        with trio.fail_after(5):
            while len(audit_lines(server)) == before:
                await trio.sleep(0.02)
        async with open_client(unix=server.unix_path) as client:  # still serving
            assert (await client.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"
    records = tail(config["audit_path"], 10)
    refusal = next(r for r in records if r["event"] == "refusal")
    assert refusal["code"] == "TRUNCATED_FRAME"
    assert refusal["requester"]["transport"] == "tcp"
    assert verify_log(config["audit_path"]).intact


# --------------------------------------------------------------------------- socket mode


@pytest.mark.parametrize("group", ["", "own group"])
async def test_socket_is_private_whatever_the_umask(config: dict[str, Any], group: str) -> None:
    socket_group = str(os.getgid()) if group else ""
    previous = os.umask(0)
    try:
        async with open_server(bytes_sessions(), socket_group=socket_group, **config) as server:
            info = os.stat(server.unix_path or "")
            async with open_client(unix=server.unix_path) as client:
                assert (await client.health())["status"] == "serving"
    finally:
        os.umask(previous)
    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == (0o660 if group else 0o600)
    if group:
        assert info.st_gid == os.getgid()


# --------------------------------------------------------------------------- bounds clamp


async def test_declared_bounds_beyond_what_the_mechanism_accepts_are_refused_before_reading(
    config: dict[str, Any],
) -> None:
    """Defect 8: the default descriptor session declared 1,052,672 bytes while its mechanism
    accepts 131,072 per pair, so the daemon read 1 MiB that had to end UNKNOWN."""
    descriptor = next(s for s in default_sessions() if s.name == "descriptor")
    assert descriptor.max_evidence_bytes == 1_052_672
    binding = bytes_binding(b"x").to_dict()
    async with open_server([descriptor], **config) as server:
        async with open_client(unix=server.unix_path) as client:
            listed = await client.list_sessions()
        # Only the header is sent: a server that accepted it would wait for 1 MiB instead.
        with trio.fail_after(5):
            answer = await raw_answers(
                server.unix_path or "", HELLO + submit_frame("descriptor", binding, [4096, 1 << 20])
            )
    error = error_of(answer)
    assert error.code == "EVIDENCE_BYTES_EXCEEDED"
    assert "admits 131072" in error.message
    assert listed[0]["bounds"] == {"max_evidence_items": 2, "max_evidence_bytes": 131_072}
    assert listed[0]["declared_bounds"] == {
        "max_evidence_items": 2,
        "max_evidence_bytes": 1_052_672,
    }
    assert listed[0]["mechanisms"][0]["accepted_bounds"]["max_evidence_bytes"] == 131_072


class _StatedBounds(BytesDigestMechanism):
    def __init__(self, bounds: object) -> None:
        self.accepted_bounds = bounds


@pytest.mark.parametrize(
    ("stated", "expected"),
    [
        (EvidenceBounds(1, 100), (1, 100)),
        (lambda: EvidenceBounds(3, 10_000_000), (2, 524_288)),  # a method; never raises bounds
    ],
)
def test_sessions_are_clamped_to_what_their_mechanisms_state(
    stated: object, expected: tuple[int, int]
) -> None:
    session = HostedSession("s", (_StatedBounds(stated),))
    assert (session.bounds()["max_evidence_items"], session.bounds()["max_evidence_bytes"]) == (
        expected
    )


@pytest.mark.parametrize("stated", [(2, 10), EvidenceBounds(True, 10), "lots"])
def test_mechanism_stating_malformed_bounds_is_a_host_error(stated: object) -> None:
    with pytest.raises(ValueError, match="accepted_bounds"):
        HostedSession("s", (_StatedBounds(stated),))


# --------------------------------------------------------------------------- idle and slow


async def test_connection_silent_before_hello_is_dropped_at_the_pre_hello_timeout(
    config: dict[str, Any],
) -> None:
    async with open_server(
        bytes_sessions(), pre_hello_timeout=0.3, idle_timeout=30.0, **config
    ) as server:
        silent = await trio.open_unix_socket(server.unix_path or "")
        with trio.fail_after(5):
            answer = await silent.receive_some(65536)
        await silent.aclose()
        async with open_client(unix=server.unix_path) as client:
            health = await client.health()
    assert error_of(answer).code == "IDLE_TIMEOUT"
    assert "no hello within 0.3 s" in error_of(answer).message
    assert health["connections"] == 1


async def test_slow_evidence_sender_loses_its_slot_at_the_minimum_rate(
    config: dict[str, Any],
) -> None:
    evidence = b"y" * 4_000
    request = HELLO + submit_frame("bytes", bytes_binding(evidence).to_dict(), [len(evidence)])
    async with open_server(
        bytes_sessions(), idle_timeout=30.0, evidence_grace=0.3, min_evidence_rate=1000, **config
    ) as server:
        assert server.unix_path is not None
        drip = await trio.open_unix_socket(server.unix_path)
        await drip.send_all(request)
        received = bytearray()

        async def dripper() -> None:
            for byte in evidence:
                try:
                    await drip.send_all(bytes([byte]))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                await trio.sleep(0.05)  # 20 bytes/s, far below 1,000

        async with trio.open_nursery() as nursery:
            nursery.start_soon(dripper)
            with trio.fail_after(5):
                while True:
                    chunk = await drip.receive_some(65536)
                    if not chunk:
                        break
                    received += chunk
            nursery.cancel_scope.cancel()
        await drip.aclose()
        async with open_client(unix=server.unix_path) as client:
            health = await client.health()
    error = error_of(bytes(received))
    assert error.code == "IDLE_TIMEOUT" and "slower than 1000 bytes/s" in error.message
    assert health["in_flight"] == 0
    refusal = next(r for r in tail(config["audit_path"], 10) if r.get("code"))
    assert refusal["code"] == "IDLE_TIMEOUT" and refusal["decision_id"] == error.decision_id


# --------------------------------------------------------------------------- per-peer caps


async def _tcp_connection_from(source: str, address: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        sock.connect(address)
    await trio.lowlevel.wait_writable(sock)
    sock.setblocking(True)
    return sock


async def test_one_peer_cannot_take_every_connection(config: dict[str, Any]) -> None:
    async with open_server(
        bytes_sessions(), max_connections=40, max_connections_per_peer=5, **config
    ) as server:
        assert server.tcp_address is not None
        hog = [await _tcp_connection_from("127.0.0.2", server.tcp_address) for _ in range(5)]
        extra = await _tcp_connection_from("127.0.0.2", server.tcp_address)
        extra.sendall(HELLO)
        with trio.fail_after(5):
            refused = await trio.to_thread.run_sync(extra.recv, 65536)
        async with open_client(tcp=server.tcp_address) as client:  # another peer: served
            assert (await client.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"
            health = await client.health()
        for sock in [*hog, extra]:
            sock.close()
    assert error_of(refused).code == "BUSY" and "from this peer" in error_of(refused).message
    assert health["peers"]["refused_connections"] == 1


async def test_one_peer_cannot_take_every_in_flight_slot(config: dict[str, Any]) -> None:
    gate = process_gate()
    slow = SlowMechanism(gate=gate)
    sessions = [HostedSession("slow", (slow,)), *bytes_sessions()]
    async with open_server(
        sessions, max_in_flight=8, max_in_flight_per_peer=2, worker_processes=2, **config
    ) as server:
        assert server.tcp_address is not None
        address = server.tcp_address

        async def hold(index: int) -> None:
            async with open_client(unix=server.unix_path) as client:
                item = bytes([index]) * 5000  # above inline_max_bytes: in a worker
                await client.submit("slow", binding_for(slow, [item]), [item])

        async with trio.open_nursery() as nursery:
            for index in range(2):
                nursery.start_soon(hold, index)
            with trio.fail_after(5):
                while slow.started < 2:
                    await trio.sleep(0.01)
            async with open_client(unix=server.unix_path, retry=None) as client:
                with pytest.raises(ServiceUnavailable) as caught:
                    await client.submit("bytes", bytes_binding(b"a"), [b"a"])
            async with open_client(tcp=address) as client:  # another peer (TCP address)
                decision = await client.submit("bytes", bytes_binding(b"b"), [b"b"])
            gate.set()
    assert caught.value.code == "BUSY" and "from this peer" in caught.value.message
    assert decision.outcome == "PASS"


# --------------------------------------------------------------------------- deadlines


class GilHoldingMechanism:
    """Backtracks catastrophically inside one C call of ``re`` (it holds the GIL throughout,
    as a quadratic admission scan once did), for any evidence."""

    mechanism_id = "test.gil_holding"
    mechanism_digest = sha(b"test.gil_holding")

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        re.fullmatch(r"(a+)+b", "a" * 40)  # 2^40 steps: ends only when killed
        return MechanismDecision(MechanismOutcome.PASS, "impossible")


class SleepsInline:
    """Sleeps ``seconds`` (on the event loop when evaluated inline)."""

    mechanism_id = "test.sleeps"
    mechanism_digest = sha(b"test.sleeps")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        time.sleep(self.seconds)
        return MechanismDecision(MechanismOutcome.PASS, "slept")


class BurnsCpu:
    """Computes for ``seconds`` of this thread's CPU time (on the event loop when inline)."""

    mechanism_id = "test.burns"
    mechanism_digest = sha(b"test.burns")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        begin = time.thread_time()
        while time.thread_time() - begin < self.seconds:
            pass
        return MechanismDecision(MechanismOutcome.PASS, "burnt")


async def _health_latencies(path: str, count: int) -> list[float]:
    latencies = []
    async with open_client(unix=path) as client:
        for _ in range(count):
            begin = time.perf_counter()
            await client.health()
            latencies.append(time.perf_counter() - begin)
            await trio.sleep(0.02)
    return latencies


async def test_gil_holding_evaluation_cannot_stall_health_and_is_killed_at_the_deadline(
    config: dict[str, Any],
) -> None:
    """The worst input: a check that holds the GIL and never ends, on the largest pair a
    formation session admits. Health keeps answering within 100 ms; at the deadline the
    decision is UNKNOWN and the worker process that ran it is gone (not abandoned)."""
    hog = GilHoldingMechanism()
    items = [b"a" * 262_144, b"b" * 262_144]
    sessions = [HostedSession("hog", (hog,), 2, 524_288)]
    async with open_server(sessions, request_deadline=2.0, worker_processes=2, **config) as server:
        assert server.unix_path is not None
        path = server.unix_path
        decisions = []

        async def submit() -> None:
            async with open_client(unix=path) as client:
                decisions.append(await client.submit("hog", binding_for(hog, items), items))

        async with open_client(unix=path) as client:
            pids_before = (await client.health())["evaluation"]["worker_pids"]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(submit)
            nursery.start_soon(submit)
            await trio.sleep(0.3)
            async with open_client(unix=path) as client:
                busy = (await client.health())["evaluation"]["workers_busy"]
            latencies = await _health_latencies(path, 20)
        async with open_client(unix=path) as client:
            evaluation = (await client.health())["evaluation"]
    ordered = sorted(latencies)
    print(
        f"health while both workers hold the GIL: median {ordered[10] * 1e3:.1f} ms, "
        f"max {ordered[-1] * 1e3:.1f} ms over {len(ordered)} probes"
    )
    assert busy == 2
    assert ordered[len(ordered) // 2] < 0.1, latencies
    assert [d.result["details"] for d in decisions] == [DEADLINE_DETAILS] * 2
    assert [d.outcome for d in decisions] == ["UNKNOWN"] * 2
    assert evaluation["workers_replaced"] == 2 and evaluation["overruns"] == 2
    for pid in pids_before:  # both killed, reaped: no runaway check left behind
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not set(evaluation["worker_pids"]) & set(pids_before)


async def test_largest_adversarial_formation_pair_cannot_stall_health(
    config: dict[str, Any],
) -> None:
    """The admission scan's worst input (an unterminated string of escaped quotes, 256 KiB per
    record) through the real formation mechanism: however long its check takes, health keeps
    answering and the decisions come back by the deadline."""
    mechanism = FormationPathCertificateMechanism()
    atom = formation_binding(*formation_pair("atom"), mechanism_digest=mechanism.mechanism_digest)
    items = [b'"' + b'a\\"' * 87_381, b'"' + b'b\\"' * 87_381]
    refs = tuple(sha(item) for item in items)
    binding = BoundProposition(
        subject_id=refs[0],
        predicate=atom.predicate,
        expected=atom.expected,
        mechanism_id=atom.mechanism_id,
        mechanism_digest=atom.mechanism_digest,
        evidence_refs=refs,
        trust_roots=atom.trust_roots,
        bounds=EvidenceBounds(2, 524_288),
        parameters=dict(atom.parameters),
    )
    sessions = [HostedSession("formation", (mechanism,), 2, 524_288)]
    async with open_server(sessions, request_deadline=3.0, **config) as server:
        assert server.unix_path is not None
        path = server.unix_path
        outcomes: list[str] = []

        async def submit() -> None:
            async with open_client(unix=path) as client:
                outcomes.append((await client.submit("formation", binding, items)).outcome)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(submit)
            nursery.start_soon(submit)
            await trio.sleep(0.1)
            latencies = await _health_latencies(path, 20)
    assert sorted(latencies)[len(latencies) // 2] < 0.1, latencies
    assert len(outcomes) == 2  # both decided (FAIL or UNKNOWN), none refused


async def test_inline_evaluation_over_the_deadline_is_unknown(config: dict[str, Any]) -> None:
    """An inline evaluation cannot be interrupted; it is still answered as an overrun."""
    sleepy = SleepsInline(0.3)
    sessions = [HostedSession("sleepy", (sleepy,))]
    async with (
        open_server(sessions, request_deadline=0.1, **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        decision = await client.submit("sleepy", binding_for(sleepy, [b"x"]), [b"x"])
        evaluation = (await client.health())["evaluation"]
    assert (decision.outcome, decision.result["details"]) == ("UNKNOWN", DEADLINE_DETAILS)
    assert evaluation["inline"] == 1 and evaluation["overruns"] == 1
    # Waiting (as when a busy machine preempts the loop) costs no CPU: no demotion.
    assert evaluation["demoted_sessions"] == []


async def test_slow_small_pair_moves_its_session_off_the_event_loop(
    config: dict[str, Any],
) -> None:
    """A small pair that costs much CPU inline stalls the loop once; its session's next pairs
    are evaluated in workers (the event loop stays free). Being preempted is not costing CPU:
    only the evaluation's own CPU time counts."""
    sleepy = BurnsCpu(0.05)
    sessions = [HostedSession("sleepy", (sleepy,)), *bytes_sessions()]
    async with (
        open_server(sessions, **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        for index in range(3):
            item = bytes([index])
            assert (await client.submit("sleepy", binding_for(sleepy, [item]), [item])).outcome == (
                "PASS"
            )
        assert (await client.submit("bytes", bytes_binding(b"ok"), [b"ok"])).outcome == "PASS"
        evaluation = (await client.health())["evaluation"]
    assert evaluation["demoted_sessions"] == ["sleepy"]
    assert (evaluation["inline"], evaluation["in_workers"]) == (2, 2)
