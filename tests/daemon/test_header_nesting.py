"""Header nesting: the documented limit is the enforced one.

docs/protocol.md promised nesting to 1,024 while the canonical re-encoding (orjson) refuses
anything deeper than 254 levels, which was reported as "not in canonical form". The limit is
now 254 (the root object counting as one) on both sides: accepted at 254, refused at 255 and
beyond with ``HEADER_INVALID`` and a message naming the limit.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import attrs
import pytest
from daemon_testkit import HELLO, bytes_binding

from daemon import HostedSession, open_client, open_server
from daemon.wire._protocol import (
    MAGIC,
    MAX_HEADER_DEPTH,
    ErrorCode,
    ProtocolError,
    ServerConnection,
    decode_header,
    encode_header,
)
from session import BytesDigestMechanism


def nested(depth: int) -> dict[str, Any]:
    """A header of exactly ``depth`` levels: the root object, then lists."""
    value: Any = "x"
    for _ in range(depth - 1):
        value = [value]
    return {"a": value}


def raw(depth: int) -> bytes:
    return b'{"a":' + b"[" * (depth - 1) + b'"x"' + b"]" * (depth - 1) + b"}"


def test_the_limit_is_the_one_the_documentation_states() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    assert MAX_HEADER_DEPTH == 254
    assert "nesting at most 254 deep" in text and "nesting at most 1,024" not in text


def test_header_at_the_limit_round_trips() -> None:
    data = encode_header(nested(MAX_HEADER_DEPTH))
    assert data == raw(MAX_HEADER_DEPTH)
    assert decode_header(data, max_bytes=len(data)) == nested(MAX_HEADER_DEPTH)


@pytest.mark.parametrize("depth", [MAX_HEADER_DEPTH + 1, 1024, 1025, 5000])
def test_header_nested_past_the_limit_is_refused_naming_it(depth: int) -> None:
    data = raw(depth)
    with pytest.raises(ProtocolError) as refused:
        decode_header(data, max_bytes=len(data))
    assert refused.value.code is ErrorCode.HEADER_INVALID
    assert refused.value.message == "header nesting deeper than 254"


def test_client_refuses_to_encode_a_header_past_the_limit() -> None:
    with pytest.raises(ValueError, match="cannot be encoded as a header"):
        encode_header(nested(MAX_HEADER_DEPTH + 1))


def test_other_refusals_keep_their_messages() -> None:
    for data, message in (
        (b'{"a":[[1]]} ', "header is not in canonical form"),
        (b"[" * 100, "header is not JSON"),
        (b'{"a":' + b"]" * 300, "header is not JSON"),
    ):
        with pytest.raises(ProtocolError) as refused:
            decode_header(data, max_bytes=len(data))
        assert refused.value.message.startswith(message)


def test_too_deep_frame_is_refused_by_the_connection() -> None:
    connection = ServerConnection()
    header = raw(MAX_HEADER_DEPTH + 1)
    connection.receive_data(HELLO + MAGIC + struct.pack(">I", len(header)) + header)
    connection.next_event()
    with pytest.raises(ProtocolError) as refused:
        connection.next_event()
    assert refused.value.code is ErrorCode.HEADER_INVALID


async def test_binding_nested_to_the_limit_is_answered_end_to_end(short_dir: Path) -> None:
    """Everything a header carries downstream (snapshot copies, digests, details) copes with
    the deepest header the protocol admits."""
    expected: Any = "x"
    for _ in range(MAX_HEADER_DEPTH - 3):  # header root, binding object, then the lists
        expected = [expected]
    binding = attrs.evolve(bytes_binding(b"good"), expected=expected)
    sessions = [HostedSession("bytes", (BytesDigestMechanism(),))]
    async with (
        open_server(sessions, unix=str(short_dir / "s"), audit_path=str(short_dir / "a")) as server,
        open_client(unix=server.unix_path) as client,
    ):
        result = await client.submit("bytes", binding, [b"good"])
    assert result.outcome == "FAIL"  # the expected value is not a digest
