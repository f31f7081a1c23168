"""The project's one canonical-JSON family and its digests.

Two encodings, each with one job; every other module calls these instead of ``json.dumps`` /
``orjson.dumps`` with its own options:

* **core** (:func:`core_json`): ``json.dumps(value, sort_keys=True, separators=(",", ":"),
  ensure_ascii=True, allow_nan=False)`` as bytes: sorted keys, no whitespace, every non-ASCII
  character ``\\u``-escaped, NaN/Infinity refused (``ValueError``). It is the encoding that
  binding digests (``BoundProposition.digest()``, ``docs/spec/formation.md`` §1.1) and catalog
  registry, package and index digests (§7.1) are computed over. :func:`core_digest` is its
  **bare** lowercase hex SHA-256.
* **network** (:func:`network_json`): sorted keys, no whitespace, raw UTF-8 — byte-identical to
  ``json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))`` for
  float-free values, encoded with orjson (property-tested in ``tests/canon``); a finite float
  is written in orjson's shortest round-trip form (``1e-05``, where ``json.dumps`` writes
  ``0.00001``). NaN and ±Infinity are refused (``ValueError``), as are non-``str`` keys and
  integers beyond 64 bits (``TypeError``). It is the daemon's wire-header encoding; with the
  strict value model of :mod:`mechanism.canonical` on top it is the VSTD network canonical
  codec.
  :func:`network_json_float_free` is the same encoding for a value the caller has already
  proven float-free (the canonical value model admits no floats), so the non-finite re-check
  is skipped; it must never be given a value that may hold a float.

:func:`digest_bytes` is the one ``sha256:<hex>`` digest of bytes (anything ``hashlib`` hashes;
``str`` raises ``TypeError``). Digests of source files and of evidence use it.
:func:`is_digest` accepts exactly that form: an exact ``str``, ``sha256:`` and 64 lowercase hex
digits.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, Final

import orjson

__all__ = [
    "DIGEST_RE",
    "core_digest",
    "core_json",
    "digest_bytes",
    "is_digest",
    "network_json",
    "network_json_float_free",
]


DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}")


def is_digest(value: object) -> bool:
    """True only for an exact ``str`` of the form ``sha256:`` + 64 lowercase hex digits."""
    return type(value) is str and DIGEST_RE.fullmatch(value) is not None


def digest_bytes(data: bytes) -> str:
    """``sha256:`` + the lowercase hex SHA-256 of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def core_json(value: object) -> bytes:
    """The core (ASCII-escaped, sorted, compact) encoding of ``value``."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def core_digest(value: object) -> str:
    """Bare lowercase hex SHA-256 of :func:`core_json`."""
    return hashlib.sha256(core_json(value)).hexdigest()


def network_json_float_free(value: object) -> bytes:
    """The network encoding of a value the caller knows holds no float."""
    data: bytes = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return data


def network_json(value: object) -> bytes:
    """The network (raw UTF-8, sorted, compact) encoding; NaN and ±Infinity are refused.

    orjson writes a non-finite float as ``null``, so an output that contains ``null`` is
    re-checked by ``json.dumps(allow_nan=False)`` unless a walk proves the value plain (no
    float that is not finite, only ``str`` keys): then the re-check cannot refuse it.
    """
    data: bytes = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)  # the float-free encoding
    if b"null" in data and not _plain(value):
        json.dumps(value, allow_nan=False, default=_refuse_default)
    return data


_PLAIN_SCALARS: Final = frozenset({str, int, bool, type(None)})


def _plain(value: object) -> bool:
    """True when ``value`` is built only of exact ``dict`` (``str`` keys), ``list``, ``tuple``,
    ``str``, ``int``, ``bool``, ``None`` and finite ``float``. False means "re-check" (the
    re-check, not this walk, decides and words any refusal). Called only after orjson encoded
    ``value``, so it is acyclic and of bounded depth.

    It runs on every answer that holds a ``null`` (every decision does), so members are judged
    where they are met and only containers (and anything inexact) are stacked."""
    isfinite = math.isfinite
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            assert isinstance(item, dict)
            for key in item:
                if type(key) is not str:
                    return False
            members: Any = item.values()
        elif kind is list or kind is tuple:
            members = item
        elif kind is float:
            if not isfinite(item):  # type: ignore[arg-type]
                return False
            continue
        elif kind in _PLAIN_SCALARS:
            continue
        else:
            return False
        for member in members:
            kind = type(member)
            if kind is str or kind is int or kind is bool or member is None:
                continue
            if kind is float:
                if not isfinite(member):
                    return False
                continue
            push(member)
    return True


def _refuse_default(value: object) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")
