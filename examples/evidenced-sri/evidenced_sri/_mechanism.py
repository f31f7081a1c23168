"""``SriIntegrityMechanism``: a resource matches its Subresource Integrity metadata.

Evidence pair: (resource bytes, integrity metadata bytes). The caller pins both references;
the metadata file is the trusted statement, so it is the one trust root. Preflight, in order
(the evidenced pair pre-check pipeline, :mod:`session`; the first step that does not hold
decides, outcome UNKNOWN unless noted):

1. binding not exactly a ``BoundProposition`` → ``SRI_BINDING_UNSUPPORTED``;
2. other mechanism id, or a digest not exactly ours → ``SRI_IMPLEMENTATION_UNSUPPORTED``;
3. predicate not the mechanism id, or expected not exactly ``"MATCHED"`` →
   ``SRI_PREDICATE_UNSUPPORTED``;
4. parameters not exactly the empty dict → ``SRI_PARAMETERS_UNSUPPORTED``;
5. references not two distinct strict digests, or subject not a strict digest →
   ``SRI_REFERENCES_UNSUPPORTED``;
6. subject not the first reference → FAIL ``SRI_SUBJECT_BINDING_INVALID``;
7. trust roots not exactly ``(metadata reference,)`` → ``SRI_ROOTS_UNSUPPORTED``;
8. bounds not ``EvidenceBounds(2, n)`` with ``0 <= n <=`` the accepted bytes →
   ``SRI_BOUNDS_UNSUPPORTED``;
9. evidence not a tuple/list of two items → ``SRI_EVIDENCE_UNAVAILABLE``;
10. an item not exact bytes → FAIL ``SRI_EVIDENCE_TYPE_INVALID``;
11. the resource above ``max_resource_bytes``, the metadata above 4,096 bytes, or the pair above
    the declared bound → ``SRI_LIMIT_EXCEEDED`` (one limit per item, before rehashing);
12. the items' digests not the references → FAIL ``SRI_EVIDENCE_BINDING_INVALID``.

Then (:mod:`._integrity`): metadata that is not ASCII → ``SRI_METADATA_UNREADABLE``; no
supported hash expression → ``SRI_METADATA_EMPTY``; a strongest algorithm weaker than the host's
``minimum_algorithm`` → ``SRI_ALGORITHM_TOO_WEAK``; no strongest value matching the resource →
FAIL ``SRI_DIGEST_MISMATCH``; else PASS. Any exception → ``SRI_EXECUTION_UNKNOWN``: it never
raises. Observations: ``status``, ``reason_codes``, ``algorithm``, ``expected_values``,
``observed_value``, ``residual_obligations``.

Identity: ``example.sri.integrity.0.1``; the digest is the source identity of this module and
``_integrity.py`` (:class:`session.SourceIdentity`).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from session import (
    BoundProposition,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
    PairPrecheck,
    PairState,
    SourceIdentity,
    lower_only,
)
from session import precheck as steps

from ._integrity import ALGORITHMS, parse_metadata, strongest

__all__ = [
    "EXPECTED",
    "MAX_METADATA_BYTES",
    "MAX_RESOURCE_BYTES",
    "MECHANISM_DIGEST",
    "MECHANISM_ID",
    "REASON_CODES",
    "SriIntegrityMechanism",
]

MECHANISM_ID: Final = "example.sri.integrity.0.1"
EXPECTED: Final = "MATCHED"
MAX_RESOURCE_BYTES: Final = 1_048_576
MAX_METADATA_BYTES: Final = 4_096
RESIDUAL_OBLIGATIONS: Final = (
    "INTEGRITY_METADATA_IS_AUTHENTIC",
    "HASH_COLLISION_RESISTANCE_ASSUMED",
)

_UNKNOWN: Final = MechanismOutcome.UNKNOWN
_FAIL: Final = MechanismOutcome.FAIL
#: Every reason code → the outcome it carries (a closed vocabulary).
REASON_CODES: Final = {
    "SRI_BINDING_UNSUPPORTED": _UNKNOWN,
    "SRI_IMPLEMENTATION_UNSUPPORTED": _UNKNOWN,
    "SRI_PREDICATE_UNSUPPORTED": _UNKNOWN,
    "SRI_PARAMETERS_UNSUPPORTED": _UNKNOWN,
    "SRI_REFERENCES_UNSUPPORTED": _UNKNOWN,
    "SRI_SUBJECT_BINDING_INVALID": _FAIL,
    "SRI_ROOTS_UNSUPPORTED": _UNKNOWN,
    "SRI_BOUNDS_UNSUPPORTED": _UNKNOWN,
    "SRI_EVIDENCE_UNAVAILABLE": _UNKNOWN,
    "SRI_EVIDENCE_TYPE_INVALID": _FAIL,
    "SRI_LIMIT_EXCEEDED": _UNKNOWN,
    "SRI_EVIDENCE_BINDING_INVALID": _FAIL,
    "SRI_METADATA_UNREADABLE": _UNKNOWN,
    "SRI_METADATA_EMPTY": _UNKNOWN,
    "SRI_ALGORITHM_TOO_WEAK": _UNKNOWN,
    "SRI_DIGEST_MISMATCH": _FAIL,
    "SRI_EXECUTION_UNKNOWN": _UNKNOWN,
}
_STATUS: Final = {
    MechanismOutcome.PASS: "CHECKED",
    MechanismOutcome.FAIL: "INVALID",
    MechanismOutcome.UNKNOWN: "UNKNOWN",
}

_HERE: Final = Path(__file__).resolve().parent
MECHANISM_DIGEST: Final = SourceIdentity.read(
    "evidenced-sri.source-identity.v1",
    (
        ("evidenced_sri/_mechanism.py", _HERE / "_mechanism.py"),
        ("evidenced_sri/_integrity.py", _HERE / "_integrity.py"),
    ),
).digest


def _decision(
    outcome: MechanismOutcome, code: str | None, found: dict[str, Any] | None = None
) -> MechanismDecision:
    return MechanismDecision(
        outcome,
        code or "",
        {
            "status": _STATUS[outcome],
            "reason_codes": [] if code is None else [code],
            "algorithm": None,
            "expected_values": [],
            "observed_value": None,
            **(found or {}),
            "residual_obligations": list(RESIDUAL_OBLIGATIONS),
        },
    )


class SriIntegrityMechanism:
    """Decides a bound (resource, integrity metadata) pair (rules in the module docstring).

    ``max_resource_bytes`` may only be lowered; ``minimum_algorithm`` is one of
    ``sha256``/``sha384``/``sha512`` (metadata whose strongest algorithm is weaker is UNKNOWN).
    """

    mechanism_id: str = MECHANISM_ID
    mechanism_digest: str = MECHANISM_DIGEST

    def __init__(
        self, *, max_resource_bytes: int = MAX_RESOURCE_BYTES, minimum_algorithm: str = "sha256"
    ) -> None:
        self.max_resource_bytes = lower_only(
            "max_resource_bytes", max_resource_bytes, MAX_RESOURCE_BYTES
        )
        if minimum_algorithm not in ALGORITHMS:
            raise ValueError(f"minimum_algorithm must be one of {list(ALGORITHMS)}")
        self.minimum_algorithm = minimum_algorithm
        self.accepted_bounds = EvidenceBounds(2, self.max_resource_bytes + MAX_METADATA_BYTES)
        self.precheck = PairPrecheck(
            (
                steps.binding_type("SRI_BINDING_UNSUPPORTED"),
                steps.implementation(
                    "SRI_IMPLEMENTATION_UNSUPPORTED", MECHANISM_ID, MECHANISM_DIGEST
                ),
                steps.predicate("SRI_PREDICATE_UNSUPPORTED", MECHANISM_ID, EXPECTED),
                steps.parameters("SRI_PARAMETERS_UNSUPPORTED", (), lambda copied: True),
                steps.pair_references("SRI_REFERENCES_UNSUPPORTED"),
                steps.subject_is_first("SRI_SUBJECT_BINDING_INVALID"),
                steps.step(
                    "trust_roots",
                    "SRI_ROOTS_UNSUPPORTED",
                    lambda s: s.binding.trust_roots == (s.binding.evidence_refs[1],),
                ),
                steps.pair_bounds(
                    "SRI_BOUNDS_UNSUPPORTED", self.accepted_bounds.max_evidence_bytes
                ),
                steps.evidence_pair("SRI_EVIDENCE_UNAVAILABLE"),
                steps.evidence_bytes("SRI_EVIDENCE_TYPE_INVALID"),
                steps.evidence_sizes(
                    "SRI_LIMIT_EXCEEDED", (self.max_resource_bytes, MAX_METADATA_BYTES)
                ),
                steps.evidence_rehash("SRI_EVIDENCE_BINDING_INVALID"),
            )
        )

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        """Decide the bound SRI proposition over ``(resource, metadata)`` bytes."""
        try:
            return self._evaluate(binding, evidence)
        except Exception:  # a decision is data: never raise to the session
            return _decision(_UNKNOWN, "SRI_EXECUTION_UNKNOWN")

    def _evaluate(self, binding: object, evidence: object) -> MechanismDecision:
        admitted = self.precheck.run(binding, evidence)
        if not isinstance(admitted, PairState):
            return _decision(admitted.outcome, admitted.code)
        resource, metadata = admitted.items
        try:
            text = metadata.decode("ascii")
        except UnicodeDecodeError:
            return _decision(_UNKNOWN, "SRI_METADATA_UNREADABLE")
        chosen = strongest(parse_metadata(text))
        if not chosen:
            return _decision(_UNKNOWN, "SRI_METADATA_EMPTY")
        algorithm = chosen[0].algorithm
        observed = base64.b64encode(hashlib.new(algorithm, resource).digest()).decode("ascii")
        found = {
            "algorithm": algorithm,
            "expected_values": [expression.value for expression in chosen],
            "observed_value": observed,
        }
        if ALGORITHMS.index(algorithm) < ALGORITHMS.index(self.minimum_algorithm):
            return _decision(_UNKNOWN, "SRI_ALGORITHM_TOO_WEAK", found)
        if all(expression.value != observed for expression in chosen):
            return _decision(_FAIL, "SRI_DIGEST_MISMATCH", found)
        return _decision(MechanismOutcome.PASS, None, found)
