"""The codec's llhttp path (daemon/server/_http_codec.py rule 7) against its h11 path.

A head llhttp parses is framed by its ``Content-Length`` in the codec; every other head
(chunked, ``Expect``, anything llhttp refuses or h11's grammar would) goes to h11 as before.
These tests hold that the choice is invisible: every conversation gets the same events and the
same refusals, in the same words, as with h11 alone (the attack suites run through both paths).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.server import _http_codec
from daemon.server._http_codec import END_OF_BODY, NEED_DATA, HttpServerCodec, RequestHead
from daemon.server._http_errors import HttpRefusal

SUBMIT = b"POST /v1/sessions/formation/decisions HTTP/1.1\r\nHost: x\r\n"


def _conversation(data: bytes, chunk: int, limit: int = 64) -> list[Any]:
    """Everything a codec says about ``data`` fed in ``chunk``-byte reads, then its end:
    events, answers' keep-alive verdicts, a refusal's code and words."""
    codec = HttpServerCodec(max_header_bytes=512, max_headers=8)
    said: list[Any] = []
    reads = [data[i : i + chunk] for i in range(0, len(data), chunk)] + [b""]
    try:
        for read in reads:
            codec.receive_data(read)
            while True:
                event = codec.next_event()
                if event is NEED_DATA:
                    break
                if isinstance(event, RequestHead):
                    said.append(("head", event))
                    codec.accept_body(limit)
                    said.append(("continue", codec.continue_bytes()))
                elif event is END_OF_BODY:
                    said.append(("end", codec.respond(200, b"{}")))
                    said.append(("next", codec.next_cycle()))
                elif isinstance(event, bytes):
                    said.append(("body", event))
                else:
                    said.append(("event", event))
                    return said
    except HttpRefusal as refusal:
        said.append(("refused", refusal.code.name, refusal.status, str(refusal)))
    return said


def _both(data: bytes, chunk: int) -> tuple[list[Any], list[Any]]:
    fast = _conversation(data, chunk)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_http_codec, "_parse_fast", lambda head: None)
        slow = _conversation(data, chunk)
    return fast, slow


def test_a_plain_submit_takes_the_llhttp_path() -> None:
    head = SUBMIT + b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n"
    assert _http_codec._parse_fast(head) is not None


@pytest.mark.parametrize(
    "head",
    [
        SUBMIT + b"Transfer-Encoding: chunked\r\n\r\n",
        SUBMIT + b"Expect: 100-continue\r\nContent-Length: 2\r\n\r\n",
        b"POST /v1/sessions/formation/decisions HTTP/1.1\nHost: x\n\n",  # bare LF: h11 takes it
        b"GET  /health HTTP/1.1\r\nHost: x\r\n\r\n",  # llhttp takes two spaces, h11 does not
        b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n",
        b"GET /health HTTP/1.1\r\n\r\n",  # no Host: h11 refuses it
        b"GET /health HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
    ],
)
def test_what_h11_frames_or_words_differently_goes_to_h11(head: bytes) -> None:
    assert _http_codec._parse_fast(head) is None


PIPELINED = (
    SUBMIT + b"Content-Length: 3\r\n\r\nabc"
    + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    + SUBMIT + b"Content-Length: 5\r\n\r\nxy"
)  # fmt: skip


@pytest.mark.parametrize("chunk", [1, 2, 7, 4096])
def test_pipelined_requests_are_the_same_conversation_on_both_paths(chunk: int) -> None:
    fast, slow = _both(PIPELINED, chunk)
    assert fast == slow
    assert fast[-1][:2] == ("refused", "TRUNCATED_FRAME")


def test_a_body_over_the_limit_is_refused_alike_when_it_arrives() -> None:
    data = SUBMIT + b"Content-Length: 70\r\n\r\n" + b"x" * 70
    fast, slow = _both(data, 16)
    assert fast == slow and fast[-1][:2] == ("refused", "EVIDENCE_BYTES_EXCEEDED")


_NAMES = st.sampled_from(
    [b"Host", b"Content-Length", b"Content-Type", b"Connection", b"Authorization", b"X-A",
     b"Transfer-Encoding", b"Expect", b"Bad Name", b"", b"Content-Length "]
)  # fmt: skip
_VALUES = st.sampled_from(
    [b"x", b"0", b"3", b"12", b"-1", b"1,1", b"+3", b" 3 ", b"close", b"keep-alive",
     b"application/json", b"chunked", b"100-continue", b"a\x01b", b"\xff", b"", b"a  b"]
)  # fmt: skip
_LINES = st.sampled_from(
    [b"POST /v1/sessions/s/decisions HTTP/1.1", b"GET /health HTTP/1.1",
     b"GET /health HTTP/1.0", b"GET /v1/sessions HTTP/1.1", b"POST /nowhere HTTP/1.1",
     b"GET http://x/health HTTP/1.1", b"GET /health HTTP/1.1 ", b"get /health HTTP/1.1",
     b"POST /v1/sessions/%ff/decisions HTTP/1.1"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    line=_LINES,
    fields=st.lists(st.tuples(_NAMES, _VALUES), max_size=5),
    separator=st.sampled_from([b"\r\n", b"\n"]),
    body=st.binary(max_size=20),
    chunk=st.sampled_from([1, 5, 4096]),
)
def test_any_head_gets_the_same_conversation_on_both_paths(
    line: bytes, fields: list[tuple[bytes, bytes]], separator: bytes, body: bytes, chunk: int
) -> None:
    head = line + b"\r\n" + b"".join(name + b": " + value + separator for name, value in fields)
    data = head + separator + body
    fast, slow = _both(data, chunk)
    assert fast == slow
