"""The compiled catalog of descriptor adapters (a constant, never configuration).

Rules:

* Exactly two adapters exist, keyed by provider: ``t81vm`` (representation
  ``base81-symbolic-tisc``, operations ``{"run"}``) and ``native-weights`` (representation
  ``safetensors-i8``, operations ``{"inspect"}``). Each admits exactly one fixture: its exact bytes
  and their CanonFS reference are compiled in here, and the reference is re-derived from the bytes
  at import (a mismatch stops the import).
* Nothing read at run time can add an adapter, add an operation, or change a fixture: the catalog
  is an immutable tuple of frozen records and a read-only mapping.
* Signed integers in reports and in ``intended`` are decimal strings, so that every report is a
  value of the network canonical codec (which admits only integers 0 … 2**53 − 1).
* ``intended`` is each fixture's intended semantics, the observation a provider must reproduce
  before the mechanism may PASS (a trusted assertion, listed in the residual obligations).
* ``CATALOG_DIGEST`` is ``H`` (network canonical codec) of :func:`catalog_record`; it names the
  compiled catalog in trust roots and reports.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

import attrs

from mechanism.canonical import canonical_digest

from ._canonfs import canonfs_hash
from ._tisc import Instruction, Opcode, render_program

__all__ = [
    "CATALOG",
    "CATALOG_BY_PROVIDER",
    "CATALOG_DIGEST",
    "CATALOG_SCHEMA",
    "FIXTURE_PROGRAM",
    "PROFILE",
    "SAFETENSORS_FIXTURE_REFERENCE",
    "SCHEMA",
    "TISC_FIXTURE_REFERENCE",
    "ProviderAdapter",
    "catalog_record",
    "safetensors_fixture_bytes",
    "tisc_fixture_bytes",
]

SCHEMA: Final = "t81.experiment-descriptor.v1"
PROFILE: Final = "object-interface-fixtures-v1"
CATALOG_SCHEMA: Final = "t81.descriptor-adapter-catalog.v1"

# LoadImm r40,6; LoadImm r41,7; Mul r42,r40,r41; Halt — the program the TISC fixture renders.
FIXTURE_PROGRAM: Final = (
    Instruction(Opcode.LOAD_IMM.value, 40, 6, 0, 0),
    Instruction(Opcode.LOAD_IMM.value, 41, 7, 0, 0),
    Instruction(Opcode.MUL.value, 42, 40, 41, 0),
    Instruction(Opcode.HALT.value, 0, 0, 0, 0),
)

_TISC_FIXTURE: Final = (
    b"@code\n"
    b"ge\xce\x93eeeeweeeeeeeeeeeeeeee\n"
    b"ge0feeezeeeeeeeeeeeeeeee\n"
    b"le1feee\xcf\x89feeeeeeee4jeeeee\n"
    b"feeeeeeeeeeeeeeeeeeeeeee\n"
)
_SAFETENSORS_FIXTURE: Final = (
    b"@\x00\x00\x00\x00\x00\x00\x00"
    b'{"weight":{"dtype":"I8","shape":[2,2],"data_offsets":[0,4]}}    '
    b"\xff\x00\x01\xff"
)
TISC_FIXTURE_REFERENCE: Final = "c5f5925cf1d666588094757aaf5750741e847cd977bf2023c134d25ba0a2bed1"
SAFETENSORS_FIXTURE_REFERENCE: Final = (
    "35690a91bff631659a4d5fd04cae57594ca2a4c3d8bf0831a5b936cffa24fd88"
)

if render_program(FIXTURE_PROGRAM) != _TISC_FIXTURE:  # pragma: no cover - import-time guard
    raise ImportError("compiled TISC fixture differs from the rendered fixture program")
if canonfs_hash(_TISC_FIXTURE) != TISC_FIXTURE_REFERENCE:  # pragma: no cover
    raise ImportError("compiled TISC fixture reference mismatch")
if canonfs_hash(_SAFETENSORS_FIXTURE) != SAFETENSORS_FIXTURE_REFERENCE:  # pragma: no cover
    raise ImportError("compiled SafeTensors fixture reference mismatch")


def tisc_fixture_bytes() -> bytes:
    """The exact 108-byte TISC fixture payload."""
    return _TISC_FIXTURE


def safetensors_fixture_bytes() -> bytes:
    """The exact 76-byte SafeTensors fixture payload."""
    return _SAFETENSORS_FIXTURE


@attrs.frozen
class ProviderAdapter:
    """One compiled adapter: provider, representation, singleton operations, fixture, semantics."""

    provider: str
    representation: str
    operations: frozenset[str]
    fixture_bytes: bytes
    fixture_reference: str
    authorization_paths: tuple[str, ...]
    intended: Any  # canonical JSON-ready value, frozen by convention (never mutated)

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "representation": self.representation,
            "operations": sorted(self.operations),
            "fixture_reference": self.fixture_reference,
            "fixture_size": len(self.fixture_bytes),
            "authorization_paths": list(self.authorization_paths),
            "intended": self.intended,
        }


CATALOG: Final = (
    ProviderAdapter(
        provider="t81vm",
        representation="base81-symbolic-tisc",
        operations=frozenset({"run"}),
        fixture_bytes=_TISC_FIXTURE,
        fixture_reference=TISC_FIXTURE_REFERENCE,
        authorization_paths=("axion_final_authorization",),
        intended={
            "halted": True,
            "trap": None,
            "trace": [[0, "LoadImm"], [1, "LoadImm"], [2, "Mul"], [3, "Halt"]],
            "registers": {"r40": "6", "r41": "7", "r42": "42"},
        },
    ),
    ProviderAdapter(
        provider="native-weights",
        representation="safetensors-i8",
        operations=frozenset({"inspect"}),
        fixture_bytes=_SAFETENSORS_FIXTURE,
        fixture_reference=SAFETENSORS_FIXTURE_REFERENCE,
        authorization_paths=("exact_local_allowlist",),
        intended={
            "tensors": [
                {
                    "name": "weight",
                    "dtype": "I8",
                    "shape": [2, 2],
                    "data_hex": "ff0001ff",
                    "values": [["-1", "0"], ["1", "-1"]],
                }
            ]
        },
    ),
)
CATALOG_BY_PROVIDER: Final = MappingProxyType({adapter.provider: adapter for adapter in CATALOG})
KNOWN_REPRESENTATIONS: Final = frozenset(adapter.representation for adapter in CATALOG)
KNOWN_OPERATIONS: Final = frozenset(op for adapter in CATALOG for op in adapter.operations)


def catalog_record() -> dict[str, Any]:
    """The compiled catalog as a canonical JSON-ready record."""
    return {
        "schema_version": CATALOG_SCHEMA,
        "descriptor_schema": SCHEMA,
        "profile": PROFILE,
        "adapters": [adapter.to_dict() for adapter in CATALOG],
    }


CATALOG_DIGEST: Final = canonical_digest(catalog_record())
