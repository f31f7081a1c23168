"""The conformance kit's cases and checks (the battery's contract:
:mod:`daemon.commands._conformance`).

Every function here evaluates the mechanism it is given on in-memory inputs only; the
digest-stability check alone starts a process (a fresh interpreter that re-creates the target
through :func:`daemon.commands._conformance.resolve`).
"""

from __future__ import annotations

import copy
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from canon import digest_bytes, is_digest, network_json
from session import (
    BoundProposition,
    EvaluatedProposition,
    EvidenceBounds,
    EvidenceStore,
    MechanismDecision,
    MechanismOutcome,
    MechanismProvider,
    VerificationMechanism,
    VerificationSession,
    accepted_bounds,
)

__all__ = [
    "Case",
    "Check",
    "base_cases",
    "bounds",
    "determinism",
    "digest_stability",
    "exceptions",
    "hostile_cases",
    "identity",
    "no_mutation",
    "options",
    "samples",
    "timing",
    "vocabulary",
]

DEFAULT_BOUNDS: Final = EvidenceBounds(2, 524_288)
MAX_TIMED_ITEMS: Final = 16
_EXECUTION_FAILED: Final = "mechanism execution failed: "
_CHANGED_SNAPSHOT: Final = "mechanism changed its binding snapshot"
_OTHER_DIGEST: Final = "sha256:" + "0" * 64


@attrs.frozen
class Check:
    """One check's verdict, the findings that failed it and what it measured."""

    name: str
    findings: tuple[str, ...] = ()
    details: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def passed(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "findings": list(self.findings),
            "details": dict(self.details),
        }


@attrs.frozen
class Case:
    name: str
    binding: Any
    evidence: tuple[Any, ...]
    through_session: bool  # a session can serve it (a BoundProposition over bytes evidence)


# --------------------------------------------------------------------------- evaluation


def _decision_key(answer: object) -> tuple[Any, ...]:
    """What determinism compares: the decision's fields (observations encoded), or the raise."""
    if isinstance(answer, BaseException):
        return ("raised", type(answer).__name__, str(answer))
    if not isinstance(answer, MechanismDecision):
        return ("not a decision", type(answer).__name__)
    try:
        observations: Any = network_json(dict(answer.observations))
    except Exception:
        observations = repr(answer.observations)
    return ("decision", str(answer.outcome), answer.details, observations)


def _call(mechanism: VerificationMechanism, binding: Any, evidence: Any) -> object:
    try:
        return mechanism.evaluate(binding, evidence)
    except Exception as error:
        return error


def _session_evaluate(
    mechanism: VerificationMechanism, binding: BoundProposition, evidence: Sequence[bytes]
) -> EvaluatedProposition:
    store = EvidenceStore()
    for item in evidence:
        store.add(item)
    session = VerificationSession(store)
    session.register(mechanism)
    return session.evaluate(binding)


def _generic_binding(mechanism: VerificationMechanism, evidence: Sequence[bytes]) -> Any:
    refs = tuple(digest_bytes(item) for item in evidence)
    return BoundProposition(
        subject_id=refs[0],
        predicate="conformance.probe",
        expected="PASS",
        mechanism_id=mechanism.mechanism_id,
        mechanism_digest=mechanism.mechanism_digest,
        evidence_refs=refs,
        trust_roots=("conformance-kit",),
        bounds=EvidenceBounds(len(evidence), sum(len(item) for item in evidence)),
    )


def _bind(
    provider: MechanismProvider[Any] | None,
    options: object,
    mechanism: VerificationMechanism,
    evidence: tuple[bytes, ...],
) -> Any:
    """The provider's honest binding (with the mechanism's digest) when it binds, else generic."""
    if provider is not None:
        try:
            binding = provider.honest_binding(evidence, options)
            return attrs.evolve(binding, mechanism_digest=mechanism.mechanism_digest)
        except Exception:
            pass
    return _generic_binding(mechanism, evidence)


def _distinct_random(rng: random.Random, sizes: Sequence[int]) -> tuple[bytes, ...]:
    items = [rng.randbytes(size) for size in sizes]
    for index, item in enumerate(items):  # evidence references must be distinct
        if item in items[:index]:
            items[index] = bytes([index & 0xFF]) + item[1:]
    return tuple(items)


def base_cases(
    provider: MechanismProvider[Any] | None,
    options: object,
    mechanism: VerificationMechanism,
    rng: random.Random,
) -> list[Case]:
    cases = []
    if provider is not None:
        for sample in provider.conformance_samples():
            evidence = tuple(sample.evidence)
            binding = _bind(provider, options, mechanism, evidence)
            cases.append(Case(f"sample {sample.name}", binding, evidence, True))
    if not cases:
        bounds = accepted_bounds(mechanism) or DEFAULT_BOUNDS
        count = max(1, min(bounds.max_evidence_items, 2))
        evidence = _distinct_random(rng, [64] * count)
        cases.append(
            Case("synthesized", _bind(provider, options, mechanism, evidence), evidence, True)
        )
    return cases


def hostile_cases(base: Case, rng: random.Random) -> list[Case]:
    binding, evidence = base.binding, base.evidence
    items = list(evidence)
    variants: list[Case] = []

    def add(name: str, new_binding: Any, new_evidence: Sequence[Any], session: bool) -> None:
        variants.append(Case(name, new_binding, tuple(new_evidence), session))

    if len(items) > 1:
        add("evidence reversed", binding, items[::-1], False)
    add("evidence truncated", binding, [*items[:-1], items[-1][: len(items[-1]) // 2]], False)
    add("evidence extended", binding, [*items, b"an extra item"], False)
    if len(items) > 1:
        add("evidence shortened", binding, items[:-1], False)
    add("evidence emptied", binding, [b""] * len(items), False)
    add("evidence randomised", binding, [rng.randbytes(len(item)) for item in items], False)
    add("evidence not bytes", binding, [bytearray(item) for item in items], False)
    add("evidence a str", binding, [item.decode("latin-1") for item in items], False)
    for name, field, value in (
        ("binding with another predicate", "predicate", "conformance.other-predicate"),
        ("binding with another expected value", "expected", "conformance-other-expected"),
        ("binding with other parameters", "parameters", {"conformance": "kit"}),
        ("binding with another digest", "mechanism_digest", _OTHER_DIGEST),
    ):
        try:
            changed = attrs.evolve(binding, **{field: value})
        except Exception:
            continue
        add(name, changed, items, field != "mechanism_digest")
    add("binding not a BoundProposition", binding.to_dict(), items, False)
    return variants


# --------------------------------------------------------------------------- checks


def identity(provider: MechanismProvider[Any] | None, mechanism: VerificationMechanism) -> Check:
    findings = []
    identifier = getattr(mechanism, "mechanism_id", None)
    digest = getattr(mechanism, "mechanism_digest", None)
    if type(identifier) is not str or not identifier:
        findings.append(f"mechanism_id is not a non-empty str: {identifier!r}")
    if provider is not None and provider.mechanism_id != identifier:
        findings.append(
            f"the provider announces {provider.mechanism_id!r}, its mechanism {identifier!r}"
        )
    if not is_digest(digest):
        findings.append(f"mechanism_digest is not sha256:<64 lowercase hex>: {digest!r}")
    try:
        VerificationSession().register(mechanism)
    except Exception as error:
        findings.append(f"a session refuses to register it: {type(error).__name__}: {error}")
    try:
        stated = accepted_bounds(mechanism)
    except ValueError as error:
        findings.append(str(error))
        stated = None
    details = {"accepted_bounds": None if stated is None else stated.to_dict()}
    return Check("identity", tuple(findings), details)


def options(provider: MechanismProvider[Any] | None) -> Check:
    if provider is None:
        return Check("options", (), {"applies": False})
    findings = []
    from session import OptionsError

    try:
        defaults = provider.structure_options({})
        provider.create(defaults)
    except Exception as error:
        findings.append(f"the empty table does not create: {type(error).__name__}: {error}")
    try:
        provider.structure_options({"conformance_kit_unknown_key": 1}, where="options")
        findings.append("an unknown option key is accepted")
    except OptionsError as error:
        if "conformance_kit_unknown_key" not in str(error):
            findings.append(f"the refusal of an unknown key does not name it: {error}")
    except Exception as error:
        findings.append(f"an unknown key raises {type(error).__name__}, not OptionsError")
    return Check("options", tuple(findings), {"applies": True})


def samples(
    provider: MechanismProvider[Any] | None,
    options: object,
    mechanism: VerificationMechanism,
) -> Check:
    if provider is None:
        return Check("samples", (), {"applies": False})
    findings = []
    outcomes = {}
    for sample in provider.conformance_samples():
        evidence = tuple(sample.evidence)
        try:
            binding = provider.honest_binding(evidence, options)
        except Exception as error:
            findings.append(
                f"sample {sample.name}: no honest binding ({type(error).__name__}: {error})"
            )
            continue
        result = _session_evaluate(mechanism, binding, evidence)
        outcomes[sample.name] = str(result.outcome)
        if result.outcome != sample.expected:
            findings.append(
                f"sample {sample.name}: expected {sample.expected}, got {result.outcome} "
                f"({result.details})"
            )
    return Check("samples", tuple(findings), {"outcomes": outcomes})


def vocabulary(answers: Mapping[str, object]) -> Check:
    findings = []
    for name, answer in answers.items():
        if isinstance(answer, BaseException):
            continue  # the exceptions check reports it
        if not isinstance(answer, MechanismDecision):
            findings.append(f"{name}: answered a {type(answer).__name__}, not a MechanismDecision")
            continue
        if type(answer.outcome) is not MechanismOutcome:
            findings.append(f"{name}: outcome {answer.outcome!r} is not a MechanismOutcome")
        if type(answer.details) is not str:
            findings.append(f"{name}: details is a {type(answer.details).__name__}, not a str")
        observations = answer.observations
        if not isinstance(observations, Mapping) or not all(
            type(key) is str for key in observations
        ):
            findings.append(f"{name}: observations are not a mapping with str keys")
            continue
        try:
            network_json(dict(observations))
        except Exception as error:
            findings.append(f"{name}: observations cannot be encoded for the wire: {error}")
    return Check("vocabulary", tuple(findings))


def determinism(
    mechanism: VerificationMechanism, cases: Sequence[Case], repeats: int
) -> tuple[Check, dict[str, object]]:
    findings = []
    first: dict[str, object] = {}
    for case in cases:
        keys = []
        for _ in range(repeats):
            answer = _call(mechanism, copy.deepcopy(case.binding), tuple(case.evidence))
            first.setdefault(case.name, answer)
            keys.append(_decision_key(answer))
        if len(set(keys)) > 1:
            seen = [key[1] if key[0] == "decision" else key[0] for key in keys]
            findings.append(f"{case.name}: the same input answered differently: {seen}")
    return Check("determinism", tuple(findings), {"repeats": repeats}), first


def _snapshot(binding: Any) -> object:
    if isinstance(binding, BoundProposition):
        return (binding.digest(), copy.deepcopy(dict(binding.parameters)))
    return copy.deepcopy(binding)


def no_mutation(mechanism: VerificationMechanism, cases: Sequence[Case]) -> Check:
    findings = []
    for case in cases:
        binding = copy.deepcopy(case.binding)
        before = _snapshot(binding)
        evidence = list(case.evidence)
        items = [copy.copy(item) for item in evidence]
        _call(mechanism, binding, evidence)
        try:
            after = _snapshot(binding)
        except Exception as error:
            after = f"undigestible ({type(error).__name__})"
        if after != before:
            findings.append(f"{case.name}: the binding was changed by evaluate")
        if len(evidence) != len(items) or any(
            type(a) is not type(b) or a != b for a, b in zip(evidence, items, strict=False)
        ):
            findings.append(f"{case.name}: the evidence sequence was changed by evaluate")
        if case.through_session:
            result = _session_evaluate(mechanism, case.binding, case.evidence)
            if result.details == _CHANGED_SNAPSHOT:
                findings.append(f"{case.name}: through a session: {_CHANGED_SNAPSHOT}")
    return Check("no-mutation", tuple(dict.fromkeys(findings)))


def exceptions(
    mechanism: VerificationMechanism, cases: Sequence[Case], answers: Mapping[str, object]
) -> Check:
    findings = []
    for case in cases:
        answer = answers.get(case.name)
        if not isinstance(answer, BaseException):
            continue
        finding = f"{case.name}: raised {type(answer).__name__}: {answer}"
        if case.through_session:
            result = _session_evaluate(mechanism, case.binding, case.evidence)
            contained = result.outcome is MechanismOutcome.UNKNOWN and result.details.startswith(
                _EXECUTION_FAILED
            )
            finding += (
                f"; through a session: {result.outcome} {result.details!r}"
                if contained
                else f"; and a session did NOT contain it: {result.outcome} {result.details!r}"
            )
        findings.append(finding)
    return Check("exceptions", tuple(findings))


class _Counting:
    """A mechanism stand-in that counts calls (to prove a session refused before calling)."""

    def __init__(self, inner: VerificationMechanism) -> None:
        self.mechanism_id = inner.mechanism_id
        self.mechanism_digest = inner.mechanism_digest
        self.calls = 0
        self._inner = inner

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        self.calls += 1
        return self._inner.evaluate(binding, evidence)


def bounds(mechanism: VerificationMechanism, base: Case) -> Check:
    findings = []
    binding, evidence = base.binding, base.evidence
    declared = binding.bounds
    size = sum(len(item) for item in evidence)
    narrower = [("item", EvidenceBounds(len(evidence) - 1, declared.max_evidence_bytes))]
    if size:
        narrower.append(("byte", EvidenceBounds(declared.max_evidence_items, size - 1)))
    for name, bounds in narrower:
        counting = _Counting(mechanism)
        try:
            narrowed = attrs.evolve(binding, bounds=bounds)
        except Exception:
            continue
        result = _session_evaluate(counting, narrowed, evidence)
        if result.outcome is not MechanismOutcome.UNKNOWN or counting.calls:
            findings.append(
                f"evidence beyond the declared {name} bound was not refused before the "
                f"mechanism ran ({result.outcome}, {counting.calls} call(s))"
            )
        elif f"{name} bound" not in result.details:
            findings.append(f"the {name} bound refusal says {result.details!r}")
    stated = accepted_bounds(mechanism)
    details: dict[str, Any] = {"accepted_bounds": None if stated is None else stated.to_dict()}
    if stated is not None:
        for name, bounds in (
            ("items", EvidenceBounds(stated.max_evidence_items + 1, declared.max_evidence_bytes)),
            ("bytes", EvidenceBounds(declared.max_evidence_items, stated.max_evidence_bytes + 1)),
        ):
            try:
                widened = attrs.evolve(binding, bounds=bounds)
            except Exception:
                continue
            answer = _call(mechanism, widened, evidence)
            if isinstance(answer, MechanismDecision) and answer.outcome is MechanismOutcome.PASS:
                findings.append(
                    f"a binding declaring more {name} than accepted_bounds "
                    f"{stated.to_dict()} PASSed"
                )
    return Check("bounds", tuple(findings), details)


_DIGEST_SCRIPT: Final = """
import json, sys
from session import load_target
provider, mechanism = load_target(sys.argv[1])
print(json.dumps({"mechanism_id": mechanism.mechanism_id,
                  "mechanism_digest": mechanism.mechanism_digest}))
"""


def digest_stability(
    target: str | None,
    mechanism: VerificationMechanism,
    recreate: Callable[[str], tuple[Any, VerificationMechanism]],
) -> Check:
    findings = []
    here = {"mechanism_id": mechanism.mechanism_id, "mechanism_digest": mechanism.mechanism_digest}
    details: dict[str, Any] = {"this_process": here}
    if target is None:
        return Check("digest-stability", ("a target object cannot be re-created elsewhere",))
    try:
        _, again = recreate(target)
        if (again.mechanism_id, again.mechanism_digest) != tuple(here.values()):
            findings.append("a second creation in this process announces another id or digest")
    except Exception as error:
        findings.append(f"a second creation failed: {error}")
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(entry for entry in sys.path if entry)
    try:
        completed = subprocess.run(
            [sys.executable, "-c", _DIGEST_SCRIPT, target],
            capture_output=True,
            text=True,
            env=environment,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        findings.append("the fresh process did not finish within 120 s")
        return Check("digest-stability", tuple(findings), details)
    if completed.returncode != 0:
        tail = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        findings.append(f"the fresh process failed ({completed.returncode}): {tail}")
    else:
        other = json.loads(completed.stdout)
        details["fresh_process"] = other
        if other != here:
            findings.append(f"a fresh process announces {other}, this one {here}")
    return Check("digest-stability", tuple(findings), details)


def timing(
    provider: MechanismProvider[Any] | None,
    options: object,
    mechanism: VerificationMechanism,
    samples: Sequence[Case],
    repeats: int,
    time_budget: float,
    rng: random.Random,
) -> Check:
    bounds = accepted_bounds(mechanism) or DEFAULT_BOUNDS
    items = max(1, min(bounds.max_evidence_items, MAX_TIMED_ITEMS))
    total = bounds.max_evidence_bytes
    sizes = [total // items + (1 if index < total % items else 0) for index in range(items)]
    evidence = _distinct_random(rng, [max(1, size) for size in sizes])
    evidence = evidence if sum(map(len, evidence)) <= total else evidence[:1]
    cases = [
        Case("at the bound sizes", _bind(provider, options, mechanism, evidence), evidence, True),
        *samples,
    ]
    findings = []
    measured: dict[str, Any] = {}
    for case in cases:
        store = EvidenceStore()
        for item in case.evidence:
            store.add(item)
        session = VerificationSession(store)
        session.register(mechanism)
        times = []
        for _ in range(repeats):
            started = time.perf_counter_ns()
            session.evaluate(case.binding)
            times.append(time.perf_counter_ns() - started)
        measured[case.name] = {
            "evidence_items": len(case.evidence),
            "evidence_bytes": sum(len(item) for item in case.evidence),
            "median_ms": round(statistics.median(times) / 1e6, 3),
            "max_ms": round(max(times) / 1e6, 3),
        }
        if max(times) > time_budget * 1e9:
            findings.append(
                f"{case.name}: an evaluation took {max(times) / 1e9:.2f} s (budget {time_budget} s)"
            )
    return Check("timing", tuple(findings), {"time_budget_s": time_budget, "cases": measured})
