"""Subresource Integrity metadata (W3C SRI, "parse metadata" and "get the strongest metadata").

Rules:

* Metadata is ASCII text; tokens are separated by ASCII whitespace. A token is
  ``<algorithm>-<base64 value>[?<options>]``; a token whose algorithm is not ``sha256``,
  ``sha384`` or ``sha512``, or whose value is empty or holds a character outside the base64
  alphabets (standard or URL-safe, ``=`` padding), is ignored — as browsers ignore it. Options
  are ignored.
* The strongest algorithm present wins (``sha512`` > ``sha384`` > ``sha256``); only the values
  of that algorithm are compared.
* A resource matches when the standard padded base64 of its digest under the strongest
  algorithm is exactly one of those values (case-sensitive, as the specification compares).
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Final

import attrs

__all__ = ["ALGORITHMS", "HashExpression", "integrity_of", "parse_metadata", "strongest"]

#: Supported algorithms, weakest first.
ALGORITHMS: Final = ("sha256", "sha384", "sha512")
_VALUE: Final = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_ASCII_WHITESPACE: Final = " \t\n\f\r"


@attrs.frozen
class HashExpression:
    """One supported ``<algorithm>-<value>`` token."""

    algorithm: str
    value: str


def parse_metadata(text: str) -> tuple[HashExpression, ...]:
    """The supported hash expressions of ``text``, in order (unsupported tokens ignored)."""
    found = []
    for token in text.translate({ord(c): " " for c in _ASCII_WHITESPACE}).split(" "):
        expression = token.split("?", 1)[0]
        algorithm, dash, value = expression.partition("-")
        if dash and algorithm in ALGORITHMS and _VALUE.fullmatch(value):
            found.append(HashExpression(algorithm, value))
    return tuple(found)


def strongest(expressions: tuple[HashExpression, ...]) -> tuple[HashExpression, ...]:
    """The expressions of the strongest algorithm present (empty for no expression)."""
    if not expressions:
        return ()
    best = max(ALGORITHMS.index(e.algorithm) for e in expressions)
    return tuple(e for e in expressions if e.algorithm == ALGORITHMS[best])


def integrity_of(resource: bytes, algorithm: str = "sha384") -> str:
    """The ``<algorithm>-<base64>`` expression of ``resource`` (what a publisher writes)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unsupported SRI algorithm {algorithm!r}")
    digest = hashlib.new(algorithm, resource).digest()
    return f"{algorithm}-{base64.b64encode(digest).decode('ascii')}"
