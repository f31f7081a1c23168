"""The strict byte reader refuses every construct TRVM's evidence.mjs refuses, and nothing
escapes it but a value or a StrictReadError with a closed-vocabulary code."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism.holdout import (
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    READ_ERROR_CODES,
    StrictReadError,
    read_json,
)

REFUSED = [
    ("duplicate member at top level", b'{"a":1,"a":2}', "duplicate-member"),
    ("duplicate member deep inside", b'{"x":[{"y":{"b":1,"b":1}}]}', "duplicate-member"),
    ("escaped lone high surrogate", b'["\\ud800"]', "lone-surrogate"),
    ("escaped lone low surrogate in a key", b'{"\\udc00":1}', "lone-surrogate"),
    ("upper-case escaped lone surrogate", b'["\\uD83D"]', "lone-surrogate"),
    ("reversed surrogate pair", b'"\\ude02\\ud83d"', "lone-surrogate"),
    ("invalid utf-8 byte", b'{"a":"\xff"}', "invalid-utf8"),
    ("utf-8 encoded surrogate", b'"\xed\xa0\x80"', "invalid-utf8"),
    ("overlong utf-8", b'"\xc0\xaf"', "invalid-utf8"),
    ("byte order mark", b'\xef\xbb\xbf{"a":1}', "bom"),
    ("trailing garbage", b'{"a":1} x', "trailing-bytes"),
    ("second document", b"{}{}", "trailing-bytes"),
    ("NaN", b"[NaN]", "non-finite-number"),
    ("Infinity", b'{"a":Infinity}', "non-finite-number"),
    ("negative Infinity", b"-Infinity", "non-finite-number"),
    ("overflowing exponent", b"[1e400]", "non-finite-number"),
    ("overflowing integer literal", b"1" + b"0" * 400, "non-finite-number"),
    ("depth 65", b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "too-deep"),
    (
        "depth hidden by nothing",
        b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1),
        "too-deep",
    ),
    ("very deep, no recursion error", b"[" * 100_000, "too-deep"),
    ("empty input", b"", "malformed"),
    ("single quotes", b"{'a':1}", "malformed"),
    ("raw control character in string", b'"a\x01b"', "malformed"),
    ("leading zero (0 then a stray 1)", b"01", "trailing-bytes"),
]


@pytest.mark.parametrize(("label", "data", "code"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refuses(label: str, data: bytes, code: str) -> None:
    with pytest.raises(StrictReadError) as raised:
        read_json(data)
    assert raised.value.code == code


def test_refuses_more_than_eight_mebibytes_before_decoding() -> None:
    data = b'"' + b"a" * (MAX_DOCUMENT_BYTES - 1) + b'"'
    with pytest.raises(StrictReadError) as raised:
        read_json(data)
    assert raised.value.code == "too-large"
    assert len(read_json(data[:-2] + b'"')) == MAX_DOCUMENT_BYTES - 2


def test_refuses_a_str_instead_of_bytes() -> None:
    with pytest.raises(StrictReadError) as raised:
        read_json('{"a":1}')  # type: ignore[arg-type]
    assert raised.value.code == "not-bytes"


ACCEPTED: list[tuple[bytes, Any]] = [
    (b"  {}\n", {}),
    (b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)),
    (b'"\\ud83d\\ude02"', "\U0001f602"),
    (b'"[[[[not structure"', "[[[[not structure"),
    (b'{"a":{"a":1}}', {"a": {"a": 1}}),
    (b"9007199254740991", 9007199254740991),
    (b"100000000000000000000", 1e20),
    (b"4.0", 4.0),
]


@pytest.mark.parametrize(("data", "value"), ACCEPTED)
def test_accepts(data: bytes, value: Any) -> None:
    parsed = read_json(data)
    assert parsed == value
    assert type(parsed) is type(value)


def test_large_integers_become_doubles_as_in_javascript() -> None:
    assert read_json(b"9007199254740993") == float(9007199254740992)
    assert isinstance(read_json(b"9007199254740993"), float)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_anything_else(data: bytes) -> None:
    try:
        read_json(data)
    except StrictReadError as error:
        assert error.code in READ_ERROR_CODES


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_round_trips_every_plain_json_value(value: Any) -> None:
    assert read_json(json.dumps(value).encode()) == value
    assert read_json(json.dumps(value, ensure_ascii=False).encode()) == value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@settings(max_examples=200, deadline=None)
@given(_json)
def test_the_byte_level_depth_scan_agrees_with_the_parsed_depth(value: Any) -> None:
    from mechanism.holdout._reader import nesting_depth

    assert nesting_depth(json.dumps(value).encode()) == _depth(value)


# The largest admissible input built to make a string-skipping scan restart at every escaped
# quote of an unterminated string (quadratic: 80 KB took 48 s before the fix). It must be
# refused like any malformed document; run in a child so a regression fails instead of hanging.
_UNTERMINATED_ESCAPED_QUOTES = (
    "import sys\n"
    "from mechanism.holdout import MAX_DOCUMENT_BYTES, StrictReadError, read_json\n"
    "data = b'[\"' + b'\\\\\"' * ((MAX_DOCUMENT_BYTES - 2) // 2)\n"
    "try:\n"
    "    read_json(data)\n"
    "except StrictReadError as error:\n"
    "    sys.stdout.write(error.code)\n"
)


def test_an_unterminated_string_of_escaped_quotes_is_refused_in_linear_time() -> None:
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-c", _UNTERMINATED_ESCAPED_QUOTES],
        capture_output=True,
        text=True,
        timeout=300,  # a liveness guard, not a measurement: the linear scan needs ~1 s
        check=False,
    )
    assert completed.stdout == "malformed"
    assert completed.returncode == 0


def test_an_unterminated_string_of_escaped_quotes_costs_no_backtracking_stack() -> None:
    """The depth scan's string token keeps no backtracking entry per escape (it kept one:
    10 MB of regex stack for 256 KiB of ``a\\"``, whose cache misses grew faster than the
    input on a loaded machine). Refused as before; the reader's peak stays near its input."""
    import tracemalloc

    attack = b'["' + b'a\\"' * 87_000
    tracemalloc.start()
    try:
        with pytest.raises(StrictReadError) as refused:
            read_json(attack)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.code == "malformed"
    assert peak < 4 * len(attack)


def test_the_possessive_string_token_removes_what_the_backtracking_one_removed() -> None:
    """Exhaustively over every string of up to 7 of the bytes that matter (CPython's
    possessive quantifiers had matching bugs before 3.11.5, gh-106052)."""
    import itertools
    import re

    from mechanism.holdout._reader import _STRING

    plain = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
    for length in range(8):
        for symbols in itertools.product([b'"', b"\\", b"a", b"["], repeat=length):
            data = b"".join(symbols)
            assert _STRING.sub(b"", data) == plain.sub(b"", data), data
