"""``BytesDigestMechanism`` (``vstd.bytes.sha256``): one item's SHA-256 equals ``expected``.

Rules: predicate exactly ``bytes.sha256`` and exactly one evidence item that can be hashed, else
UNKNOWN "this mechanism checks one bytes.sha256 proposition" (also for a binding or an item of
another shape: it never raises); PASS when ``sha256:<hex>`` of the bytes
equals the normalised ``expected``, FAIL otherwise (also for an ``expected`` that is not a
digest); details ``observed <d>; expected <d>``; observations ``{"observed_digest": <d>}``.
The mechanism digest is ``sha256:`` of this module file's bytes, read once at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from session.canon import digest_bytes

from ._identity import file_digest
from ._types import (
    BoundProposition,
    EvidenceBindingError,
    MechanismDecision,
    MechanismOutcome,
    normalise_digest,
)

__all__ = ["BytesDigestMechanism"]

_SOURCE_DIGEST: Final = file_digest(__file__)


class BytesDigestMechanism:
    """Checks that the single evidence item hashes to the expected SHA-256 digest."""

    mechanism_id: str = "vstd.bytes.sha256"
    mechanism_digest: str = _SOURCE_DIGEST

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        try:
            shaped = not (binding.predicate != "bytes.sha256" or len(evidence) != 1)
            observed = digest_bytes(evidence[0]) if shaped else ""
        except Exception:  # a binding or an item of another shape: a decision is data
            shaped = False
        if not shaped:
            return MechanismDecision(
                MechanismOutcome.UNKNOWN, "this mechanism checks one bytes.sha256 proposition"
            )
        try:
            expected = normalise_digest(binding.expected)
        except EvidenceBindingError:
            expected = str(binding.expected)
        outcome = MechanismOutcome.PASS if observed == expected else MechanismOutcome.FAIL
        return MechanismDecision(
            outcome, f"observed {observed}; expected {expected}", {"observed_digest": observed}
        )
