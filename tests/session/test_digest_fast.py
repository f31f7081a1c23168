"""A binding's digest through orjson is the core codec's digest, byte for byte
(``session/_types.py``, ``_plain_core_json``): any text (control characters, DEL, quotes,
backslashes, non-ASCII), any ``expected`` (floats, huge integers, nested values fall back to
``json.dumps``), any parameters. A digest that differed would be a different binding."""

from __future__ import annotations

from typing import Any

from binding_strategies import bindings
from hypothesis import given, settings

from session import BoundProposition, EvidenceBounds
from session._types import _plain_core_json
from session.canon import core_digest, core_json


@settings(max_examples=1500, deadline=None)
@given(binding=bindings())
def test_the_fast_digest_is_the_core_codecs_digest(binding: BoundProposition) -> None:
    wire = binding.to_dict()
    fast = _plain_core_json(wire)
    assert fast is None or fast == core_json(wire)
    assert binding.digest() == core_digest(wire)


def test_an_ordinary_binding_takes_the_fast_path() -> None:
    binding = BoundProposition(
        subject_id='s\x01"\\',
        predicate="p",
        expected=True,
        mechanism_id="m",
        mechanism_digest="ab" * 32,
        evidence_refs=("cd" * 32,),
        trust_roots=("r",),
        bounds=EvidenceBounds(1, 64),
        parameters={"k": "v\n"},
    )
    assert _plain_core_json(binding.to_dict()) == core_json(binding.to_dict())


def test_what_orjson_writes_otherwise_falls_back() -> None:
    for expected in ("del\x7f", "café", 1.5, 2**64, [1]):
        wire = {**_ordinary_wire(), "expected": expected}
        assert _plain_core_json(wire) is None


def _ordinary_wire() -> dict[str, Any]:
    return {
        "subject_id": "s",
        "predicate": "p",
        "expected": None,
        "mechanism_id": "m",
        "mechanism_digest": "sha256:" + "ab" * 32,
        "evidence_refs": ["sha256:" + "cd" * 32],
        "trust_roots": ["r"],
        "bounds": {"max_evidence_items": 1, "max_evidence_bytes": 1},
        "parameters": {},
    }
