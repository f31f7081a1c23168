"""Test-only mechanism providers for the conformance kit: one well-behaved, the others broken.

``SOUND``: one item whose ``sha256:`` digest is the binding's ``expected`` → PASS, another
digest → FAIL, anything else → UNKNOWN; never raises, never mutates. Each broken provider
differs in exactly one behaviour:

* ``MUTATING``: evaluate writes into the binding's parameters and appends to a list of evidence;
* ``NONDETERMINISTIC``: every other call answers the opposite outcome;
* ``RAISING``: raises ``ValueError`` for anything but one bytes item (instead of UNKNOWN);
* ``UNSTABLE``: its digest names the process that created it (another process, another digest);
* ``CLOCKED``: a counter in the observations (the outcome and details always agree);
* ``OVERREACHING``: states ``accepted_bounds`` of one 8-byte item yet PASSes larger bindings.

``MECHANISM_ONLY`` is a bare mechanism (no provider) for the kit's ``module:attribute`` form.
Targets: ``broken_mechanisms:SOUND`` and so on (``tests/_support`` is on the test path).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import Any, Final

from session import (
    BoundProposition,
    ConformanceSample,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
    MechanismProvider,
    NoOptions,
    SourceIdentity,
)
from session.canon import digest_bytes

PREDICATE: Final = "kit.sha256"
_DIGEST: Final = SourceIdentity.read("kit-probe-1", (("broken_mechanisms.py", __file__),)).digest


class SoundMechanism:
    mechanism_id = "test.kit.sound.0.1"
    mechanism_digest = _DIGEST

    def _decide(self, binding: Any, evidence: Any) -> MechanismDecision:
        try:
            if (
                type(binding) is not BoundProposition
                or binding.predicate != PREDICATE
                or type(evidence) not in (tuple, list)
                or len(evidence) != 1
                or type(evidence[0]) is not bytes
            ):
                return MechanismDecision(MechanismOutcome.UNKNOWN, "unsupported shape")
            observed = digest_bytes(evidence[0])
        except Exception:
            return MechanismDecision(MechanismOutcome.UNKNOWN, "unsupported shape")
        if observed == binding.expected:
            return MechanismDecision(MechanismOutcome.PASS, "", {"observed": observed})
        return MechanismDecision(MechanismOutcome.FAIL, "digest differs", {"observed": observed})

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        return self._decide(binding, evidence)


class MutatingMechanism(SoundMechanism):
    mechanism_id = "test.kit.mutating.0.1"

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        decision = self._decide(binding, evidence)
        parameters = getattr(binding, "parameters", None)
        if isinstance(parameters, dict):
            parameters["touched"] = "by the mechanism"
        if isinstance(evidence, list):
            evidence.append(b"appended by the mechanism")
        return decision


class NondeterministicMechanism(SoundMechanism):
    mechanism_id = "test.kit.nondeterministic.0.1"

    def __init__(self) -> None:
        self._calls = itertools.count()

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        decision = self._decide(binding, evidence)
        if next(self._calls) % 2:
            flipped = {
                MechanismOutcome.PASS: MechanismOutcome.FAIL,
                MechanismOutcome.FAIL: MechanismOutcome.PASS,
            }.get(decision.outcome, MechanismOutcome.PASS)
            return MechanismDecision(flipped, "flipped", {})
        return decision


class RaisingMechanism(SoundMechanism):
    mechanism_id = "test.kit.raising.0.1"

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        if len(evidence) != 1 or type(evidence[0]) is not bytes:
            raise ValueError("unexpected evidence")
        return self._decide(binding, evidence)


class UnstableMechanism(SoundMechanism):
    mechanism_id = "test.kit.unstable.0.1"

    def __init__(self) -> None:
        self.mechanism_digest = digest_bytes(f"process {os.getpid()}".encode())


class ClockedMechanism(SoundMechanism):
    mechanism_id = "test.kit.clocked.0.1"

    def __init__(self) -> None:
        self._ticks = itertools.count(1)

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        decision = self._decide(binding, evidence)
        observed = {**decision.observations, "evaluated_at": next(self._ticks)}
        return MechanismDecision(decision.outcome, decision.details, observed)


class OverreachingMechanism(SoundMechanism):
    mechanism_id = "test.kit.overreaching.0.1"
    accepted_bounds = EvidenceBounds(1, 8)


class _Provider(MechanismProvider[NoOptions]):
    mechanism_type: type[SoundMechanism] = SoundMechanism

    def create(self, options: NoOptions) -> SoundMechanism:
        return self.mechanism_type()

    def honest_binding(self, evidence: Sequence[bytes], options: NoOptions) -> BoundProposition:
        if len(evidence) != 1:
            raise ValueError("one file")
        reference = digest_bytes(evidence[0])
        return BoundProposition(
            subject_id=reference,
            predicate=PREDICATE,
            expected=reference,
            mechanism_id=self.mechanism_id,
            mechanism_digest=self.create(options).mechanism_digest,
            evidence_refs=(reference,),
            trust_roots=(reference,),
            bounds=EvidenceBounds(1, len(evidence[0])),
        )

    def conformance_samples(self) -> Sequence[ConformanceSample]:
        return (ConformanceSample("one item", (b"conformance probe",), MechanismOutcome.PASS),)


def _provider(mechanism: type[SoundMechanism]) -> _Provider:
    provider_type = type(
        f"{mechanism.__name__}Provider",
        (_Provider,),
        {"mechanism_id": mechanism.mechanism_id, "mechanism_type": mechanism},
    )
    provider: _Provider = provider_type()
    return provider


SOUND: Final = _provider(SoundMechanism)
MUTATING: Final = _provider(MutatingMechanism)
NONDETERMINISTIC: Final = _provider(NondeterministicMechanism)
RAISING: Final = _provider(RaisingMechanism)
UNSTABLE: Final = _provider(UnstableMechanism)
OVERREACHING: Final = _provider(OverreachingMechanism)
CLOCKED: Final = _provider(ClockedMechanism)
MECHANISM_ONLY: Final = SoundMechanism()
