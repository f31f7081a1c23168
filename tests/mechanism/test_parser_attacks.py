"""Attacks on the mechanism parsers found by the linear-growth audit (docs/adr/0008).

Growth itself is measured in ``tests/linear``; these tests pin what each fix must keep: the
same decisions as before, a documented refusal instead of an escaping exception, and a scan
that still agrees with a byte-by-byte reference.
"""

from __future__ import annotations

import itertools
import json
import re
import struct
import tracemalloc
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from mechanism.canonical import (
    CanonicalError,
    CanonicalLimitError,
    admit_canonical,
    scan_structure,
)
from mechanism.descriptor._authorization import AllowlistError, parse_allowlist
from mechanism.descriptor._axion import PolicyError, parse_policy
from mechanism.descriptor._weights import inspect_weights


def _reference_scan(data: bytes, max_depth: int, max_containers: int) -> str | None:
    """The scan's rules, one byte at a time: "limit", "invalid" or None."""
    depth = containers = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            containers += 1
            if depth > max_depth or containers > max_containers:
                return "limit"
        elif byte in b"]}":
            depth -= 1
            if depth < 0:
                return "invalid"
    return None


def _scan(data: bytes, max_depth: int, max_containers: int) -> str | None:
    try:
        scan_structure(data, max_depth=max_depth, max_containers=max_containers)
    except CanonicalLimitError:
        return "limit"
    except CanonicalError:
        return "invalid"
    return None


@given(st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"a", b","]), max_size=60))
def test_scan_agrees_with_a_byte_by_byte_reference(tokens: list[bytes]) -> None:
    data = b"".join(tokens)
    assert _scan(data, 4, 6) == _reference_scan(data, 4, 6)


def test_unterminated_string_of_escaped_quotes_is_refused_invalid() -> None:
    """The issue's reproduction (48 KB of ``a\\"``): refused, not a limit, and nothing after
    the opening quote is counted as structure."""
    attack = b'"' + b'a\\"' * 16_000
    try:
        admit_canonical(attack, max_bytes=262_144)
    except CanonicalLimitError:  # pragma: no cover - the assertion below explains
        raise AssertionError("an unterminated string is not a resource limit") from None
    except CanonicalError:
        pass
    else:  # pragma: no cover
        raise AssertionError("an unterminated string was admitted")
    assert _scan(b'["' + b'\\"[' * 100, 16, 8192) is None


def test_escaped_quotes_then_a_real_closing_quote_still_close_the_string() -> None:
    assert _scan(b'["' + b'a\\"' * 50 + b'"' + b"]]", 16, 8192) == "invalid"
    assert _scan(b'["' + b'a\\"' * 50 + b'",' + b"[" * 16 + b"]", 16, 8192) == "limit"


def _peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_unterminated_string_of_escaped_quotes_costs_no_backtracking_stack() -> None:
    """256 KiB of ``a\\"`` after one quote: the string token used to keep one backtracking
    entry per escape (a 10 MB regex stack, whose cache misses showed as super-linear time
    under load); the scan now holds little more than its own output."""
    attack = b'["' + b'a\\"' * 87_000
    assert _scan(attack, 16, 8192) is None
    assert _peak_bytes(lambda: _scan(attack, 16, 8192)) < 256 * 1024


def test_unterminated_policy_string_costs_no_backtracking_stack() -> None:
    """The same attack on the policy language's lexer (64 KiB): refused with its code, and
    the failed string token keeps no stack (10 MB before)."""
    attack = b'(policy (tier 1) (require "' + b'a\\"' * 21_000

    def parse() -> object:
        try:
            return parse_policy(attack)
        except PolicyError as error:
            return error

    assert isinstance(parse(), PolicyError)
    assert _peak_bytes(parse) < 1024 * 1024


def _safetensors(header: bytes, data: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def test_shape_of_huge_integers_is_refused_not_raised() -> None:
    """Eight 2,000-digit dimensions: their product has 16,000 digits, which ``str()`` refuses;
    the report used to let that ``ValueError`` escape. Now the header is refused first."""
    shape = b",".join([b"9" * 2000] * 8)
    payload = _safetensors(b'{"t":{"dtype":"I8","shape":[' + shape + b'],"data_offsets":[0,1]}}')
    report = inspect_weights(payload + b"\x00")
    assert (report.status, report.reason_code) == ("INVALID", "WEIGHTS_HEADER_INVALID")
    assert "64 bits" in report.message


def test_header_integers_up_to_64_bits_are_still_judged_by_the_offset_rules() -> None:
    big = str(2**64 - 1).encode()
    payload = _safetensors(b'{"t":{"dtype":"I8","shape":[' + big + b'],"data_offsets":[0,1]}}')
    report = inspect_weights(payload + b"\x00")
    assert (report.status, report.reason_code) == ("INVALID", "WEIGHTS_OFFSETS_INVALID")


def test_allowlist_of_many_distinct_entries_is_parsed_and_a_repeat_still_refused() -> None:
    entries = [
        {"provider": "t81vm", "operation": "run", "payload_reference": f"{index:064x}"}
        for index in range(400)
    ]
    document = {"schema_version": "t81.descriptor-allowlist.v1", "entries": entries}
    assert len(parse_allowlist(json.dumps(document).encode())) == 400
    document["entries"] = [*entries, entries[123]]
    try:
        parse_allowlist(json.dumps(document).encode())
    except AllowlistError as error:
        assert error.code == "ALLOWLIST_DUPLICATE_ENTRY"
        assert "entry 400" in error.message
    else:  # pragma: no cover
        raise AssertionError("a repeated entry was accepted")


def _every_string(alphabet: list[bytes], longest: int = 7) -> list[bytes]:
    """Every concatenation of up to ``longest`` symbols of ``alphabet`` (exhaustive: the
    possessive quantifiers of CPython before 3.11.5 had matching bugs, gh-106052)."""
    return [
        b"".join(symbols)
        for length in range(longest + 1)
        for symbols in itertools.product(alphabet, repeat=length)
    ]


def test_possessive_string_token_matches_what_the_backtracking_one_matched() -> None:
    """The possessive quantifiers change the regex engine's memory, never a match: the
    canonical scan's string token removes exactly what the plain pattern removed."""
    from mechanism.canonical import _STRING_TOKEN_RE

    plain = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
    for data in _every_string([b'"', b"\\", b"a", b"["]):
        assert _STRING_TOKEN_RE.sub(b"", data) == plain.sub(b"", data), data


def test_possessive_policy_string_matches_what_the_backtracking_one_matched() -> None:
    from mechanism.descriptor._axion import _TOKEN_RE

    plain = re.compile(r'"(?:[^"\\]|\\["\\])*"')
    for data in _every_string([b'"', b"\\", b"a", b"("]):
        text = data.decode()
        for start in range(len(text)):
            ours = _TOKEN_RE.match(text, start)
            theirs = plain.match(text, start)
            string = ours.group("string") if ours is not None else None
            assert string == (theirs.group() if theirs is not None else None), (text, start)
