"""A binding's digest through orjson is the core codec's digest, byte for byte
(``session/_types.py``, ``_plain_core_json``): any text (control characters, DEL, quotes,
backslashes, non-ASCII), any ``expected`` (floats, huge integers, nested values fall back to
``json.dumps``), any parameters. A digest that differed would be a different binding."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from canon import core_digest, core_json
from session import BoundProposition, EvidenceBounds
from session._types import _plain_core_json

_hex = st.binary(min_size=32, max_size=32).map(bytes.hex)
_text = st.text(min_size=1, max_size=12)
_expected: Any = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def _bindings(draw: st.DrawFn) -> BoundProposition:
    return BoundProposition(
        subject_id=draw(_text),
        predicate=draw(_text),
        expected=draw(_expected),
        mechanism_id=draw(_text),
        mechanism_digest=draw(st.sampled_from(["", "sha256:"])) + draw(_hex),
        evidence_refs=tuple(dict.fromkeys(draw(st.lists(_hex, min_size=1, max_size=3)))),
        trust_roots=tuple(draw(st.lists(_text, min_size=1, max_size=3))),
        bounds=EvidenceBounds(draw(st.integers(0, 2**66)), draw(st.integers(0, 2**66))),
        parameters=draw(st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3)),
    )


@settings(max_examples=1500, deadline=None)
@given(binding=_bindings())
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
