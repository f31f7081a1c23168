"""The CanonFS content hash used by the T81 experiment descriptor.

Rules:

* ``canonfs_hash(data)`` is the first 32 bytes of FIPS-202 SHA3-512 over exactly ``data`` (no type
  prefix, no framing), written as 64 lowercase hex digits. It is the public T81
  ``t81::hash::hash_bytes`` digest; the hex text form is the descriptor's, not a T81 text form.
* Only exact ``bytes`` are hashed; anything else raises ``TypeError`` (never silently coerced).
* ``is_canonfs_ref(value)`` is ``True`` only for an exact ``str`` of 64 characters from
  ``[0-9a-f]`` (no prefix, no upper case, no base-81 form).
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["CANONFS_HASH_BYTES", "CANONFS_REF_RE", "canonfs_hash", "is_canonfs_ref"]

CANONFS_HASH_BYTES: Final = 32
CANONFS_REF_RE: Final = re.compile(r"[0-9a-f]{64}")


def canonfs_hash(data: bytes) -> str:
    """Return SHA3-512(data)[:32] as 64 lowercase hex digits."""
    if type(data) is not bytes:
        raise TypeError("canonfs_hash needs exact bytes")
    return hashlib.sha3_512(data).digest()[:CANONFS_HASH_BYTES].hex()


def is_canonfs_ref(value: object) -> bool:
    """True for an exact ``str`` of exactly 64 lowercase hex digits."""
    return type(value) is str and CANONFS_REF_RE.fullmatch(value) is not None
