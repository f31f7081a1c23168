"""The shipped fixtures are the reference bytes, and the compiled catalog is exactly those bytes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import safetensors.numpy
import testdata

from mechanism.descriptor import (
    CATALOG,
    CATALOG_BY_PROVIDER,
    DEFAULT_ALLOWLIST,
    DEFAULT_POLICY,
    FIXTURE_PROGRAM,
    SAFETENSORS_FIXTURE_REFERENCE,
    TISC_FIXTURE_REFERENCE,
    canonfs_hash,
    encode_descriptor,
    render_program,
    safetensors_fixture_bytes,
    tisc_fixture_bytes,
)

from ._support import FIXTURES, SAFETENSORS_REF, TISC_REF, fixture, sha3_ref

REFERENCE_FILES = (
    "tisc-fixture.bin",
    "safetensors-fixture.bin",
    "descriptor-tisc.txt",
    "descriptor-safetensors.txt",
)


@pytest.mark.parametrize("name", REFERENCE_FILES)
def test_repository_fixture_is_byte_identical_to_the_reference_data(name: str) -> None:
    recorded = testdata.reference_sha256(f"fixtures/descriptor/{name}")
    assert hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest() == recorded


def test_rendering_the_fixture_program_reproduces_the_tisc_fixture_byte_for_byte() -> None:
    rendered = render_program(FIXTURE_PROGRAM)
    assert rendered == fixture("tisc-fixture.bin")
    assert len(rendered) == 108
    assert rendered == tisc_fixture_bytes()


def test_fixture_program_is_loadimm_loadimm_mul_halt() -> None:
    fields = [instruction.fields() for instruction in FIXTURE_PROGRAM]
    assert fields == [(2, 40, 6, 0, 0), (2, 41, 7, 0, 0), (7, 42, 40, 41, 0), (1, 0, 0, 0, 0)]


def test_tisc_fixture_reference_equals_the_seed_example_reference() -> None:
    assert sha3_ref(fixture("tisc-fixture.bin")) == TISC_REF
    assert canonfs_hash(tisc_fixture_bytes()) == TISC_REF == TISC_FIXTURE_REFERENCE


def test_safetensors_fixture_is_what_the_real_library_writes() -> None:
    written = safetensors.numpy.save({"weight": np.array([[-1, 0], [1, -1]], dtype=np.int8)})
    assert written == fixture("safetensors-fixture.bin") == safetensors_fixture_bytes()
    assert canonfs_hash(written) == SAFETENSORS_REF == SAFETENSORS_FIXTURE_REFERENCE


def test_canonfs_hash_is_sha3_512_truncated_to_32_bytes_hex() -> None:
    for data in (b"", b"abc", fixture("descriptor-tisc.txt")):
        assert canonfs_hash(data) == sha3_ref(data)
    assert canonfs_hash(b"") == "a69f73cca23a9ac5c8b567dc185a756e97c982164fe25859e0d1dcc1475c80a6"


@pytest.mark.parametrize("value", [bytearray(b"x"), memoryview(b"x"), "x", None])
def test_canonfs_hash_refuses_anything_but_exact_bytes(value: object) -> None:
    with pytest.raises(TypeError):
        canonfs_hash(value)  # type: ignore[arg-type]


def test_encoder_reproduces_both_reference_descriptors() -> None:
    assert encode_descriptor(tisc_fixture_bytes()) == fixture("descriptor-tisc.txt")
    assert encode_descriptor(safetensors_fixture_bytes()) == fixture("descriptor-safetensors.txt")


def test_compiled_catalog_has_exactly_two_adapters_with_singleton_operations() -> None:
    assert [(a.provider, a.representation, sorted(a.operations)) for a in CATALOG] == [
        ("t81vm", "base81-symbolic-tisc", ["run"]),
        ("native-weights", "safetensors-i8", ["inspect"]),
    ]
    for adapter in CATALOG:
        assert canonfs_hash(adapter.fixture_bytes) == adapter.fixture_reference
        assert len(adapter.operations) == 1


def test_compiled_catalog_cannot_be_extended_at_run_time() -> None:
    with pytest.raises(TypeError):
        CATALOG_BY_PROVIDER["new-provider"] = CATALOG[0]  # type: ignore[index]
    with pytest.raises(AttributeError):
        CATALOG[0].operations.add("inspect")  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        CATALOG[0].provider = "other"  # type: ignore[misc]


def test_embedded_default_configuration_is_the_shipped_example_files() -> None:
    assert fixture("policy-default.apl") == DEFAULT_POLICY
    assert fixture("allowlist-default.json") == DEFAULT_ALLOWLIST
