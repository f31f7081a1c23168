"""The transparency requests on the wire (``docs/spec/transparency.md §10``): exact shapes,
refusals of malformed headers, and a daemon without a transparency log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon import RejectedError, default_sessions, open_client, open_server
from daemon.wire._protocol import (
    CheckpointNote,
    CheckpointRequest,
    ClientConnection,
    ConsistencyProof,
    ConsistencyProofRequest,
    ErrorCode,
    InclusionProof,
    InclusionProofRequest,
    ProtocolError,
    ServerConnection,
    encode_frame,
)


def server_event(header: dict[str, Any]) -> Any:
    connection = ServerConnection()
    connection.receive_data(encode_frame({"kind": "hello", "versions": [1], "client": "t"}))
    connection.next_event()
    connection.receive_data(encode_frame(header))
    return connection.next_event()


def client_event(header: dict[str, Any]) -> Any:
    connection = ClientConnection()
    connection.handshake_done = True
    connection.receive_data(encode_frame(header))
    return connection.next_event()


@pytest.mark.parametrize(
    "event",
    [
        CheckpointRequest(1),
        InclusionProofRequest(2, 5, 10),
        ConsistencyProofRequest(3, 4, 9),
    ],
)
def test_requests_round_trip(event: Any) -> None:
    assert server_event(event.to_header()) == event


@pytest.mark.parametrize(
    "event",
    [
        CheckpointNote(1, "o\n1\nAAAA\n\n— o AAAAAAA=\n"),
        InclusionProof(2, 5, 10, ("AAAA", "BBBB")),
        ConsistencyProof(3, 4, 9, ()),
    ],
)
def test_answers_round_trip(event: Any) -> None:
    assert client_event(event.to_header()) == event


@pytest.mark.parametrize(
    "header",
    [
        {"kind": "inclusion_proof", "request_id": 1, "index": -1, "tree_size": 3},
        {"kind": "inclusion_proof", "request_id": 1, "index": True, "tree_size": 3},
        {"kind": "inclusion_proof", "request_id": 1, "index": 1},
        {"kind": "consistency_proof", "request_id": 1, "old_size": 1, "new_size": 2**63},
        {"kind": "consistency_proof", "request_id": 1, "old_size": "1", "new_size": 2},
        {"kind": "checkpoint", "request_id": 1, "size": 3},
    ],
)
def test_malformed_transparency_requests_are_refused(header: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as caught:
        server_event(header)
    assert caught.value.code is ErrorCode.HEADER_INVALID


def test_proof_answer_with_non_string_hashes_is_refused() -> None:
    header = InclusionProof(2, 5, 10, ()).to_header() | {"proof": [1]}
    with pytest.raises(ProtocolError):
        client_event(header)


async def test_daemon_without_transparency_refuses_the_requests(short_dir: Path) -> None:
    options: dict[str, Any] = {
        "tcp": None,
        "unix": str(short_dir / "s"),
        "audit_path": str(short_dir / "a"),
    }
    async with open_server(default_sessions(), **options):
        for method, args in (
            ("checkpoint", ()),
            ("inclusion_proof", (0, 1)),
            ("consistency_proof", (1, 1)),
        ):
            async with open_client(unix=str(short_dir / "s")) as client:
                with pytest.raises(RejectedError) as caught:
                    await getattr(client, method)(*args)
                assert caught.value.code == "TRANSPARENCY_DISABLED"
