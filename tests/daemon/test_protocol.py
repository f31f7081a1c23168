"""The sans-IO codec, without sockets: framing, bounds before reads, canonical headers."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from daemon_testkit import HELLO, bytes_binding, frame
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.wire._protocol import (
    CLOSED,
    MAGIC,
    NEED_DATA,
    ClientConnection,
    Decision,
    ErrorCode,
    ErrorResponse,
    Evidence,
    HealthRequest,
    Hello,
    HelloAccepted,
    ListSessions,
    ProtocolError,
    ServerConnection,
    State,
    Submit,
    decode_header,
    encode_frame,
    encode_header,
)


def server(**limits: int) -> ServerConnection:
    conn = ServerConnection(**limits)
    conn.receive_data(HELLO)
    assert isinstance(conn.next_event(), Hello)
    return conn


def submit_frame(evidence: bytes, *, request_id: int = 7, session: str = "bytes") -> bytes:
    binding = bytes_binding(evidence).to_dict()
    return ClientConnection.send(
        Submit(request_id, session, binding, (len(evidence),)), (evidence,)
    )


def refusal(conn: ServerConnection, data: bytes) -> ErrorCode:
    conn.receive_data(data)
    with pytest.raises(ProtocolError) as caught:
        while conn.next_event() is not NEED_DATA:
            pass
    assert conn.state is State.ERROR
    return caught.value.code


def test_hello_list_health_submit_round_trip_byte_by_byte() -> None:
    conn = ServerConnection()
    stream = HELLO + frame({"kind": "list", "request_id": 1}) + submit_frame(b"abc")
    stream += frame({"kind": "health", "request_id": 2})
    events: list[Any] = []
    for byte in stream:  # one byte at a time: framing must not depend on read sizes
        conn.receive_data(bytes([byte]))
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                break
            if isinstance(event, Submit):
                conn.accept_evidence()
            events.append(event)
    kinds = [type(event) for event in events]
    assert kinds == [Hello, ListSessions, Submit, Evidence, HealthRequest]
    assert events[3] == Evidence(7, (b"abc",))
    conn.receive_data(b"")
    assert conn.next_event() is CLOSED


def test_submit_stops_before_evidence_until_the_host_decides() -> None:
    conn = server()
    conn.receive_data(submit_frame(b"x" * 100)[:-100])  # header only
    event = conn.next_event()
    assert isinstance(event, Submit) and event.item_sizes == (100,)
    assert conn.state is State.AWAIT_VERDICT
    assert conn.bytes_wanted() == 0  # nothing may be read before accept_evidence()
    conn.accept_evidence()
    assert conn.bytes_wanted() == 100


def test_refused_submit_reads_nothing_more() -> None:
    conn = server()
    conn.receive_data(submit_frame(b"y" * 10)[:-10])
    assert isinstance(conn.next_event(), Submit)
    conn.refuse()
    assert conn.state is State.ERROR
    assert conn.bytes_wanted() == 0


def test_bytes_wanted_never_exceeds_the_current_unit() -> None:
    conn = server()
    data = submit_frame(b"z" * 5000)
    fed = 0
    while True:
        wanted = conn.bytes_wanted()
        assert wanted > 0
        chunk = data[fed : fed + wanted]
        fed += len(chunk)
        conn.receive_data(chunk)
        event = conn.next_event()
        assert conn.buffered == 0  # everything fed was consumed: nothing buffered beyond
        if isinstance(event, Submit):
            conn.accept_evidence()
        if isinstance(event, Evidence):
            break
    assert fed == len(data)


@pytest.mark.parametrize(
    ("attack", "data", "code"),
    [
        ("wrong magic", b"GET / HTTP/1.1\r\n\r\n", ErrorCode.BAD_MAGIC),
        ("magic prefix only then garbage", b"EVX1" + b"\0" * 20, ErrorCode.BAD_MAGIC),
        (
            "header length over the cap",
            MAGIC + struct.pack(">I", 2**32 - 1),
            ErrorCode.HEADER_TOO_LARGE,
        ),
        ("header not json", MAGIC + struct.pack(">I", 3) + b"abc", ErrorCode.HEADER_INVALID),
        ("header is a list", MAGIC + struct.pack(">I", 2) + b"[]", ErrorCode.HEADER_INVALID),
        (
            "header with whitespace",
            MAGIC + struct.pack(">I", 28) + b'{"kind": "list","request_id":1}'[:28],
            ErrorCode.HEADER_INVALID,
        ),
        ("unknown kind", frame({"kind": "exec", "request_id": 1}), ErrorCode.UNKNOWN_KIND),
        ("bool request id", frame({"kind": "list", "request_id": True}), ErrorCode.HEADER_INVALID),
        (
            "negative request id",
            frame({"kind": "list", "request_id": -1}),
            ErrorCode.HEADER_INVALID,
        ),
        ("extra key", frame({"kind": "list", "request_id": 1, "x": 1}), ErrorCode.HEADER_INVALID),
        (
            "items on a list request",
            frame({"kind": "list", "request_id": 1, "items": []}),
            ErrorCode.HEADER_INVALID,
        ),
        (
            "too many items",
            frame(
                {
                    "kind": "submit",
                    "request_id": 1,
                    "session": "s",
                    "binding": {},
                    "items": [0] * 17,
                }
            ),
            ErrorCode.EVIDENCE_ITEMS_EXCEEDED,
        ),
        (
            "frame over the global cap",
            frame(
                {
                    "kind": "submit",
                    "request_id": 1,
                    "session": "s",
                    "binding": {},
                    "items": [3 * 1024 * 1024],
                }
            ),
            ErrorCode.FRAME_TOO_LARGE,
        ),
        (
            "item size not an int",
            frame(
                {"kind": "submit", "request_id": 1, "session": "s", "binding": {}, "items": [1.5]}
            ),
            ErrorCode.HEADER_INVALID,
        ),
        (
            "deep nesting",
            frame({"kind": "list", "request_id": 1})[:8] + b"[" * 100,
            ErrorCode.HEADER_INVALID,
        ),
    ],
)
def test_hostile_frames_are_refused_with_a_code(attack: str, data: bytes, code: ErrorCode) -> None:
    if code is ErrorCode.HEADER_INVALID and attack == "deep nesting":
        data = MAGIC + struct.pack(">I", 100) + b"[" * 100
    assert refusal(server(), data) is code


@pytest.mark.parametrize(
    ("attack", "raw"),
    [
        ("duplicate keys", b'{"kind":"list","kind":"list","request_id":1}'),
        ("unsorted keys", b'{"request_id":1,"kind":"list"}'),
        ("escaped ascii", b'{"kind":"\\u006cist","request_id":1}'),
        ("invalid utf-8", b'{"kind":"l\xffst","request_id":1}'),
        ("NaN", b'{"kind":"list","request_id":NaN}'),
        ("float id", b'{"kind":"list","request_id":1.0}'),
        ("trailing newline", b'{"kind":"list","request_id":1}\n'),
        ("bom", b'\xef\xbb\xbf{"kind":"list","request_id":1}'),
    ],
)
def test_non_canonical_headers_are_refused(attack: str, raw: bytes) -> None:
    data = MAGIC + struct.pack(">I", len(raw)) + raw
    assert refusal(server(), data) in {ErrorCode.HEADER_INVALID}


def test_first_frame_must_be_hello() -> None:
    assert refusal(ServerConnection(), frame({"kind": "list", "request_id": 1})) is (
        ErrorCode.HANDSHAKE_REQUIRED
    )


def test_version_negotiation_picks_a_common_version_or_none() -> None:
    assert ServerConnection.choose_version(Hello((1, 2), "c")) == 1
    assert ServerConnection.choose_version(Hello((2, 3), "c")) is None


@pytest.mark.parametrize("cut", [1, 4, 8, 20])
def test_stream_ending_inside_a_frame_is_truncated(cut: int) -> None:
    conn = ServerConnection()
    conn.receive_data(HELLO[:cut])
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    with pytest.raises(ProtocolError) as caught:
        conn.next_event()
    assert caught.value.code is ErrorCode.TRUNCATED_FRAME


def test_evidence_shorter_than_declared_is_truncated_at_eof() -> None:
    conn = server()
    data = submit_frame(b"0123456789")
    conn.receive_data(data[:-5])
    assert isinstance(conn.next_event(), Submit)
    conn.accept_evidence()
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    with pytest.raises(ProtocolError) as caught:
        conn.next_event()
    assert caught.value.code is ErrorCode.TRUNCATED_FRAME


def test_evidence_longer_than_declared_spills_into_a_bad_frame() -> None:
    conn = server()
    conn.receive_data(submit_frame(b"01234") + b"56789")
    assert isinstance(conn.next_event(), Submit)
    conn.accept_evidence()
    assert conn.next_event() == Evidence(7, (b"01234",))
    with pytest.raises(ProtocolError) as caught:
        conn.next_event()
    assert caught.value.code is ErrorCode.BAD_MAGIC


def test_client_reads_answers_and_errors() -> None:
    client = ClientConnection()
    accepted = HelloAccepted(1, "evidenced/test", {"max_items": 16})
    decision = Decision(3, "id-1", "bytes", {"outcome": "PASS"})
    error = ErrorResponse(4, "BUSY", "busy", None)
    client.receive_data(ServerConnection.send(accepted) + ServerConnection.send(decision))
    client.receive_data(ServerConnection.send(error))
    assert client.next_event() == accepted
    assert client.next_event() == decision
    answer = client.next_event()
    assert answer == error
    assert isinstance(answer, ErrorResponse) and answer.fault.value == "service"


def test_client_refuses_an_unknown_error_code() -> None:
    client = ClientConnection()
    client.receive_data(
        frame(
            {
                "kind": "error",
                "request_id": None,
                "code": "NOPE",
                "message": "",
                "decision_id": None,
            }
        )
    )
    with pytest.raises(ProtocolError):
        client.next_event()


def test_client_send_refuses_evidence_that_does_not_match_its_sizes() -> None:
    request = Submit(1, "s", bytes_binding(b"a").to_dict(), (2,))
    with pytest.raises(ValueError):
        ClientConnection.send(request, (b"a",))


def test_every_error_code_names_its_fault() -> None:
    for code in ErrorCode:
        assert code.fault.value in {"peer", "service"}
        assert code.summary


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise_anything_but_protocol_error(data: bytes) -> None:
    conn = ServerConnection()
    conn.receive_data(data)
    conn.receive_data(b"")
    try:
        for _ in range(10):
            event = conn.next_event()
            if event is CLOSED:
                break
            if isinstance(event, Submit):
                conn.accept_evidence()
    except ProtocolError as error:
        assert error.code.name in {code.name for code in ErrorCode}


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_single_byte_mutation_of_a_valid_stream_is_refused_or_parsed(
    data: st.DataObject,
) -> None:
    stream = bytearray(HELLO + submit_frame(b"evidence"))
    index = data.draw(st.integers(0, len(stream) - 1))
    stream[index] = data.draw(st.integers(0, 255).filter(lambda b: b != stream[index]))
    conn = ServerConnection()
    conn.receive_data(bytes(stream))
    conn.receive_data(b"")
    outcomes: list[Any] = []
    try:
        for _ in range(6):
            event = conn.next_event()
            outcomes.append(event)
            if event is CLOSED:
                break
            if isinstance(event, Submit):
                conn.accept_evidence()
    except ProtocolError as error:
        outcomes.append(error.code)
    # Refused with a code, or parsed into different events: never silently the same request.
    original = [Hello((1,), "raw-test"), *_submit_events(b"evidence")]
    assert any(isinstance(item, ErrorCode) for item in outcomes) or outcomes[:3] != original


def _submit_events(evidence: bytes) -> list[Any]:
    binding = bytes_binding(evidence).to_dict()
    return [Submit(7, "bytes", binding, (len(evidence),)), Evidence(7, (evidence,))]


def test_encode_frame_is_the_documented_layout() -> None:
    data = encode_frame({"kind": "list", "request_id": 1})
    header = b'{"kind":"list","request_id":1}'
    assert data == b"EVD1" + len(header).to_bytes(4, "big") + header


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _JSON_VALUES, max_size=5))
def test_header_encoding_is_the_documented_json_dumps_form(value: dict[str, Any]) -> None:
    import json

    try:
        expected = json.dumps(
            value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
        ).encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates cannot be UTF-8: refused by both
        with pytest.raises(ValueError):
            encode_header(value)
        return
    assert encode_header(value) == expected
    assert decode_header(expected, max_bytes=1 << 20) == value


def test_header_encoding_refuses_nan_and_infinity() -> None:
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError):
            encode_header({"x": [None, bad]})
