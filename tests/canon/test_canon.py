"""The canonical-JSON family, digests and the strict reader (``canon``).

Each variant is checked against the standard-library encoding it is specified as, on arbitrary
JSON values; refusals are checked on the exact inputs each one must refuse.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session.canon import (
    DuplicateKeyError,
    StrictJSONError,
    core_digest,
    core_json,
    digest_bytes,
    is_digest,
    loads_strict_json,
    network_json,
)

_FLOAT_FREE = (
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text()
)


def _json(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )


FLOAT_FREE_VALUES = _json(_FLOAT_FREE)
JSON_VALUES = _json(_FLOAT_FREE | st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=150, deadline=None)
@given(FLOAT_FREE_VALUES)
def test_network_variant_is_the_sorted_compact_utf8_encoding(value: Any) -> None:
    try:
        expected = json.dumps(
            value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
        ).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: neither encoder may produce bytes
        with pytest.raises((TypeError, ValueError)):
            network_json(value)
        return
    assert network_json(value) == expected


@settings(max_examples=150, deadline=None)
@given(JSON_VALUES)
def test_core_variant_is_the_ascii_escaped_encoding_and_its_bare_digest(value: Any) -> None:
    expected = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")
    assert core_json(value) == expected
    assert core_digest(value) == hashlib.sha256(expected).hexdigest()


@settings(max_examples=100, deadline=None)
@given(JSON_VALUES)
def test_network_variant_round_trips_finite_floats(value: Any) -> None:
    try:
        encoded = network_json(value)
    except (TypeError, ValueError):  # a lone surrogate
        return
    assert json.loads(encoded) == value


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused_by_both_variants(bad: float) -> None:
    for encode in (network_json, core_json):
        with pytest.raises(ValueError):
            encode({"x": [None, bad]})


class _Text(str):
    pass


class _Float(float):
    pass


_ANY_FLOAT = st.floats() | st.builds(_Float, st.floats())
_TUPLES_TOO = st.recursive(
    _FLOAT_FREE | _ANY_FLOAT | st.builds(_Text, st.text()),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text() | st.builds(_Text, st.text()), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TUPLES_TOO, min_size=1, max_size=3).map(lambda items: [None, *items]))
def test_network_json_refuses_a_non_finite_number_exactly_when_json_dumps_does(
    value: list[Any],
) -> None:
    """The answer-frame check (``null`` in the output, then the walk or the re-check) refuses
    NaN and the infinities wherever they sit (float subclasses too) and nothing else."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:  # NaN or an infinity somewhere (orjson refuses a float subclass itself)
        with pytest.raises((ValueError, TypeError)):
            network_json(value)
        return
    with contextlib.suppress(TypeError):  # orjson's own refusal of a subclass, not the walk's
        network_json(value)


def test_digest_form() -> None:
    assert digest_bytes(b"") == "sha256:" + hashlib.sha256(b"").hexdigest()
    assert is_digest(digest_bytes(b"x"))
    for forged in (digest_bytes(b"x")[7:], digest_bytes(b"x").upper(), "sha256:" + "0" * 63):
        assert not is_digest(forged)
    with pytest.raises(TypeError):
        digest_bytes("text")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "document",
    [b'{"a":1,"a":1}', b'{"x":{"k":[{"b":0,"b":0}]}}', b'[{"dup":1,"ok":2,"dup":3}]'],
)
def test_a_duplicate_key_at_any_depth_is_refused_and_named(document: bytes) -> None:
    with pytest.raises(DuplicateKeyError) as refused:
        loads_strict_json(document)
    assert refused.value.key in {"a", "b", "dup"}
    assert str(refused.value) == f"duplicate key {refused.value.key!r}"


def test_the_strict_reader_refuses_what_its_options_say() -> None:
    for document in (b"NaN", b"[Infinity]", b'{"x":-Infinity}'):
        with pytest.raises(StrictJSONError, match="non-finite"):
            loads_strict_json(document)
        assert loads_strict_json(document, refuse_constants=False) is not None
    with pytest.raises(StrictJSONError, match=r"floating-point number 1\.5"):
        loads_strict_json(b'{"x":1.5}', refuse_floats=True)
    assert loads_strict_json(b'{"x":1.5}') == {"x": 1.5}
    with pytest.raises(StrictJSONError, match="not strict UTF-8"):
        loads_strict_json(b'{"x":"\xff"}')
    with pytest.raises(StrictJSONError):
        loads_strict_json(b'{"x":')
    with pytest.raises(StrictJSONError, match="nesting too deep"):
        loads_strict_json(b"[" * 100_000 + b"]" * 100_000)
    assert loads_strict_json('{"ü":[1,2]}') == {"ü": [1, 2]}
