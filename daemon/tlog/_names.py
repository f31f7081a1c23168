"""Replica-aware decision ids: an id says which transparency log proves it
(``docs/adr/0018-replica-aware-decision-ids.md``, ``docs/spec/transparency.md`` §12).

Rules:

1. A log's *tag* is the first 4 bytes of SHA-256 of its origin's UTF-8 bytes, as 8 lower-case
   hex digits (:func:`log_tag`).
2. A daemon with a transparency log names its decisions (and audited refusals) with UUIDs of
   version 8 (RFC 9562 §5.8) whose first 32 bits are the log's tag: ``TTTTTTTT-RRRR-8RRR-
   VRRR-RRRRRRRRRRRR`` (``V`` one of ``89ab``), the 90 ``R`` bits random. Without a
   transparency log there is no origin to name: the id is a random version-4 UUID, as before.
   Both are plain UUIDs to anyone who only keys on them.
3. :func:`tag_of` reads the tag back from a version-8 id of this shape (``None`` for any other
   id), so a tool that holds a fleet's origins goes straight to the one log that can prove a
   decision; an id's tag is a routing hint, never evidence: what proves the decision is the
   line found in that log and its inclusion under a checkpoint signed with the log's key.
4. Ids need uniqueness, not secrecy: one ``random.Random`` seeded from ``os.urandom`` (and
   re-seeded in every forked process, which would else repeat the ids), no ``getrandom(2)``
   per decision (on some hosts ``uuid.uuid4()`` costs ~200 us, more than a minimal check).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
from collections.abc import Callable
from typing import Final

__all__ = ["DecisionIds", "log_tag", "replica_fields", "tag_of"]

_RANDOM = random.Random()
os.register_at_fork(after_in_child=_RANDOM.seed)

# Version 4: clear the version nibble and the variant's top two bits, then set them.
_V4_CLEAR: Final = ~((0xC000 << 48) | (0xF000 << 64))
_V4_SET: Final = (0x8000 << 48) | (4 << 76)
_V8_SET: Final = (0x8000 << 48) | (8 << 76)
_V8_ID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def log_tag(origin: str) -> str:
    """Rule 1: the 8-hex-digit tag of the log named ``origin``."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()[:8]


def tag_of(decision_id: str) -> str | None:
    """Rule 3: the log tag a version-8 decision id carries, else ``None``."""
    if _V8_ID.fullmatch(decision_id) is None:
        return None
    return decision_id[:8]


def replica_fields(origin: str | None) -> dict[str, str]:
    """What names the replica in ``daemon_start`` and ``health``: ``origin`` and its
    ``log_tag`` (rule 1); nothing without a transparency log."""
    return {} if origin is None else {"origin": origin, "log_tag": log_tag(origin)}


def _format(value: int) -> str:
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


class DecisionIds:
    """The id generator of one daemon (rule 2): calling it returns a fresh decision id."""

    def __init__(self, origin: str | None) -> None:
        self.origin = origin
        #: The tag every id begins with (``None`` without a transparency log).
        self.tag = None if origin is None else log_tag(origin)
        self._high = 0 if self.tag is None else int(self.tag, 16) << 96
        #: The bound generator (no branch per id).
        self.new: Callable[[], str] = self._v4 if origin is None else self._v8

    def __call__(self) -> str:
        return self.new()

    @staticmethod
    def _v4() -> str:
        return _format(_RANDOM.getrandbits(128) & _V4_CLEAR | _V4_SET)

    def _v8(self) -> str:
        return _format(self._high | (_RANDOM.getrandbits(96) & _V4_CLEAR) | _V8_SET)
