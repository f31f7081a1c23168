"""The evidence-bound session protocol: pure, synchronous, no sockets, files or clocks.

A host registers mechanism instances in a :class:`VerificationSession`; a caller pins a
:class:`BoundProposition` (mechanism id and digest, exact evidence references, trust roots,
bounds, parameters); the session resolves and bounds the evidence, runs the mechanism on a
snapshot of the binding, and returns an :class:`EvaluatedProposition` whose outcome is
``PASS``, ``FAIL`` or ``UNKNOWN``. See ``docs/spec/formation.md`` §1.

One edge helper lives here as well, :func:`read_capped` (with :func:`read_prefix`,
:class:`InputTooLarge` and :data:`MAX_INPUT_FILE_BYTES`): the capped file read every command
line uses. It is in the bottom layer only so that every package may import it; the protocol
above never calls it.
"""

from ._bytes_digest import BytesDigestMechanism
from ._capped_read import MAX_INPUT_FILE_BYTES, InputTooLarge, read_capped, read_prefix
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
    "MAX_INPUT_FILE_BYTES",
    "BoundProposition",
    "BytesDigestMechanism",
    "EvaluatedProposition",
    "EvidenceBindingError",
    "EvidenceBounds",
    "EvidenceStore",
    "FrozenInstanceError",
    "InputTooLarge",
    "MechanismDecision",
    "MechanismOutcome",
    "VerificationMechanism",
    "VerificationSession",
    "core_digest",
    "normalise_digest",
    "read_capped",
    "read_prefix",
]
