"""The scorer's fast routes are the reference routes, faster (ADR 0006).

Each fast route must return exactly what the reference route returns (type for type, member
order included: compared through ``marshal``) or decline, never differ: the strict reader's
orjson route, the plain copy of caller values, and the encoding-free canonical comparison.
"""

from __future__ import annotations

import json
import marshal
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism.holdout import StrictReadError, canonical_equal, read_json
from mechanism.holdout._reader import _NO_FAST_ROUTE, _read, _read_fast
from mechanism.holdout._scorer import _NO_COPY, Refusal, _as_read, _plain_copy, _same

NUMBERS = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([2**53 - 1, 2**53, -(2**53), 2**53 + 1, 0, -0.0, 1e16, 4.0, 1e-7]),
    st.floats(allow_nan=False, allow_infinity=False),
)
TEXT = st.text(
    st.sampled_from([*'ab:"\\[]{}\n\r\t/é\u2028', "\U0001f600", "\x01"]),
    max_size=6,
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=24,
)


def _identical(left: Any, right: Any) -> bool:
    """Equal with the same types and member order (marshal encodes both exactly)."""
    return marshal.dumps(left, 2) == marshal.dumps(right, 2)


def _reference(raw: bytes) -> Any:
    try:
        return ("value", _read(raw, fast=False))
    except StrictReadError as error:
        return ("refused", error.code, str(error))


def _texts(value: Any) -> list[bytes]:
    """The JSON texts a producer might write for a value: compact, spaced, ASCII-escaped."""
    return [
        json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(),
        json.dumps(value, ensure_ascii=True, indent=1).encode(),
        b" \n" + json.dumps(value, ensure_ascii=False).encode() + b"\t",
    ]


@settings(max_examples=150, deadline=None)
@given(JSON_VALUES)
def test_fast_read_never_differs_from_the_reference(value: Any) -> None:
    for raw in _texts(value):
        fast = _read_fast(raw)
        if fast is not _NO_FAST_ROUTE:
            expected = _reference(raw)
            assert expected[0] == "value" and _identical(fast, expected[1]), raw


def _alternating(depth: int) -> bytes:
    """Arrays and objects nested alternately: ``[{"a":[{"a":...}]}]``."""
    text = b"1"
    for level in range(depth):
        text = b"[" + text + b"]" if level % 2 == 0 else b'{"a":' + text + b"}"
    return text


ADVERSARIAL = [
    _alternating(64),
    _alternating(65),  # too deep: one pass must not peel an array and an object at once
    _alternating(128),
    b'{"a":1,"a":2}',  # duplicate member: orjson keeps the last one
    b'{"a":{"b":1,"b":1}}',
    b'{"a:":1,"a:":1}',  # colons inside duplicated names
    b'{"\\u003a":1,"\\u003a":2}',  # an escaped colon cannot balance the count
    b'{"a":"\\u003a","a":1}',
    b"[9007199254740992]",  # 2**53: the reader's double, orjson's int
    b"[-9007199254740993]",
    b"[18446744073709551615]",
    b"[1e400]",
    b"[NaN]",
    b'["\\ud800"]',
    b'"a\\"b"',
    b'["\\\\", {"a":1,"a":1}]',
    b'"]]]]"',
    b'["[[[[", 1]',
    b"[" * 64 + b"]" * 64,
    b"[" * 65 + b"]" * 65,
    b'["' + b"[" * 70 + b'"]',  # brackets inside a string are not depth
    b"{" + b'"a":{' * 64 + b"}" * 65,
    b"\x0c[1]",
    b"[1]\x0c",
    b"[1,]",
    b"-0",
    b"1.0",
    b'["\xff"]',  # invalid UTF-8: orjson must refuse what Python's decoder refuses
    b'"\xed\xa0\x80"',  # an encoded surrogate
    b'"\xc0\xaf"',  # overlong
    b'"\xf4\x90\x80\x80"',  # beyond U+10FFFF
    b'{"a":1}\xff',
]


@pytest.mark.parametrize("raw", ADVERSARIAL)
def test_adversarial_text_reads_as_the_reference_reads_it(raw: bytes) -> None:
    expected = _reference(raw)
    try:
        got: Any = ("value", read_json(raw))
    except StrictReadError as error:
        got = ("refused", error.code, str(error))
    if expected[0] == "refused":
        assert got == expected
    else:
        assert got[0] == "value" and _identical(got[1], expected[1])


class _Text(str):
    pass


class _Loud(dict[str, Any]):
    def items(self) -> Any:  # code the copy must never run
        raise AssertionError("ran caller code")


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


EXOTIC = [
    (1, 2),
    {"a": (1,)},
    [math.nan],
    [math.inf],
    {1: "a"},
    {"a": b"bytes"},
    [{1, 2}],
    [1j],
    ["\ud800"],
    [_Text("x")],
    OrderedDict(a=1),
    [2**53 + 1],
    [2**70],
    _nested(65),  # deeper than the reader admits
    _nested(64),
]


def _reference_copy(value: Any) -> Any:
    try:
        return ("value", _reference_as_read(value))
    except Refusal as refusal:
        return ("refused", refusal.code, refusal.detail)


def _reference_as_read(value: Any) -> Any:
    from mechanism.holdout._reader import check_json_value

    try:
        check_json_value(value)
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return read_json(text.encode("utf-8"))
    except StrictReadError as error:
        raise Refusal("x", str(error)) from None
    except Exception as error:
        raise Refusal("x", f"not a JSON value ({type(error).__name__})") from None


@pytest.mark.parametrize("value", EXOTIC, ids=range(len(EXOTIC)))
def test_exotic_caller_value_is_copied_as_the_reference_copies_it(value: Any) -> None:
    fast = _plain_copy(value)
    expected = _reference_copy(value)
    if fast is not _NO_COPY:
        assert expected[0] == "value" and _identical(fast, expected[1])
    got = ("value", _as_read(value, "x", "")) if expected[0] == "value" else None
    if got is None:
        with pytest.raises(Refusal) as raised:
            _as_read(value, "x", "")
        assert raised.value.detail == expected[2]
    else:
        assert _identical(got[1], expected[1])


def test_caller_code_never_runs_in_the_fast_copy() -> None:
    assert _plain_copy({"a": _Loud(b=1)}) is _NO_COPY


@settings(max_examples=150, deadline=None)
@given(JSON_VALUES)
def test_plain_copy_never_differs_from_the_reference(value: Any) -> None:
    fast = _plain_copy([value, {"wrapped": value}])
    if fast is not _NO_COPY:
        expected = _reference_copy([value, {"wrapped": value}])
        assert expected[0] == "value" and _identical(fast, expected[1])


def _as_parsed(value: Any) -> Any:
    return read_json(json.dumps(value, ensure_ascii=False).encode())


@st.composite
def _pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    left = draw(JSON_VALUES)
    choice = draw(st.integers(0, 3))
    if choice == 0:
        right = left
    elif choice == 1:  # the same value with integers written as doubles
        right = json.loads(json.dumps(left), parse_int=float)
    elif choice == 2:
        right = draw(JSON_VALUES)
    else:  # members in another order
        right = json.loads(json.dumps(left, sort_keys=True))
    return _as_parsed(left), _as_parsed(right)


@settings(max_examples=200, deadline=None)
@given(_pairs())
def test_encoding_free_comparison_agrees_with_rfc8785(pair: tuple[Any, Any]) -> None:
    left, right = pair
    assert _same(left, right) is canonical_equal(left, right)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"[]" * 1000, True),
        (b"[" * 64 + b"]" * 64, True),
        (b"[" * 65 + b"]" * 65, False),
        (_alternating(64), True),
        (_alternating(65), False),
        (b"[{" * 40 + b"}]" * 40, False),
        (b'["' + b"[" * 100 + b'"]', True),  # brackets in a string are not depth
        (b'["\\"[[[["]', False),  # a quote that may not delimit: undecided
        (b"[" * 10, False),  # unbalanced
        (b"[}", True),  # kinds aside: a mismatched pair is the parser's to refuse
        (b"]", False),
    ],
)
def test_shallow_decides_depth_from_the_brackets_outside_strings(
    raw: bytes, expected: bool
) -> None:
    from mechanism.holdout._reader import shallow

    assert shallow(raw) is expected
