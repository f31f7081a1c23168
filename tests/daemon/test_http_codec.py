"""The HTTP codec without sockets: heads, limits, framing, bodies, answers (daemon/_http_codec)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.server._http_codec import (
    CLOSED,
    END_OF_BODY,
    NEED_DATA,
    HttpServerCodec,
    RequestHead,
    Route,
)
from daemon.server._http_errors import HttpRefusal
from daemon.wire._protocol import ErrorCode

SUBMIT = b"POST /v1/sessions/formation/decisions HTTP/1.1\r\nHost: x\r\n"


def refusal_of(
    data: bytes, codec: HttpServerCodec | None = None, *, limit: int = 100
) -> HttpRefusal:
    codec = codec or HttpServerCodec()
    codec.receive_data(data)
    with pytest.raises(HttpRefusal) as caught:
        while True:
            event = codec.next_event()
            if isinstance(event, RequestHead):
                codec.accept_body(limit)
            assert event is not NEED_DATA, "the codec waits instead of refusing"
    return caught.value


def head_of(data: bytes) -> RequestHead:
    codec = HttpServerCodec()
    codec.receive_data(data)
    event = codec.next_event()
    assert isinstance(event, RequestHead)
    return event


def test_routes_and_session_names_are_decoded() -> None:
    assert head_of(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").route is Route.HEALTH
    assert head_of(b"GET /ready?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n").route is Route.READY
    head = head_of(b"POST /v1/sessions/caf%C3%A9/decisions HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (head.route, head.session) == (Route.SUBMIT, "café")


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        (b"GET /nothing HTTP/1.1", 404),
        (b"HEAD /health HTTP/1.1", 405),
        (b"DELETE /v1/sessions HTTP/1.1", 405),
        (b"GET /v1/sessions/formation/decisions HTTP/1.1", 405),
    ],
)
def test_unknown_paths_and_methods_are_refused_as_unknown_kind(
    request_line: bytes, status: int
) -> None:
    refusal = refusal_of(request_line + b"\r\nHost: x\r\n\r\n")
    assert (refusal.code, refusal.status) == (ErrorCode.UNKNOWN_KIND, status)
    if status == 405:
        assert ("Allow", "GET" if b"decisions" not in request_line else "POST") in refusal.headers


def test_non_utf8_session_name_is_refused() -> None:
    refusal = refusal_of(b"POST /v1/sessions/%FF/decisions HTTP/1.1\r\nHost: x\r\n\r\n")
    assert refusal.code is ErrorCode.HEADER_INVALID


@pytest.mark.parametrize(
    "data",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /health HTTP/1.1 extra\r\nHost: x\r\n\r\n",
        b"GET http://example/health HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /health HTTP/1.1\r\n\r\n",  # no Host
        b"GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        SUBMIT + b"Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        SUBMIT + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
        SUBMIT + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        SUBMIT + b"Transfer-Encoding: gzip\r\n\r\n",
        SUBMIT + b"Content-Length: -1\r\n\r\n",
        SUBMIT + b"Bad Header Name: x\r\n\r\n",
    ],
)
def test_ambiguous_or_malformed_heads_are_refused_header_invalid(data: bytes) -> None:
    refusal = refusal_of(data)
    assert (refusal.code, refusal.status) == (ErrorCode.HEADER_INVALID, 400)


def test_a_head_dripped_byte_by_byte_past_the_cap_is_refused_at_the_cap() -> None:
    codec = HttpServerCodec(max_header_bytes=1024)
    data = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 2000
    fed = 0
    with pytest.raises(HttpRefusal) as caught:
        for byte in data:
            codec.receive_data(bytes([byte]))
            fed += 1
            assert codec.next_event() is NEED_DATA
    assert caught.value.code is ErrorCode.HEADER_TOO_LARGE
    assert caught.value.status == 431
    assert fed == 1025


def test_ten_thousand_tiny_headers_in_one_read_are_refused() -> None:
    data = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"a: b\r\n" * 10_000 + b"\r\n"
    codec = HttpServerCodec(max_header_bytes=1 << 20)  # the count, not the size, refuses
    refusal = refusal_of(data, codec)
    assert (refusal.code, refusal.status) == (ErrorCode.HEADER_TOO_LARGE, 431)
    assert "header fields" in refusal.message


def test_a_whole_oversized_head_in_one_read_is_refused() -> None:
    data = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 20_000 + b"\r\n\r\n"
    assert refusal_of(data).code is ErrorCode.HEADER_TOO_LARGE


def test_declared_body_over_the_limit_is_refused_before_a_body_byte_is_read() -> None:
    codec = HttpServerCodec()
    codec.receive_data(SUBMIT + b"Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
    head = codec.next_event()
    assert isinstance(head, RequestHead) and head.expects_continue
    with pytest.raises(HttpRefusal) as caught:
        codec.accept_body(999)
    assert (caught.value.code, caught.value.status) == (ErrorCode.EVIDENCE_BYTES_EXCEEDED, 413)
    assert codec.body_bytes == 0


def test_chunked_body_is_cut_the_moment_it_passes_the_limit() -> None:
    codec = HttpServerCodec()
    codec.receive_data(SUBMIT + b"Transfer-Encoding: chunked\r\n\r\n")
    assert isinstance(codec.next_event(), RequestHead)
    codec.accept_body(10)
    codec.receive_data(b"6\r\nabcdef\r\n")
    assert codec.next_event() == b"abcdef"
    codec.receive_data(b"6\r\nghijkl\r\n" + b"ffff\r\n" + b"x" * 65535)
    with pytest.raises(HttpRefusal) as caught:
        codec.next_event()
    assert caught.value.code is ErrorCode.EVIDENCE_BYTES_EXCEEDED
    assert codec.body_bytes == 12


def test_body_is_not_read_before_the_host_accepts_it() -> None:
    codec = HttpServerCodec()
    codec.receive_data(SUBMIT + b"Content-Length: 3\r\n\r\nabc")
    assert isinstance(codec.next_event(), RequestHead)
    assert codec.next_event() is NEED_DATA
    assert codec.body_bytes == 0
    codec.accept_body(3)
    assert codec.next_event() == b"abc"
    assert codec.next_event() is END_OF_BODY


def test_continue_is_sent_only_after_the_body_is_accepted() -> None:
    codec = HttpServerCodec()
    codec.receive_data(SUBMIT + b"Content-Length: 3\r\nExpect: 100-continue\r\n\r\n")
    assert isinstance(codec.next_event(), RequestHead)
    codec.accept_body(3)
    assert codec.continue_bytes().startswith(b"HTTP/1.1 100 ")


def test_a_get_with_a_body_is_refused() -> None:
    refusal = refusal_of(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", limit=0)
    assert refusal.code is ErrorCode.HEADER_INVALID


@pytest.mark.parametrize(
    "data",
    [
        b"GET /health HTTP/1.1\r\nHo",
        SUBMIT + b"Content-Length: 10\r\n\r\nabc",
        SUBMIT + b"Transfer-Encoding: chunked\r\n\r\n5\r\nab",
    ],
)
def test_stream_ending_inside_a_request_is_truncated_frame(data: bytes) -> None:
    codec = HttpServerCodec()
    codec.receive_data(data)
    codec.receive_data(b"")
    refusal = refusal_of(b"", codec, limit=100)
    assert refusal.code is ErrorCode.TRUNCATED_FRAME


def test_stream_ending_between_requests_is_closed() -> None:
    codec = HttpServerCodec()
    codec.receive_data(b"")
    assert codec.next_event() is CLOSED


def test_keep_alive_serves_pipelined_requests_in_order() -> None:
    codec = HttpServerCodec()
    codec.receive_data(
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /ready HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    routes = []
    for _ in range(2):
        head = codec.next_event()
        assert isinstance(head, RequestHead)
        routes.append(head.route)
        codec.accept_body(0)
        assert codec.next_event() is END_OF_BODY
        answer = codec.respond(200, b"{}")
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        assert codec.next_cycle()
    assert routes == [Route.HEALTH, Route.READY]
    assert codec.idle()


def test_connection_close_and_http10_end_keep_alive() -> None:
    for data in (
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /health HTTP/1.0\r\n\r\n",
    ):
        codec = HttpServerCodec()
        codec.receive_data(data)
        assert isinstance(codec.next_event(), RequestHead)
        codec.accept_body(0)
        assert codec.next_event() is END_OF_BODY
        codec.respond(200, b"{}")
        assert not codec.next_cycle()


def test_an_answer_before_the_body_was_read_closes_the_connection() -> None:
    codec = HttpServerCodec()
    codec.receive_data(SUBMIT + b"Content-Length: 3\r\n\r\n")
    assert isinstance(codec.next_event(), RequestHead)
    codec.respond(200, b"{}")
    assert not codec.next_cycle()


def test_refusal_is_json_and_closes() -> None:
    codec = HttpServerCodec()
    data = codec.refuse(HttpRefusal(ErrorCode.BUSY, "full"), None, "full")
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"\r\nRetry-After: 1\r\n" in head and head.endswith(b"Connection: close")
    assert body == (
        b'{"error":{"code":"BUSY","decision_id":null,"fault":"service","message":"full"}}'
    )
    assert codec.next_event() is CLOSED


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_arbitrary_bytes_give_events_or_a_refusal_never_another_exception(
    chunks: list[bytes],
) -> None:
    codec = HttpServerCodec(max_header_bytes=512, max_headers=8)
    try:
        for chunk in [*chunks, b""]:
            codec.receive_data(chunk)
            for _ in range(100):
                event = codec.next_event()
                if isinstance(event, RequestHead):
                    codec.accept_body(64)
                elif event is END_OF_BODY:
                    codec.respond(200, b"{}")
                    if not codec.next_cycle():
                        return
                elif event is NEED_DATA or event is CLOSED:
                    break
    except HttpRefusal as refusal:
        assert refusal.code in ErrorCode
