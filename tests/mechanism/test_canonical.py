"""The VSTD network canonical codec and strict admission (docs/spec/formation.md §2.1–§2.2)."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from typing import Any

import pytest
import testdata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mechanism.canonical import (
    MAX_CANONICAL_INT,
    CanonicalError,
    CanonicalLimitError,
    CanonicalUnsupportedError,
    admit_canonical,
    admit_record,
    canonical_bytes,
    canonical_digest,
    digest_bytes,
    is_digest,
    parse_unscanned,
    scan_structure,
    validate_value,
)

PROFILE_DIGEST = "sha256:271760d604e1ade55cba4974c658b92263bd3ee8ae343677dd91d0e713fb677f"


def admit(data: object, max_bytes: int = 262144) -> Any:
    return admit_canonical(data, max_bytes=max_bytes)


# ---- encoding ----------------------------------------------------------------------------


def test_encoding_matches_the_reference_profile_bytes() -> None:
    profile = testdata.repo("mechanism/formation/data/typed-formation-0.1.json").read_bytes()
    assert canonical_bytes(json.loads(profile)) == profile
    assert digest_bytes(profile) == PROFILE_DIGEST


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ({"b": 1, "a": [True, False, None]}, b'{"a":[true,false,null],"b":1}'),
        ('é/"\\', '"é/\\"\\\\"'.encode()),
        ("\n\r\t\b\f", b'"\\n\\r\\t\\b\\f"'),
        ("\x01\x1f", b'"\\u0001\\u001f"'),
        ("\x7f\u2028\u2029", '"\x7f\u2028\u2029"'.encode()),
        (MAX_CANONICAL_INT, b"9007199254740991"),
        ((1, 2), b"[1,2]"),
    ],
)
def test_exact_encoding_rules(value: object, encoded: bytes) -> None:
    assert canonical_bytes(value) == encoded


@pytest.mark.parametrize(
    "value",
    [
        1.0,
        -1,
        MAX_CANONICAL_INT + 1,
        float("nan"),
        float("inf"),
        "\ud800",
        "e\u0301",  # not NFC
        {"A": 1},
        {"1a": 1},
        {"a-b": 1},
        {1: 1},
        b"bytes",
        {1, 2},
        {"k": [1, 2.5]},
    ],
)
def test_values_outside_the_model_are_refused(value: object) -> None:
    with pytest.raises(CanonicalError):
        canonical_bytes(value)


def test_booleans_are_not_integers_and_integers_are_not_booleans() -> None:
    assert canonical_bytes([True, 1]) == b"[true,1]"


def test_deep_values_raise_a_typed_error_not_recursion_error() -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(CanonicalError):
        canonical_bytes(value)


def test_shared_subvalues_are_fine_but_cycles_are_refused() -> None:
    shared = [1]
    assert canonical_bytes({"a": shared, "b": shared}) == b'{"a":[1],"b":[1]}'
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(CanonicalError, match="self-referencing"):
        validate_value(cyclic)


def test_digest_format() -> None:
    assert digest_bytes(b"") == "sha256:" + hashlib.sha256(b"").hexdigest()
    assert canonical_digest({"a": 1}) == digest_bytes(b'{"a":1}')
    with pytest.raises(TypeError):
        digest_bytes(bytearray(b""))  # type: ignore[arg-type]


@pytest.mark.parametrize("data", [bytearray(b""), memoryview(b""), "", None, 0])
def test_digest_bytes_refusal_is_a_typed_codec_refusal(data: object) -> None:
    # §2.1 "digest_bytes only accepts bytes"; every codec refusal is a ValueError
    # (NetworkError in the reference) — this one is also a TypeError.
    with pytest.raises(CanonicalError) as caught:
        digest_bytes(data)  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)
    assert caught.value.kind == "invalid"


def test_digest_strings_are_strict() -> None:
    assert is_digest(PROFILE_DIGEST)
    for bad in [PROFILE_DIGEST + "\n", PROFILE_DIGEST.upper(), PROFILE_DIGEST[7:], None, 1]:
        assert not is_digest(bad)


# ---- admission ---------------------------------------------------------------------------


@pytest.mark.parametrize("data", [bytearray(b"{}"), memoryview(b"{}"), "{}", None])
def test_non_bytes_inputs_are_invalid(data: object) -> None:
    class Sub(bytes):
        pass

    for candidate in (data, Sub(b"{}")):
        with pytest.raises(CanonicalError) as caught:
            admit(candidate)
        assert caught.value.kind == "invalid"


def test_size_bound_is_a_limit() -> None:
    with pytest.raises(CanonicalLimitError):
        admit(b'"' + b"a" * 10 + b'"', max_bytes=11)
    assert admit(b'"' + b"a" * 9 + b'"', max_bytes=11) == "a" * 9


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":1,"a":1}',  # duplicate key
        b'{"a":1,"a":2}',
        b'{"b":1,"a":2}',  # unsorted
        b'{"a": 1}',  # whitespace
        b"{}\n",  # trailing newline
        b"\xef\xbb\xbf{}",  # BOM
        b'{"a":1.0}',
        b'{"a":1e2}',
        b"[-0]",
        b"[-1]",
        b"[9007199254740992]",
        b"[NaN]",
        b"[Infinity]",
        b'["\\u00e9"]',  # escaped non-ASCII
        b'["\\/"]',  # needless escape
        b'["\\u000A"]',  # uppercase hex escape
        b'["\\ud800"]',  # lone surrogate
        '["e\u0301"]'.encode(),  # not NFC
        b'["\xff"]',  # invalid UTF-8
        b'{"A":1}',
        b"",
        b"null x",
        b"[1,]",
        b"]",
        b"[]]",
    ],
)
def test_near_miss_encodings_are_invalid(data: bytes) -> None:
    with pytest.raises(CanonicalError) as caught:
        admit(data)
    assert caught.value.kind == "invalid"


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":"x:12345678901234567890"}',
        b'{"a":9007199254740991}',
        b'{"a":"-.+e+5"}',
        b'{"a":"\\u0001-1.5"}',
        '{"a":"é","b":["Å"]}'.encode(),
    ],
)
def test_lookalikes_inside_strings_do_not_trip_the_fast_checks(data: bytes) -> None:
    assert canonical_bytes(admit(data)) == data


@pytest.mark.parametrize(
    "data",
    [
        b"9007199254740992",  # a bare top-level integer has no separator before its digits
        b"18446744073709551615",
        b"12345678901234567",
    ],
)
def test_top_level_integer_above_the_safe_range_is_invalid(data: bytes) -> None:
    # docs/spec/formation.md §2.1: integers are 0 … 2**53 − 1 wherever they occur, root included.
    with pytest.raises(CanonicalError) as caught:
        admit(data)
    assert caught.value.kind == "invalid"
    assert admit(b"9007199254740991") == MAX_CANONICAL_INT


@pytest.mark.parametrize(
    "value",
    [":", ":u2028", "::", [[], ":x"], {"a": ":"}, {"a": [":b", "c:"], "b": {"c": ":"}}],
)
def test_strings_beginning_with_a_colon_are_admitted(value: object) -> None:
    # docs/spec/formation.md §2.1: any NFC string is a canonical value; `":` opening a string value
    # is not a key and must not be mistaken for one.
    encoded = canonical_bytes(value)
    assert admit(encoded) == value


@pytest.mark.parametrize("data", [b'{":a":1}', b'{"a:":1}', b'{"a":":","B":1}', b'[{"":":"}]'])
def test_invalid_keys_beside_colon_strings_are_invalid(data: bytes) -> None:
    with pytest.raises(CanonicalError) as caught:
        admit(data)
    assert caught.value.kind == "invalid"


def _reference_admission(data: bytes) -> bool:
    """Spec §2.2 step 4 written naively: parse (duplicates refused), validate, re-encode."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, member in items:
            if key in seen:
                raise ValueError("duplicate key")
            seen[key] = member
        return seen

    try:
        value = json.loads(data.decode("utf-8"), object_pairs_hook=pairs)
        validate_value(value)
    except (ValueError, RecursionError):
        return False
    encoded = json.dumps(
        value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
    ).encode()
    return encoded == data


_TOKENS = [
    b"0", b"9007199254740991", b"9007199254740992", b"-1", b"1.0", b"1e5", b"true", b"null",
    b'"a"', b'":"', b'":a"', b'"a:"', b'"\\\\"', b'"\\u00e9"', '"é"'.encode(),
    '"e\u0301"'.encode(), b'"\\n"', b'"\\u000a"', b"[]", b"{}", b"[", b"]", b"{", b"}",
    b",", b":", b'"b"', b'"A"', b'""', b" ",
]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=12))
def test_admission_agrees_with_the_naive_reference_pipeline(tokens: list[bytes]) -> None:
    data = b"".join(tokens)
    try:
        admit(data)
    except CanonicalError:
        admitted = False
    else:
        admitted = True
    assert admitted == _reference_admission(data)


def test_depth_sixteen_is_admitted_and_seventeen_is_a_limit() -> None:
    assert admit(b"[" * 16 + b"]" * 16) is not None
    with pytest.raises(CanonicalLimitError):
        admit(b"[" * 17 + b"]" * 17)


def test_container_count_bound() -> None:
    ok = b"[" + b",".join([b"[]"] * 8191) + b"]"
    assert len(admit(ok)) == 8191
    with pytest.raises(CanonicalLimitError):
        admit(b"[" + b",".join([b"[]"] * 8192) + b"]")


def test_the_scan_ignores_brackets_inside_strings_and_escapes() -> None:
    data = b'["' + b"[" * 40 + b'\\"' + b"{" * 40 + b'"]'
    assert admit(data) == ["[" * 40 + '"' + "{" * 40]
    scan_structure(b'"\\\\"' + b"[" * 3, max_depth=3, max_containers=3)


def test_the_limit_wins_over_later_invalid_bytes_in_byte_order() -> None:
    with pytest.raises(CanonicalLimitError):
        admit(b"[" * 17 + b"\xff")
    with pytest.raises(CanonicalError) as caught:
        admit(b"]" + b"[" * 17)
    assert caught.value.kind == "invalid"


def test_an_unterminated_string_hides_later_brackets_from_the_scan() -> None:
    scan_structure(b'["' + b"[" * 40, max_depth=16, max_containers=8192)
    with pytest.raises(CanonicalError):
        admit(b'["' + b"[" * 40)


def test_admit_record_schema_rules() -> None:
    assert admit_record(b'{"schema_version":"S"}', "S", max_bytes=100) == {"schema_version": "S"}
    with pytest.raises(CanonicalUnsupportedError) as caught:
        admit_record(b'{"schema_version":"T"}', "S", max_bytes=100)
    assert caught.value.kind == "unsupported"
    for data in [b"null", b"[]", b'{"schema_version":1}', b'{"a":"S"}']:
        with pytest.raises(CanonicalError) as invalid:
            admit_record(data, "S", max_bytes=100)
        assert invalid.value.kind == "invalid"


# ---- properties --------------------------------------------------------------------------

keys = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
texts = st.text(max_size=12).filter(
    lambda s: unicodedata.is_normalized("NFC", s) and not any("\ud800" <= c <= "\udfff" for c in s)
)
scalars = st.none() | st.booleans() | st.integers(0, MAX_CANONICAL_INT) | texts
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(values)
def test_every_accepted_value_round_trips_exactly(value: object) -> None:
    encoded = canonical_bytes(value)
    assert admit(encoded) == value
    assert canonical_bytes(admit(encoded)) == encoded


def _near_misses(encoded: bytes, value: object) -> list[bytes]:
    misses = [b" " + encoded, encoded + b"\n"]
    if isinstance(value, dict | list) and value:
        spaced = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))
        misses.append(spaced.encode())
    if isinstance(value, dict) and len(value) >= 2:
        reordered = json.dumps(
            dict(reversed(list(value.items()))), ensure_ascii=False, separators=(",", ":")
        ).encode()
        misses.append(reordered)
    if isinstance(value, dict) and value:
        key, member = next(iter(sorted(value.items())))
        duplicate = json.dumps({key: member}, ensure_ascii=False, separators=(",", ":")).encode()
        misses.append(duplicate[:-1] + b"," + encoded[1:])
    misses.append(
        json.dumps(value, ensure_ascii=True, sort_keys=True, separators=(",", ":")).encode()
    )
    return [miss for miss in misses if miss != encoded]


@SETTINGS
@given(values)
def test_every_near_miss_encoding_is_refused(value: object) -> None:
    encoded = canonical_bytes(value)
    for miss in _near_misses(encoded, value):
        with pytest.raises(CanonicalError):
            admit(miss)


@SETTINGS
@given(st.binary(max_size=64))
def test_arbitrary_bytes_are_admitted_only_when_exactly_canonical(data: bytes) -> None:
    try:
        value = admit(data)
    except CanonicalError:
        return
    assert canonical_bytes(value) == data


@SETTINGS
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(0, MAX_CANONICAL_INT) | st.text(max_size=12),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=20,
    )
)
def test_fast_encoder_is_byte_identical_to_the_reference_encoding(value: object) -> None:
    reference = json.dumps(
        value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
    ).encode("utf-8", "surrogatepass")
    try:
        encoded = canonical_bytes(value)
    except CanonicalError:
        # refused values are exactly the non-NFC or surrogate-bearing strings
        validate_value_refused = True
    else:
        validate_value_refused = False
        assert encoded == reference
    assert validate_value_refused == (not _is_model(value))


def _is_model(value: object) -> bool:
    if isinstance(value, str):
        return unicodedata.is_normalized("NFC", value) and not any(
            "\ud800" <= c <= "\udfff" for c in value
        )
    if isinstance(value, list):
        return all(_is_model(v) for v in value)
    if isinstance(value, dict):
        return all(_is_model(v) for v in value.values())
    return True


@SETTINGS
@given(values)
def test_fast_and_escaped_admission_paths_agree(value: object) -> None:
    encoded = canonical_bytes(value)
    # A string holding a backslash forces the escaped (reference parser) path.
    escaped = canonical_bytes([value, "\\"])
    assert admit(escaped) == [value, "\\"]
    assert admit(encoded) == value


# ---- the unscanned fast parse (only an answer together with a grammar) --------------------


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 2000 + b"]" * 2000,  # deeper than orjson parses: refused, no crash
        b"[" * 300 + b"]" * 300,  # parsed, deeper than orjson encodes: refused, no crash
        b'{"a":"\\u0041"}',  # any backslash: the ordered admission decides
        b'{"b":1,"a":2}',  # not canonical
        b"\xff",
        bytearray(b"{}"),
        b"[1]" + b" " * 300,  # over the byte bound below
    ],
)
def test_unscanned_parse_leaves_every_doubtful_input_to_admission(data: object) -> None:
    assert parse_unscanned(data, max_bytes=256) is None


def test_unscanned_parse_returns_values_outside_the_model_for_the_grammar_to_refuse() -> None:
    assert parse_unscanned(b'{"a":1.5}', max_bytes=256) == {"a": 1.5}


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | st.sampled_from([b'{"a":[1,{"b":null}]}', b'"x"', b"[]"]))
def test_unscanned_parse_agrees_with_admission_where_it_answers(data: bytes) -> None:
    parsed = parse_unscanned(data, max_bytes=262144)
    if parsed is not None:
        assert not _in_model(parsed) or canonical_bytes(parsed) == data


def _in_model(value: object) -> bool:
    try:
        validate_value(value)
    except CanonicalError:
        return False
    return True
