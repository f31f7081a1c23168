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

import random
from typing import Any

import attrs

from daemon.commands import _conformance_checks as checks
from daemon.commands._conformance_checks import Check
from daemon.errors import PeerError
from session import MechanismProvider, ProviderLookupError, VerificationMechanism, load_target

__all__ = ["Check", "ConformanceReport", "TargetError", "check_mechanism", "resolve"]


class TargetError(PeerError):
    """The target cannot be loaded or is neither a provider nor a mechanism."""


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


# --------------------------------------------------------------------------- targets


def resolve(target: str) -> tuple[MechanismProvider[Any] | None, VerificationMechanism]:
    """(provider or None, the mechanism to check) for a target string
    (:func:`session.load_target`); :class:`TargetError` when it cannot be loaded."""
    try:
        return load_target(target)
    except ProviderLookupError as error:
        raise TargetError(str(error)) from None


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
    provider, mechanism = resolve(target)
    options = provider.default_options() if provider is not None else None
    rng = random.Random(seed)
    identity = checks.identity(provider, mechanism)
    if not identity.passed:  # nothing else can be bound to an unidentifiable mechanism
        return ConformanceReport(
            target,
            "provider" if provider is not None else "mechanism",
            _text(getattr(mechanism, "mechanism_id", None)),
            _text(getattr(mechanism, "mechanism_digest", None)),
            (identity,),
        )
    base = checks.base_cases(provider, options, mechanism, rng)
    cases = [*base, *checks.hostile_cases(base[0], rng)]
    determinism, answers = checks.determinism(mechanism, cases, repeats)
    verdicts = (
        identity,
        checks.options(provider),
        checks.samples(provider, options, mechanism),
        checks.vocabulary(answers),
        determinism,
        checks.no_mutation(mechanism, cases),
        checks.exceptions(mechanism, cases, answers),
        checks.bounds(mechanism, base[0]),
        checks.digest_stability(target, mechanism, resolve),
        checks.timing(provider, options, mechanism, base, repeats, time_budget, rng),
    )
    return ConformanceReport(
        target,
        "provider" if provider is not None else "mechanism",
        mechanism.mechanism_id,
        mechanism.mechanism_digest,
        verdicts,
    )


def _text(value: object) -> str | None:
    return value if type(value) is str else None
