"""Outgoing-state tracking (docs/protocol.md "Outgoing state"): a connection refuses to send
what its side may not send now, with LocalProtocolError (our bug, not the peer's), and a
refused send changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from daemon_testkit import HELLO, bytes_binding
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.protocol import LocalProtocolError
from daemon.wire._protocol import (
    NEED_DATA,
    ClientConnection,
    Decision,
    ErrorCode,
    ErrorResponse,
    Evidence,
    HealthReport,
    HealthRequest,
    Hello,
    HelloAccepted,
    ListSessions,
    ProtocolError,
    ServerConnection,
    SessionList,
    Submit,
)

ACCEPTED = HelloAccepted(1, "evidenced/test", {})
EVIDENCE = b"evidence"


def submit(request_id: int = 7) -> Submit:
    return Submit(request_id, "bytes", bytes_binding(EVIDENCE).to_dict(), (len(EVIDENCE),))


def decision(request_id: int = 7) -> Decision:
    return Decision(request_id, "id-1", "bytes", {"outcome": "PASS"})


def busy(request_id: int | None = None) -> ErrorResponse:
    return ErrorResponse(request_id, ErrorCode.BUSY.name, "busy", None)


def received(conn: ServerConnection, data: bytes) -> list[Any]:
    """Every event ``data`` yields (evidence accepted as soon as a submit asks)."""
    conn.receive_data(data)
    events = []
    while (event := conn.next_event()) is not NEED_DATA:
        events.append(event)
        if isinstance(event, Submit):
            conn.accept_evidence()
    return events


def greeted() -> ServerConnection:
    conn = ServerConnection()
    assert received(conn, HELLO) == [Hello((1,), "raw-test")]
    conn.send(ACCEPTED)
    return conn


def unchanged_server(conn: ServerConnection) -> None:
    """The refused send changed nothing: the answer the state allows still goes out."""
    assert received(conn, ClientConnection.send(ListSessions(99))) == [ListSessions(99)]
    assert conn.send(SessionList(99, [])) == ServerConnection.send(SessionList(99, []))


# -- server


def test_decision_before_hello_is_refused_locally() -> None:
    conn = ServerConnection()
    with pytest.raises(LocalProtocolError, match="no request awaits an answer"):
        conn.send(decision())
    received(conn, HELLO)
    with pytest.raises(LocalProtocolError, match="hello has not been answered"):
        conn.send(decision())
    assert conn.send(ACCEPTED) == ServerConnection.send(ACCEPTED)
    unchanged_server(conn)


def test_answer_to_a_request_never_received_is_refused() -> None:
    conn = greeted()
    with pytest.raises(LocalProtocolError):
        conn.send(SessionList(5, []))
    with pytest.raises(LocalProtocolError):
        conn.send(ACCEPTED)  # hello was answered already
    unchanged_server(conn)


def test_answer_with_another_request_id_is_refused() -> None:
    conn = greeted()
    received(conn, ClientConnection.send(ListSessions(1)))
    with pytest.raises(LocalProtocolError, match="request 1 awaits it"):
        conn.send(SessionList(2, []))
    conn.send(SessionList(1, []))
    unchanged_server(conn)


def test_answer_of_another_kind_is_refused() -> None:
    conn = greeted()
    received(conn, ClientConnection.send(HealthRequest(1)))
    with pytest.raises(LocalProtocolError, match="'health'"):
        conn.send(SessionList(1, []))
    conn.send(HealthReport(1, {}))
    unchanged_server(conn)


def test_decision_before_its_evidence_arrived_is_refused() -> None:
    conn = greeted()
    frame = ClientConnection.send(submit(), (EVIDENCE,))
    header_only = frame[: -len(EVIDENCE)]
    assert received(conn, header_only) == [submit()]
    with pytest.raises(LocalProtocolError, match="evidence was not received"):
        conn.send(decision())
    assert received(conn, EVIDENCE) == [Evidence(7, (EVIDENCE,))]
    conn.send(decision())
    unchanged_server(conn)


def test_nothing_is_sent_after_an_error() -> None:
    conn = greeted()
    received(conn, ClientConnection.send(ListSessions(1)))
    conn.send(busy(1))
    for event in (SessionList(1, []), busy(), busy(1), ACCEPTED):
        with pytest.raises(LocalProtocolError, match="an error was already sent"):
            conn.send(event)


def test_error_naming_a_request_never_received_is_refused() -> None:
    conn = ServerConnection()
    with pytest.raises(LocalProtocolError, match="no such request"):
        conn.send(busy(3))
    assert conn.send(busy()) == ServerConnection.send(busy())  # an error needs no request


def test_error_may_answer_the_latest_request_after_its_decision_was_encoded() -> None:
    """The decision is encoded while its audit line is written; if the line then fails, the
    request is answered with an error instead (AUDIT_FAILED)."""
    conn = greeted()
    received(conn, ClientConnection.send(submit(), (EVIDENCE,)))
    conn.send(decision())
    conn.send(ErrorResponse(7, ErrorCode.AUDIT_FAILED.name, "disk full", None))


def test_unencodable_answer_changes_nothing() -> None:
    conn = greeted()
    received(conn, ClientConnection.send(submit(), (EVIDENCE,)))
    with pytest.raises(ValueError):
        conn.send(Decision(7, "id-1", "bytes", {"score": float("nan")}))
    conn.send(decision())
    unchanged_server(conn)


def test_answers_go_out_in_the_order_their_requests_came_in() -> None:
    conn = ServerConnection()
    data = HELLO + ClientConnection.send(ListSessions(1)) + ClientConnection.send(HealthRequest(2))
    assert len(received(conn, data)) == 3
    with pytest.raises(LocalProtocolError):
        conn.send(HealthReport(2, {}))
    with pytest.raises(LocalProtocolError):
        conn.send(SessionList(1, []))
    conn.send(ACCEPTED)
    conn.send(SessionList(1, []))
    conn.send(HealthReport(2, {}))


def test_local_protocol_error_is_ours_not_the_peers() -> None:
    with pytest.raises(LocalProtocolError) as caught:
        ServerConnection().send(ACCEPTED)
    assert not isinstance(caught.value, ProtocolError)
    assert not hasattr(caught.value, "code")


def test_send_on_the_class_only_encodes() -> None:
    """Frames outside any connection (a refusal at accept, test fixtures) need no state."""
    assert ServerConnection.send(decision()) == ServerConnection.send(decision())
    assert ClientConnection.send(ListSessions(1)) == ClientConnection.send(ListSessions(1))


# -- client


def test_request_before_hello_is_refused_locally() -> None:
    client = ClientConnection()
    for request in (ListSessions(1), submit()):
        with pytest.raises(LocalProtocolError, match="the first request must be hello"):
            client.send(request, (EVIDENCE,) if isinstance(request, Submit) else ())
    client.send(Hello((1,), "c"))


def test_request_before_hello_was_answered_is_refused() -> None:
    client = ClientConnection()
    client.send(Hello((1,), "c"))
    with pytest.raises(LocalProtocolError, match="hello has not been answered"):
        client.send(ListSessions(1))
    client.receive_data(ServerConnection.send(ACCEPTED))
    assert client.next_event() == ACCEPTED
    client.send(ListSessions(1))


def test_second_hello_is_refused() -> None:
    client = ClientConnection()
    client.send(Hello((1,), "c"))
    client.receive_data(ServerConnection.send(ACCEPTED))
    client.next_event()
    with pytest.raises(LocalProtocolError, match="hello was already sent"):
        client.send(Hello((1,), "c"))


def test_second_request_while_one_awaits_its_answer_is_refused() -> None:
    client = ClientConnection()
    client.send(Hello((1,), "c"))
    client.receive_data(ServerConnection.send(ACCEPTED))
    client.next_event()
    client.send(ListSessions(1))
    with pytest.raises(LocalProtocolError, match="another request awaits its answer"):
        client.send(HealthRequest(2))
    # An answer of another kind does not free the client; the awaited one does.
    client.receive_data(ServerConnection.send(HealthReport(1, {})))
    client.next_event()
    with pytest.raises(LocalProtocolError):
        client.send(HealthRequest(2))
    client.receive_data(ServerConnection.send(SessionList(1, [])))
    client.next_event()
    client.send(HealthRequest(2))


def test_nothing_is_sent_after_the_server_answered_an_error() -> None:
    client = ClientConnection()
    client.send(Hello((1,), "c"))
    client.receive_data(ServerConnection.send(busy()))
    assert client.next_event() == busy()
    for request in (Hello((1,), "c"), ListSessions(1)):
        with pytest.raises(LocalProtocolError, match="the connection is over"):
            client.send(request)


def test_evidence_that_does_not_fit_changes_nothing() -> None:
    client = ClientConnection()
    client.send(Hello((1,), "c"))
    client.receive_data(ServerConnection.send(ACCEPTED))
    client.next_event()
    with pytest.raises(ValueError):
        client.send(submit(), (b"short",))
    client.send(submit(), (EVIDENCE,))


# -- any sequence of sends


_SERVER_SENDS = (
    ACCEPTED,
    SessionList(1, []),
    HealthReport(2, {}),
    decision(3),
    decision(1),
    busy(),
    busy(2),
)
_CLIENT_FRAMES = (
    ClientConnection.send(ListSessions(1)),
    ClientConnection.send(HealthRequest(2)),
    ClientConnection.send(submit(3), (EVIDENCE,)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 6)), max_size=16))
def test_any_sequence_of_sends_yields_a_transcript_the_protocol_allows(
    steps: list[tuple[bool, int]],
) -> None:
    """Whatever the host attempts, the frames that go out start with the hello answer (or
    an error), answer only requests received, in order, and end at the first error."""
    conn = ServerConnection()
    received(conn, HELLO)
    requests: list[tuple[str, int | None]] = [("hello", None)]
    sent: list[Any] = []
    for is_receive, index in steps:
        if is_receive:
            for event in received(conn, _CLIENT_FRAMES[index % len(_CLIENT_FRAMES)]):
                if not isinstance(event, Evidence):
                    requests.append((event.KIND, event.request_id))
            continue
        event = _SERVER_SENDS[index]
        try:
            conn.send(event)
        except LocalProtocolError:
            continue
        sent.append(event)
    assert not any(isinstance(event, ErrorResponse) for event in sent[:-1])
    answers = [event for event in sent if not isinstance(event, ErrorResponse)]
    assert len(answers) <= len(requests)
    kinds = {"hello": "hello", "list": "sessions", "health": "health", "submit": "decision"}
    for answer, (kind, request_id) in zip(answers, requests, strict=False):
        assert kinds[kind] == answer.KIND
        assert kind == "hello" or answer.request_id == request_id
