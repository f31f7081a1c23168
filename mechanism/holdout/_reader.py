"""The strict byte reader for challenge, observation, index and schema documents.

Every artifact the scorer looks at passes through :func:`read_json` first. It is a port of
TRVM's ``evidence.mjs`` reader and refuses, with a :class:`StrictReadError` whose ``code`` is
one of :data:`READ_ERROR_CODES`, checked in this order:

1. ``not-bytes``         the input is not exactly ``bytes`` (or ``bytearray``/``memoryview``).
2. ``too-large``         more than :data:`MAX_DOCUMENT_BYTES` (8 MiB) bytes.
3. ``bom``               a UTF-8 byte-order mark at the start.
4. ``invalid-utf8``      the bytes are not strict UTF-8 (surrogate code points included).
5. ``too-deep``          array/object nesting deeper than :data:`MAX_DEPTH` (64); counted by a
                         string-aware scan *before* decoding, so no recursion limit is reached.
6. ``malformed``         not one JSON text (Python's decoder in strict mode: control characters
                         in strings are refused).
7. ``trailing-bytes``    anything but JSON whitespace after the document.
8. ``duplicate-member``  an object with the same member name twice, at any depth.
9. ``non-finite-number`` ``NaN``, ``Infinity``, ``-Infinity`` or a number literal whose value
                         overflows a double (``1e400``).
10. ``lone-surrogate``   an escaped surrogate (``\\ud800``) that is not half of a valid pair.

Numbers are read as JavaScript reads them: an integer literal whose magnitude is below 2**53
stays an ``int``; any larger integer literal becomes the nearest ``float`` (so ``rfc8785``
can format it the ES way). Fractions and exponents are ``float``.

Fast route (ADR 0006): once steps 1-3 pass, a document in which every ``"`` delimits a string
(no ``\\"`` and no ``\\\\``) and no escape spells a colon (``\\u003a``) is decoded with
``orjson``, and the result is returned only when it provably equals the reference route's:
orjson accepted it (strict UTF-8, one well-formed JSON text, finite numbers, no lone
surrogate), the bracket depth outside strings is at most :data:`MAX_DEPTH`, re-encoding it
with a 53-bit integer limit succeeds (no integer needs the float conversion), and the
re-encoding has as many ``:`` as the input (a duplicate member would have lost one). Anything
else, refusals included, takes the reference route above, so every refusal code and message
is the reference's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any, Final

import orjson

from session.canon._errors import CallerError

MAX_DOCUMENT_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64

READ_ERROR_CODES = (
    "not-bytes",
    "too-large",
    "bom",
    "invalid-utf8",
    "too-deep",
    "malformed",
    "trailing-bytes",
    "duplicate-member",
    "non-finite-number",
    "lone-surrogate",
)

_SAFE_INTEGER_BOUND = 2**53
_JSON_WHITESPACE = " \t\n\r"
# A string token, unrolled (linear). The closing quote is optional: an unterminated string
# runs to the end of the input (the decoder refuses the document as malformed), so the scan
# never restarts inside it at every escaped quote, which would be quadratic. Possessive
# quantifiers: a plain ``*`` keeps one backtracking entry per escape (10 MB of regex stack
# for 256 KiB of escapes, whose cache misses grow faster than the input on a loaded machine).
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\x02\x02")
_STEP = (0, 1, -1)
_QUOTES_AND_BRACKETS = bytes(b for b in range(256) if b not in b'"[]{}')
_QUOTES_BRACKETS_AND_COLONS = bytes(b for b in range(256) if b not in b'"[]{}:')
_COLON_ESCAPE = re.compile(rb"\\u003[aA]")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")
_NO_FAST_ROUTE: Final = object()
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class StrictReadError(CallerError, ValueError):
    """The bytes are not a document the strict reader accepts. ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.detail = message


class _DuplicateMember(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


class _NonFinite(Exception):
    def __init__(self, literal: str) -> None:
        self.literal = literal


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _DuplicateMember(name)
            seen.add(name)
    return result


def _parse_constant(literal: str) -> Any:
    raise _NonFinite(literal)


def _parse_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _NonFinite(literal)
    return value


def _parse_int(literal: str) -> int | float:
    digits = len(literal) - (1 if literal.startswith("-") else 0)
    if digits <= 16:
        value = int(literal)
        if -_SAFE_INTEGER_BOUND < value < _SAFE_INTEGER_BOUND:
            return value
    # Beyond 2**53 JavaScript holds the nearest double; so do we (and float() has no
    # digit-count limit, unlike int()).
    return _parse_float(literal)


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs_hook,
    parse_constant=_parse_constant,
    parse_float=_parse_float,
    parse_int=_parse_int,
    strict=True,
)


def nesting_depth(data: bytes) -> int:
    """The deepest array/object nesting in ``data``, skipping string contents (no decoding)."""
    # Keep only brackets, as 1 (open) / 2 (close); the running sum of +1/-1 steps is the
    # depth after each bracket. C-level iteration: ~1 s for 8 MiB of brackets, not ~3 s.
    steps = _STRING.sub(b"", data).translate(_BRACKET_STEPS, _NOT_BRACKETS)
    return max(0, max(accumulate(map(_STEP.__getitem__, steps)), default=0))


def shallow(raw: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the brackets outside strings of ``raw`` nest at most ``limit`` deep, decided
    without scanning the strings; ``False`` also when that cannot be decided so (a ``"`` that
    may not delimit a string: ``\\"`` or ``\\\\``) or the brackets do not balance (kinds
    aside: a mismatched pair is the parser's to refuse)."""
    if b"\\" in raw and (b'\\"' in raw or b"\\\\" in raw):
        return False
    return _shallow_kept(raw.translate(None, _QUOTES_AND_BRACKETS), limit)


def _shallow_kept(kept: bytes, limit: int) -> bool:
    """:func:`shallow` given the quotes and brackets of its input, in order (and nothing else)."""
    # The quotes alternate open/close. Keep quotes and brackets only; dropping adjacent quote
    # pairs keeps that alternation and removes no bracket, and what is then between an
    # opening and a closing quote is inside a string.
    brackets = kept.replace(b'""', b"")
    if b'"' in brackets:
        brackets = b"".join(brackets.split(b'"')[::2])
    # One kind of bracket (a mismatched pair is the parser's to refuse), so that each pass
    # removes exactly the innermost level of a balanced sequence: with two kinds, removing
    # "[]" could expose a "{}" that the same pass would remove too. At most ``limit`` passes
    # over the brackets: linear.
    brackets = brackets.translate(_ONE_KIND)
    for remaining in range(limit, 0, -1):
        if not brackets:
            return True
        shorter = brackets.replace(b"[]", b"")
        # A nesting forest of n pairs at most ``remaining`` deep has at least n/remaining
        # innermost pairs: fewer removed means too deep (or unbalanced) without more passes.
        if (len(brackets) - len(shorter)) * remaining < len(brackets):
            return False
        brackets = shorter
    return not brackets


def _read_fast(raw: bytes) -> Any:
    """The fast route (module docstring), or ``_NO_FAST_ROUTE`` when it cannot prove equality."""
    if b"\\" in raw and (b'\\"' in raw or b"\\\\" in raw or _COLON_ESCAPE.search(raw) is not None):
        return _NO_FAST_ROUTE  # shallow() would refuse, or an escape spells a colon
    # One pass keeps what shallow() needs and the colons, so the colons are counted there.
    kept = raw.translate(None, _QUOTES_BRACKETS_AND_COLONS)
    colons = kept.count(b":")
    if not _shallow_kept(kept.translate(None, b":"), MAX_DEPTH):
        return _NO_FAST_ROUTE
    try:
        value = orjson.loads(raw)
        encoded = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return _NO_FAST_ROUTE
    if colons != encoded.count(b":"):  # a duplicate member lost its colon
        return _NO_FAST_ROUTE
    return value


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            yield from item.keys()
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def read_json(data: bytes | bytearray | memoryview) -> Any:
    """Decode one strict JSON document; raise :class:`StrictReadError` on any refusal."""
    return _read(data, fast=True)


def _read(data: bytes | bytearray | memoryview, *, fast: bool) -> Any:
    """:func:`read_json`; ``fast=False`` takes the reference route only (for tests)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise StrictReadError("not-bytes", f"expected bytes, got {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise StrictReadError("too-large", f"{len(raw)} bytes exceeds {MAX_DOCUMENT_BYTES}")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise StrictReadError("bom", "a byte-order mark precedes the document")
    if fast:
        value = _read_fast(raw)  # accepts only strict UTF-8 (orjson refuses anything else)
        if value is not _NO_FAST_ROUTE:
            return value
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as error:
        raise StrictReadError("invalid-utf8", f"at byte {error.start}") from None
    return _read_reference(raw, text)


def _read_reference(raw: bytes, text: str) -> Any:
    """Steps 5-10 of the module docstring on UTF-8 ``raw`` (decoded as ``text``)."""
    depth = nesting_depth(raw)
    if depth > MAX_DEPTH:
        raise StrictReadError("too-deep", f"nesting depth {depth} exceeds {MAX_DEPTH}")
    start = len(text) - len(text.lstrip(_JSON_WHITESPACE))
    try:
        value, end = _DECODER.raw_decode(text, start)
    except _DuplicateMember as error:
        raise StrictReadError("duplicate-member", f"member {error.name!r} repeated") from None
    except _NonFinite as error:
        raise StrictReadError("non-finite-number", f"literal {error.literal!r}") from None
    except json.JSONDecodeError as error:
        raise StrictReadError("malformed", f"{error.msg} at offset {error.pos}") from None
    except RecursionError:  # pragma: no cover - the depth scan bounds nesting first
        raise StrictReadError("too-deep", "nesting too deep to decode") from None
    if text[end:].strip(_JSON_WHITESPACE):
        raise StrictReadError("trailing-bytes", f"data after the document at offset {end}")
    # Raw UTF-8 cannot carry a surrogate (step 4), so only a \uD800-\uDFFF escape can.
    if _SURROGATE_ESCAPE.search(raw):
        for string in _strings(value):
            if _SURROGATE.search(string):
                raise StrictReadError("lone-surrogate", "an escaped lone surrogate")
    return value


def check_json_value(value: Any, *, max_depth: int = MAX_DEPTH) -> None:
    """Refuse (``StrictReadError``) a Python value the strict reader could not have produced.

    For callers that hand the scorer already-parsed values: only dict (str keys), list, str,
    int, finite float, bool and None; nesting at most ``max_depth``; no surrogate code points.
    Iterative, so no recursion limit is reachable.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                raise StrictReadError("too-deep", f"nesting depth exceeds {max_depth}")
            if isinstance(item, dict):
                for key, member in item.items():
                    if not isinstance(key, str):
                        raise StrictReadError("malformed", "an object key is not a string")
                    if _SURROGATE.search(key):
                        raise StrictReadError("lone-surrogate", "a lone surrogate in a key")
                    stack.append((member, depth + 1))
            else:
                stack.extend((member, depth + 1) for member in item)
        elif isinstance(item, str):
            if _SURROGATE.search(item):
                raise StrictReadError("lone-surrogate", "a lone surrogate in a string")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise StrictReadError("non-finite-number", repr(item))
        elif item is None or isinstance(item, bool | int):
            continue
        else:
            raise StrictReadError("malformed", f"not a JSON value: {type(item).__name__}")
