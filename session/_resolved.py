"""What the session proved about the evidence it hands the running mechanism.

Rules:

* While ``VerificationSession.evaluate`` runs a mechanism's ``evaluate(binding, evidence)``,
  :func:`resolved_references` of that very ``evidence`` tuple (by identity) answers the
  normalised references its items were resolved under, in order: the evidence store proved
  each item's ``sha256:`` digest to be its reference (hashed when stored, the object unchanged
  since, or hashed again on resolution). A mechanism may take them for the items' digests
  instead of hashing the items again.
* For any other object — an equal tuple, a tuple the mechanism built, the same tuple after the
  call returned, or during a call from anything but the session — it answers ``None``: the
  mechanism hashes the items itself. The tuple and its ``bytes`` items are immutable, and only
  the session held the tuple before the call.
* The answer is per thread and per context (a :class:`contextvars.ContextVar`), set for the
  duration of the one call and reset after it, also when it raises; a session evaluated inside
  a mechanism's call answers for its own call and restores the outer answer afterwards.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Final

__all__ = ["HANDED", "resolved_references"]

#: The session's side: ``(evidence tuple, its references)`` while the call runs (set, then
#: reset with the token in a ``finally``), else ``None``.
HANDED: Final[ContextVar[tuple[tuple[bytes, ...], tuple[str, ...]] | None]] = ContextVar(
    "session_resolved_evidence", default=None
)


def resolved_references(evidence: object) -> tuple[str, ...] | None:
    """The normalised references of ``evidence`` if it is the tuple the session is handing
    the running mechanism, else ``None`` (module rules)."""
    handed = HANDED.get()
    if handed is not None and handed[0] is evidence:
        return handed[1]
    return None
