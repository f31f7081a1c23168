"""Submit bodies: JSON with base64 evidence and multipart/form-data (daemon/_http_body)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.server._http_body import BodyParser, SubmitBody, body_limit, body_parser
from daemon.server._http_errors import HttpRefusal
from daemon.wire._protocol import ErrorCode

BINDING = {"subject_id": "s", "predicate": "p"}
BOUNDARY = "------------------------d74496d66958873e"


def parser(content_type: str = "application/json", boundary: str | None = None) -> BodyParser:
    return body_parser(content_type, boundary, max_items=2, max_bytes=100, max_binding_bytes=1024)


def parse(body: bytes, content_type: str = "application/json", chunk: int = 7) -> SubmitBody:
    target = parser(content_type, BOUNDARY if content_type.startswith("multipart") else None)
    for start in range(0, len(body), chunk):
        target.feed(body[start : start + chunk])
    return target.finish()


def refused(body: bytes, content_type: str = "application/json") -> HttpRefusal:
    with pytest.raises(HttpRefusal) as caught:
        parse(body, content_type)
    return caught.value


def json_body(*items: bytes, binding: object = BINDING) -> bytes:
    evidence = [{"base64": base64.b64encode(item).decode()} for item in items]
    return json.dumps({"binding": binding, "evidence": evidence}).encode()


def part(name: str | None, data: bytes, *, filename: str | None = None, extra: str = "") -> bytes:
    disposition = "form-data" if name is None else f'form-data; name="{name}"'
    if filename is not None:
        disposition += f'; filename="{filename}"'
    return (
        f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n{extra}\r\n".encode()
        + data
        + b"\r\n"
    )


def multipart_body(*parts: bytes) -> bytes:
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


MULTIPART = "multipart/form-data"


def test_json_body_gives_binding_and_raw_items() -> None:
    body = parse(json_body(b"subject", b"\x00\xff"))
    assert body == SubmitBody(BINDING, (b"subject", b"\x00\xff"))


def test_multipart_body_as_curl_sends_it_gives_items_in_order() -> None:
    body = parse(
        multipart_body(
            part("binding", json.dumps(BINDING).encode()),
            part("evidence", b"first", filename="a.json", extra="Content-Type: text/plain\r\n"),
            part("evidence", b"\r\n--second\r\n", filename="b.bin"),
        ),
        MULTIPART,
    )
    assert body == SubmitBody(BINDING, (b"first", b"\r\n--second\r\n"))


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", ErrorCode.HEADER_INVALID),
        (b"\xef\xbb\xbf" + json_body(b"x"), ErrorCode.HEADER_INVALID),
        (b'{"binding": {}, "evidence": [], "binding": {}}', ErrorCode.HEADER_INVALID),
        (b'{"binding": {"x": NaN}, "evidence": []}', ErrorCode.HEADER_INVALID),
        (b'{"binding": {}, "evidence": [], "extra": 1}', ErrorCode.HEADER_INVALID),
        (b'{"binding": [], "evidence": []}', ErrorCode.BINDING_INVALID),
        (b'{"binding": {}, "evidence": {}}', ErrorCode.HEADER_INVALID),
        (b'{"binding": {}, "evidence": ["YWJj"]}', ErrorCode.HEADER_INVALID),
        (b'{"binding": {}, "evidence": [{"base64": "YWJj", "x": 1}]}', ErrorCode.HEADER_INVALID),
        (b'{"binding": {}, "evidence": [{"base64": "YWI"}]}', ErrorCode.HEADER_INVALID),
        (b'{"binding": {}, "evidence": [{"base64": "YW=j"}]}', ErrorCode.HEADER_INVALID),
        (b'{"binding": {}, "evidence": [{"base64": "YW Jj"}]}', ErrorCode.HEADER_INVALID),
        (b'{"binding": {}, "evidence": [{"base64": "YW-_"}]}', ErrorCode.HEADER_INVALID),
        (b"[" * 100_000, ErrorCode.HEADER_INVALID),
        (json_body(b"a", b"b", b"c"), ErrorCode.EVIDENCE_ITEMS_EXCEEDED),
        (json_body(b"a" * 60, b"b" * 41), ErrorCode.EVIDENCE_BYTES_EXCEEDED),
    ],
)
def test_malformed_json_bodies_are_refused_with_a_protocol_code(
    body: bytes, code: ErrorCode
) -> None:
    assert refused(body).code is code


def test_bad_base64_padding_names_the_item() -> None:
    refusal = refused(b'{"binding": {}, "evidence": [{"base64": "YQ=="}, {"base64": "YQ="}]}')
    assert refusal.code is ErrorCode.HEADER_INVALID
    assert "evidence[1]" in refusal.message


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (multipart_body(part(None, b"x")), ErrorCode.HEADER_INVALID),  # nameless part
        (multipart_body(part("", b"x")), ErrorCode.HEADER_INVALID),
        (multipart_body(part("other", b"x")), ErrorCode.HEADER_INVALID),
        (multipart_body(part("evidence", b"x")), ErrorCode.HEADER_INVALID),  # no binding
        (
            multipart_body(part("binding", b"{}"), part("binding", b"{}")),
            ErrorCode.HEADER_INVALID,
        ),
        (multipart_body(part("binding", b"{bad")), ErrorCode.HEADER_INVALID),
        (multipart_body(part("binding", b"[]")), ErrorCode.BINDING_INVALID),
        (multipart_body(part("binding", b" " * 2000)), ErrorCode.HEADER_TOO_LARGE),
        (
            multipart_body(part("binding", b"{}", extra="Content-Length: 5000\r\n")),
            ErrorCode.HEADER_TOO_LARGE,
        ),
        (
            multipart_body(*(part("evidence", b"x") for _ in range(3))),
            ErrorCode.EVIDENCE_ITEMS_EXCEEDED,
        ),
        (
            multipart_body(part("evidence", b"x" * 60), part("evidence", b"x" * 41)),
            ErrorCode.EVIDENCE_BYTES_EXCEEDED,
        ),
        (
            multipart_body(part("evidence", b"x", extra="Content-Length: 101\r\n")),
            ErrorCode.EVIDENCE_BYTES_EXCEEDED,
        ),
        (
            multipart_body(part("evidence", b"x", extra="X-A: 1\r\n" * 20)),
            ErrorCode.HEADER_TOO_LARGE,
        ),
        (multipart_body(part("binding", b"{}"))[:-10], ErrorCode.HEADER_INVALID),
        (b"no multipart at all", ErrorCode.HEADER_INVALID),
    ],
)
def test_malformed_multipart_bodies_are_refused_with_a_protocol_code(
    body: bytes, code: ErrorCode
) -> None:
    assert refused(body, MULTIPART).code is code


def test_multipart_evidence_over_the_bound_is_refused_before_the_rest_is_read() -> None:
    target = parser(MULTIPART, BOUNDARY)
    target.feed(part("binding", b"{}") + part("evidence", b"x" * 90))
    with pytest.raises(HttpRefusal) as caught:
        target.feed(b"y" * 20)  # 110 bytes of evidence so far: over 100
    assert caught.value.code is ErrorCode.EVIDENCE_BYTES_EXCEEDED


@pytest.mark.parametrize(
    ("content_type", "boundary"),
    [("text/plain", None), ("", None), ("multipart/form-data", None), ("multipart/mixed", "x")],
)
def test_unsupported_media_types_are_415(content_type: str, boundary: str | None) -> None:
    with pytest.raises(HttpRefusal) as caught:
        body_parser(content_type, boundary, max_items=1, max_bytes=1, max_binding_bytes=1)
    assert (caught.value.code, caught.value.status) == (ErrorCode.HEADER_INVALID, 415)


def test_body_limit_admits_the_largest_honest_body_of_either_kind() -> None:
    items = (b"\xff" * 60, b"\xfe" * 40)
    binding = {"blob": "b" * 900}
    limit = body_limit(max_items=2, max_bytes=100, max_binding_bytes=1024)
    as_json = json_body(*items, binding=binding)
    as_multipart = multipart_body(
        part("binding", json.dumps(binding).encode()),
        *(part("evidence", item, filename="f" * 200) for item in items),
    )
    assert len(as_json) <= limit and len(as_multipart) <= limit
    assert parse(as_json).items == items
    assert parse(as_multipart, MULTIPART).items == items


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.sampled_from(["application/json", MULTIPART]))
def test_arbitrary_bodies_parse_or_are_refused_never_another_exception(
    data: bytes, content_type: str
) -> None:
    try:
        parse(data, content_type, chunk=13)
    except HttpRefusal as refusal:
        assert refusal.code in ErrorCode
