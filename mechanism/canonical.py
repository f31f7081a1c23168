"""The VSTD network canonical codec and strict canonical record admission.

Contract (``docs/spec/formation.md`` §2.1–§2.2):

Value model. A canonical value is ``None``, ``True``/``False``, a string (no code point in
U+D800–U+DFFF, equal to its own NFC normalisation), an exact ``int`` in 0 … 2**53 − 1 (``bool``
is never an integer), a list/tuple of canonical values, or a ``dict`` whose keys are strings
matching ``[a-z][a-z0-9_]*``. Everything else (floats, negative integers, bytes, sets, other
mappings' keys ...) is refused with :class:`CanonicalError`.

Encoding. Exactly ``json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True,
separators=(",", ":"))`` encoded as UTF-8: sorted keys, no whitespace, raw non-ASCII, short
escapes for ``\\n \\r \\t \\b \\f``, ``\\u00xx`` (lowercase hex) for other C0 controls, no
trailing newline.

Digests. ``sha256:`` + 64 lowercase hex over exact ``bytes``. ``H(x)`` is
``digest_bytes(canonical_bytes(x))``.

Admission, in this order, first failure wins:

1. the input is exactly ``bytes`` (no ``bytearray``/``memoryview``/subclass) → else INVALID;
2. its length is at most ``max_bytes`` → else LIMIT;
3. a string-aware structural scan over the raw bytes: outside strings each ``[``/``{`` opens a
   container (the root counts as depth 1); depth above ``max_depth`` or more than
   ``max_containers`` openings → LIMIT; a ``]``/``}`` taking depth below zero → INVALID;
4. strict UTF-8, JSON parsing, and byte equality with the canonical re-encoding of the parsed
   value (this refuses duplicate keys, whitespace, BOMs, floats, ``-0``, non-canonical escapes,
   unsorted keys, non-NFC strings, surrogates and bad keys) → else INVALID;
5. (records only) a ``dict`` with a string ``schema_version`` → else INVALID;
6. (records only) ``schema_version`` equals the expected one → else UNSUPPORTED.

:func:`admit_record_deferred` is steps 1–6 for a caller whose own grammar refuses every value
outside the model: when the schema matches, the value-model part of step 4 is handed back to
be run (:func:`check_value_model`) only if that grammar refuses, so no answer changes.

Failures raise :class:`CanonicalError` (INVALID), :class:`CanonicalLimitError` (LIMIT) or
:class:`CanonicalUnsupportedError` (UNSUPPORTED); ``error.kind`` names the class. Nothing else
escapes: no ``RecursionError``, ``UnicodeError`` or ``TypeError`` leaks out of this module.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Final

import orjson

from session import canon
from session.canon import DIGEST_RE, CallerError, is_digest, network_json_float_free

__all__ = [
    "DIGEST_RE",
    "MAX_CANONICAL_INT",
    "CanonicalError",
    "CanonicalLimitError",
    "CanonicalTypeError",
    "CanonicalUnsupportedError",
    "admit_canonical",
    "admit_record",
    "admit_record_deferred",
    "canonical_bytes",
    "canonical_digest",
    "check_value_model",
    "digest_bytes",
    "is_digest",
    "parse_unscanned",
    "scan_structure",
    "validate_value",
]

MAX_CANONICAL_INT: Final = 2**53 - 1
_KEY_RE: Final = re.compile(r"[a-z][a-z0-9_]*")
# A JSON string token on raw bytes, unrolled (no nested quantifier can backtrack): a backslash
# escapes the next byte. The closing quote is optional, so an unterminated string runs to the
# end of the input in one match. With a required closing quote the failed match would be
# retried at every escaped quote inside the string: quadratic (1 s for 16 KiB of ``a\"``).
# The quantifiers are possessive (nothing they take can ever be given back to a match): a
# plain ``*`` over the group keeps one backtracking entry per escape, a 10 MB stack for
# 256 KiB of ``a\"`` whose cache misses made the large input ~1.3-1.6x slower per byte.
_STRING_TOKEN_RE: Final = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)
_NOT_BRACKET: Final = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_BRACKET_OR_QUOTE: Final = bytes(b for b in range(256) if b not in b'[]{}"')
_ONE_KIND: Final = bytes.maketrans(b"{}", b"[]")
# 16+ digits after a value separator: a possibly too-large integer (or, rarely, string
# text); a bare top-level integer (no separator before it) is matched at the start.
_LONG_NUMBER_START_RE: Final = re.compile(rb"[:,\[][0-9]{16}")
_SIGN_OR_POINT_RE: Final = re.compile(rb"[-.+]")
_LONG_DIGITS_RE: Final = re.compile(rb"[0-9]{16,}")
_VALID_KEY_TOKEN_RE: Final = re.compile(rb'"[a-z][a-z0-9_]*+":')
_KEY_BYTES_RE: Final = re.compile(rb"[a-z][a-z0-9_]*")


class CanonicalError(CallerError, ValueError):
    """The bytes or value are not canonical (INVALID)."""

    kind: str = "invalid"


class CanonicalLimitError(CanonicalError):
    """A resource ceiling stopped admission before a decision (LIMIT, not a refutation)."""

    kind = "limit"


class CanonicalUnsupportedError(CanonicalError):
    """A well-formed record declares a schema this codec was not asked to admit (UNSUPPORTED)."""

    kind = "unsupported"


class CanonicalTypeError(CanonicalError, TypeError):
    """A non-``bytes`` input where exact bytes are required: INVALID, and also a ``TypeError``."""


def digest_bytes(data: bytes) -> str:
    """``sha256:`` + lowercase hex SHA-256 of exact ``bytes`` (:func:`canon.digest_bytes`).

    Anything else raises :class:`CanonicalTypeError`, which is both a ``TypeError`` and a
    ``CanonicalError`` (so a ``ValueError``, like every refusal of the reference codec).
    """
    if type(data) is not bytes:
        raise CanonicalTypeError("digest_bytes accepts exact bytes only")
    return canon.digest_bytes(data)


def _string_is_canonical(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return unicodedata.is_normalized("NFC", text)


def validate_value(value: object) -> None:
    """Refuse (``CanonicalError``) anything outside the canonical value model.

    Iterative, so arbitrarily deep input cannot raise ``RecursionError``; self-referencing
    containers are refused as well.
    """
    # Depth-first with explicit exit markers so shared (acyclic) sub-values are fine while a
    # container that contains itself is refused.
    stack: list[tuple[object, bool]] = [(value, False)]
    active: set[int] = set()
    while stack:
        item, exiting = stack.pop()
        if exiting:
            active.discard(id(item))
            continue
        kind = type(item)
        if item is None or kind is bool:
            continue
        if kind is str:
            if not _string_is_canonical(item):  # type: ignore[arg-type]
                raise CanonicalError("string is not NFC Unicode without surrogates")
            continue
        if kind is int:
            if not 0 <= item <= MAX_CANONICAL_INT:  # type: ignore[operator]
                raise CanonicalError("integer outside 0 .. 2**53 - 1")
            continue
        if kind is list or kind is tuple or kind is dict:
            marker = id(item)
            if marker in active:
                raise CanonicalError("self-referencing container")
            active.add(marker)
            stack.append((item, True))
            if kind is dict:
                for key, member in item.items():  # type: ignore[attr-defined]
                    if type(key) is not str or _KEY_RE.fullmatch(key) is None:
                        raise CanonicalError(f"mapping key is not canonical: {key!r}")
                    stack.append((member, False))
            else:
                stack.extend((member, False) for member in item)  # type: ignore[attr-defined]
            continue
        raise CanonicalError(f"value of type {kind.__name__} is not canonical")


def canonical_bytes(value: object) -> bytes:
    """The exact canonical encoding of a validated value (``CanonicalError`` if not canonical)."""
    validate_value(value)
    try:
        return _encode(value)
    except (ValueError, TypeError, RecursionError) as error:
        raise CanonicalError(f"value cannot be encoded: {error}") from None


# The network encoding of the project's canonical-JSON family (:mod:`canon`): orjson with
# sorted keys, byte-identical to ``json.dumps(..., ensure_ascii=False, sort_keys=True,
# separators=(",", ":"))`` on the canonical value model (ASCII keys, no floats, integers below
# 2**64, no surrogates) and about 20x faster; the equivalence is a property test
# (tests/mechanism/test_canonical.py). The model admits no float, so the float-free variant (no
# non-finite re-check) is exact. Bound by name: admission calls it on every record.
_encode: Final = network_json_float_free


def canonical_digest(value: object) -> str:
    """``H(value)``: the digest of the value's canonical bytes."""
    return digest_bytes(canonical_bytes(value))


def _check_brackets(outside: bytes, max_depth: int, max_containers: int) -> None:
    depth = 0
    containers = 0
    for byte in outside:
        if byte == 0x5B or byte == 0x7B:  # [ {
            depth += 1
            containers += 1
            if depth > max_depth or containers > max_containers:
                raise CanonicalLimitError("record nesting or container count exceeds its bound")
        else:
            depth -= 1
            if depth < 0:
                raise CanonicalError("record closes a container it never opened")


def _brackets_fit(outside: bytes, max_depth: int, max_containers: int) -> bool:
    """True when the brackets balance, nest at most ``max_depth`` deep and open at most
    ``max_containers`` containers: then :func:`_check_brackets` has nothing to report. Each
    pass drops exactly the innermost level of a balanced sequence (C-level, ``max_depth``
    passes at most); ``False`` leaves the exact, ordered verdict to :func:`_check_brackets`."""
    # One kind of bracket (the exact loop counts depth whatever the kind), so that each pass
    # removes exactly one level: with two kinds, removing "[]" could expose a "{}" that the
    # same pass would remove too.
    outside = outside.translate(_ONE_KIND)
    if outside.count(b"[") > max_containers:
        return False
    for remaining in range(max_depth, 0, -1):
        if not outside:
            return True
        shorter = outside.replace(b"[]", b"")
        # n pairs nested at most ``remaining`` deep hold at least n/remaining innermost ones:
        # fewer removed means too deep or unbalanced, which the exact loop then reports.
        if (len(outside) - len(shorter)) * remaining < len(outside):
            return False
        outside = shorter
    return not outside


def scan_structure(data: bytes, *, max_depth: int, max_containers: int) -> None:
    """The string-aware pre-decode scan over raw bytes (step 3 of admission).

    Raises ``CanonicalLimitError`` when depth exceeds ``max_depth`` (the root container counts
    as one) or more than ``max_containers`` containers open, and ``CanonicalError`` when a
    closing bracket takes depth below zero, whichever comes first in byte order. Unclosed
    containers are left to the parser. Bytes after an unterminated string are inside it.
    Linear in ``len(data)`` whatever the bytes (a growth test holds it to that).
    """
    if b"\\" in data:
        # Every quote opens a token that the substitution removes (an unterminated one with
        # everything after it), so what is left is exactly the text outside strings.
        outside = _STRING_TOKEN_RE.sub(b"", data).translate(None, _NOT_BRACKET)
    else:
        # Without backslashes every quote toggles the in-string flag: of the quotes and
        # brackets, even-numbered segments between quotes are outside strings (a trailing odd
        # segment is an unterminated string). Dropping adjacent quote pairs first (strings
        # without brackets: every string of a formation record) keeps that alternation, so
        # usually no quote is left to split on.
        outside = data.translate(None, _NOT_BRACKET_OR_QUOTE).replace(b'""', b"")
        if b'"' in outside:
            outside = b"".join(outside.split(b'"')[::2])
    if not _brackets_fit(outside, max_depth, max_containers):
        _check_brackets(outside, max_depth, max_containers)


def _keys_are_valid(data: bytes) -> bool:
    """Exact key check for parsed JSON bytes without backslashes (so without escaped quotes)."""
    parts = data.split(b'"')
    # Odd parts are string contents; a string is a key exactly when the outside text right
    # after it starts with ``:``.
    return all(
        _KEY_BYTES_RE.fullmatch(parts[index]) is not None
        for index in range(1, len(parts) - 1, 2)
        if parts[index + 1][:1] == b":"
    )


def _values_are_canonical(data: bytes, text: str) -> bool:
    """For byte-exact ``json.dumps`` output without backslashes: the value-model checks.

    With no backslash there are no escapes and no quote inside a string, so:

    * every string appears raw in ``text`` between quotes that never compose with a
      neighbour: the whole text is NFC exactly when every string is, and strict UTF-8 decoding
      already excluded surrogates;
    * ``":`` ends every key, and otherwise only opens a string that begins with ``:``. A valid
      key token ``"[a-z][a-z0-9_]*":`` can only be a key (none can start at a closing quote),
      so when as many valid key tokens as ``":`` occur, every key is valid. Otherwise (an
      invalid key, or a string beginning with ``:``) the strings are cut out and each key —
      a string whose following outside text starts with ``:`` — is checked exactly;
    * outside strings, a float (``repr`` form) needs ``.``, ``e+`` or ``e-``, and a negative
      integer needs ``-``; a too-large integer needs 16 or more digits at the very start or
      after ``:``, ``,`` or ``[``. Only when one of these bytes occurs anywhere are strings
      cut out and the outside text checked exactly.
    """
    if (
        b"-" in data
        or b"." in data
        or b"+" in data
        or _LONG_NUMBER_START_RE.search(data) is not None
        or _LONG_DIGITS_RE.match(data) is not None
    ):
        outside = b"".join(data.split(b'"')[::2])
        if _SIGN_OR_POINT_RE.search(outside) is not None:
            return False
        for run in _LONG_DIGITS_RE.findall(outside):
            if int(run) > MAX_CANONICAL_INT:
                return False
    if len(_VALID_KEY_TOKEN_RE.findall(data)) != data.count(b'":') and not _keys_are_valid(data):
        return False
    return text.isascii() or unicodedata.is_normalized("NFC", text)


def admit_canonical(
    data: object, *, max_bytes: int, max_depth: int = 16, max_containers: int = 8192
) -> Any:
    """Steps 1–4 of admission: return the parsed value of exact canonical bytes."""
    return _admit(data, max_bytes, max_depth, max_containers, defer_model=False)[0]


def _admit(
    data: object, max_bytes: int, max_depth: int, max_containers: int, *, defer_model: bool
) -> tuple[Any, bytes | None]:
    """Steps 1–4; with ``defer_model`` the value-model part of step 4 may be left undone, and
    then the bytes it must still be checked on are returned (else ``None``)."""
    if type(data) is not bytes:
        raise CanonicalError("record must be exact bytes")
    if len(data) > max_bytes:
        raise CanonicalLimitError("record exceeds its byte bound")
    scan_structure(data, max_depth=max_depth, max_containers=max_containers)
    pending: bytes | None = None
    try:
        text = data.decode("utf-8")
        if b"\\" in data:
            # Escapes present: the reference parser and the full value-model walk.
            value = json.loads(text)
            encoded = canonical_bytes(value)
        else:
            value = orjson.loads(data)
            encoded = _encode(value)
            if encoded == data:
                if defer_model:
                    pending = data
                elif not _values_are_canonical(data, text):
                    raise CanonicalError("record holds a value outside the canonical model")
    except (ValueError, TypeError, RecursionError) as error:
        raise CanonicalError("record is not canonical JSON") from error
    if encoded != data:
        raise CanonicalError("record is not canonical JSON")
    return value, pending


def parse_unscanned(data: object, *, max_bytes: int) -> Any:
    """A fast path for a caller whose own grammar, applied to the result, admits only values
    that nest at most 3 deep, open at most 1,027 containers and hold only ASCII digests, tags
    and small ints: the value of exact canonical bytes without backslashes, else ``None``.

    It skips the structural scan (step 3: such a value's canonical bytes pass it) and the
    value-model scan (the grammar implies it), so it is an answer only together with that
    grammar: a ``None``, or a value the grammar refuses, means "run the ordered admission".
    """
    if type(data) is not bytes or len(data) > max_bytes or b"\\" in data:
        return None
    try:
        value = orjson.loads(data)  # deep nesting is refused by orjson, never a crash
        if _encode(value) != data:
            return None
    except (ValueError, TypeError):  # orjson's decode and encode errors
        return None
    return value


def check_value_model(pending: bytes | None) -> None:
    """Finish a deferred step 4 (see :func:`admit_record_deferred`): ``CanonicalError`` when
    the bytes hold a value outside the canonical model; nothing for ``None``."""
    if pending is not None and not _values_are_canonical(pending, pending.decode("utf-8")):
        raise CanonicalError("record holds a value outside the canonical model")


def admit_record(
    data: object,
    schema_version: str,
    *,
    max_bytes: int,
    max_depth: int = 16,
    max_containers: int = 8192,
) -> dict[str, Any]:
    """Steps 1–6 of admission: a canonical object declaring exactly ``schema_version``."""
    record, pending = admit_record_deferred(
        data,
        schema_version,
        max_bytes=max_bytes,
        max_depth=max_depth,
        max_containers=max_containers,
    )
    check_value_model(pending)
    return record


def admit_record_deferred(
    data: object,
    schema_version: str,
    *,
    max_bytes: int,
    max_depth: int = 16,
    max_containers: int = 8192,
) -> tuple[dict[str, Any], bytes | None]:
    """:func:`admit_record` for a caller whose own record grammar refuses every value outside
    the canonical model (as INVALID): when the schema matches, the generic value-model scan
    of step 4 may be left undone, and its bytes are returned with the record (else ``None``).

    The caller must then apply its grammar, and before reporting anything but INVALID (a
    LIMIT of its own) call :func:`check_value_model` on them, so INVALID keeps its precedence.
    When the schema does not match, the scan runs here, before UNSUPPORTED is raised.
    """
    value, pending = _admit(data, max_bytes, max_depth, max_containers, defer_model=True)
    if type(value) is not dict or type(value.get("schema_version")) is not str:
        check_value_model(pending)
        raise CanonicalError("record is not an object with a string schema_version")
    if value["schema_version"] != schema_version:
        check_value_model(pending)
        raise CanonicalUnsupportedError(f"unsupported schema {value['schema_version']!r}")
    return value, pending
