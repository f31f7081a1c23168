"""The mechanism conformance kit: the protocol battery a mechanism must pass to be hosted.

:func:`check_mechanism` takes a target — a provider's entry-point name (``formation``), or
``module:attribute`` naming a :class:`~session.MechanismProvider` (instance or subclass), a
mechanism instance, or a zero-argument factory of either — and runs these checks, in this
order, each answering ``passed`` and the findings that failed it. A provider's battery runs
under the default options and then under every option set it declares
(``conformance_option_sets()``), each created as a host creates it and bound as a client of
that host binds (:mod:`daemon.kit._conformance_cases` rule 1); a finding under an option
set begins ``option set 'NAME': ``.

``identity``        a non-empty ``mechanism_id`` (the provider's equals its mechanism's, under
                    every option set); a strict ``sha256:<64 hex>`` ``mechanism_digest``; a
                    session accepts it; ``accepted_bounds``, when stated, is an
                    ``EvidenceBounds`` of exact ints.
``options``         (providers) ``{}`` structures into the defaults and creates the mechanism;
                    an unknown key is refused with the key named; every option set creates
                    (a refusal names the option's path, :meth:`~session.MechanismProvider.
                    configure`).
``samples``         (providers) every conformance sample gets its expected outcome (the option
                    set's, when it says another) through a real session, bound by
                    ``honest_binding`` for those options *and* by ``client_binding`` over
                    what the mechanism announces (what ``evidenced submit`` pins); so do the
                    provider's scaled samples (``conformance_scaled``).
``vocabulary``      every answer, on every case below, is a ``MechanismDecision`` whose outcome is
                    exactly a ``MechanismOutcome``, details a ``str`` and observations a mapping
                    with ``str`` keys that the daemon can encode (network JSON).
``determinism``     the same case evaluated ``repeats`` times, on fresh copies, answers the same
                    decision (outcome, details and encoded observations; a raise counts as an
                    answer); the finding names the first field that differed and both values.
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
``timing``          every sample, and every sample grown to the bound (the ``accepted_bounds``,
                    else two items and 524,288 bytes: the provider's ``conformance_scaled``,
                    else each item in turn padded to fill it), and random splits of the bound,
                    each finish within ``time_budget`` seconds (median and maximum reported).

The cases (:mod:`daemon.kit._conformance_cases`): each sample's binding and evidence (or,
with no samples, a synthesized pair); hostile variants of the first with broken hashes
(evidence reversed, truncated, extended, …; a binding with another predicate, digest, …); and
well-hashed variants of every sample — each item malformed (emptied, halved, a non-ASCII byte,
invalid UTF-8, doubled, deeply nested, …) and re-bound honestly, so that they reach the
mechanism's own parsing. Nothing is read from disk beyond the target's own import; the only
process started is the digest-stability one.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import attrs

from daemon.kit import _conformance_cases as cases
from daemon.kit import _conformance_checks as checks
from daemon.kit._conformance_cases import Setting
from daemon.kit._conformance_checks import Check
from daemon.wire._errors import PeerError
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


def _settings(
    provider: MechanismProvider[Any] | None, mechanism: VerificationMechanism
) -> tuple[list[Setting], list[str]]:
    """The defaults, then each option set the provider's ``configure`` accepts; the refusals
    as findings of the ``options`` check."""
    options = provider.default_options() if provider is not None else None
    settings = [Setting("defaults", provider, options, mechanism)]
    refused: list[str] = []
    if provider is None:
        return settings, refused
    for option_set in provider.conformance_option_sets():
        where = f"sessions.<name>.options.<{provider.mechanism_id}>"
        try:
            created = provider.configure(dict(option_set.options), where=where)
            structured = provider.structure_options(dict(option_set.options), where=where)
        except Exception as error:
            refused.append(f"option set {option_set.name!r}: {type(error).__name__}: {error}")
            continue
        settings.append(
            Setting(option_set.name, provider, structured, created, dict(option_set.expected))
        )
    return settings, refused


def _merge(name: str, verdicts: Sequence[tuple[Setting, Check]]) -> Check:
    """One check over every setting: the findings in setting order (prefixed by the option
    set's name), the defaults' details, and the others' under ``option_sets``."""
    findings: list[str] = []
    details: dict[str, Any] = {}
    others: dict[str, Any] = {}
    for setting, check in verdicts:
        if setting.is_default:
            findings.extend(check.findings)
            details.update(check.details)
        else:
            findings.extend(f"option set {setting.name!r}: {item}" for item in check.findings)
            others[setting.name] = dict(check.details)
    if others:
        details["option_sets"] = others
    return Check(name, tuple(findings), details)


def _battery(
    setting: Setting, repeats: int, time_budget: float, rng: random.Random
) -> dict[str, Check]:
    """Every in-memory check under one setting."""
    mechanism = setting.mechanism
    base = cases.base_cases(setting, rng)
    well_hashed = cases.well_hashed_cases(setting, base, rng)
    battery = [*base, *cases.hostile_cases(base[0], rng), *well_hashed]
    determinism, answers = checks.determinism(mechanism, battery, repeats)
    scaled = cases.scaled_cases(setting, base, rng)  # it probes the mechanism: after the above
    found = {
        "identity": checks.identity(setting.provider, mechanism),
        "samples": checks.samples(setting, scaled),
        "vocabulary": checks.vocabulary(answers),
        "determinism": determinism,
        "no-mutation": checks.no_mutation(mechanism, battery),
        "exceptions": checks.exceptions(mechanism, battery, answers),
        "bounds": checks.bounds(mechanism, base[0]),
        "timing": checks.timing(setting, [*base, *scaled], repeats, time_budget),
    }
    return found


def check_mechanism(
    target: str,
    *,
    repeats: int = 3,
    time_budget: float = 5.0,
    seed: int = 0,
) -> ConformanceReport:
    """Run the battery (module rules) against ``target``; raise :class:`TargetError` when it
    cannot be loaded. ``repeats``, ``time_budget`` and ``seed`` are the kit's settings; the
    provider's options come from the provider (``conformance_option_sets()``)."""
    if repeats < 2:
        raise ValueError("determinism needs at least two repeats")
    provider, mechanism = resolve(target)
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
    settings, refused = _settings(provider, mechanism)
    runs = [(setting, _battery(setting, repeats, time_budget, rng)) for setting in settings]

    def merged(name: str) -> Check:
        return _merge(name, [(setting, run[name]) for setting, run in runs])

    verdicts = (
        merged("identity"),
        checks.options(provider, refused),
        merged("samples"),
        merged("vocabulary"),
        merged("determinism"),
        merged("no-mutation"),
        merged("exceptions"),
        merged("bounds"),
        checks.digest_stability(target, mechanism, resolve),
        merged("timing"),
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
