"""Malformed, oversized, slow and random HTTP against a live daemon: each a 4xx JSON error and
a close, audited, and the daemon keeps serving (docs/http.md)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from http_testkit import LiveDaemon, atom, json_body
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.wire._echo import echo

SUBMIT = "/v1/sessions/formation/decisions"
BOUNDARY = "XyZ"


@pytest.fixture(scope="module")
def daemon() -> Iterator[LiveDaemon]:
    live = LiveDaemon(idle=3.0, header=1.0)
    try:
        yield live
    finally:
        code = live.stop()
        stderr = live.stderr()
        live.cleanup()
        assert code == 0, stderr
        assert "failed" not in stderr, stderr  # no exception reached the catch-all


def still_serving(daemon: LiveDaemon) -> None:
    answer = daemon.get("/health")
    assert answer.status == 200 and answer.json()["status"]["status"] == "serving"


def refusal_line(daemon: LiveDaemon, decision_id: str) -> dict[str, Any]:
    lines = [line for line in daemon.audit() if line.get("decision_id") == decision_id]
    assert len(lines) == 1
    return lines[0]


def part(name: str | None, data: bytes) -> bytes:
    disposition = "form-data" if name is None else f'form-data; name="{name}"'
    return f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + data + b"\r\n"


def multipart(*parts: bytes) -> bytes:
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


def post_head(length: int, content_type: str = "application/json", extra: str = "") -> bytes:
    return (
        f"POST {SUBMIT} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


SUBJECT, CERTIFICATE, BINDING = atom()
GOOD = json_body(BINDING, SUBJECT, CERTIFICATE)
BAD_PADDING = json.dumps({"binding": BINDING, "evidence": [{"base64": "YWJjZA="}]}).encode()
NAMELESS = multipart(part("binding", json.dumps(BINDING).encode()), part(None, SUBJECT))

MALFORMED = {
    "bad request line": (b"GET /health HTTP/1.1 extra words\r\nHost: t\r\n\r\n", 400),
    "duplicate content-length": (
        post_head(len(GOOD), extra=f"Content-Length: {len(GOOD)}\r\n") + GOOD,
        400,
    ),
    "content-length and transfer-encoding": (
        post_head(len(GOOD), extra="Transfer-Encoding: chunked\r\n") + b"0\r\n\r\n",
        400,
    ),
    "header too large": (
        b"GET /health HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n",
        431,
    ),
    "invalid json": (post_head(9) + b"{not json", 400),
    "base64 with bad padding": (post_head(len(BAD_PADDING)) + BAD_PADDING, 400),
    "evidence part without a name": (
        post_head(len(NAMELESS), f"multipart/form-data; boundary={BOUNDARY}") + NAMELESS,
        400,
    ),
    "10,000 tiny headers": (
        b"GET /health HTTP/1.1\r\nHost: t\r\n" + b"a: b\r\n" * 10_000 + b"\r\n",
        431,
    ),
}
CODES = {
    "bad request line": "HEADER_INVALID",
    "duplicate content-length": "HEADER_INVALID",
    "content-length and transfer-encoding": "HEADER_INVALID",
    "header too large": "HEADER_TOO_LARGE",
    "invalid json": "HEADER_INVALID",
    "base64 with bad padding": "HEADER_INVALID",
    "evidence part without a name": "HEADER_INVALID",
    "10,000 tiny headers": "HEADER_TOO_LARGE",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_request_is_a_json_4xx_and_a_close(daemon: LiveDaemon, case: str) -> None:
    data, status = MALFORMED[case]
    answer = daemon.exchange(data)
    assert answer.status == status
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["connection"] == "close" and answer.closed
    error = answer.error
    assert (error["code"], error["fault"]) == (CODES[case], "peer")
    if not data.startswith(b"POST"):
        # Malformed before it named a session: noise, counted, no line of its own.
        assert error["decision_id"] is None
        still_serving(daemon)
        return
    line = refusal_line(daemon, error["decision_id"])
    assert line["event"] == "refusal" and line["code"] == CODES[case]
    assert line["requester"]["protocol"] == "http"
    assert line["session"] == "formation"  # it named a session: audited with it
    still_serving(daemon)


def test_slow_loris_header_drip_is_cut_at_the_header_timeout(daemon: LiveDaemon) -> None:
    started = time.monotonic()
    pieces = [bytes([byte]) for byte in b"GET /health HTTP/1.1\r\nHost: t\r\nX-Drip: aaaaaaaa"]
    answer = daemon.exchange(pieces, pause=0.1)
    assert answer.status == 408 and answer.closed
    assert answer.error["code"] == "IDLE_TIMEOUT"
    assert time.monotonic() - started < 4.5  # cut at the 1 s header timeout, not the drip's end
    assert answer.error["decision_id"] is None  # no session named yet: noise, not a line
    still_serving(daemon)


def test_a_connection_that_sends_nothing_is_answered_and_closed_unaudited(
    daemon: LiveDaemon,
) -> None:
    before = len(daemon.audit())
    with daemon.connect() as sock:
        from http_testkit import read_answer

        answer = read_answer(sock)
    assert answer.status == 408 and answer.closed and answer.error["decision_id"] is None
    assert len(daemon.audit()) == before


def test_declared_body_over_the_session_bound_is_refused_before_it_is_sent(
    daemon: LiveDaemon,
) -> None:
    with daemon.connect() as sock:
        sock.sendall(post_head(50_000_000, extra="Expect: 100-continue\r\n"))
        from http_testkit import read_answer

        answer = read_answer(sock)  # no body byte was sent: the head alone is refused
    assert answer.status == 413 and answer.closed
    assert answer.error["code"] == "EVIDENCE_BYTES_EXCEEDED"
    assert refusal_line(daemon, answer.error["decision_id"])["session"] == "formation"


def test_chunked_body_over_the_bound_is_cut_and_refused(daemon: LiveDaemon) -> None:
    head = (
        b"POST /v1/sessions/bytes/decisions HTTP/1.1\r\nHost: t\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"4000\r\n" + b"x" * 0x4000 + b"\r\n"
    answer = daemon.exchange([head, *([chunk] * 8)])
    assert answer.status == 413 and answer.error["code"] == "EVIDENCE_BYTES_EXCEEDED"


def test_keep_alive_serves_several_requests_then_closes_when_idle(daemon: LiveDaemon) -> None:
    from http_testkit import read_answer

    with daemon.connect() as sock:
        for number in (1, 2, 3):
            sock.sendall(post_head(len(GOOD)) + GOOD)
            answer = read_answer(sock, close_wait=0.05)
            assert answer.status == 200 and not answer.closed
            assert answer.json()["request_id"] == number
        sock.settimeout(10)
        assert sock.recv(1) == b""  # closed after the idle timeout, without an answer


def test_unknown_session_is_404_and_audited_with_its_name(daemon: LiveDaemon) -> None:
    answer = daemon.post("/v1/sessions/no%20such/decisions", GOOD)
    assert answer.status == 404 and answer.error["code"] == "UNKNOWN_SESSION"
    assert refusal_line(daemon, answer.error["decision_id"])["session"] == "no such"


def test_binding_that_is_not_a_bound_proposition_is_422(daemon: LiveDaemon) -> None:
    body = json_body({"subject_id": "x"}, SUBJECT)
    answer = daemon.post(SUBMIT, body)
    assert answer.status == 422 and answer.error["code"] == "BINDING_INVALID"


# A lone surrogate (the ``\\ud800`` escape without its pair) in the binding: not Unicode text.
# EVD1 refuses the header as not JSON; HTTP used to parse it, fail in the audit renderer and
# answer 500 INTERNAL with a service-fault INTERNAL line. Now both refuse it the same way.
PLACEHOLDER = "lone surrogate here"
LONE_PLACES = {"a value": b'"\\ud800"', "a key": b'"\\udc00"'}


def _lone_binding(place: str) -> tuple[dict[str, Any], bytes, bytes]:
    """The atom binding with ``PLACEHOLDER`` where the surrogate goes, the placeholder's JSON
    string and the lone surrogate's."""
    binding = dict(BINDING)
    if place == "a value":
        binding["subject_id"] = PLACEHOLDER
    else:
        binding["parameters"] = {**binding.get("parameters", {}), PLACEHOLDER: "x"}
    return binding, json.dumps(PLACEHOLDER).encode(), LONE_PLACES[place]


def _evd1_answer(daemon: LiveDaemon, place: str) -> tuple[str, str]:
    """(code, fault) EVD1 answers for the same binding, sent as a raw frame."""
    import struct

    import trio
    from daemon_testkit import HELLO
    from test_server_attacks import error_of, raw_answers

    from daemon.wire._protocol import MAGIC, encode_header

    binding, placeholder, lone = _lone_binding(place)
    header = {
        "kind": "submit",
        "request_id": 1,
        "session": "formation",
        "binding": binding,
        "items": [len(SUBJECT), len(CERTIFICATE)],
    }
    raw = encode_header(header).replace(placeholder, lone)
    submit = MAGIC + struct.pack(">I", len(raw)) + raw + SUBJECT + CERTIFICATE
    answer = trio.run(raw_answers, daemon.socket, HELLO + submit)
    error = error_of(answer)
    return str(error.code), str(error.fault.value)


@pytest.mark.parametrize("place", sorted(LONE_PLACES))
@pytest.mark.parametrize("form", ["json", "multipart"])
def test_lone_surrogate_in_an_http_binding_is_refused_as_evd1_refuses_it(
    daemon: LiveDaemon, form: str, place: str
) -> None:
    binding, placeholder, lone = _lone_binding(place)
    if form == "json":
        body = json_body(binding, SUBJECT, CERTIFICATE).replace(placeholder, lone)
        answer = daemon.post(SUBMIT, body)
    else:
        document = json.dumps(binding).encode().replace(placeholder, lone)
        body = multipart(part("binding", document), part("evidence", SUBJECT))
        answer = daemon.post(SUBMIT, body, f"multipart/form-data; boundary={BOUNDARY}")
    code, fault = _evd1_answer(daemon, place)
    assert (code, fault) == ("HEADER_INVALID", "peer")
    assert answer.status == 400, answer.body
    assert (answer.error["code"], answer.error["fault"]) == (code, fault)
    assert "lone surrogate" in answer.error["message"]
    line = refusal_line(daemon, answer.error["decision_id"])
    assert (line["code"], line["fault"]) == (code, fault)
    assert not any(line.get("code") == "INTERNAL" for line in daemon.audit())
    still_serving(daemon)


# --------------------------------------------------------------------------- fuzzing

NAMES = st.sampled_from(["formation", "bytes", "nope", "caf%C3%A9", "%FF", "a%2Fb"])
CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        f"multipart/form-data; boundary={BOUNDARY}",
        "multipart/form-data",
        "text/plain",
        "",
    ]
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["good", "json", "multipart", "bytes"]))
    if kind == "good":
        return GOOD
    if kind == "json":
        value = draw(
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                lambda inner: (
                    st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["binding", "evidence", "base64"]), inner)
                ),
                max_leaves=8,
            )
        )
        return json.dumps(value).encode()
    if kind == "multipart":
        names = draw(st.lists(st.sampled_from(["binding", "evidence", None, "x"]), max_size=3))
        return multipart(*(part(name, draw(st.binary(max_size=40))) for name in names))
    return draw(st.binary(max_size=200))


@st.composite
def requests(draw: st.DrawFn) -> tuple[bytes, str | None]:
    """(raw request, the session it names when it is a well-framed submit)."""
    method = draw(st.sampled_from(["POST", "POST", "GET", "HEAD", "PUT", "P\x00ST"]))
    name = draw(NAMES)
    path = draw(
        st.sampled_from(
            [f"/v1/sessions/{name}/decisions", "/health", "/metrics", "/v1/sessions", "/x"]
        )
    )
    body = draw(bodies())
    framing = draw(st.sampled_from(["length", "chunked", "short", "none"]))
    content_type = draw(CONTENT_TYPES)
    headers = f"{method} {path} HTTP/1.1\r\nHost: t\r\n"
    if content_type:
        headers += f"Content-Type: {content_type}\r\n"
    if framing == "length":
        headers += f"Content-Length: {len(body)}\r\n\r\n"
        data = headers.encode() + body
    elif framing == "short":  # declares more than it sends, then closes
        headers += f"Content-Length: {len(body) + 10}\r\n\r\n"
        data = headers.encode() + body
    elif framing == "chunked":
        headers += "Transfer-Encoding: chunked\r\n\r\n"
        data = headers.encode() + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    else:
        data = headers.encode() + b"\r\n"
    names_session = method == "POST" and path.startswith("/v1/sessions/") and "\x00" not in method
    session = None
    if names_session:
        from urllib.parse import unquote_to_bytes

        raw = unquote_to_bytes(name)
        try:
            session = raw.decode("utf-8")
        except UnicodeDecodeError:
            session = None
    return data, session


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(requests())
def test_random_requests_never_escape_and_every_named_session_is_audited(
    daemon: LiveDaemon, request: tuple[bytes, str | None]
) -> None:
    data, session = request
    before = len(daemon.audit())
    with daemon.connect() as sock:
        sock.sendall(data)
        sock.shutdown(1)  # the end of the request stream: a short body is truncated
        from http_testkit import read_answer

        answer = read_answer(sock, close_wait=5)
    assert 200 <= answer.status < 600
    if answer.status != 200:  # a 200 may be /metrics' text exposition: only refusals are JSON
        assert answer.closed and set(answer.json()) == {"error"}
    new = daemon.audit()[before:]
    if session is not None:
        # Exactly one line for the request: its decision or its refusal, with the session.
        mine = [line for line in new if line.get("requester", {}).get("protocol") == "http"]
        assert len(mine) == 1, (data, new)
        assert mine[0]["session"] == echo(session)
        assert mine[0]["event"] in ("decision", "refusal")


def test_after_the_fuzzing_the_daemon_still_serves_every_endpoint(daemon: LiveDaemon) -> None:
    still_serving(daemon)
    assert daemon.get("/ready").status == 200
    assert daemon.get("/metrics").status == 200
    assert daemon.post(SUBMIT, GOOD).json()["result"]["outcome"] == "PASS"


class _Answers:
    """Kept-alive answers read off one socket in order (pipelined ones share reads)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        assert chunk, "the connection closed"
        self.buffer += chunk

    def next(self) -> Any:
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return json.loads(body)


def test_a_pipelining_client_cannot_starve_another_connection() -> None:
    """A client that has its next requests on the wire before it reads an answer is served one
    request per turn (rule 7 of :mod:`daemon.server._http_server`): with nothing else to wait
    for (``durability = "none"``), a greedy connection's 200 pipelined requests used to be
    answered back to back while a second connection's one request waited for all of them."""
    import threading

    from daemon_testkit import bytes_binding

    config = (
        '[server]\nlisten = ""\nsocket = "s"\n[http]\nlisten = "127.0.0.1:0"\n'
        '[audit]\npath = "audit.jsonl"\ndurability = "none"\n'
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
    )
    daemon = LiveDaemon(config_text=config)

    def request(number: int) -> bytes:
        item = f"artifact {number}".encode()
        body = json_body(bytes_binding(item).to_dict(), item)
        return (
            b"POST /v1/sessions/bytes/decisions HTTP/1.1\r\nHost: t\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        ) + body

    try:
        assert (
            daemon.post("/v1/sessions/bytes/decisions", request(0).split(b"\r\n\r\n", 1)[1]).status
            == 200
        )
        greedy, modest = daemon.connect(), daemon.connect()
        greedy_seqs: list[int] = []
        underway = threading.Event()

        def drain() -> None:
            answers = _Answers(greedy)
            for number in range(200):
                greedy_seqs.append(answers.next()["seq"])
                if number == 20:
                    underway.set()

        # The greedy client's 200 requests go out from a thread of their own (sendall blocks
        # while the server reads), and the modest one's once the greedy ones are being answered.
        sender = threading.Thread(
            target=greedy.sendall, args=(b"".join(request(n) for n in range(1, 201)),)
        )
        reader = threading.Thread(target=drain)
        sender.start()
        reader.start()
        assert underway.wait(60)
        modest.sendall(request(1000))
        modest_seq = _Answers(modest).next()["seq"]
        sender.join(60)
        reader.join(60)
        assert len(greedy_seqs) == 200
        # served while the greedy connection still had requests waiting, not after them all
        assert modest_seq < greedy_seqs[-1]
        greedy.close()
        modest.close()
    finally:
        daemon.stop()
        daemon.cleanup()
