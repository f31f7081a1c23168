"""The catalog's digest codec (the ASCII-escaped *core* codec, not the network codec).

Rules:

* ``core_bytes(value)`` is ``json.dumps(value, sort_keys=True, separators=(",", ":"),
  ensure_ascii=True, allow_nan=False)`` encoded as ASCII. This is the codec the reference uses for
  ``BoundProposition.digest()`` and for registry, package and index digests
  (docs/spec/formation.md §7.1, §12 item 1).
* ``core_digest(value)`` is the **bare** lowercase 64-hex SHA-256 of those bytes, no ``sha256:``
  prefix. ``sha256_hex(data)`` is the bare hex SHA-256 of exact bytes.
* Only JSON-ready values are accepted: exact ``dict`` with ``str`` keys, ``list``, ``str``,
  ``int``, ``bool`` and ``None``. Floats are refused so that a digest never depends on float
  formatting; anything else raises ``ValueError``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from session.canon import core_json

__all__ = [
    "BARE_HEX_RE",
    "DIGEST_RE",
    "core_bytes",
    "core_digest",
    "is_bare_hex",
    "is_prefixed_digest",
    "sha256_hex",
]

BARE_HEX_RE = re.compile(r"[0-9a-f]{64}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


def is_bare_hex(value: object) -> bool:
    """True only for an exact ``str`` of 64 lowercase hex digits."""
    return type(value) is str and BARE_HEX_RE.fullmatch(value) is not None


def is_prefixed_digest(value: object) -> bool:
    """True only for an exact ``str`` ``sha256:`` + 64 lowercase hex digits."""
    return type(value) is str and DIGEST_RE.fullmatch(value) is not None


def _check(value: Any, depth: int = 0) -> None:
    if depth > 64:
        raise ValueError("value nests deeper than 64 levels")
    if value is None or type(value) in (bool, int, str):
        return
    if type(value) is list:
        for item in value:
            _check(item, depth + 1)
        return
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise ValueError("object keys must be strings")
            _check(item, depth + 1)
        return
    raise ValueError(f"not a JSON-ready value: {type(value).__name__}")


def core_bytes(value: Any) -> bytes:
    """ASCII-escaped, sorted, compact JSON bytes of a JSON-ready value (the core variant of
    the canonical-JSON family, :func:`canon.core_json`)."""
    _check(value)
    return core_json(value)


def core_digest(value: Any) -> str:
    """Bare hex SHA-256 of :func:`core_bytes`."""
    return hashlib.sha256(core_bytes(value)).hexdigest()


def sha256_hex(data: bytes) -> str:
    """Bare hex SHA-256 of exact bytes."""
    return hashlib.sha256(data).hexdigest()
