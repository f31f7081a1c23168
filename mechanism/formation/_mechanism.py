"""``FormationPathCertificateMechanism``: the typed-formation session adapter.

Normative behaviour: docs/spec/formation.md §5.

Identity. ``mechanism_id`` is ``vstd.typed_formation.checked.0.1``. ``mechanism_digest`` is this
project's own source-identity digest: ``H({"schema_version":
"VSTD-TYPED-FORMATION-SOURCE-IDENTITY-0.1", "profile_digest": <compiled>, "sources": [...]})``
where ``sources`` lists, in this fixed order, ``{"path", "digest"}`` for
``mechanism/formation/_mechanism.py``, ``mechanism/formation/_checker.py``,
``mechanism/formation/_wire.py`` and ``mechanism/canonical.py`` (each digest over the file's raw
bytes, read once at import). The producer is not in the inventory. This is source-file
identity, not loaded-code attestation; it cannot equal the reference's value.

Evaluation never reads files and never raises for any binding or evidence. Every decision has
``details`` = its reason code (``""`` for PASS) and observations exactly ``status``,
``reason_codes``, ``formation_report`` (the pure checker's report or ``None``),
``residual_obligations``, ``trust_roots_meaning`` and ``claim_scope``. Preflight, in order, the
first hit decides (the report is ``None`` unless stated):

1. binding not exactly a ``BoundProposition`` → UNKNOWN ``FORMATION_BINDING_UNSUPPORTED``;
2. wrong mechanism id, or mechanism digest not a strict ``sha256:`` digest equal to ours →
   UNKNOWN ``FORMATION_IMPLEMENTATION_UNSUPPORTED``;
3. predicate not exactly the mechanism id, or ``expected`` not exactly the string
   ``"CHECKED"`` → UNKNOWN ``FORMATION_PREDICATE_UNSUPPORTED``;
4. parameters not exactly a ``dict`` → UNKNOWN ``FORMATION_PARAMETERS_UNSUPPORTED``; then a
   copy (only the copy is used from here on) must have exactly ``profile_digest``,
   ``ground_artifact_digest`` and ``authority_axiom_agency_digest``, each a strict digest;
5. ``profile_digest`` parameter ≠ compiled digest → UNKNOWN ``FORMATION_PROFILE_UNSUPPORTED``;
6. trust roots not a tuple equal to the sorted distinct parameter values → UNKNOWN
   ``FORMATION_ROOTS_UNSUPPORTED``;
7. bounds not exactly ``EvidenceBounds(2, n)`` with exact ints and ``0 <= n <= 524288`` →
   UNKNOWN ``FORMATION_BOUNDS_UNSUPPORTED``;
8. evidence refs not a tuple of two distinct strict digests, or ``subject_id`` not a strict
   digest → UNKNOWN ``FORMATION_REFERENCES_UNSUPPORTED``;
9. ``subject_id`` ≠ first ref → FAIL ``FORMATION_SUBJECT_BINDING_INVALID``;
10. evidence not a tuple/list of two items → UNKNOWN ``FORMATION_EVIDENCE_UNAVAILABLE``;
11. an item not exactly ``bytes`` → FAIL ``FORMATION_EVIDENCE_TYPE_INVALID``;
12. an item above 262,144 bytes or the pair above the declared byte bound → UNKNOWN
    ``FORMATION_LIMIT_EXCEEDED`` (this precedes rehashing: an oversized item can hide a
    substitution of the other; documented, stays UNKNOWN);
13. the items' digests ≠ the refs (subject, then certificate) → FAIL
    ``FORMATION_EVIDENCE_BINDING_INVALID``;
14. if the subject admits and names the compiled profile, a context digest ≠ the parameter of
    the same name → FAIL ``FORMATION_CONTEXT_BINDING_INVALID`` (before pure checking);
15. the pure checker's report (its internal entry point is handed the record step 14 admitted,
    or the admission error, and the subject digest step 13 computed: the subject is admitted
    and hashed once per evaluation; the report is exactly ``check_formation``'s):
    UNKNOWN → UNKNOWN ``FORMATION_CHECK_UNKNOWN``; INVALID → FAIL
    ``FORMATION_CHECK_INVALID``; anything else but CHECKED → UNKNOWN
    ``FORMATION_CHECK_RESULT_UNSUPPORTED`` (report attached to all three);
16. any exception in 14–15 → UNKNOWN ``FORMATION_EXECUTION_UNKNOWN``;
17. PASS, status ``CHECKED``, no reason, report attached.

One pass, same decisions: a binding and evidence of exact built-in types that pass steps 1–13
are recognised in one pass (``_honest``), each ``is_digest`` rule holding by equality with a
strict digest (the compiled mechanism and profile digests, the items' own digests — those the
session proved, :func:`session.resolved_references`, when it handed this very evidence tuple,
else hashed here); the
subject's head is then admitted instead of the whole subject, and only when its profile is the
compiled one and its context digests equal the ground and agency parameters (which are digests
by that equality, and pass step 14) is it handed to the pure check, which applies the per-node
rules itself and admits in full where ``check_formation`` would. Anything else — a refusal, or
a head that does not admit or match — takes the ordered steps above from step 1.

PASS means only that this exact finite certificate predicate held; FAIL is not the negation of
the mathematical claim; UNKNOWN covers unsupported, missing and exhausted.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import mechanism.canonical as _canonical
from mechanism.canonical import digest_bytes, is_digest
from mechanism.formation._checker import check_admitted_subject
from mechanism.formation._wire import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_PATH_STEPS,
    MAX_RECORD_BYTES,
    MECHANISM_ID,
    PROFILE_DIGEST,
    RESIDUAL_OBLIGATIONS,
    FormationError,
    admit_subject,
    admit_subject_head,
    validate_ceilings,
)
from session import (
    BoundProposition,
    EvidenceBindingError,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
    PairPrecheck,
    PairState,
    SourceIdentity,
    resolved_references,
)
from session import precheck as _steps

__all__ = [
    "ADAPTER_REASON_CODES",
    "MECHANISM_DIGEST",
    "PRECHECK",
    "SOURCE_IDENTITY_SCHEMA",
    "SOURCE_INVENTORY",
    "FormationPathCertificateMechanism",
    "formation_binding",
    "source_identity",
]

SOURCE_IDENTITY_SCHEMA: Final = "VSTD-TYPED-FORMATION-SOURCE-IDENTITY-0.1"
MAX_PAIR_BYTES: Final = 2 * MAX_RECORD_BYTES
TRUST_ROOTS_MEANING: Final = "DECLARED_ASSUMPTIONS_ONLY"
CLAIM_SCOPE: Final = "EXACT_FINITE_FORMATION_CERTIFICATE_ONLY"
PARAMETER_KEYS: Final = frozenset(
    {"profile_digest", "ground_artifact_digest", "authority_axiom_agency_digest"}
)

BINDING_UNSUPPORTED: Final = "FORMATION_BINDING_UNSUPPORTED"
IMPLEMENTATION_UNSUPPORTED: Final = "FORMATION_IMPLEMENTATION_UNSUPPORTED"
PREDICATE_UNSUPPORTED: Final = "FORMATION_PREDICATE_UNSUPPORTED"
PARAMETERS_UNSUPPORTED: Final = "FORMATION_PARAMETERS_UNSUPPORTED"
PROFILE_UNSUPPORTED: Final = "FORMATION_PROFILE_UNSUPPORTED"
ROOTS_UNSUPPORTED: Final = "FORMATION_ROOTS_UNSUPPORTED"
BOUNDS_UNSUPPORTED: Final = "FORMATION_BOUNDS_UNSUPPORTED"
REFERENCES_UNSUPPORTED: Final = "FORMATION_REFERENCES_UNSUPPORTED"
SUBJECT_BINDING_INVALID: Final = "FORMATION_SUBJECT_BINDING_INVALID"
EVIDENCE_UNAVAILABLE: Final = "FORMATION_EVIDENCE_UNAVAILABLE"
EVIDENCE_TYPE_INVALID: Final = "FORMATION_EVIDENCE_TYPE_INVALID"
LIMIT_EXCEEDED: Final = "FORMATION_LIMIT_EXCEEDED"
EVIDENCE_BINDING_INVALID: Final = "FORMATION_EVIDENCE_BINDING_INVALID"
CONTEXT_BINDING_INVALID: Final = "FORMATION_CONTEXT_BINDING_INVALID"
CHECK_UNKNOWN: Final = "FORMATION_CHECK_UNKNOWN"
CHECK_INVALID: Final = "FORMATION_CHECK_INVALID"
CHECK_RESULT_UNSUPPORTED: Final = "FORMATION_CHECK_RESULT_UNSUPPORTED"
EXECUTION_UNKNOWN: Final = "FORMATION_EXECUTION_UNKNOWN"

# Closed vocabulary of decision reasons → the outcome each one carries.
ADAPTER_REASON_CODES: Final[dict[str, MechanismOutcome]] = {
    BINDING_UNSUPPORTED: MechanismOutcome.UNKNOWN,
    IMPLEMENTATION_UNSUPPORTED: MechanismOutcome.UNKNOWN,
    PREDICATE_UNSUPPORTED: MechanismOutcome.UNKNOWN,
    PARAMETERS_UNSUPPORTED: MechanismOutcome.UNKNOWN,
    PROFILE_UNSUPPORTED: MechanismOutcome.UNKNOWN,
    ROOTS_UNSUPPORTED: MechanismOutcome.UNKNOWN,
    BOUNDS_UNSUPPORTED: MechanismOutcome.UNKNOWN,
    REFERENCES_UNSUPPORTED: MechanismOutcome.UNKNOWN,
    SUBJECT_BINDING_INVALID: MechanismOutcome.FAIL,
    EVIDENCE_UNAVAILABLE: MechanismOutcome.UNKNOWN,
    EVIDENCE_TYPE_INVALID: MechanismOutcome.FAIL,
    LIMIT_EXCEEDED: MechanismOutcome.UNKNOWN,
    EVIDENCE_BINDING_INVALID: MechanismOutcome.FAIL,
    CONTEXT_BINDING_INVALID: MechanismOutcome.FAIL,
    CHECK_UNKNOWN: MechanismOutcome.UNKNOWN,
    CHECK_INVALID: MechanismOutcome.FAIL,
    CHECK_RESULT_UNSUPPORTED: MechanismOutcome.UNKNOWN,
    EXECUTION_UNKNOWN: MechanismOutcome.UNKNOWN,
}

_HERE: Final = Path(__file__).resolve().parent
_IDENTITY: Final = SourceIdentity.read(
    SOURCE_IDENTITY_SCHEMA,
    (  # (inventory path, file) in the fixed inventory order
        ("mechanism/formation/_mechanism.py", _HERE / "_mechanism.py"),
        ("mechanism/formation/_checker.py", _HERE / "_checker.py"),
        ("mechanism/formation/_wire.py", _HERE / "_wire.py"),
        ("mechanism/canonical.py", Path(_canonical.__file__).resolve()),
    ),
    {"profile_digest": PROFILE_DIGEST},
)
SOURCE_INVENTORY: Final[tuple[tuple[str, str], ...]] = _IDENTITY.sources


def source_identity() -> dict[str, Any]:
    """The source-identity document whose canonical digest is :data:`MECHANISM_DIGEST`."""
    return _IDENTITY.document()


MECHANISM_DIGEST: Final = _IDENTITY.digest

#: Preflight steps 1–13 of the module contract, in order (:mod:`session._precheck`).
PRECHECK: Final = PairPrecheck(
    (
        _steps.binding_type(BINDING_UNSUPPORTED),
        _steps.implementation(IMPLEMENTATION_UNSUPPORTED, MECHANISM_ID, MECHANISM_DIGEST),
        _steps.predicate(PREDICATE_UNSUPPORTED, MECHANISM_ID, "CHECKED"),
        _steps.parameters(
            PARAMETERS_UNSUPPORTED,
            PARAMETER_KEYS,
            lambda copied: all(map(is_digest, copied.values())),
        ),
        _steps.step(
            "profile",
            PROFILE_UNSUPPORTED,
            lambda state: bool(state.parameters["profile_digest"] == PROFILE_DIGEST),
        ),
        _steps.trust_roots(
            ROOTS_UNSUPPORTED,
            lambda copied: tuple(sorted(set(map(str, copied.values())))),
        ),
        _steps.pair_bounds(BOUNDS_UNSUPPORTED, MAX_PAIR_BYTES),
        _steps.pair_references(REFERENCES_UNSUPPORTED),
        _steps.subject_is_first(SUBJECT_BINDING_INVALID),
        _steps.evidence_pair(EVIDENCE_UNAVAILABLE),
        _steps.evidence_bytes(EVIDENCE_TYPE_INVALID),
        _steps.evidence_size(LIMIT_EXCEEDED, MAX_RECORD_BYTES),
        _steps.evidence_rehash(EVIDENCE_BINDING_INVALID),
    )
)


def _decision(
    outcome: MechanismOutcome,
    reason: str | None,
    status: str,
    report: dict[str, Any] | None = None,
) -> MechanismDecision:
    return MechanismDecision(
        outcome=outcome,
        details="" if reason is None else reason,
        observations={
            "status": status,
            "reason_codes": [] if reason is None else [reason],
            "formation_report": report,
            "residual_obligations": list(RESIDUAL_OBLIGATIONS),
            "trust_roots_meaning": TRUST_ROOTS_MEANING,
            "claim_scope": CLAIM_SCOPE,
        },
    )


def _unknown(reason: str, report: dict[str, Any] | None = None) -> MechanismDecision:
    return _decision(MechanismOutcome.UNKNOWN, reason, "UNKNOWN", report)


def _fail(reason: str, report: dict[str, Any] | None = None) -> MechanismDecision:
    return _decision(MechanismOutcome.FAIL, reason, "INVALID", report)


_STATUS: Final = {MechanismOutcome.UNKNOWN: "UNKNOWN", MechanismOutcome.FAIL: "INVALID"}


class FormationPathCertificateMechanism:
    """Rechecks a bound typed-formation subject/certificate pair (rules in the module docstring).

    The resource ceilings default to the compiled values and may only be lowered (a bool, a
    non-int, a negative value or one above the default raises before the instance exists).
    """

    mechanism_id: str = MECHANISM_ID
    mechanism_digest: str = MECHANISM_DIGEST
    #: The most evidence one evaluation accepts (read by hosts to clamp session bounds).
    accepted_bounds: EvidenceBounds = EvidenceBounds(2, MAX_PAIR_BYTES)

    def __init__(
        self,
        *,
        max_nodes: int = MAX_NODES,
        max_depth: int = MAX_DEPTH,
        max_path_steps: int = MAX_PATH_STEPS,
    ) -> None:
        validate_ceilings(max_nodes=max_nodes, max_depth=max_depth, max_path_steps=max_path_steps)
        self._max_nodes = max_nodes
        self._max_depth = max_depth
        self._max_path_steps = max_path_steps

    @property
    def ceilings(self) -> dict[str, int]:
        """The resource ceilings this instance checks with."""
        return {
            "max_nodes": self._max_nodes,
            "max_depth": self._max_depth,
            "max_path_steps": self._max_path_steps,
        }

    def __repr__(self) -> str:
        return f"FormationPathCertificateMechanism({self.ceilings})"

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        """Decide the bound formation proposition over ``(subject, certificate)`` bytes."""
        try:
            return self._evaluate(binding, evidence)
        except Exception:  # a decision is data: never raise to the session
            return _unknown(EXECUTION_UNKNOWN)

    def _evaluate(self, binding: object, evidence: object) -> MechanismDecision:
        honest = _honest(binding, evidence)
        if honest is not None:
            # Steps 1–14 in one pass (see _honest); anything else takes the ordered path.
            subject, certificate, subject_digest, ground, agency = honest
            try:
                head = admit_subject_head(subject, max_nodes=self._max_nodes)
            except Exception:
                head = None
            if (
                head is not None
                and head["profile_digest"] == PROFILE_DIGEST
                and head["context"]["ground_artifact_digest"] == ground
                and head["context"]["authority_axiom_agency_digest"] == agency
            ):
                try:
                    # 15. The pure check, handed the head it admitted (the check applies the
                    # per-node rules, and admits in full where check_formation would).
                    report = check_admitted_subject(
                        subject,
                        certificate,
                        head,
                        subject_digest,
                        max_nodes=self._max_nodes,
                        max_depth=self._max_depth,
                        max_path_steps=self._max_path_steps,
                        head_only=True,
                    )
                except Exception:
                    return _unknown(EXECUTION_UNKNOWN)  # 16.
                return _reported(report)
        # 1–13. The pre-checks, in order; the first that does not hold decides.
        admitted = PRECHECK.run(binding, evidence)
        if not isinstance(admitted, PairState):
            return _decision(admitted.outcome, admitted.code, _STATUS[admitted.outcome])
        parameters = admitted.parameters
        subject, certificate = admitted.items
        try:
            # 14. Declared context against the bound parameters (before pure checking).
            try:
                record: dict[str, Any] | FormationError = admit_subject(
                    subject, max_nodes=self._max_nodes
                )
            except FormationError as error:
                record = error  # the pure checker reports it
            if (
                not isinstance(record, FormationError)
                and record["profile_digest"] == PROFILE_DIGEST
            ):
                context = record["context"]
                if (
                    context["ground_artifact_digest"] != parameters["ground_artifact_digest"]
                    or context["authority_axiom_agency_digest"]
                    != parameters["authority_axiom_agency_digest"]
                ):
                    return _fail(CONTEXT_BINDING_INVALID)
            # 15. The pure, independent check, handed the record admitted above (it is admitted
            # once per evaluation) and the subject digest the rehash step computed.
            report = check_admitted_subject(
                subject,
                certificate,
                record,
                admitted.digests[0],
                max_nodes=self._max_nodes,
                max_depth=self._max_depth,
                max_path_steps=self._max_path_steps,
            )
            return _reported(report)
        except Exception:
            # 16. Execution failed: unknown, not a refutation.
            return _unknown(EXECUTION_UNKNOWN)


def _reported(report: dict[str, Any]) -> MechanismDecision:
    """Steps 15 and 17: the decision the pure checker's report carries."""
    status = report.get("status") if type(report) is dict else None
    if status == "UNKNOWN":
        return _unknown(CHECK_UNKNOWN, report)
    if status == "INVALID":
        return _fail(CHECK_INVALID, report)
    if status != "CHECKED":
        return _unknown(CHECK_RESULT_UNSUPPORTED, report if type(report) is dict else None)
    # 17. The exact finite certificate predicate held.
    return _decision(MechanismOutcome.PASS, None, "CHECKED", report)


def _honest(binding: object, evidence: object) -> tuple[bytes, bytes, str, str, str] | None:
    """Preflight steps 1–13 in one pass, for a binding and evidence of exact built-in types
    that pass every one of them: ``(subject, certificate, subject digest, ground parameter,
    agency parameter)``; ``None`` for anything else (the ordered steps then decide).

    Every field is type-checked before it is compared, so no code of the caller's runs. The
    rules the ordered steps check with ``is_digest`` hold here by equality with a value that
    is a strict digest: the mechanism digest equals :data:`MECHANISM_DIGEST`, the profile
    parameter :data:`PROFILE_DIGEST`, the two references the items' own digests (step 13:
    the references the session resolved them under when it handed this very tuple, which the
    store proved them to hash to, else hashed here) and ``subject_id`` the first reference.
    The ground and agency parameters are only known to be exact strings: the caller accepts
    them only when they equal the context digests of the subject it admitted (digests by
    admission), which is also step 14; otherwise it takes the ordered path.
    """
    if type(binding) is not BoundProposition or not _honest_identity(binding):
        return None
    parameters = _honest_parameters(binding)
    if parameters is None:
        return None
    limit = _honest_limit(binding.bounds)
    if limit is None:
        return None
    refs = _honest_refs(binding)
    if refs is None:
        return None
    pair = _honest_pair(evidence, limit)
    if pair is None:
        return None
    subject, certificate = pair
    resolved = resolved_references(evidence)
    if resolved is None:
        resolved = (digest_bytes(subject), digest_bytes(certificate))
    if resolved != refs:
        return None
    return subject, certificate, refs[0], *parameters


def _honest_identity(binding: BoundProposition) -> bool:
    """Steps 2–3 of :func:`_honest`: our mechanism id and digest, predicate and expectation."""
    identifier, digest = binding.mechanism_id, binding.mechanism_digest
    predicate, expected = binding.predicate, binding.expected
    return (
        type(identifier) is str
        and type(digest) is str
        and type(predicate) is str
        and type(expected) is str
        and identifier == MECHANISM_ID
        and digest == MECHANISM_DIGEST
        and predicate == MECHANISM_ID
        and expected == "CHECKED"
    )


def _honest_parameters(binding: BoundProposition) -> tuple[str, str] | None:
    """Steps 4–6 of :func:`_honest`: the ground and agency parameters, or ``None``."""
    parameters = binding.parameters
    if type(parameters) is not dict:
        return None
    copied = dict(parameters)  # only the copy is read from here on (step 4)
    for key in copied:
        if type(key) is not str:
            return None
    profile = copied.get("profile_digest")
    ground = copied.get("ground_artifact_digest")
    agency = copied.get("authority_axiom_agency_digest")
    if (
        len(copied) != len(PARAMETER_KEYS)
        or type(profile) is not str
        or type(ground) is not str
        or type(agency) is not str
        or profile != PROFILE_DIGEST
    ):
        return None
    roots = binding.trust_roots
    if type(roots) is not tuple:
        return None
    for root in roots:
        if type(root) is not str:
            return None
    if roots != tuple(sorted({profile, ground, agency})):
        return None
    return ground, agency


def _honest_limit(bounds: object) -> int | None:
    """Step 7 of :func:`_honest`: the pair's byte bound of an exact ``EvidenceBounds(2, n)``."""
    if type(bounds) is not EvidenceBounds:
        return None
    items, limit = bounds.max_evidence_items, bounds.max_evidence_bytes
    if (
        type(items) is not int
        or items != 2
        or type(limit) is not int
        or not 0 <= limit <= MAX_PAIR_BYTES
    ):
        return None
    return limit


def _honest_refs(binding: BoundProposition) -> tuple[str, str] | None:
    """Steps 8–9 of :func:`_honest`: two distinct string refs, the first the subject id."""
    refs, subject_id = binding.evidence_refs, binding.subject_id
    if type(refs) is not tuple or len(refs) != 2:
        return None
    first, second = refs
    if (
        type(first) is not str
        or type(second) is not str
        or type(subject_id) is not str
        or first == second
        or subject_id != first
    ):
        return None
    return first, second


def _honest_pair(evidence: object, limit: int) -> tuple[bytes, bytes] | None:
    """Steps 10–12 of :func:`_honest`: two exact ``bytes`` items within the limits."""
    if type(evidence) is not tuple and type(evidence) is not list:
        return None
    pair = tuple(evidence)
    if len(pair) != 2:
        return None
    subject, certificate = pair
    if (
        type(subject) is not bytes
        or type(certificate) is not bytes
        or len(subject) > MAX_RECORD_BYTES
        or len(certificate) > MAX_RECORD_BYTES
        or len(subject) + len(certificate) > limit
    ):
        return None
    return subject, certificate


if not (is_digest(MECHANISM_DIGEST) and is_digest(PROFILE_DIGEST)):  # what _honest relies on
    raise RuntimeError("the compiled mechanism and profile digests must be strict digests")


def formation_binding(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    *,
    mechanism_digest: str | None = None,
) -> BoundProposition:
    """The honest binding a caller would pin for this pair.

    Parameters come from the subject's *declared* context (declarations, not proofs); trust
    roots are their sorted distinct values; bounds are ``EvidenceBounds(2, 524288)``; the
    mechanism digest defaults to this installation's :data:`MECHANISM_DIGEST`. Raises
    :class:`FormationError` when the subject cannot be admitted or the pair cannot be bound
    (for example, identical subject and certificate bytes).
    """
    subject = admit_subject(subject_bytes)
    if type(certificate_bytes) is not bytes:
        raise FormationError("certificate must be exact bytes")
    context = subject["context"]
    parameters = {
        "profile_digest": subject["profile_digest"],
        "ground_artifact_digest": context["ground_artifact_digest"],
        "authority_axiom_agency_digest": context["authority_axiom_agency_digest"],
    }
    subject_ref = digest_bytes(subject_bytes)
    certificate_ref = digest_bytes(certificate_bytes)
    try:
        return BoundProposition(
            subject_id=subject_ref,
            predicate=MECHANISM_ID,
            expected="CHECKED",
            mechanism_id=MECHANISM_ID,
            mechanism_digest=MECHANISM_DIGEST if mechanism_digest is None else mechanism_digest,
            evidence_refs=(subject_ref, certificate_ref),
            trust_roots=tuple(parameters.values()),
            bounds=EvidenceBounds(max_evidence_items=2, max_evidence_bytes=MAX_PAIR_BYTES),
            parameters=parameters,
        )
    except EvidenceBindingError as error:
        raise FormationError(f"cannot bind this pair: {error}") from None
