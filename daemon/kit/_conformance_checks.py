"""The conformance kit's checks (the battery's contract: :mod:`daemon.kit._conformance`;
its inputs: :mod:`daemon.kit._conformance_cases`).

Every function here evaluates the mechanism it is given on in-memory inputs only; the
digest-stability check alone starts a process (a fresh interpreter that re-creates the target
through :func:`daemon.kit._conformance.resolve`).
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from daemon.kit._conformance_cases import Case, Setting
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
from session.canon import is_digest, network_json

__all__ = [
    "Check",
    "bounds",
    "determinism",
    "digest_stability",
    "exceptions",
    "first_difference",
    "identity",
    "no_mutation",
    "options",
    "samples",
    "timing",
    "vocabulary",
]

_EXECUTION_FAILED: Final = "mechanism execution failed: "
_CHANGED_SNAPSHOT: Final = "mechanism changed its binding snapshot"
_CLIENT: Final = "client binding, as evidenced submit pins it"


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


# --------------------------------------------------------------------------- evaluation


def _decision_view(answer: object) -> dict[str, Any]:
    """What determinism compares, as plain data: the decision's fields (observations as the
    wire encodes them), or the raise."""
    if isinstance(answer, BaseException):
        return {"raised": f"{type(answer).__name__}: {answer}"}
    if not isinstance(answer, MechanismDecision):
        return {"answered": type(answer).__name__}
    try:
        observations: Any = json.loads(network_json(dict(answer.observations)))
    except Exception:
        observations = repr(answer.observations)
    return {
        "outcome": str(answer.outcome),
        "details": answer.details,
        "observations": observations,
    }


def first_difference(first: Any, second: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """(dotted path, value in ``first``, value in ``second``) of the first field, in key order,
    where two plain JSON values differ; None when they are equal."""
    if first == second:
        return None
    if isinstance(first, dict) and isinstance(second, dict):
        for key in [*first, *(key for key in second if key not in first)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in first or key not in second:
                return (
                    where,
                    first.get(key, "<absent>"),
                    second.get(key, "<absent>"),
                )
            found = first_difference(first[key], second[key], where)
            if found is not None:
                return found
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        for index, (a, b) in enumerate(zip(first, second, strict=True)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
    return (path or "<answer>", first, second)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def options(provider: MechanismProvider[Any] | None, refused: Sequence[str] = ()) -> Check:
    """``{}`` creates; an unknown key is refused naming it; every declared option set creates
    (``refused``: the option sets the provider's ``configure`` refused, already as findings)."""
    if provider is None:
        return Check("options", (), {"applies": False})
    findings = list(refused)
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
    sets = [option_set.name for option_set in provider.conformance_option_sets()]
    return Check("options", tuple(findings), {"applies": True, "option_sets": sets})


def samples(setting: Setting, scaled: Sequence[Case] = ()) -> Check:
    """Each sample's expected outcome (under this setting) through a real session, bound by
    the provider for these options and, as ``evidenced submit`` binds it, by
    ``client_binding`` over what the mechanism announces; the provider's own scaled samples
    (``conformance_scaled``) as well."""
    provider = setting.provider
    if provider is None:
        return Check("samples", (), {"applies": False})
    findings = []
    outcomes: dict[str, str] = {}
    bindings: tuple[tuple[str, Callable[[tuple[bytes, ...]], BoundProposition]], ...] = (
        ("host binding", setting.host_binding),
        ("client binding", setting.client_binding),
    )
    said = {"host binding": "host binding", "client binding": _CLIENT}
    grown = {case.name: case for case in scaled if "scaled by the provider" in case.name}
    for sample in provider.conformance_samples():
        evidence = tuple(sample.evidence)
        expected = setting.expected_of(sample)
        inputs = [(f"sample {sample.name}", evidence)]
        for name, case in grown.items():
            if name.startswith(f"sample {sample.name} scaled"):
                inputs.append((name, case.evidence))
        for label, items in inputs:
            built: list[tuple[str, BoundProposition]] = []
            for how, binder in bindings:
                try:
                    built.append((how, binder(items)))
                except Exception as error:
                    findings.append(f"{label}: no {how} ({type(error).__name__}: {error})")
            if len(built) == 2 and built[0][1] == built[1][1]:
                built = [("", built[0][1])]  # the client pins what the host binds: one run
            for how, binding in built:
                result = _session_evaluate(setting.mechanism, binding, items)
                outcomes[f"{label} ({how})" if how else label] = str(result.outcome)
                if result.outcome != expected:
                    named = f"{label} ({said[how]})" if how else label
                    findings.append(
                        f"{named}: expected {expected}, got {result.outcome} ({result.details})"
                    )
    return Check("samples", tuple(dict.fromkeys(findings)), {"outcomes": outcomes})


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
    """Each case ``repeats`` times on fresh copies; a finding names the first field that
    differed between the first answer and the first answer unlike it."""
    findings = []
    first: dict[str, object] = {}
    for case in cases:
        views = []
        for _ in range(repeats):
            answer = _call(mechanism, copy.deepcopy(case.binding), tuple(case.evidence))
            first.setdefault(case.name, answer)
            views.append(_decision_view(answer))
        for number, view in enumerate(views[1:], start=2):
            found = first_difference(views[0], view)
            if found is not None:
                where, was, now = found
                findings.append(
                    f"{case.name}: the same input answered differently: {where}: "
                    f"{_short(was)} (evaluation 1) vs {_short(now)} (evaluation {number})"
                )
                break
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
    setting: Setting,
    cases: Sequence[Case],
    repeats: int,
    time_budget: float,
) -> Check:
    """Each case (the samples, and :func:`~daemon.kit._conformance_cases.scaled_cases`:
    every sample grown to the bound and random splits of it) evaluated ``repeats`` times
    through a session; one evaluation over ``time_budget`` seconds is a finding."""
    findings = []
    measured: dict[str, Any] = {}
    for case in cases:
        if not case.through_session:
            continue
        store = EvidenceStore()
        for item in case.evidence:
            store.add(item)
        session = VerificationSession(store)
        session.register(setting.mechanism)
        times = []
        outcome = None
        for _ in range(repeats):
            started = time.perf_counter_ns()
            outcome = session.evaluate(case.binding).outcome
            times.append(time.perf_counter_ns() - started)
            if times[-1] > time_budget * 1e9:
                break  # one overrun is the finding: no need to wait for more
        measured[case.name] = {
            "evidence_items": len(case.evidence),
            "evidence_bytes": sum(len(item) for item in case.evidence),
            "outcome": str(outcome),
            "median_ms": round(statistics.median(times) / 1e6, 3),
            "max_ms": round(max(times) / 1e6, 3),
        }
        if max(times) > time_budget * 1e9:
            findings.append(
                f"{case.name}: an evaluation took {max(times) / 1e9:.2f} s (budget {time_budget} s)"
            )
    bounds = setting.bounds().to_dict()
    details = {"time_budget_s": time_budget, "bounds": bounds, "cases": measured}
    return Check("timing", tuple(findings), details)
