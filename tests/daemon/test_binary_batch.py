"""Batches over the binary protocol (``submit_batch``, ``docs/protocol.md`` §4.1): a real
in-process server over real sockets, the real client and raw frames. Each pair is its own
decision with its own audit line, answered in order; a bad pair is refused alone; a batch
over its bounds is refused before a byte of its evidence is read; a server without batches
gets the pairs one by one; a batch waits for fewer fsyncs than it has pairs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from daemon_testkit import HELLO, bytes_binding, frame
from test_server_attacks import bytes_sessions, error_of, raw_answers

from daemon import (
    HostedSession,
    RejectedError,
    SubmitResult,
    SyncClient,
    open_client,
    open_server,
    verify_log,
)
from daemon.client._outcomes import check_pair_count
from daemon.config._http_config import HttpConfig
from daemon.wire import _protocol
from daemon.wire._errors import LocalProtocolError
from daemon.wire._protocol import (
    BATCH_HEADER_START,
    DEFAULT_MAX_HEADER_BYTES,
    MAX_BATCH_PAIRS,
    ErrorCode,
    ProtocolError,
    batch_header_bytes,
    encode_header,
)
from mechanism.formation import FormationPathCertificateMechanism, formation_binding

BOUND = 4096  # the test session's evidence bytes per pair
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "formation"


@pytest.fixture
def config(short_dir: Path) -> dict[str, Any]:
    return {
        "tcp": ("127.0.0.1", 0),
        "unix": str(short_dir / "sock"),
        "audit_path": str(short_dir / "audit.jsonl"),
        "audit_durability": "fsync",
        "idle_timeout": 60.0,  # a server that waited for the evidence would outlast the test
    }


def _sessions() -> Any:
    return bytes_sessions(max_evidence_items=2, max_evidence_bytes=BOUND)


def _records(config: dict[str, Any]) -> list[dict[str, Any]]:
    text = Path(config["audit_path"]).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines()]


def _pair(payload: bytes, **changes: Any) -> tuple[dict[str, Any], list[bytes]]:
    return bytes_binding(payload, **changes).to_dict(), [payload]


def _batch_header(pairs: Any, session: str = "bytes") -> dict[str, Any]:
    return {"kind": "submit_batch", "request_id": 1, "session": session, "pairs": pairs}


def _sized(*sizes: int) -> list[dict[str, Any]]:
    binding = bytes_binding(b"x").to_dict()
    return [{"binding": binding, "items": [size]} for size in sizes]


async def test_a_batchs_decisions_equal_the_same_pairs_submitted_alone(
    config: dict[str, Any],
) -> None:
    pairs = [_pair(bytes([n]) * (n + 1)) for n in range(5)]
    pairs.append(_pair(b"lied about", expected="sha256:" + "0" * 64))  # decided FAIL
    async with (
        open_server(_sessions(), **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        batch = await client.submit_batch("bytes", pairs)
        alone = [await client.submit("bytes", binding, items) for binding, items in pairs]
        assert (await client.health())["status"] == "serving"  # the connection goes on
    assert all(isinstance(result, SubmitResult) for result in batch)
    decided = [result for result in batch if isinstance(result, SubmitResult)]
    assert [r.outcome for r in decided] == [r.outcome for r in alone]
    assert [r.outcome for r in decided] == ["PASS"] * 5 + ["FAIL"]
    assert [r.result["binding_digest"] for r in decided] == [
        r.result["binding_digest"] for r in alone
    ]
    lines = {line["decision_id"]: line for line in _records(config) if "decision_id" in line}
    assert len({r.decision_id for r in decided}) == len({r.seq for r in decided}) == 6
    for result in decided:
        line = lines[result.decision_id]
        assert line["event"] == "decision" and line["session"] == "bytes"
        assert (line["seq"], line["line_digest"]) == (result.seq, result.line_digest)
        assert line["outcome"] == result.outcome
    assert verify_log(config["audit_path"]).intact


async def test_one_bad_pair_in_a_batch_is_refused_alone_and_the_others_decided(
    config: dict[str, Any],
) -> None:
    malformed = {"subject_id": "no other keys"}
    over = b"o" * (BOUND + 1)
    pairs = [_pair(b"first"), (malformed, [b"m"]), _pair(over), _pair(b"last")]
    async with (
        open_server(_sessions(), **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        first, bad, too_big, last = await client.submit_batch("bytes", pairs)
        assert (await client.submit("bytes", *_pair(b"after"))).outcome == "PASS"
    assert isinstance(first, SubmitResult) and isinstance(last, SubmitResult)
    assert first.outcome == last.outcome == "PASS"
    assert isinstance(bad, RejectedError) and bad.code == "BINDING_INVALID"
    assert isinstance(too_big, RejectedError) and too_big.code == "EVIDENCE_BYTES_EXCEEDED"
    by_id = {line.get("decision_id"): line for line in _records(config)}
    for refused, code in ((bad, "BINDING_INVALID"), (too_big, "EVIDENCE_BYTES_EXCEEDED")):
        line = by_id[refused.decision_id]
        assert (line["event"], line["code"], line["session"]) == ("refusal", code, "bytes")
    assert by_id[too_big.decision_id]["declared_items"] == [BOUND + 1]


@pytest.mark.parametrize(
    ("pairs", "code"),
    [
        (_sized(*[1] * (MAX_BATCH_PAIRS + 1)), "HEADER_INVALID"),
        (_sized(*[BOUND + 100] * MAX_BATCH_PAIRS), "EVIDENCE_BYTES_EXCEEDED"),
        (_sized(1, 3 * 1024 * 1024), "FRAME_TOO_LARGE"),
        ([{"binding": {}, "items": [1] * 17}], "EVIDENCE_ITEMS_EXCEEDED"),
    ],
    ids=[
        "65 pairs",
        "over 64 times the session bound",
        "a pair over the frame cap",
        "a pair over the item cap",
    ],
)
async def test_a_batch_over_its_bounds_is_refused_before_a_byte_of_evidence_is_read(
    config: dict[str, Any], pairs: list[dict[str, Any]], code: str
) -> None:
    """Only the header is sent and the stream stays open, the evidence still unsent: a
    server that accepted the header would wait for the evidence (idle timeout 60 s)."""
    async with open_server(_sessions(), **config) as server:
        with trio.fail_after(20):
            answer = await raw_answers(
                server.unix_path or "", HELLO + frame(_batch_header(pairs)), eof=False, wait=15
            )
        error = error_of(answer)
        assert error.code == code
        refusals = [line for line in _records(config) if line["event"] == "refusal"]
    assert [line["code"] for line in refusals] == [code]  # audited once
    assert refusals[0]["decision_id"] == error.decision_id


@pytest.mark.parametrize(
    "pairs",
    [
        [],
        {"binding": {}, "items": []},
        [{"binding": {}, "items": [1], "extra": 1}],
        [{"binding": "not an object", "items": [1]}],
        [{"binding": {}, "items": [-1]}],
    ],
    ids=["no pairs", "not an array", "an extra key", "binding not an object", "negative size"],
)
async def test_a_malformed_batch_header_is_refused_and_audited_once(
    config: dict[str, Any], pairs: Any
) -> None:
    async with open_server(_sessions(), **config) as server:
        with trio.fail_after(20):
            answer = await raw_answers(
                server.unix_path or "", HELLO + frame(_batch_header(pairs)), eof=False, wait=15
            )
        error = error_of(answer)
        records = _records(config)
    assert error.code == "HEADER_INVALID"
    assert [line["event"] for line in records if line["event"] != "daemon_start"] == ["refusal"]
    assert records[-1]["code"] == "HEADER_INVALID"


async def test_a_batch_for_an_unknown_session_is_refused_whole_before_reading(
    config: dict[str, Any],
) -> None:
    async with open_server(_sessions(), **config) as server:
        with trio.fail_after(20):
            answer = await raw_answers(
                server.unix_path or "",
                HELLO + frame(_batch_header(_sized(10), session="nope")),
                eof=False,
                wait=15,
            )
    assert error_of(answer).code == "UNKNOWN_SESSION"


async def test_a_client_falls_back_to_single_submits_when_the_server_knows_no_batches(
    config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real server, its kind table cut back to an older server's (no ``submit_batch``):
    it answers UNKNOWN_KIND, and the client submits the pairs one by one instead, a refused
    pair ending its connection and the next pair going on a new one."""
    monkeypatch.delitem(_protocol._REQUEST_TYPES, "submit_batch")
    pairs = [_pair(b"one"), _pair(b"o" * (BOUND + 1)), _pair(b"three")]
    async with (
        open_server(_sessions(), **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        first = await client.submit_batch("bytes", pairs)
        again = await client.submit_batch("bytes", pairs[:1])  # straight to one by one
        health = await client.health()  # the client is usable after a fallback
    one, refused, three = first
    assert isinstance(one, SubmitResult) and isinstance(three, SubmitResult)
    assert one.outcome == three.outcome == "PASS"
    assert isinstance(refused, RejectedError) and refused.code == "EVIDENCE_BYTES_EXCEEDED"
    assert isinstance(again[0], SubmitResult) and again[0].outcome == "PASS"
    assert health["status"] == "serving"
    refusals = [line["code"] for line in _records(config) if line["event"] == "refusal"]
    assert refusals == ["UNKNOWN_KIND", "EVIDENCE_BYTES_EXCEEDED"]  # the batch asked once


async def test_a_64_pair_batch_waits_for_fewer_fsyncs_than_pairs(config: dict[str, Any]) -> None:
    pairs = [_pair(n.to_bytes(2, "big") * 8) for n in range(MAX_BATCH_PAIRS)]
    async with (
        open_server(_sessions(), **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        before = (await client.health())["audit"]
        results = await client.submit_batch("bytes", pairs)
        after = (await client.health())["audit"]
    assert before["durability"] == "fsync"
    assert [getattr(r, "outcome", r) for r in results] == ["PASS"] * MAX_BATCH_PAIRS
    assert after["lines"] - before["lines"] >= MAX_BATCH_PAIRS
    assert 1 <= after["fsyncs"] - before["fsyncs"] < MAX_BATCH_PAIRS


def _formation_pair() -> tuple[dict[str, Any], list[bytes]]:
    """The fixtures' atom pair and its honest binding: about 1.1 KB of ``submit_batch``
    header per pair, so 64 of them are more than the 64 KiB of a single header."""
    subject = (FIXTURES / "atom.subject.json").read_bytes()
    certificate = (FIXTURES / "atom.certificate.json").read_bytes()
    digest = FormationPathCertificateMechanism().mechanism_digest
    binding = formation_binding(subject, certificate, mechanism_digest=digest)
    return binding.to_dict(), [subject, certificate]


@pytest.mark.parametrize("front", ["evd1", "http"])
async def test_64_real_pairs_are_one_batch_on_either_front_end(
    config: dict[str, Any], front: str
) -> None:
    """The documented batch of 64 pairs failed whole over EVD1 (``HEADER_TOO_LARGE: declared
    header of 66490 bytes exceeds 65536``): the header cap of a single submit applied to the
    batch. The batch's header bound is now 64 times it (``batch_header_bytes``)."""
    pairs = [_formation_pair()] * MAX_BATCH_PAIRS
    request = _protocol.SubmitBatch(
        1, "formation", tuple(_protocol.BatchPair(b, (len(i[0]), len(i[1]))) for b, i in pairs)
    )
    header = len(encode_header(request.to_header()))
    assert DEFAULT_MAX_HEADER_BYTES < header <= batch_header_bytes(DEFAULT_MAX_HEADER_BYTES)
    formation = [HostedSession("formation", (FormationPathCertificateMechanism(),))]
    async with open_server(formation, **config, http=HttpConfig(listen=("127.0.0.1", 0))) as server:
        host, port = server.http_address or ("", 0)
        target: dict[str, Any] = (
            {"unix": server.unix_path} if front == "evd1" else {"url": f"http://{host}:{port}"}
        )
        async with open_client(target.pop("url", None), **target) as client:
            results = await client.submit_batch("formation", pairs)
    assert [getattr(r, "outcome", r) for r in results] == ["PASS"] * MAX_BATCH_PAIRS
    decisions = [line for line in _records(config) if line["event"] == "decision"]
    assert len(decisions) == MAX_BATCH_PAIRS and len({d["request_id"] for d in decisions}) == 1


@pytest.mark.parametrize("front", ["evd1", "http"])
async def test_a_batch_as_large_as_max_in_flight_is_decided_whole(
    config: dict[str, Any], front: str
) -> None:
    """With ``max_in_flight = 64`` (batches "at or under those caps", as the docs advise) a
    batch of 64 got 63 decisions and one ``BUSY``: the batch's own slot was held beside its
    pairs' slots. It now becomes theirs. Four here, the cap four."""
    pairs = [_pair(bytes([n]) * 8) for n in range(4)]
    caps: dict[str, Any] = {"max_in_flight": 4, "max_in_flight_per_peer": 4}
    async with open_server(
        _sessions(), **config, **caps, http=HttpConfig(listen=("127.0.0.1", 0))
    ) as server:
        host, port = server.http_address or ("", 0)
        url = None if front == "evd1" else f"http://{host}:{port}"
        async with open_client(url, unix=server.unix_path if url is None else None) as client:
            results = await client.submit_batch("bytes", pairs)
            again = await client.submit_batch("bytes", pairs)  # every slot was given back
            health = await client.health()
    assert [getattr(r, "outcome", r) for r in results + again] == ["PASS"] * 8
    assert health["in_flight"] == 0


async def test_the_sync_client_sends_a_batch(config: dict[str, Any]) -> None:
    async with open_server(_sessions(), **config) as server:
        client = SyncClient(unix=server.unix_path)
        results = await trio.to_thread.run_sync(
            client.submit_batch, "bytes", [_pair(b"a"), _pair(b"b")]
        )
    assert [getattr(r, "outcome", r) for r in results] == ["PASS", "PASS"]


async def test_a_client_refuses_an_empty_batch_and_splits_one_over_the_documented_size(
    config: dict[str, Any],
) -> None:
    """0 pairs is refused unsent; 65 pairs (one more than a ``submit_batch`` request carries:
    ``check_pair_count`` refuses to build it) go as two batches, every pair decided."""
    async with (
        open_server(_sessions(), **config) as server,
        open_client(unix=server.unix_path) as client,
    ):
        with pytest.raises(ValueError, match="at least one pair"):
            await client.submit_batch("bytes", [])
        with pytest.raises(ValueError, match="1 to 64 pairs"):
            check_pair_count(MAX_BATCH_PAIRS + 1)
        items = [bytes([n]) for n in range(MAX_BATCH_PAIRS + 1)]
        results = await client.submit_batch("bytes", [_pair(item) for item in items])
        assert [r.outcome for r in results if isinstance(r, SubmitResult)] == ["PASS"] * 65


# --------------------------------------------------------------------------- the codec alone


def _connected() -> tuple[_protocol.ClientConnection, _protocol.ServerConnection]:
    client, server = _protocol.ClientConnection(), _protocol.ServerConnection()
    server.receive_data(client.send(_protocol.Hello((1,), "t")))
    hello = server.next_event()
    assert isinstance(hello, _protocol.Hello)
    client.receive_data(server.send(_protocol.HelloAccepted(1, "s", {})))
    assert isinstance(client.next_event(), _protocol.HelloAccepted)
    return client, server


def test_a_batchs_evidence_is_delivered_pair_by_pair_only_after_the_host_accepts_it() -> None:
    client, server = _connected()
    batch = _protocol.SubmitBatch(
        7, "bytes", (_protocol.BatchPair({"a": 1}, (3,)), _protocol.BatchPair({}, (1, 2)))
    )
    server.receive_data(client.send(batch, (b"abc", b"d", b"ef")))
    assert server.next_event() == batch
    assert server.state is _protocol.State.AWAIT_VERDICT and server.bytes_wanted() == 0
    with pytest.raises(LocalProtocolError):  # no answer before the evidence
        server.send_decisions(7, [])
    server.accept_evidence()
    assert server.next_event() == _protocol.BatchEvidence(7, ((b"abc",), (b"d", b"ef")))


def test_the_spliced_answer_is_the_encoded_decisions_frame_byte_for_byte() -> None:
    client, server = _connected()
    batch = _protocol.SubmitBatch(9, "bytes", (_protocol.BatchPair({}, ()),) * 2)
    server.receive_data(client.send(batch, ()))
    server.next_event()
    server.accept_evidence()
    server.next_event()
    decision = _protocol.Decision(9, "id-é", "bytes", {"outcome": "PASS", "n": [1, "\x00"]})
    refusal = _protocol.ErrorResponse(9, "BUSY", "full", None)
    elements = [decision.to_header(), refusal.to_header()]
    data = server.send_decisions(9, [_protocol.encode_header(e) for e in elements])
    assert data == _protocol.ServerConnection.send(_protocol.Decisions(9, tuple(elements)))
    client.receive_data(data)
    assert client.next_event() == _protocol.Decisions(9, tuple(elements))
    # the connection goes on after an error element
    client.send(_protocol.HealthRequest(10))


def test_a_client_refuses_evidence_that_does_not_match_the_batchs_sizes() -> None:
    client, _ = _connected()
    batch = _protocol.SubmitBatch(1, "bytes", (_protocol.BatchPair({}, (2,)),))
    with pytest.raises(ValueError, match="declared item sizes"):
        client.send(batch, (b"abc",))


def _sized_header(size: int) -> bytes:
    """A canonical ``submit_batch`` header of exactly ``size`` bytes (its session name
    padded), as a frame's prefix and header."""
    batch = _protocol.SubmitBatch(1, "", (_protocol.BatchPair({}, (1,)),))
    short = encode_header(batch.to_header())
    padded = encode_header(attrs.evolve(batch, session="s" * (size - len(short))).to_header())
    assert len(padded) == size and padded.startswith(BATCH_HEADER_START)
    return _protocol.MAGIC + len(padded).to_bytes(4, "big") + padded


def test_a_batch_header_at_its_derived_bound_is_read_and_one_byte_over_is_refused_unread() -> None:
    """``max_header_bytes`` 1,024: a batch header of 64 × 1,024 bytes is a batch; one of a
    byte more is refused on its prefix, before a header byte is read."""
    bound = batch_header_bytes(1024)
    assert bound == MAX_BATCH_PAIRS * 1024
    server = _protocol.ServerConnection(max_header_bytes=1024)
    server.receive_data(_protocol.ClientConnection.send(_protocol.Hello((1,), "t")))
    assert isinstance(server.next_event(), _protocol.Hello)
    server.receive_data(_sized_header(bound))
    batch = server.next_event()
    assert isinstance(batch, _protocol.SubmitBatch) and len(batch.session) > 60_000
    server.accept_evidence()
    server.receive_data(b"x")
    assert server.next_event() == _protocol.BatchEvidence(1, ((b"x",),))
    over = _sized_header(bound + 1)
    server.receive_data(over[:8])  # the prefix only
    with pytest.raises(ProtocolError) as refused:
        server.next_event()
    assert refused.value.code is ErrorCode.HEADER_TOO_LARGE
    assert str(bound + 1) in (refused.value.message or "")


def test_a_long_header_that_is_no_batch_is_refused_after_its_first_bytes() -> None:
    """Only a batch's header may be longer than ``max_header_bytes``; the server reads the
    few bytes that say whether it is one (sorted keys: ``{"kind":"submit_batch",``) and
    refuses any other there, never buffering the rest."""
    server = _protocol.ServerConnection(max_header_bytes=1024)
    server.receive_data(_protocol.ClientConnection.send(_protocol.Hello((1,), "t")))
    server.next_event()
    header = encode_header({"kind": "list", "pad": "x" * 5000, "request_id": 1})
    server.receive_data(_protocol.MAGIC + len(header).to_bytes(4, "big"))
    assert server.next_event() is _protocol.NEED_DATA
    assert server.bytes_wanted() == len(BATCH_HEADER_START)  # not the 5 KB it declared
    server.receive_data(header[:10])  # '{"kind":"' then 'l': no batch
    with pytest.raises(ProtocolError) as refused:
        server.next_event()
    assert refused.value.code is ErrorCode.HEADER_TOO_LARGE
    assert "only a submit_batch header may be longer" in (refused.value.message or "")


def test_before_its_hello_a_connection_gets_no_long_header() -> None:
    server = _protocol.ServerConnection(max_header_bytes=1024)
    server.receive_data(_sized_header(2048)[:8])
    with pytest.raises(ProtocolError) as refused:
        server.next_event()
    assert refused.value.code is ErrorCode.HEADER_TOO_LARGE


@pytest.mark.parametrize("count", [1, 2, MAX_BATCH_PAIRS])
@pytest.mark.parametrize(("request_id", "session"), [(1, "s"), (2**53, "a-long-session-name")])
def test_pairs_that_fit_single_submits_fit_the_batch_bound(
    count: int, request_id: int, session: str
) -> None:
    """The formula's reason (``daemon/wire/_protocol.py`` rule 6): a batch header is at most
    the sum of its pairs' submit headers (one pair: 18 bytes more), so pairs that each fit
    ``max_header_bytes`` as a submit fit 64 × it as a batch."""
    pairs = [_pair(bytes([n]) * (n + 1)) for n in range(count)]
    singles = [
        len(encode_header(_protocol.Submit(request_id, session, b, (len(i[0]),)).to_header()))
        for b, i in pairs
    ]
    batch = _protocol.SubmitBatch(
        request_id, session, tuple(_protocol.BatchPair(b, (len(i[0]),)) for b, i in pairs)
    )
    size = len(encode_header(batch.to_header()))
    assert size <= sum(singles) + (18 if count == 1 else 0)
    assert size <= batch_header_bytes(max(singles))
