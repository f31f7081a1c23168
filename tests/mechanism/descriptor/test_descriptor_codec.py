"""Every byte-level and field-level descriptor violation is refused with its own stable code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism.descriptor import (
    DESCRIPTOR_REASON_CODES,
    DescriptorError,
    decode_descriptor,
    descriptor_identity,
    encode_descriptor,
)

from ._support import TISC_REF, fixture, sha3_ref

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).with_name("codec_cases.json")).read_text("utf-8")
)["cases"]


def _bytes(case: dict[str, Any]) -> bytes:
    return str(case["descriptor"]).encode("latin-1")


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_descriptor_conformance_table(case: dict[str, Any]) -> None:
    data = _bytes(case)
    if case["code"] is None:
        fields = decode_descriptor(data)
        assert "".join(line + "\n" for line in fields.lines()).encode("ascii") == data
        return
    with pytest.raises(DescriptorError) as caught:
        decode_descriptor(data)
    assert caught.value.code == case["code"]
    assert caught.value.kind == case["kind"]


def test_every_reason_code_is_exercised_by_the_table_or_a_named_test() -> None:
    exercised = {case["code"] for case in CASES if case["code"] is not None}
    exercised |= {"DESCRIPTOR_NOT_BYTES", "DESCRIPTOR_LIMIT_EXCEEDED"}
    assert exercised == set(DESCRIPTOR_REASON_CODES)


def test_oversize_case_is_exactly_one_byte_over_the_limit() -> None:
    (case,) = [case for case in CASES if case["name"] == "oversize_4097_bytes"]
    assert len(_bytes(case)) == 4097


@pytest.mark.parametrize("value", [bytearray(fixture("descriptor-tisc.txt")), "text", None, 7])
def test_non_bytes_descriptor_is_refused(value: object) -> None:
    with pytest.raises(DescriptorError) as caught:
        decode_descriptor(value)  # type: ignore[arg-type]
    assert caught.value.code == "DESCRIPTOR_NOT_BYTES"


def test_lowered_host_limit_is_a_limit_not_a_refutation() -> None:
    with pytest.raises(DescriptorError) as caught:
        decode_descriptor(fixture("descriptor-tisc.txt"), max_bytes=100)
    assert (caught.value.code, caught.value.kind) == ("DESCRIPTOR_LIMIT_EXCEEDED", "limit")


def test_decoded_fields_are_the_six_lines_in_order() -> None:
    fields = decode_descriptor(fixture("descriptor-tisc.txt"))
    assert fields.to_dict() == {
        "schema": "t81.experiment-descriptor.v1",
        "payload_reference": TISC_REF,
        "representation": "base81-symbolic-tisc",
        "provider": "t81vm",
        "operations": "run",
        "profile": "object-interface-fixtures-v1",
    }


def test_descriptor_identity_is_the_canonfs_hash_of_its_own_bytes_not_the_payload_reference() -> (
    None
):
    data = fixture("descriptor-tisc.txt")
    assert descriptor_identity(data) == sha3_ref(data)
    assert descriptor_identity(data) != TISC_REF


@pytest.mark.parametrize("payload", [b"", b"@code\n", fixture("tisc-fixture.bin") + b"\n"])
def test_encoder_refuses_payloads_outside_the_constraint_profile(payload: bytes) -> None:
    with pytest.raises(DescriptorError) as caught:
        encode_descriptor(payload)
    assert caught.value.code == "DESCRIPTOR_PAYLOAD_NOT_ADMITTED"


_VALID = (fixture("descriptor-tisc.txt"), fixture("descriptor-safetensors.txt"))


@settings(max_examples=200, deadline=None)
@given(
    which=st.sampled_from(_VALID),
    position=st.integers(min_value=0, max_value=200),
    byte=st.integers(min_value=0, max_value=255),
    action=st.sampled_from(["replace", "insert", "delete"]),
)
def test_any_single_byte_mutation_is_refused_with_a_closed_code_or_stays_canonical(
    which: bytes, position: int, byte: int, action: str
) -> None:
    index = position % len(which)
    if action == "replace":
        mutated = which[:index] + bytes([byte]) + which[index + 1 :]
    elif action == "insert":
        mutated = which[:index] + bytes([byte]) + which[index:]
    else:
        mutated = which[:index] + which[index + 1 :]
    try:
        fields = decode_descriptor(mutated)
    except DescriptorError as error:
        assert error.code in DESCRIPTOR_REASON_CODES
        assert error.kind in ("invalid", "unsupported", "limit")
        return
    # Accepted only if it is still a canonical six-line descriptor (e.g. another hex digit).
    assert "".join(line + "\n" for line in fields.lines()).encode("ascii") == mutated
