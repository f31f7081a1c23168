"""``VerificationSession``: binds a decision to an exact binding snapshot.

Normative behaviour: docs/spec/formation.md §1.3.

``evaluate(binding)`` runs these steps, in order; the first that fails decides:

1. snapshot: deep-copy the binding and digest it (:func:`session._snapshot.take`: one pass for
   a plain binding); failure *raises* ``EvidenceBindingError`` ("cannot obtain a digestible
   binding snapshot") — there is nothing to bind a result to;
2. mechanism lookup by ``mechanism_id`` → else UNKNOWN "bound mechanism is not registered";
3. registered digest equals the binding's (both normalised) → else UNKNOWN
   "registered mechanism digest does not match";
4. item bound checked *before* resolution → else UNKNOWN "evidence item bound exceeded";
5. resolve every reference in order (re-hashed) → else UNKNOWN with the store's message;
6. byte bound over the resolved bytes → else UNKNOWN "evidence byte bound exceeded";
7. a second deep copy for execution, whose digest must equal the snapshot's → else UNKNOWN
   "execution snapshot differs from binding" (a plain snapshot, :mod:`session._snapshot`, is its
   own execution copy: nothing else holds it, and what steps 10–12 report is read first);
8. call ``mechanism.evaluate(execution_copy, payloads)`` (during the call,
   :func:`session.resolved_references` of ``payloads`` answers the references step 5 resolved);
9. the execution copy's digest is unchanged by the call → else UNKNOWN
   "mechanism changed its binding snapshot" (for a plain snapshot, recomputed only when an
   object the digest is computed from was replaced: :func:`session._snapshot.unchanged`);
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
from collections.abc import Sequence
from typing import Any

from ._resolved import HANDED
from ._snapshot import Snapshot, normalised_digest, take, unchanged
from ._store import EvidenceStore
from ._types import (
    BoundProposition,
    EvaluatedProposition,
    EvidenceBindingError,
    MechanismDecision,
    MechanismOutcome,
    VerificationMechanism,
    evaluated,
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
        digest = normalised_digest(mechanism.mechanism_digest)
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
        if not snapshots:
            return ()
        observed: list[int] = []
        try:
            registered_digest, entry = self._compound_mechanism(snapshots)
            evidence = self._compound_evidence(snapshots, observed)
            decided = _compound_decisions(entry, snapshots, evidence, observed)
            return _compound_results(snapshots, observed, decided, registered_digest)
        except _CompoundRefused as refusal:
            counts = observed or [0] * len(snapshots)
            return tuple(
                _refusal(snapshot, digest, refusal.details, count)
                for (snapshot, digest), count in zip(snapshots, counts, strict=True)
            )

    def _compound_mechanism(self, snapshots: list[tuple[BoundProposition, str]]) -> tuple[str, Any]:
        """The digest of the one registered mechanism the bindings name and its compound
        entry point; else :class:`_CompoundRefused`."""
        try:
            coordinates = {
                (snapshot.mechanism_id, normalise_digest(snapshot.mechanism_digest))
                for snapshot, _ in snapshots
            }
        except (TypeError, EvidenceBindingError):
            coordinates = set()
        if len(coordinates) != 1:
            raise _CompoundRefused("compound propositions do not bind one exact mechanism")
        ((mechanism_id, bound_digest),) = coordinates
        mechanism = self._mechanisms.get(mechanism_id)
        if mechanism is None:
            raise _CompoundRefused("bound mechanism is not registered")
        try:
            registered_digest = normalise_digest(mechanism.mechanism_digest)
        except EvidenceBindingError:
            raise _CompoundRefused("registered mechanism digest does not match") from None
        if registered_digest != bound_digest:
            raise _CompoundRefused("registered mechanism digest does not match")
        entry = getattr(mechanism, "evaluate_compound", None)
        if not callable(entry):
            raise _CompoundRefused("bound mechanism has no compound evaluation entry point")
        return registered_digest, entry

    def _compound_evidence(
        self, snapshots: list[tuple[BoundProposition, str]], observed: list[int]
    ) -> list[tuple[bytes, ...]]:
        """Every binding's item bound, then every resolution, then every byte bound; the
        byte counts go to ``observed`` once all are resolved (a later refusal reports them)."""
        for snapshot, _ in snapshots:
            if not _within(len(snapshot.evidence_refs), snapshot.bounds.max_evidence_items):
                raise _CompoundRefused("compound evidence item bound exceeded before invocation")
        evidence: list[tuple[bytes, ...]] = []
        for snapshot, _ in snapshots:
            try:
                evidence.append(
                    tuple(self.evidence_store.resolve(ref) for ref in snapshot.evidence_refs)
                )
            except EvidenceBindingError as error:
                raise _CompoundRefused(str(error)) from None
        observed.extend(sum(len(payload) for payload in payloads) for payloads in evidence)
        for (snapshot, _), count in zip(snapshots, observed, strict=True):
            if not _within(count, snapshot.bounds.max_evidence_bytes):
                raise _CompoundRefused("compound evidence byte bound exceeded before invocation")
        return evidence

    def evaluate(self, binding: BoundProposition) -> EvaluatedProposition:
        """Evaluate ``binding`` through the twelve steps of the module contract."""
        # Step 1, and what results and refusals report, read before the mechanism holds the
        # snapshot (session._snapshot: one pass for a plain binding).
        taken = take(binding)
        snapshot, snapshot_digest = taken.binding, taken.digest
        try:
            mechanism, registered_digest = self._bound_mechanism(taken)
            if not _within(len(taken.evidence_refs), snapshot.bounds.max_evidence_items):
                raise _Refused("evidence item bound exceeded")
            payloads, references = self._resolved(taken)
            observed = sum(map(len, payloads))
            if not _within(observed, snapshot.bounds.max_evidence_bytes):
                raise _Refused("evidence byte bound exceeded", observed)
            decision = _execute(mechanism, taken, payloads, references, observed)
            if not isinstance(decision, MechanismDecision):
                raise _Refused("mechanism returned an invalid decision object", observed)
            try:
                observations = dict(decision.observations)
            except (TypeError, ValueError):  # observations that are not a mapping
                raise _Refused("mechanism returned an invalid decision object", observed) from None
        except _Refused as refusal:
            return _refusal(taken, snapshot_digest, refusal.details, refusal.observed)
        return evaluated(
            snapshot_digest,
            decision.outcome,
            taken.mechanism_id,
            registered_digest,
            taken.evidence_refs,
            taken.trust_roots,
            observed,
            decision.details,
            observations,
        )

    def _bound_mechanism(self, taken: Snapshot) -> tuple[VerificationMechanism, str]:
        """Steps 2–3: the registered mechanism and its normalised digest, equal to the
        binding's; else :class:`_Refused`."""
        try:
            mechanism = self._mechanisms.get(taken.mechanism_id)
        except TypeError:  # an unhashable id (set on the binding after construction)
            mechanism = None
        if mechanism is None:
            raise _Refused("bound mechanism is not registered")
        try:
            registered_digest = normalised_digest(mechanism.mechanism_digest)
        except EvidenceBindingError:  # the instance changed its digest after registration
            raise _Refused("registered mechanism digest does not match") from None
        bound_digest = taken.bound_digest
        if bound_digest is None:
            bound_digest = normalise_digest(taken.binding.mechanism_digest)
        if registered_digest != bound_digest:
            raise _Refused("registered mechanism digest does not match")
        return mechanism, registered_digest

    def _resolved(self, taken: Snapshot) -> tuple[tuple[bytes, ...], tuple[str, ...] | None]:
        """Step 5: the payloads in order, and the references the store proved them to hash
        to (``resolved_references``) for a store of exactly this class only: a subclass may
        resolve by its own rules (``None``)."""
        store = self.evidence_store
        try:
            if type(store) is EvidenceStore:
                found = [store.resolved(ref) for ref in taken.evidence_refs]
                references = tuple([reference for reference, _ in found])
                return tuple([payload for _, payload in found]), references
            return tuple(store.resolve(ref) for ref in taken.evidence_refs), None
        except EvidenceBindingError as error:
            raise _Refused(str(error)) from None


class _Refused(Exception):
    """A session-level refusal of :meth:`VerificationSession.evaluate`: UNKNOWN with
    ``details``, after ``observed`` bytes were resolved."""

    def __init__(self, details: str, observed: int = 0) -> None:
        super().__init__(details)
        self.details = details
        self.observed = observed


def _execute(
    mechanism: VerificationMechanism,
    taken: Snapshot,
    payloads: tuple[bytes, ...],
    references: tuple[str, ...] | None,
    observed: int,
) -> object:
    """Steps 7–10: what the mechanism returned for the execution copy; else :class:`_Refused`.

    A plain snapshot is itself the execution copy: nothing else holds it and what is reported
    was read before; its field objects were recorded, and only when one is no longer the same
    object is the digest computed again (step 9). Any other snapshot is deep-copied once more
    and digested before and after."""
    snapshot, snapshot_digest, recorded = taken.binding, taken.digest, taken.recorded
    try:
        if recorded is None:
            execution_copy = copy.deepcopy(snapshot)
            if execution_copy.digest() != snapshot_digest:
                raise _Refused("execution snapshot differs from binding", observed)
        else:
            execution_copy = snapshot
        if references is None:
            decision = mechanism.evaluate(execution_copy, payloads)
        else:
            handed = HANDED.set((payloads, references))
            try:
                decision = mechanism.evaluate(execution_copy, payloads)
            finally:
                HANDED.reset(handed)
        if (
            recorded is None or not unchanged(execution_copy, recorded)
        ) and execution_copy.digest() != snapshot_digest:
            raise _Refused("mechanism changed its binding snapshot", observed)
    except _Refused:
        raise
    except Exception as error:
        raise _Refused(
            f"mechanism execution failed: {type(error).__name__}: {error}", observed
        ) from None
    return decision


class _CompoundRefused(Exception):
    """A compound evaluation refused: every binding is answered UNKNOWN with ``details``."""

    def __init__(self, details: str) -> None:
        super().__init__(details)
        self.details = details


def _compound_decisions(
    entry: Any,
    snapshots: list[tuple[BoundProposition, str]],
    evidence: list[tuple[bytes, ...]],
    observed: list[int],
) -> tuple[MechanismDecision, ...]:
    """The one invocation, on execution copies checked before and after: one decision per
    binding, in order; else :class:`_CompoundRefused`."""
    try:
        copies = [copy.deepcopy(snapshot) for snapshot, _ in snapshots]
        if any(
            execution.digest() != digest
            for execution, (_, digest) in zip(copies, snapshots, strict=True)
        ):
            raise _CompoundRefused("execution snapshot differs from binding")
        decisions = entry(tuple(copies), tuple(evidence))
        if any(
            execution.digest() != digest
            for execution, (_, digest) in zip(copies, snapshots, strict=True)
        ):
            raise _CompoundRefused("mechanism changed its binding snapshot")
        decided = tuple(decisions) if isinstance(decisions, list | tuple) else None
    except _CompoundRefused:
        raise
    except Exception as error:
        raise _CompoundRefused(
            f"mechanism execution failed: {type(error).__name__}: {error}"
        ) from None
    if (
        decided is None
        or len(decided) != len(snapshots)
        or not all(isinstance(decision, MechanismDecision) for decision in decided)
    ):
        raise _CompoundRefused("compound mechanism did not return one decision per binding")
    return decided


def _compound_results(
    snapshots: list[tuple[BoundProposition, str]],
    observed: list[int],
    decided: tuple[MechanismDecision, ...],
    registered_digest: str,
) -> tuple[EvaluatedProposition, ...]:
    """Step 12 for each binding of a compound evaluation (invalid observations refuse all)."""
    results = []
    for (snapshot, digest), count, decision in zip(snapshots, observed, decided, strict=True):
        try:
            observations = dict(decision.observations)
        except (TypeError, ValueError):
            raise _CompoundRefused("mechanism returned an invalid decision object") from None
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


def _snapshot(binding: BoundProposition) -> tuple[BoundProposition, str]:
    taken = take(binding)
    return taken.binding, taken.digest


def _refusal(
    snapshot: BoundProposition | Snapshot, snapshot_digest: str, details: str, observed: int = 0
) -> EvaluatedProposition:
    return evaluated(
        snapshot_digest,
        MechanismOutcome.UNKNOWN,
        snapshot.mechanism_id,
        snapshot.mechanism_digest,
        snapshot.evidence_refs,
        snapshot.trust_roots,
        observed,
        details,
        {},
    )


def _within(count: int, bound: object) -> bool:
    """``count <= bound``; a bound that cannot be compared with a count holds nothing."""
    try:
        return bool(count <= bound)  # type: ignore[operator]
    except TypeError:
        return False
