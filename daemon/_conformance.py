"""The mechanism conformance kit: the protocol battery a mechanism must pass to be hosted.

:func:`check_mechanism` takes a target — a provider's entry-point name (``formation``), or
``module:attribute`` naming a :class:`~session.MechanismProvider` (instance or subclass), a
mechanism instance, or a zero-argument factory of either — and runs these checks, in this
order, each answering ``passed`` and the findings that failed it:

``identity``        a non-empty ``mechanism_id`` (the provider's equals its mechanism's); a
                    strict ``sha256:<64 hex>`` ``mechanism_digest``; a session accepts it;
                    ``accepted_bounds``, when stated, is an ``EvidenceBounds`` of exact ints.
``options``         (providers) ``{}`` structures into the defaults and creates the mechanism;
                    an unknown key is refused with the key named.
``samples``         (providers) every conformance sample's honest binding gets the sample's
                    expected outcome through a real session.
``vocabulary``      every answer, on every case below, is a ``MechanismDecision`` whose outcome is
                    exactly a ``MechanismOutcome``, details a ``str`` and observations a mapping
                    with ``str`` keys that the daemon can encode (network JSON).
``determinism``     the same case evaluated ``repeats`` times, on fresh copies, answers the same
                    decision (outcome, details and encoded observations; a raise counts as an
                    answer).
``no-mutation``     evaluating leaves the binding (its digest and its parameters) and the
                    evidence sequence (length, items) exactly as they were; through a session,
                    never "mechanism changed its binding snapshot".
``exceptions``      no case makes the mechanism raise (a decision is data: hostile input is
                    UNKNOWN or FAIL); each raise is also run through a session, which must
                    answer UNKNOWN "mechanism execution failed: …" (the finding quotes it).
``bounds``          through a session, evidence beyond the binding's declared item or byte bound
                    is refused UNKNOWN before the mechanism is called; a mechanism that states
                    ``accepted_bounds`` never PASSes a binding that declares more.
``digest-stability`` a fresh Python process (a real subprocess) creating the same target
                    announces the same id and digest, and so does a second creation here.
``timing``          evaluations at the session's bound sizes (the ``accepted_bounds``, else two
                    items and 524,288 bytes) and of every sample each finish within
                    ``time_budget`` seconds (the median and maximum are reported).

The cases: each sample's honest binding and evidence (or, with no samples, a synthesized pair
under the provider's honest binding when it binds random bytes, else a generic binding); then
hostile variants of the first: evidence reversed, truncated, extended, shortened, emptied,
randomised, of the wrong type, and a binding with another predicate, expected value,
parameters, digest, or not a binding at all. Nothing is read from disk beyond the target's
own import; the only process started is the digest-stability one.
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
from collections.abc import Mapping, Sequence
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
    ProviderLookupError,
    VerificationMechanism,
    VerificationSession,
    accepted_bounds,
    load_provider,
    load_reference,
)
from session._plugins import as_provider

__all__ = ["Check", "ConformanceReport", "TargetError", "check_mechanism"]

DEFAULT_BOUNDS: Final = EvidenceBounds(2, 524_288)
MAX_TIMED_ITEMS: Final = 16
_EXECUTION_FAILED: Final = "mechanism execution failed: "
_CHANGED_SNAPSHOT: Final = "mechanism changed its binding snapshot"
_OTHER_DIGEST: Final = "sha256:" + "0" * 64


class TargetError(Exception):
    """The target cannot be loaded or is neither a provider nor a mechanism."""


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
class ConformanceReport:
    """The battery's report: the target, what it announced, and every check in order."""

    target: str
    kind: str  # "provider" | "mechanism"
    mechanism_id: str | None
    mechanism_digest: str | None
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def failed(self) -> dict[str, tuple[str, ...]]:
        """``{check name: findings}`` of the checks that failed."""
        return {check.name: check.findings for check in self.checks if not check.passed}

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "kind": self.kind,
            "mechanism_id": self.mechanism_id,
            "mechanism_digest": self.mechanism_digest,
            "passed": self.passed,
            "checks": [check.to_dict() for check in self.checks],
        }


@attrs.frozen
class _Case:
    name: str
    binding: Any
    evidence: tuple[Any, ...]
    through_session: bool  # a session can serve it (a BoundProposition over bytes evidence)


# --------------------------------------------------------------------------- targets


def _resolve(target: str) -> tuple[MechanismProvider[Any] | None, VerificationMechanism]:
    """(provider or None, the mechanism to check) for a target string."""
    try:
        if ":" not in target:
            provider = load_provider(target)
            return provider, provider.create(provider.default_options())
        value = load_reference(target)
    except ProviderLookupError as error:
        raise TargetError(str(error)) from None
    except Exception as error:  # a provider whose defaults it cannot create
        raise TargetError(f"{target}: {type(error).__name__}: {error}") from None
    return _coerce(value, target)


def _coerce(
    value: object, target: str
) -> tuple[MechanismProvider[Any] | None, VerificationMechanism]:
    is_provider_class = isinstance(value, type) and issubclass(value, MechanismProvider)
    if not is_provider_class and not _is_mechanism(value) and callable(value):
        try:
            value = value()
        except Exception as error:
            raise TargetError(
                f"{target}: the factory raised {type(error).__name__}: {error}"
            ) from None
    if isinstance(value, MechanismProvider) or (
        isinstance(value, type) and issubclass(value, MechanismProvider)
    ):
        try:
            provider = as_provider(value, target)
            return provider, provider.create(provider.default_options())
        except ProviderLookupError as error:
            raise TargetError(str(error)) from None
        except Exception as error:
            raise TargetError(
                f"{target}: cannot create with default options: {type(error).__name__}: {error}"
            ) from None
    if _is_mechanism(value):
        return None, value  # type: ignore[return-value]
    raise TargetError(f"{target}: neither a MechanismProvider nor a mechanism")


def _is_mechanism(value: object) -> bool:
    return (
        not isinstance(value, type)
        and callable(getattr(value, "evaluate", None))
        and hasattr(value, "mechanism_id")
        and hasattr(value, "mechanism_digest")
    )


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


def _base_cases(
    provider: MechanismProvider[Any] | None,
    options: object,
    mechanism: VerificationMechanism,
    rng: random.Random,
) -> list[_Case]:
    cases = []
    if provider is not None:
        for sample in provider.conformance_samples():
            evidence = tuple(sample.evidence)
            binding = _bind(provider, options, mechanism, evidence)
            cases.append(_Case(f"sample {sample.name}", binding, evidence, True))
    if not cases:
        bounds = accepted_bounds(mechanism) or DEFAULT_BOUNDS
        count = max(1, min(bounds.max_evidence_items, 2))
        evidence = _distinct_random(rng, [64] * count)
        cases.append(
            _Case("synthesized", _bind(provider, options, mechanism, evidence), evidence, True)
        )
    return cases


def _hostile_cases(base: _Case, rng: random.Random) -> list[_Case]:
    binding, evidence = base.binding, base.evidence
    items = list(evidence)
    variants: list[_Case] = []

    def add(name: str, new_binding: Any, new_evidence: Sequence[Any], session: bool) -> None:
        variants.append(_Case(name, new_binding, tuple(new_evidence), session))

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


def _identity(provider: MechanismProvider[Any] | None, mechanism: VerificationMechanism) -> Check:
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


def _options(provider: MechanismProvider[Any] | None) -> Check:
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


def _samples(
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


def _vocabulary(answers: Mapping[str, object]) -> Check:
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


def _determinism(
    mechanism: VerificationMechanism, cases: Sequence[_Case], repeats: int
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


def _no_mutation(mechanism: VerificationMechanism, cases: Sequence[_Case]) -> Check:
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


def _exceptions(
    mechanism: VerificationMechanism, cases: Sequence[_Case], answers: Mapping[str, object]
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


def _bounds(mechanism: VerificationMechanism, base: _Case) -> Check:
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
from daemon._conformance import _resolve
provider, mechanism = _resolve(sys.argv[1])
print(json.dumps({"mechanism_id": mechanism.mechanism_id,
                  "mechanism_digest": mechanism.mechanism_digest}))
"""


def _digest_stability(target: str | None, mechanism: VerificationMechanism) -> Check:
    findings = []
    here = {"mechanism_id": mechanism.mechanism_id, "mechanism_digest": mechanism.mechanism_digest}
    details: dict[str, Any] = {"this_process": here}
    if target is None:
        return Check("digest-stability", ("a target object cannot be re-created elsewhere",))
    try:
        _, again = _resolve(target)
        if (again.mechanism_id, again.mechanism_digest) != tuple(here.values()):
            findings.append("a second creation in this process announces another id or digest")
    except TargetError as error:
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


def _timing(
    provider: MechanismProvider[Any] | None,
    options: object,
    mechanism: VerificationMechanism,
    samples: Sequence[_Case],
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
        _Case("at the bound sizes", _bind(provider, options, mechanism, evidence), evidence, True),
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


# --------------------------------------------------------------------------- the battery


def check_mechanism(
    target: str,
    *,
    repeats: int = 3,
    time_budget: float = 5.0,
    seed: int = 0,
) -> ConformanceReport:
    """Run the battery (module rules) against ``target``; raise :class:`TargetError` when it
    cannot be loaded."""
    if repeats < 2:
        raise ValueError("determinism needs at least two repeats")
    provider, mechanism = _resolve(target)
    options = provider.default_options() if provider is not None else None
    rng = random.Random(seed)
    identity = _identity(provider, mechanism)
    if not identity.passed:  # nothing else can be bound to an unidentifiable mechanism
        return ConformanceReport(
            target,
            "provider" if provider is not None else "mechanism",
            _text(getattr(mechanism, "mechanism_id", None)),
            _text(getattr(mechanism, "mechanism_digest", None)),
            (identity,),
        )
    base = _base_cases(provider, options, mechanism, rng)
    cases = [*base, *_hostile_cases(base[0], rng)]
    determinism, answers = _determinism(mechanism, cases, repeats)
    checks = (
        identity,
        _options(provider),
        _samples(provider, options, mechanism),
        _vocabulary(answers),
        determinism,
        _no_mutation(mechanism, cases),
        _exceptions(mechanism, cases, answers),
        _bounds(mechanism, base[0]),
        _digest_stability(target, mechanism),
        _timing(provider, options, mechanism, base, repeats, time_budget, rng),
    )
    return ConformanceReport(
        target,
        "provider" if provider is not None else "mechanism",
        mechanism.mechanism_id,
        mechanism.mechanism_digest,
        checks,
    )


def _text(value: object) -> str | None:
    return value if type(value) is str else None
