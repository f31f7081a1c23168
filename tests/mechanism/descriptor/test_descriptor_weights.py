"""native-weights provider: private snapshot, real safetensors by path, lying headers refused."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from mechanism.descriptor import inspect_weights, safetensors_fixture_bytes

from ._support import SAFETENSORS_REF


def build(header: dict[str, Any] | bytes, data: bytes, *, pad: bool = True) -> bytes:
    raw = (
        header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    )
    if pad:
        raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def weight(offsets: list[int], shape: list[int] | None = None, dtype: str = "I8") -> dict[str, Any]:
    return {"weight": {"dtype": dtype, "shape": shape or [2, 2], "data_offsets": offsets}}


def test_fixture_inspection_reports_the_tensor_values() -> None:
    report = inspect_weights(safetensors_fixture_bytes())
    assert report.status == "OBSERVED"
    (tensor,) = report.tensors
    assert tensor["name"] == "weight" and tensor["dtype"] == "I8" and tensor["shape"] == [2, 2]
    assert tensor["values"] == [["-1", "0"], ["1", "-1"]]
    assert tensor["data_hex"] == "ff0001ff" and tensor["balanced_trits"] is True
    assert tensor["data_digest"].startswith("sha256:")


def test_snapshot_is_private_exclusive_and_loaded_by_path(
    opened_files: list[tuple[str, Any, Any]],
) -> None:
    report = inspect_weights(safetensors_fixture_bytes())
    assert report.snapshot is not None
    assert report.snapshot["file_mode"] == "0600"
    assert report.snapshot["directory_mode"] == "0700"
    assert report.snapshot["reference"] == SAFETENSORS_REF
    snapshot_opens = [event for event in opened_files if event[0].endswith("payload.safetensors")]
    assert snapshot_opens, "the snapshot must be opened by path"
    write_flags = snapshot_opens[0][2]
    assert isinstance(write_flags, int) and write_flags & os.O_EXCL and write_flags & os.O_CREAT
    # The snapshot directory is gone afterwards.
    assert not Path(snapshot_opens[0][0]).parent.exists()


LYING = [
    (
        "offsets_past_the_data",
        build(weight([0, 8]), b"\xff\x00\x01\xff"),
        "WEIGHTS_OFFSETS_INVALID",
    ),
    (
        "length_shorter_than_shape",
        build(weight([0, 3]), b"\xff\x00\x01"),
        "WEIGHTS_OFFSETS_INVALID",
    ),
    (
        "length_longer_than_shape",
        build(weight([0, 5]), b"\xff\x00\x01\xff\x00"),
        "WEIGHTS_OFFSETS_INVALID",
    ),
    ("begin_after_end", build(weight([4, 0]), b"\xff\x00\x01\xff"), "WEIGHTS_OFFSETS_INVALID"),
    (
        "trailing_bytes_after_tensor",
        build(weight([0, 4]), b"\xff\x00\x01\xff\x00"),
        "WEIGHTS_OFFSETS_INVALID",
    ),
    (
        "gap_before_tensor",
        build(weight([1, 5]), b"\x00\xff\x00\x01\xff"),
        "WEIGHTS_OFFSETS_INVALID",
    ),
    (
        "overlapping_tensors",
        build(
            {
                "a": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]},
                "b": {"dtype": "I8", "shape": [2], "data_offsets": [2, 4]},
            },
            b"\xff\x00\x01\xff",
        ),
        "WEIGHTS_OFFSETS_INVALID",
    ),
    ("offsets_not_a_pair", build(weight([0]), b"\xff\x00\x01\xff"), "WEIGHTS_OFFSETS_INVALID"),
    ("offsets_bool", build(weight([False, True]), b"\xff"), "WEIGHTS_OFFSETS_INVALID"),
    (
        "header_length_past_the_file",
        struct.pack("<Q", 10_000) + safetensors_fixture_bytes()[8:],
        "WEIGHTS_HEADER_LENGTH_INVALID",
    ),
    ("header_length_huge", struct.pack("<Q", 2**63) + b"{}", "WEIGHTS_HEADER_LENGTH_INVALID"),
    ("shorter_than_length_field", b"\x40\x00", "WEIGHTS_HEADER_LENGTH_INVALID"),
    ("header_not_json", build(b"{not json}", b""), "WEIGHTS_HEADER_INVALID"),
    (
        "duplicate_tensor_key",
        build(
            b'{"weight":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},'
            b'"weight":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}}',
            b"\x01",
        ),
        "WEIGHTS_HEADER_INVALID",
    ),
    ("header_is_a_list", build(b"[]", b""), "WEIGHTS_HEADER_INVALID"),
    (
        "extra_tensor_key",
        build({"w": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1], "x": 1}}, b"\x01"),
        "WEIGHTS_HEADER_INVALID",
    ),
    (
        "negative_shape",
        build(weight([0, 4], shape=[-2, -2]), b"\xff\x00\x01\xff"),
        "WEIGHTS_HEADER_INVALID",
    ),
    ("bad_metadata", build({"__metadata__": {"a": 1}}, b""), "WEIGHTS_HEADER_INVALID"),
    ("header_bad_utf8", build(b'{"\xff":1}', b""), "WEIGHTS_HEADER_INVALID"),
]


@pytest.mark.parametrize(
    ("payload", "code"), [(p, c) for _, p, c in LYING], ids=[n for n, _, _ in LYING]
)
def test_a_safetensors_header_lying_about_offsets_or_lengths_is_invalid(
    payload: bytes, code: str
) -> None:
    report = inspect_weights(payload)
    assert (report.status, report.reason_code) == ("INVALID", code)
    assert report.snapshot is None  # refused before any snapshot or library call


def test_float_dtype_is_unsupported_not_invalid() -> None:
    report = inspect_weights(build(weight([0, 16], dtype="F32"), bytes(16)))
    assert (report.status, report.reason_code) == ("UNKNOWN", "WEIGHTS_DTYPE_UNSUPPORTED")


def test_oversize_payload_is_a_limit() -> None:
    report = inspect_weights(safetensors_fixture_bytes(), max_bytes=75)
    assert (report.status, report.reason_code) == ("UNKNOWN", "WEIGHTS_LIMIT_EXCEEDED")


def test_non_bytes_payload_is_invalid() -> None:
    report = inspect_weights(bytearray(safetensors_fixture_bytes()))  # type: ignore[arg-type]
    assert (report.status, report.reason_code) == ("INVALID", "WEIGHTS_NOT_BYTES")


def test_a_valid_non_ternary_tensor_is_observed_and_flagged() -> None:
    report = inspect_weights(build(weight([0, 4]), b"\x05\x00\x01\xff"))
    assert report.status == "OBSERVED"
    assert report.tensors[0]["balanced_trits"] is False
    assert report.tensors[0]["values"] == [["5", "0"], ["1", "-1"]]
