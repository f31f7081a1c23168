"""``VerificationSession``: binds a decision to an exact binding snapshot.

Normative behaviour: docs/spec/formation.md §1.3.

``evaluate(binding)`` runs these steps, in order; the first that fails decides:

1. snapshot: deep-copy the binding and digest it; failure *raises* ``EvidenceBindingError``
   ("cannot obtain a digestible binding snapshot") — there is nothing to bind a result to;
2. mechanism lookup by ``mechanism_id`` → else UNKNOWN "bound mechanism is not registered";
3. registered digest equals the binding's (both normalised) → else UNKNOWN
   "registered mechanism digest does not match";
4. item bound checked *before* resolution → else UNKNOWN "evidence item bound exceeded";
5. resolve every reference in order (re-hashed) → else UNKNOWN with the store's message;
6. byte bound over the resolved bytes → else UNKNOWN "evidence byte bound exceeded";
7. a second deep copy for execution, whose digest must equal the snapshot's → else UNKNOWN
   "execution snapshot differs from binding" (a plain snapshot, :func:`_plain_state`, is its
   own execution copy: nothing else holds it, and what steps 10–12 report is read first);
8. call ``mechanism.evaluate(execution_copy, payloads)``;
9. the execution copy's digest is unchanged by the call → else UNKNOWN
   "mechanism changed its binding snapshot" (for a plain snapshot, recomputed only when an
   object the digest is computed from was replaced: :func:`_unchanged`);
10. any exception in 7–9 → UNKNOWN "mechanism execution failed: <Type>: <message>";
11. the return value is a ``MechanismDecision`` → else UNKNOWN
    "mechanism returned an invalid decision object";
12. the result carries the snapshot digest, the mechanism's outcome, details and observations.

``evaluate_compound(bindings)`` applies the same checks to several bindings of one exact
mechanism before a single call of its ``evaluate_compound``; any refusal answers every
binding UNKNOWN (see the method).

Session-level refusals are UNKNOWN with empty observations, never FAIL; the session never
inspects the mechanism's outcome. Observed bytes are 0 before step 6. Apart from step 1 nothing
raises for a bad binding or a misbehaving mechanism: an unhashable mechanism id is "not
registered", a registered instance whose digest became malformed "does not match", a bound
that cannot be compared with a count is exceeded, and a decision whose observations are not a
mapping is "an invalid decision object".
"""

from __future__ import annotations

import copy
import itertools
import operator
from collections.abc import Sequence
from typing import Final

from ._store import EvidenceStore
from ._types import (
    BoundProposition,
    EvaluatedProposition,
    EvidenceBindingError,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
    VerificationMechanism,
    normalise_digest,
)

__all__ = ["VerificationSession"]


class VerificationSession:
    """Registered mechanisms plus the evidence store their propositions resolve against."""

    def __init__(self, evidence_store: EvidenceStore | None = None) -> None:
        self.evidence_store = evidence_store if evidence_store is not None else EvidenceStore()
        self._mechanisms: dict[str, VerificationMechanism] = {}

    def register(self, mechanism: VerificationMechanism) -> None:
        """Register ``mechanism``; a different digest under a registered id is refused."""
        if not mechanism.mechanism_id:
            raise EvidenceBindingError("mechanism_id must not be empty")
        digest = normalise_digest(mechanism.mechanism_digest)
        existing = self._mechanisms.get(mechanism.mechanism_id)
        if existing is not None and normalise_digest(existing.mechanism_digest) != digest:
            raise EvidenceBindingError(
                f"mechanism substitution refused for {mechanism.mechanism_id}"
            )
        self._mechanisms[mechanism.mechanism_id] = mechanism

    def registered_mechanisms(self) -> tuple[VerificationMechanism, ...]:
        """Registered mechanisms sorted by id."""
        return tuple(self._mechanisms[key] for key in sorted(self._mechanisms))

    def evaluate_compound(
        self, bindings: Sequence[BoundProposition]
    ) -> tuple[EvaluatedProposition, ...]:
        """Evaluate several bindings of one exact mechanism in a single invocation.

        Every binding is snapshotted first (an undigestible one raises, as in ``evaluate``).
        The bindings must name one mechanism id and one (normalised) digest; the mechanism
        must be registered under that digest and expose ``evaluate_compound(bindings,
        evidence)``. Each binding's item bound, resolution and byte bound are checked before
        the one invocation. Any refusal answers every binding UNKNOWN with the same details
        (empty observations) and the mechanism is not called. The mechanism receives
        execution copies and a tuple of payload tuples, must leave the copies unchanged, and
        must return one ``MechanismDecision`` per binding, in order.
        """
        snapshots = [_snapshot(binding) for binding in bindings]

        def refused_all(
            details: str, observed: Sequence[int] = ()
        ) -> tuple[EvaluatedProposition, ...]:
            counts = list(observed) or [0] * len(snapshots)
            return tuple(
                _refusal(snapshot, digest, details, count)
                for (snapshot, digest), count in zip(snapshots, counts, strict=True)
            )

        if not snapshots:
            return ()
        try:
            coordinates = {
                (snapshot.mechanism_id, normalise_digest(snapshot.mechanism_digest))
                for snapshot, _ in snapshots
            }
        except (TypeError, EvidenceBindingError):
            coordinates = set()
        if len(coordinates) != 1:
            return refused_all("compound propositions do not bind one exact mechanism")
        ((mechanism_id, bound_digest),) = coordinates
        mechanism = self._mechanisms.get(mechanism_id)
        if mechanism is None:
            return refused_all("bound mechanism is not registered")
        try:
            registered_digest = normalise_digest(mechanism.mechanism_digest)
        except EvidenceBindingError:
            return refused_all("registered mechanism digest does not match")
        if registered_digest != bound_digest:
            return refused_all("registered mechanism digest does not match")
        entry = getattr(mechanism, "evaluate_compound", None)
        if not callable(entry):
            return refused_all("bound mechanism has no compound evaluation entry point")
        for snapshot, _ in snapshots:
            if not _within(len(snapshot.evidence_refs), snapshot.bounds.max_evidence_items):
                return refused_all("compound evidence item bound exceeded before invocation")
        evidence: list[tuple[bytes, ...]] = []
        for snapshot, _ in snapshots:
            try:
                evidence.append(
                    tuple(self.evidence_store.resolve(ref) for ref in snapshot.evidence_refs)
                )
            except EvidenceBindingError as error:
                return refused_all(str(error))
        observed = [sum(len(payload) for payload in payloads) for payloads in evidence]
        for (snapshot, _), count in zip(snapshots, observed, strict=True):
            if not _within(count, snapshot.bounds.max_evidence_bytes):
                return refused_all(
                    "compound evidence byte bound exceeded before invocation", observed
                )
        try:
            copies = [copy.deepcopy(snapshot) for snapshot, _ in snapshots]
            if any(
                execution.digest() != digest
                for execution, (_, digest) in zip(copies, snapshots, strict=True)
            ):
                return refused_all("execution snapshot differs from binding", observed)
            decisions = entry(tuple(copies), tuple(evidence))
            if any(
                execution.digest() != digest
                for execution, (_, digest) in zip(copies, snapshots, strict=True)
            ):
                return refused_all("mechanism changed its binding snapshot", observed)
            decided = tuple(decisions) if isinstance(decisions, list | tuple) else None
        except Exception as error:
            return refused_all(
                f"mechanism execution failed: {type(error).__name__}: {error}", observed
            )
        if (
            decided is None
            or len(decided) != len(snapshots)
            or not all(isinstance(decision, MechanismDecision) for decision in decided)
        ):
            return refused_all(
                "compound mechanism did not return one decision per binding", observed
            )
        results = []
        for (snapshot, digest), count, decision in zip(snapshots, observed, decided, strict=True):
            try:
                observations = dict(decision.observations)
            except (TypeError, ValueError):
                return refused_all("mechanism returned an invalid decision object", observed)
            results.append(
                EvaluatedProposition(
                    binding_digest=digest,
                    outcome=decision.outcome,
                    mechanism_id=snapshot.mechanism_id,
                    mechanism_digest=registered_digest,
                    evidence_refs=snapshot.evidence_refs,
                    trust_roots=snapshot.trust_roots,
                    observed_evidence_bytes=count,
                    details=decision.details,
                    observations=observations,
                )
            )
        return tuple(results)

    def evaluate(self, binding: BoundProposition) -> EvaluatedProposition:
        """Evaluate ``binding`` through the twelve steps of the module contract."""
        snapshot, snapshot_digest = _snapshot(binding)
        # What results and refusals report, read before the mechanism holds the snapshot.
        reported = _Reported(snapshot)

        def refused(details: str, observed: int = 0) -> EvaluatedProposition:
            return _refusal(reported, snapshot_digest, details, observed)

        try:
            mechanism = self._mechanisms.get(reported.mechanism_id)
        except TypeError:  # an unhashable id (set on the binding after construction)
            mechanism = None
        if mechanism is None:
            return refused("bound mechanism is not registered")
        try:
            registered_digest = normalise_digest(mechanism.mechanism_digest)
        except EvidenceBindingError:  # the instance changed its digest after registration
            return refused("registered mechanism digest does not match")
        if registered_digest != normalise_digest(snapshot.mechanism_digest):
            return refused("registered mechanism digest does not match")
        if not _within(len(reported.evidence_refs), snapshot.bounds.max_evidence_items):
            return refused("evidence item bound exceeded")
        try:
            payloads = tuple(self.evidence_store.resolve(ref) for ref in reported.evidence_refs)
        except EvidenceBindingError as error:
            return refused(str(error))
        observed = sum(len(payload) for payload in payloads)
        if not _within(observed, snapshot.bounds.max_evidence_bytes):
            return refused("evidence byte bound exceeded", observed)
        # Step 7. A plain snapshot (_plain_state) is itself the execution copy: nothing else
        # holds it and what is reported was read above; its field objects are recorded, and
        # only when one is no longer the same object is the digest computed again (step 9).
        # Any other snapshot is deep-copied once more and digested before and after.
        recorded = _field_objects(snapshot) if _plain_state(snapshot) is not None else None
        try:
            if recorded is None:
                execution_copy = copy.deepcopy(snapshot)
                if execution_copy.digest() != snapshot_digest:
                    return refused("execution snapshot differs from binding", observed)
            else:
                execution_copy = snapshot
            decision = mechanism.evaluate(execution_copy, payloads)
            if (
                recorded is None or not _unchanged(execution_copy, recorded)
            ) and execution_copy.digest() != snapshot_digest:
                return refused("mechanism changed its binding snapshot", observed)
        except Exception as error:
            return refused(f"mechanism execution failed: {type(error).__name__}: {error}", observed)
        if not isinstance(decision, MechanismDecision):
            return refused("mechanism returned an invalid decision object", observed)
        try:
            observations = dict(decision.observations)
        except (TypeError, ValueError):  # observations that are not a mapping
            return refused("mechanism returned an invalid decision object", observed)
        return EvaluatedProposition(
            binding_digest=snapshot_digest,
            outcome=decision.outcome,
            mechanism_id=reported.mechanism_id,
            mechanism_digest=registered_digest,
            evidence_refs=reported.evidence_refs,
            trust_roots=reported.trust_roots,
            observed_evidence_bytes=observed,
            details=decision.details,
            observations=observations,
        )


class _Reported:
    """The snapshot fields a result or refusal reports (a mechanism may hold the snapshot)."""

    __slots__ = ("evidence_refs", "mechanism_digest", "mechanism_id", "trust_roots")

    def __init__(self, snapshot: BoundProposition) -> None:
        self.mechanism_id = snapshot.mechanism_id
        self.mechanism_digest = snapshot.mechanism_digest
        self.evidence_refs = snapshot.evidence_refs
        self.trust_roots = snapshot.trust_roots


def _field_objects(binding: BoundProposition) -> tuple[object, ...]:
    """Every object a plain binding's digest is computed from: its fields, its bounds' two
    ints, and its parameters' keys and values (the only mutable container)."""
    bounds = binding.bounds
    return (
        binding.subject_id,
        binding.predicate,
        binding.expected,
        binding.mechanism_id,
        binding.mechanism_digest,
        binding.evidence_refs,
        binding.trust_roots,
        bounds,
        bounds.max_evidence_items,
        bounds.max_evidence_bytes,
        binding.parameters,
        *itertools.chain.from_iterable(binding.parameters.items()),
    )


def _unchanged(binding: BoundProposition, recorded: tuple[object, ...]) -> bool:
    """Whether ``binding`` still consists of exactly the ``recorded`` objects (by identity:
    immutable objects, so equal content; a replaced object, even an equal one, is "changed"
    and the caller computes the digest). Never raises."""
    try:
        now = _field_objects(binding)
    except Exception:  # a deleted field: the digest will say so
        return False
    return len(now) == len(recorded) and all(map(operator.is_, now, recorded))


_PLAIN_EXPECTED: Final = frozenset({str, int, bool, type(None)})


def _plain_state(binding: BoundProposition) -> tuple[object, ...] | None:
    """The values ``binding.digest()`` is computed from, when every field is of an exact plain
    type (``str``; ``tuple`` of ``str``; ``EvidenceBounds`` of ``int``; ``dict`` of ``str`` to
    ``str``; ``expected`` a ``str``, ``int``, ``bool`` or ``None``), else ``None``.

    Two bindings with equal plain states encode identically, so have equal digests; the
    session compares states and falls back to computing the digest whenever a state is
    ``None`` or differs. Never raises.
    """
    try:
        if type(binding) is not BoundProposition:
            return None
        expected = binding.expected
        if type(expected) not in _PLAIN_EXPECTED:
            return None
        strings = (
            binding.subject_id,
            binding.predicate,
            binding.mechanism_id,
            binding.mechanism_digest,
        )
        refs, roots, bounds, parameters = (
            binding.evidence_refs,
            binding.trust_roots,
            binding.bounds,
            binding.parameters,
        )
        if (
            any(type(value) is not str for value in strings)
            or type(refs) is not tuple
            or type(roots) is not tuple
            or any(type(value) is not str for value in refs)
            or any(type(value) is not str for value in roots)
            or type(bounds) is not EvidenceBounds
            or type(parameters) is not dict
        ):
            return None
        items, size = bounds.max_evidence_items, bounds.max_evidence_bytes
        if type(items) is not int or type(size) is not int:
            return None
        pairs = tuple(parameters.items())
        if any(type(key) is not str or type(value) is not str for key, value in pairs):
            return None
        return (strings, type(expected), expected, refs, roots, items, size, pairs)
    except Exception:
        return None


def _snapshot(binding: BoundProposition) -> tuple[BoundProposition, str]:
    try:
        # What copy.deepcopy does for the exact type, without its memo bookkeeping.
        if type(binding) is BoundProposition:
            snapshot = binding.__deepcopy__({})
        else:
            snapshot = copy.deepcopy(binding)
        return snapshot, snapshot.digest()
    except Exception:
        raise EvidenceBindingError("cannot obtain a digestible binding snapshot") from None


def _refusal(
    snapshot: BoundProposition | _Reported, snapshot_digest: str, details: str, observed: int = 0
) -> EvaluatedProposition:
    return EvaluatedProposition(
        binding_digest=snapshot_digest,
        outcome=MechanismOutcome.UNKNOWN,
        mechanism_id=snapshot.mechanism_id,
        mechanism_digest=snapshot.mechanism_digest,
        evidence_refs=snapshot.evidence_refs,
        trust_roots=snapshot.trust_roots,
        observed_evidence_bytes=observed,
        details=details,
        observations={},
    )


def _within(count: int, bound: object) -> bool:
    """``count <= bound``; a bound that cannot be compared with a count holds nothing."""
    try:
        return bool(count <= bound)  # type: ignore[operator]
    except TypeError:
        return False
