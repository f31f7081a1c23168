"""The evidence-bound session protocol: pure, synchronous, no sockets, files or clocks.

A host registers mechanism instances in a :class:`VerificationSession`; a caller pins a
:class:`BoundProposition` (mechanism id and digest, exact evidence references, trust roots,
bounds, parameters); the session resolves and bounds the evidence, runs the mechanism on a
snapshot of the binding, and returns an :class:`EvaluatedProposition` whose outcome is
``PASS``, ``FAIL`` or ``UNKNOWN``. See ``docs/spec/formation.md`` §1.
"""

from ._bytes_digest import BytesDigestMechanism
from ._session import VerificationSession
from ._store import EvidenceStore
from ._types import (
    BoundProposition,
    EvaluatedProposition,
    EvidenceBindingError,
    EvidenceBounds,
    FrozenInstanceError,
    MechanismDecision,
    MechanismOutcome,
    VerificationMechanism,
    core_digest,
    normalise_digest,
)

__all__ = [
    "BoundProposition",
    "BytesDigestMechanism",
    "EvaluatedProposition",
    "EvidenceBindingError",
    "EvidenceBounds",
    "EvidenceStore",
    "FrozenInstanceError",
    "MechanismDecision",
    "MechanismOutcome",
    "VerificationMechanism",
    "VerificationSession",
    "core_digest",
    "normalise_digest",
]
