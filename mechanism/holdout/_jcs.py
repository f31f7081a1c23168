"""Canonical comparison of JSON values, as TRVM's scorer compares them.

Rules:

* Two values are canonically equal when their RFC 8785 (JCS) encodings are byte-equal: ES
  ``Number::toString`` formatting (``4.0`` is ``4``, ``1e20`` is ``100000000000000000000``),
  JSON string escaping, object keys sorted by UTF-16 code unit. The encoder is the ``rfc8785``
  package; integers outside the safe range are turned into the double JavaScript would hold
  before encoding, never refused.
* :func:`strict_equal` is JavaScript's ``===`` on parsed JSON: numbers equal numbers by value
  (``1 === 1.0``), strings, booleans and null by type and value, and an object or array is
  never ``===`` to a separately parsed literal (reference identity).
* :func:`js_sort_key` is the key of JavaScript's default ``Array.prototype.sort``: compare
  ``String(x)`` by UTF-16 code units.
* :func:`is_number` excludes booleans (``typeof true`` is ``"boolean"``).
"""

from __future__ import annotations

from typing import Any

import rfc8785

from session.canon._errors import CallerError

_SAFE_INTEGER_BOUND = 2**53


class NotJSONError(CallerError, ValueError):
    """A value that is not plain parsed JSON was handed to the canonical encoder."""


def _js_value(value: Any) -> Any:
    # Iterative copy that maps unsafe integers to doubles; depth is bounded by the reader.
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return value if -_SAFE_INTEGER_BOUND < value < _SAFE_INTEGER_BOUND else float(value)
    if isinstance(value, list):
        return [_js_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _js_value(item) for key, item in value.items()}
    raise NotJSONError(f"not a JSON value: {type(value).__name__}")


def canonical(value: Any) -> bytes:
    """The RFC 8785 encoding of a parsed JSON value (raises :class:`NotJSONError`)."""
    try:
        return rfc8785.dumps(_js_value(value))
    except rfc8785.CanonicalizationError as error:
        raise NotJSONError(str(error)) from None


def canonical_equal(left: Any, right: Any) -> bool:
    return canonical(left) == canonical(right)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def strict_equal(left: Any, right: Any) -> bool:
    """JavaScript ``left === right`` for values produced by a JSON parser."""
    if is_number(left) and is_number(right):
        return bool(left == right)
    if isinstance(left, dict | list) or isinstance(right, dict | list):
        return False
    if type(left) is not type(right):
        return False
    return bool(left == right)


def js_string(value: Any) -> str:
    """JavaScript ``String(value)`` for a parsed JSON value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_number(value):
        return canonical(value).decode("ascii")
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def js_sort_key(value: Any) -> bytes:
    return js_string(value).encode("utf-16-be", errors="surrogatepass")
