"""Hypothesis strategies for the session tests: any ``BoundProposition`` a caller could build
(text with any characters, an ``expected`` of any JSON-like shape with floats and huge
integers, digests with or without their ``sha256:`` prefix, bounds past 64 bits)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from session import BoundProposition, EvidenceBounds

__all__ = ["bindings"]

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
def bindings(draw: st.DrawFn) -> BoundProposition:
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
