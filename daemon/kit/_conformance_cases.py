"""The conformance kit's inputs: the settings it runs under and the cases it evaluates.

Rules (the battery's contract is :mod:`daemon.kit._conformance`):

1. A :class:`Setting` is one host configuration: the defaults, then each
   :meth:`~session.MechanismProvider.conformance_option_sets` entry, created as a host creates
   it (:meth:`~session.MechanismProvider.configure`). Under the defaults a case is bound with
   the provider's ``honest_binding``; under any other setting as ``evidenced submit`` binds it,
   :meth:`~session.MechanismProvider.client_binding` over what that mechanism announces
   (:meth:`session.Announcement.of`). A bare mechanism (no provider) has one setting and a
   generic binding.
2. Base cases: each sample with its binding; with no samples, a synthesized pair of random
   bytes.
3. Hostile cases (hashes broken): evidence reversed, truncated, extended, shortened, emptied,
   randomised, not bytes, a str; a binding with another predicate, expected value,
   parameters, digest, or not a binding at all.
4. Well-hashed cases: every item of every sample, malformed (emptied, halved, a byte made
   non-ASCII or changed within ASCII, invalid UTF-8 appended, a NUL inserted, doubled,
   reversed, random bytes of its length, deep nesting, a long number, whitespace only) and
   **re-bound honestly**: the setting's binding of the changed evidence, or when the provider
   cannot bind it, the original binding with every old reference replaced by the new one. The
   session's rehash accepts them, so they reach the mechanism's own parsing.
5. Scaled cases (timing): each sample grown to the setting's bound — the provider's
   :meth:`~session.MechanismProvider.conformance_scaled`, else each item in turn padded by
   repeating itself until the evidence fills the bound, and when the mechanism refuses that
   UNKNOWN (an item limit below the bound), also to the largest size it answers otherwise
   (a bisection of at most 12 probes) — and random splits of the bound over random bytes
   (even, and two random proportions), each re-bound as in rule 4.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from session import (
    Announcement,
    BoundProposition,
    ConformanceSample,
    EvidenceBounds,
    EvidenceStore,
    MechanismOutcome,
    MechanismProvider,
    VerificationMechanism,
    VerificationSession,
    accepted_bounds,
)
from session.canon import digest_bytes

__all__ = [
    "DEFAULT_BOUNDS",
    "Case",
    "Setting",
    "base_cases",
    "hostile_cases",
    "scaled_cases",
    "well_hashed_cases",
]

DEFAULT_BOUNDS: Final = EvidenceBounds(2, 524_288)
MAX_TIMED_ITEMS: Final = 16
_OTHER_DIGEST: Final = "sha256:" + "0" * 64


@attrs.frozen
class Case:
    name: str
    binding: Any
    evidence: tuple[Any, ...]
    through_session: bool  # a session can serve it (a BoundProposition over bytes evidence)


@attrs.frozen
class Setting:
    """One host configuration the battery runs under (rule 1)."""

    name: str  # "defaults" or the option set's name
    provider: MechanismProvider[Any] | None
    options: object
    mechanism: VerificationMechanism
    expected: Mapping[str, MechanismOutcome] = attrs.field(factory=dict)

    @property
    def is_default(self) -> bool:
        return self.name == "defaults"

    def announcement(self) -> Announcement:
        assert self.provider is not None
        return Announcement.of(self.provider, self.mechanism)

    def bounds(self) -> EvidenceBounds:
        return accepted_bounds(self.mechanism) or DEFAULT_BOUNDS

    def host_binding(self, evidence: tuple[bytes, ...]) -> BoundProposition:
        """The provider's honest binding for this setting's options (raises what it raises)."""
        assert self.provider is not None
        binding = self.provider.honest_binding(evidence, self.options)
        return attrs.evolve(binding, mechanism_digest=self.mechanism.mechanism_digest)

    def client_binding(self, evidence: tuple[bytes, ...]) -> BoundProposition:
        """What ``evidenced submit`` pins against a daemon hosting this setting."""
        assert self.provider is not None
        return self.provider.client_binding(evidence, self.announcement())

    def bind(self, evidence: tuple[bytes, ...]) -> BoundProposition | None:
        """The binding of rule 1, or None when the provider cannot bind these files."""
        if self.provider is None:
            return None
        try:
            if self.is_default:
                return self.host_binding(evidence)
            return self.client_binding(evidence)
        except Exception:
            return None

    def expected_of(self, sample: ConformanceSample) -> MechanismOutcome:
        return self.expected.get(sample.name, sample.expected)


def generic_binding(mechanism: VerificationMechanism, evidence: Sequence[bytes]) -> Any:
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


def bind(setting: Setting, evidence: tuple[bytes, ...]) -> Any:
    """The setting's binding when the provider binds, else a generic one."""
    return setting.bind(evidence) or generic_binding(setting.mechanism, evidence)


def rebind(
    setting: Setting, binding: Any, before: tuple[bytes, ...], after: tuple[bytes, ...]
) -> Any:
    """``after`` re-bound honestly (rule 4): the setting's binding, else ``binding`` with each
    reference of ``before`` replaced by the matching one of ``after``."""
    bound = setting.bind(after)
    if bound is not None:
        return bound
    if not isinstance(binding, BoundProposition):
        return binding
    swap = {
        digest_bytes(old): digest_bytes(new)
        for old, new in zip(before, after, strict=True)
        if old != new
    }

    def new(value: Any) -> Any:
        return swap.get(value, value) if isinstance(value, str) else value

    try:
        return attrs.evolve(
            binding,
            subject_id=new(binding.subject_id),
            evidence_refs=tuple(new(ref) for ref in binding.evidence_refs),
            trust_roots=tuple(new(root) for root in binding.trust_roots),
            parameters={key: new(value) for key, value in binding.parameters.items()},
        )
    except Exception:
        return binding


def distinct_random(rng: random.Random, sizes: Sequence[int]) -> tuple[bytes, ...]:
    items = [rng.randbytes(size) for size in sizes]
    for index, item in enumerate(items):  # evidence references must be distinct
        if item in items[:index]:
            items[index] = bytes([index & 0xFF]) + item[1:]
    return tuple(items)


def base_cases(setting: Setting, rng: random.Random) -> list[Case]:
    """Rule 2."""
    cases = []
    if setting.provider is not None:
        for sample in setting.provider.conformance_samples():
            evidence = tuple(sample.evidence)
            cases.append(Case(f"sample {sample.name}", bind(setting, evidence), evidence, True))
    if not cases:
        count = max(1, min(setting.bounds().max_evidence_items, 2))
        evidence = distinct_random(rng, [64] * count)
        cases.append(Case("synthesized", bind(setting, evidence), evidence, True))
    return cases


def hostile_cases(base: Case, rng: random.Random) -> list[Case]:
    """Rule 3."""
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


def _flip(item: bytes, rng: random.Random, mask: int) -> bytes:
    if not item:
        return bytes([mask])
    at = rng.randrange(len(item))
    return item[:at] + bytes([item[at] ^ mask]) + item[at + 1 :]


#: Rule 4's malformations: (name, item → changed item).
MALFORMATIONS: Final[tuple[tuple[str, Callable[[bytes, random.Random], bytes]], ...]] = (
    ("emptied", lambda item, rng: b""),
    ("halved", lambda item, rng: item[: len(item) // 2]),
    ("a byte made non-ASCII", lambda item, rng: _flip(item, rng, 0x80)),
    ("a byte changed within ASCII", lambda item, rng: _flip(item, rng, 0x01)),
    ("invalid UTF-8 appended", lambda item, rng: item + b"\xc3\x28\xff"),
    ("a NUL inserted", lambda item, rng: item[: len(item) // 2] + b"\x00" + item[len(item) // 2 :]),
    ("doubled", lambda item, rng: item + item),
    ("reversed", lambda item, rng: item[::-1]),
    ("random bytes of its length", lambda item, rng: rng.randbytes(max(1, len(item)))),
    ("deeply nested", lambda item, rng: b"[" * 2048 + b"{" * 2048),
    ("a long number", lambda item, rng: b"9" * 4096),
    ("whitespace only", lambda item, rng: b" \t\r\n" * 16),
)

_ORDINAL: Final = ("subject", "companion")


def _item_name(index: int) -> str:
    return _ORDINAL[index] if index < len(_ORDINAL) else f"item {index + 1}"


def well_hashed_cases(setting: Setting, bases: Sequence[Case], rng: random.Random) -> list[Case]:
    """Rule 4."""
    cases = []
    for base in bases:
        for index, item in enumerate(base.evidence):
            for name, change in MALFORMATIONS:
                changed = change(item, rng)
                if changed == item or changed in base.evidence:
                    continue
                evidence = (*base.evidence[:index], changed, *base.evidence[index + 1 :])
                binding = rebind(setting, base.binding, base.evidence, evidence)
                label = f"{base.name}: {_item_name(index)} {name} (re-bound)"
                cases.append(Case(label, binding, evidence, isinstance(binding, BoundProposition)))
    return cases


def _grown(item: bytes, size: int) -> bytes:
    unit = item or b"x"
    return (unit * (size // len(unit) + 1))[:size]


#: Rule 5's search: at most this many probes for the largest growth an item's own limit admits.
MAX_PROBES: Final = 12


def _answer(setting: Setting, binding: Any, evidence: tuple[bytes, ...]) -> tuple[str, str]:
    """(outcome, details) of ``evidence`` through a session (a raise is its own answer)."""
    if not isinstance(binding, BoundProposition):
        return ("not bound", "")
    store = EvidenceStore()
    for item in evidence:
        store.add(item)
    session = VerificationSession(store)
    session.register(setting.mechanism)
    try:
        result = session.evaluate(binding)
    except Exception as error:
        return ("raised", type(error).__name__)
    return (str(result.outcome), result.details)


def _grown_cases(
    setting: Setting, name: str, original: tuple[bytes, ...], index: int, room: int
) -> list[Case]:
    """Item ``index`` grown to fill the bound (``room`` bytes); and when the mechanism refuses
    that, grown to the largest size (within 1/4096 of ``room``, :data:`MAX_PROBES` probes) it
    answers otherwise — where a per-item limit below the bound lets the real work start."""
    item = original[index]
    base = bind(setting, original)

    def at(size: int) -> tuple[tuple[bytes, ...], Any]:
        evidence = (*original[:index], _grown(item, size), *original[index + 1 :])
        return evidence, rebind(setting, base, original, evidence)

    found = []
    evidence, binding = at(room)
    if len(set(evidence)) != len(evidence):
        return []
    label = f"sample {name} with its {_item_name(index)} grown to"
    bound = isinstance(binding, BoundProposition)
    found.append(Case(f"{label} {room:,} bytes", binding, evidence, bound))
    full = _answer(setting, binding, evidence)
    if full[0] != str(MechanismOutcome.UNKNOWN) or full == _answer(
        setting, *reversed(at(len(item)))
    ):
        return found  # not refused at the bound, or refused as the sample itself is
    low, high = len(item), room
    for _ in range(MAX_PROBES):
        if high - low <= max(1, room // 4096):
            break
        middle = (low + high) // 2
        middle_evidence, middle_binding = at(middle)
        if _answer(setting, middle_binding, middle_evidence) == full:
            high = middle
        else:
            low = middle
    if low > len(item):
        evidence, binding = at(low)
        if len(set(evidence)) == len(evidence):
            found.append(
                Case(
                    f"{label} {low:,} bytes (the largest not refused as at the bound)",
                    binding,
                    evidence,
                    isinstance(binding, BoundProposition),
                )
            )
    return found


def scaled_cases(setting: Setting, bases: Sequence[Case], rng: random.Random) -> list[Case]:
    """Rule 5: every sample at the bound, then random splits of it."""
    bounds = setting.bounds()
    total = bounds.max_evidence_bytes
    cases: list[Case] = []
    samples = setting.provider.conformance_samples() if setting.provider is not None else ()
    for sample in samples:
        scaled = setting.provider.conformance_scaled(sample, bounds) if setting.provider else None
        if scaled is not None:
            evidence = tuple(scaled.evidence)
            size = sum(map(len, evidence))
            cases.append(
                Case(
                    f"sample {sample.name} scaled by the provider to {size:,} bytes",
                    bind(setting, evidence),
                    evidence,
                    True,
                )
            )
            continue
        original = tuple(sample.evidence)
        for index, item in enumerate(original):
            room = total - sum(len(other) for other in original) + len(item)
            if room <= len(item):
                continue
            cases.extend(_grown_cases(setting, sample.name, original, index, room))
    items = max(1, min(bounds.max_evidence_items, MAX_TIMED_ITEMS, total))
    splits = [[total // items + (1 if i < total % items else 0) for i in range(items)]]
    for _ in range(2 if items > 1 else 0):
        cuts = sorted(rng.randrange(total + 1) for _ in range(items - 1))
        splits.append([b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)])
    for number, sizes in enumerate(splits):
        sizes = [max(1, size) for size in sizes]
        sizes[sizes.index(max(sizes))] -= max(0, sum(sizes) - total)
        evidence = distinct_random(rng, sizes)
        label = "at the bound sizes" if number == 0 else f"a random split of the bound {sizes}"
        cases.append(Case(label, bind(setting, evidence), evidence, True))
    return cases
