"""The fast lane answers and logs exactly what the general path does (daemon.server._lane).

Two real daemons, one configuration: one with the lane (the default), one with
``EVIDENCED_FAST_LANE=0`` (every request on the general path). The same requests —
honest, tampered, over a bound, to a wrong session, malformed in the body or the head — go to
both, in the same order, over real sockets; the answers (status, fields, body) and the audit
lines each request appended must be byte-identical once what is inherently per decision is
normalised (:func:`normal_line`, :func:`normal_answer`):

* ``timestamp`` (the wall clock at rendering), ``decision_id`` (a fresh random id per
  decision or audited refusal), ``metrics`` (the nanoseconds measured for that request),
* the chain fields ``seq``, ``prev``, ``line_digest`` (and an answer's ``log_index``): each
  follows from every earlier line of that daemon's own log, and the periodic ``noise``
  summary lines (one per minute at most, written when the minute ends) fall in either log at
  its own moment — so ``noise`` lines are left out of the comparison and the chain is
  compared by position only (the same number of lines, each the same once normalised),
* ``requester.peer``/``requester.address`` port: each request arrives on a connection of
  its own, from an ephemeral port.

A tampered request that the lane lets through wrongly (a check dropped) answers PASS where
the general path refuses or FAILs: the comparison catches it. A last test replaces the audit
file under both daemons (fail-stop): the lane's admitted request and every one after it are
refused ``AUDIT_FAILED`` in the general path's words (only the outage's moment and the files'
inode numbers differ between the two daemons).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from daemon_testkit import bytes_binding
from http_testkit import LiveDaemon, read_answer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SUBMIT = "/v1/sessions/bytes/decisions"


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[LiveDaemon, LiveDaemon]]:
    lane = LiveDaemon()
    previous = os.environ.get("EVIDENCED_FAST_LANE")
    os.environ["EVIDENCED_FAST_LANE"] = "0"
    try:
        general = LiveDaemon()
    finally:
        if previous is None:
            del os.environ["EVIDENCED_FAST_LANE"]
        else:
            os.environ["EVIDENCED_FAST_LANE"] = previous
    try:
        yield lane, general
    finally:
        for daemon in (lane, general):
            daemon.stop()
            daemon.cleanup()


_PORT = re.compile(r":\d+$")


def _normal_requester(requester: Any) -> Any:
    if not isinstance(requester, dict):
        return requester
    out = dict(requester)
    for key in ("peer", "address"):
        if isinstance(out.get(key), str):
            out[key] = _PORT.sub(":<port>", out[key])
    return out


def normal_line(text: str) -> dict[str, Any]:
    """An audit line without what is inherently per decision (module docstring)."""
    line: dict[str, Any] = json.loads(text)
    for key in ("timestamp", "decision_id", "seq", "prev", "line_digest"):
        if key in line:
            line[key] = f"<{key}>"
    if "metrics" in line:
        line["metrics"] = {key: "<ns>" for key in line["metrics"]}
    if "requester" in line:
        line["requester"] = _normal_requester(line["requester"])
    return line


def normal_answer(body: bytes) -> Any:
    """An answer's document without what is inherently per decision."""
    try:
        document = json.loads(body)
    except ValueError:
        return body
    if not isinstance(document, dict):
        return document
    if "error" in document and isinstance(document["error"], dict):
        error = dict(document["error"])
        if error.get("decision_id") is not None:
            error["decision_id"] = "<decision_id>"
        return {**document, "error": error}
    out = dict(document)
    for key in ("decision_id", "seq", "line_digest", "log_index"):
        if out.get(key) is not None:
            out[key] = f"<{key}>"
    if isinstance(out.get("audit_line"), str):
        out["audit_line"] = normal_line(out["audit_line"])
    return out


def _new_lines(daemon: LiveDaemon, seen: int) -> tuple[list[dict[str, Any]], int]:
    lines = daemon.audit_path.read_text("utf-8").splitlines()
    fresh = [normal_line(line) for line in lines[seen:]]
    return [line for line in fresh if line.get("event") != "noise"], len(lines)


def _request(
    path: str, body: bytes, *, content_type: str = "application/json", extra: str = ""
) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


def _body(binding: dict[str, Any], items: list[str]) -> bytes:
    return json.dumps(
        {"binding": binding, "evidence": [{"base64": text} for text in items]},
        separators=(",", ":"),
    ).encode()


def _honest(payload: bytes) -> tuple[dict[str, Any], str]:
    return bytes_binding(payload).to_dict(), base64.b64encode(payload).decode()


@st.composite
def requests(draw: st.DrawFn) -> list[bytes]:
    """One connection's requests (1 to 3, sent one after another)."""
    return [draw(one_request()) for _ in range(draw(st.integers(1, 3)))]


@st.composite
def one_request(draw: st.DrawFn) -> bytes:
    payload = draw(st.binary(max_size=96))
    binding, text = _honest(payload)
    kind = draw(
        st.sampled_from(
            [
                "honest", "honest", "honest", "fail", "tampered_ref", "tampered_field",
                "two_items", "over_items", "over_bytes", "wrong_session", "formation",
                "dup_key", "extra_key", "bad_base64", "padding", "whitespace", "no_evidence",
                "not_object", "garbage", "mutate", "cut", "media", "expect", "chunked",
                "nan", "surrogate", "close", "extra_item_key",
            ]
        )
    )  # fmt: skip
    path, content_type, extra = SUBMIT, "application/json", ""
    if kind in ("honest", "close"):
        body = _body(binding, [text])
        if kind == "close":
            extra = "Connection: close\r\n"
    elif kind == "fail":
        lying = bytes_binding(payload, expected="sha256:" + hashlib.sha256(b"x").hexdigest())
        body = _body(lying.to_dict(), [text])
    elif kind == "tampered_ref":
        body = _body(binding, [base64.b64encode(payload + b"!").decode()])
    elif kind == "tampered_field":
        field = draw(st.sampled_from(sorted(binding)))
        value = draw(st.sampled_from([None, 1, "", "x", [], {}, binding[field]]))
        body = _body({**binding, field: value}, [text])
    elif kind == "two_items":
        body = _body(binding, [text, text])
    elif kind == "over_items":
        body = _body(binding, [text, text, text])
    elif kind == "over_bytes":
        big = base64.b64encode(payload * 1 + bytes(4097)).decode()
        body = _body(binding, [big])
    elif kind == "wrong_session":
        path = f"/v1/sessions/{draw(st.sampled_from(['nope', 'Bytes', 'bytes%20']))}/decisions"
        body = _body(binding, [text])
    elif kind == "formation":
        path = "/v1/sessions/formation/decisions"
        body = _body(binding, [text])
    elif kind == "dup_key":
        body = b'{"binding":' + json.dumps(binding).encode() + b',"binding":{},"evidence":[]}'
    elif kind == "extra_key":
        body = json.dumps({"binding": binding, "evidence": [{"base64": text}], "x": 1}).encode()
    elif kind == "extra_item_key":
        body = json.dumps({"binding": binding, "evidence": [{"base64": text, "y": 2}]}).encode()
    elif kind == "bad_base64":
        body = _body(binding, [text[:-1] + "*" if text else "*AAA"])
    elif kind == "padding":
        body = _body(binding, [text.rstrip("=") + "A" * (len(text) - len(text.rstrip("=")))])
    elif kind == "whitespace":
        body = _body(binding, [text[:4] + "\n" + text[4:]])
    elif kind == "no_evidence":
        body = _body(binding, [])
    elif kind == "not_object":
        body = json.dumps([binding]).encode()
    elif kind == "garbage":
        body = draw(st.binary(max_size=64))
    elif kind == "mutate":
        mutated = bytearray(_body(binding, [text]))
        at = draw(st.integers(0, len(mutated) - 1))
        mutated[at] = draw(st.integers(0, 255))
        body = bytes(mutated)
    elif kind == "cut":
        whole = _body(binding, [text])
        body = whole[: draw(st.integers(0, len(whole) - 1))]
    elif kind == "media":
        content_type = draw(st.sampled_from(["text/plain", "application/json; charset=utf-8", ""]))
        body = _body(binding, [text])
    elif kind == "expect":
        extra = "Expect: 100-continue\r\n"
        body = _body(binding, [text])
    elif kind == "chunked":
        whole = _body(binding, [text])
        return (
            (
                f"POST {SUBMIT} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                f"Transfer-Encoding: chunked\r\n\r\n{len(whole):x}\r\n"
            ).encode()
            + whole
            + b"\r\n0\r\n\r\n"
        )
    elif kind == "nan":
        body = _body({**binding, "bounds": {"max_items": float("nan")}}, [text])
    else:  # surrogate: json.dumps escapes the lone surrogate as \ud800
        body = _body({**binding, "subject_id": "\ud800"}, [text])
    return _request(path, body, content_type=content_type, extra=extra)


def _converse(daemon: LiveDaemon, sequence: list[bytes]) -> list[tuple[int, dict[str, str], Any]]:
    answers: list[tuple[int, dict[str, str], Any]] = []
    with daemon.connect() as sock:
        for data in sequence:
            sock.settimeout(30)  # read_answer leaves its short close watch set
            try:
                sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                break
            try:
                answer = read_answer(sock)
            except AssertionError:  # closed without an answer (as the other must be too)
                answers.append((0, {}, b""))
                break
            answers.append((answer.status, answer.headers, normal_answer(answer.body)))
            if answer.closed:
                break
    return answers


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=requests())
def test_the_lane_answers_and_logs_what_the_general_path_does(
    pair: tuple[LiveDaemon, LiveDaemon], sequence: list[bytes]
) -> None:
    lane, general = pair
    seen_lane = len(lane.audit_path.read_text("utf-8").splitlines())
    seen_general = len(general.audit_path.read_text("utf-8").splitlines())
    on_lane = _converse(lane, sequence)
    on_general = _converse(general, sequence)
    assert on_lane == on_general
    lines_lane, _ = _new_lines(lane, seen_lane)
    lines_general, _ = _new_lines(general, seen_general)
    assert lines_lane == lines_general


def test_an_honest_request_takes_the_lane_and_a_tampered_one_does_not_pass(
    pair: tuple[LiveDaemon, LiveDaemon],
) -> None:
    """Not vacuous: the honest request PASSes on both and the tampered one on neither (the
    comparison above is of real decisions, not of two identical refusals)."""
    lane, general = pair
    payload = b"the lane"
    binding, text = _honest(payload)
    honest = _request(SUBMIT, _body(binding, [text]))
    tampered = _request(SUBMIT, _body(binding, [base64.b64encode(b"not the lane").decode()]))
    for daemon in (lane, general):
        ((status, _, document),) = _converse(daemon, [honest])
        assert status == 200 and document["result"]["outcome"] == "PASS"
        ((status, _, document),) = _converse(daemon, [tampered])
        assert status != 200 or document["result"]["outcome"] != "PASS"


_STAMP = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.]+Z")
_INODE = re.compile(r"inode \d+|is \d+\)")


def _per_daemon(answer: tuple[int, dict[str, str], Any]) -> tuple[int, dict[str, str], Any]:
    """An outage refusal without its moment and inode numbers (and so its length)."""
    status, headers, document = answer
    error = dict(document["error"])
    error["message"] = _INODE.sub("<inode>", _STAMP.sub("<time>", error["message"]))
    fields = {key: value for key, value in headers.items() if key != "content-length"}
    return status, fields, {"error": error}


def test_a_log_changed_under_the_daemon_fails_stop_on_the_lane_as_on_the_general_path() -> None:
    """Fail-stop (the lane's rule 4): once the audit file is replaced under the writer, an
    honest request the lane admitted is answered ``AUDIT_FAILED`` exactly as the general path
    answers it, and so is every request after it; nothing is answered as recorded."""
    daemons = []
    previous = os.environ.get("EVIDENCED_FAST_LANE")
    try:
        for switch in ("1", "0"):
            os.environ["EVIDENCED_FAST_LANE"] = switch
            daemons.append(LiveDaemon())
    finally:
        if previous is None:
            os.environ.pop("EVIDENCED_FAST_LANE", None)
        else:
            os.environ["EVIDENCED_FAST_LANE"] = previous
    try:
        payload = b"recorded or refused"
        binding, text = _honest(payload)
        honest = _request(SUBMIT, _body(binding, [text]))
        answers = []
        for daemon in daemons:
            ((status, _, document),) = _converse(daemon, [honest])
            assert status == 200 and document["result"]["outcome"] == "PASS"
            moved = daemon.audit_path.with_name("moved.jsonl")
            daemon.audit_path.rename(moved)
            daemon.audit_path.write_bytes(moved.read_bytes())  # same bytes, another file
            answers.append(_converse(daemon, [honest]) + _converse(daemon, [honest]))
        # the outage's words name the moment and the inodes of each daemon's own files
        on_lane, on_general = ([_per_daemon(answer) for answer in run] for run in answers)
        assert on_lane == on_general
        for status, _, document in on_lane:
            assert status == 500 and document["error"]["code"] == "AUDIT_FAILED"
            assert document["error"]["decision_id"] is None
    finally:
        for daemon in daemons:
            daemon.stop()
            daemon.cleanup()
