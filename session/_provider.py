"""The mechanism provider contract: how a mechanism is made known to hosts, clients and tools.

A **provider** is the one object that knows a mechanism. Hosts, clients, the catalog, the
holdout instrument and the conformance kit ask it; nothing else is written per mechanism. It is
registered under the Python entry-point group ``evidenced.mechanisms`` — the built-in
``formation``, ``descriptor`` and ``bytes-sha256`` exactly as a third-party package registers
(:mod:`session._plugins` finds them; ``docs/writing-a-mechanism.md`` is the author's guide).

Contract of a :class:`MechanismProvider` (subclass it):

* ``mechanism_id`` — the id of every mechanism :meth:`~MechanismProvider.create` returns.
* ``options_type`` — a frozen attrs class whose fields all have defaults; hosts' option tables
  are structured into it by :func:`session.structure_options` (exact types, unknown keys
  refused, errors naming the key path). :class:`NoOptions` when there are none.
* ``create(options)`` → a :class:`VerificationMechanism`. It may refuse options the type
  system cannot (raising a lower-only ceiling, say) by raising ``ValueError``/``TypeError``.
  The mechanism may state the most evidence one evaluation accepts as ``accepted_bounds`` (an
  :class:`EvidenceBounds`, or a zero-argument method returning one; :func:`accepted_bounds`
  reads it): hosts clamp a session's declared bounds to it, so they never read evidence every
  mechanism of the session must refuse. A provider whose mechanism needs a library of one of
  the distribution's extras raises :class:`session.ExtraMissing` when it is not installed
  (:func:`session.require_extra`: a look-up, nothing imported); ``evidenced mechanisms`` then
  lists the provider as unavailable with the install command, and a host skips or refuses the
  session saying the same.
* optional ``prepare(mechanism)`` → None: import what evaluating ``mechanism`` loads lazily
  (numpy, say). :meth:`~MechanismProvider.configure`, the host's way to make a mechanism, calls
  it once the mechanism is created, so a host's evaluation workers inherit the import and no
  decision pays for it within its deadline; tools that only describe a mechanism
  (``evidenced mechanisms``) call ``create`` alone. Default: nothing.
* ``honest_binding(evidence, options)`` → the :class:`BoundProposition` an honest client with
  only these files would pin for a mechanism created with ``options``, carrying the provider's
  own mechanism digest (a client talking to a daemon replaces it with the digest the daemon
  announced). Raises :class:`EvidenceCountError` (a ``ValueError``) when the number of files
  is wrong (``evidenced submit`` exits 2, a usage error), and ``ValueError`` with a one-line
  message when these files cannot be bound (an unreadable subject; ``submit`` exits 65).
* optional ``announce(mechanism)`` → the parameters the host configured that a client must pin
  to be answered by ``mechanism`` (digests of a policy, an allowlist, a profile), as a mapping
  of names to strings; the daemon announces it with the session (``sessions``, the ``list``
  answer: each mechanism's ``pinned``). Default: none.
* optional ``pin(binding, announced)`` → the binding from :meth:`honest_binding` with the
  ``announced`` parameters pinned instead of the default configuration's (``evidenced
  submit`` calls it with what the daemon announced). Default: the binding unchanged.
* optional ``client_binding(evidence, announcement)`` → the binding a client of a daemon pins,
  from what the daemon announced about the mechanism (an :class:`Announcement`: id, digest,
  ``pinned``, ``accepted_bounds``). ``evidenced submit`` calls it. Default: the honest binding
  of the default options, pinned (:meth:`~MechanismProvider.pin`) to ``announcement.pinned``, its
  declared bounds lowered field by field to ``announcement.accepted_bounds`` (a host that
  lowered a limit accepts less than the defaults declare), carrying the announced digest.
  Override it when a host option changes the binding in a way none of these carries.
* optional ``catalog_metadata()`` → :class:`CatalogMetadata` (plain JSON-ready component
  declarations and packaging, which the catalog derives its registry from; never executed).
* optional ``holdout_handler()`` → a :class:`HoldoutHandler` (how the holdout instrument views,
  mutates, renders and evaluates this mechanism's fixtures).
* optional ``conformance_samples()`` → :class:`ConformanceSample` evidence with the outcome its
  honest binding must get (the conformance kit evaluates them).
* optional ``conformance_scaled(sample, bounds)`` → the sample grown to fill ``bounds`` (an
  honest :class:`ConformanceSample`, e.g. a 1 MiB message with its signature), or None for
  the kit's own growth (the subject, then the companion, padded by repeating itself). The kit
  times these: a mechanism's worst case is an honest input at the bound, not a refusal.
* optional ``conformance_option_sets()`` → :class:`ConformanceOptionSet` entries: non-default host
  configurations (lowered limits, another policy) the kit runs its battery under as well,
  binding each sample as a client does (:meth:`~MechanismProvider.client_binding` over what
  that configuration announces).
* optional ``decision_schema()`` → a JSON Schema (draft 2020-12, self-contained: no ``$ref``,
  no ``$id``) of this mechanism's own decisions as a session result carries them: an object
  schema over the result's ``outcome``, ``details`` and ``observations`` (what the mechanism's
  :class:`MechanismDecision` said). The daemon's HTTP API description (``GET /openapi.json``)
  describes the results of a hosted mechanism with it, beside the host's own ``UNKNOWN``
  (empty observations). Default: None (its observations are described as any object).

:meth:`MechanismProvider.configure` is how a host makes a mechanism from its option table:
structuring errors and the constructor's refusals both raise ``OptionsError`` naming the
table's path (``sessions.<name>.options.<provider>.<field>`` when the refusal names a field).

Every provider method is deterministic and side-effect free apart from what it returns.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import attrs

from session.canon import CallerError

from ._limits import CeilingError, lower_only
from ._types import BoundProposition, EvidenceBounds, MechanismOutcome, VerificationMechanism

__all__ = [
    "HOLDOUT_OPTIONS_UNSUPPORTED",
    "HOLDOUT_OPTIONS_WEAKENED",
    "Announcement",
    "CatalogMetadata",
    "ConformanceOptionSet",
    "ConformanceSample",
    "EvidenceCountError",
    "HoldoutHandler",
    "HoldoutOptionsRefused",
    "HoldoutStepError",
    "MechanismProvider",
    "NoOptions",
    "accepted_bounds",
    "holdout_lower_only",
    "splice_octets",
]

OptionsT = TypeVar("OptionsT")

#: Holdout refusal codes a handler's ``configure`` raises (:class:`HoldoutOptionsRefused`).
HOLDOUT_OPTIONS_WEAKENED = "CHECK_OPTIONS_WEAKENED"
HOLDOUT_OPTIONS_UNSUPPORTED = "CHECK_OPTIONS_UNSUPPORTED"


@attrs.frozen
class NoOptions:
    """The options of a provider that takes none: only the empty table is accepted."""


@attrs.frozen
class CatalogMetadata:
    """A provider's catalog declarations, as plain JSON-ready data.

    ``components``: one mapping per component in the field form of the catalog's
    ``ComponentDescriptor`` (lists for the string sets). ``packaging``: one mapping per
    component, ``{"component_id", "source_refs": [...], "artifacts": [{"role", "path"}],
    "dependencies": [...]}``: what a stored package retains for it.
    """

    components: tuple[Mapping[str, Any], ...]
    packaging: tuple[Mapping[str, Any], ...] = ()


@attrs.frozen
class ConformanceSample:
    """Evidence whose honest binding must get ``expected`` from a default-options mechanism."""

    name: str
    evidence: tuple[bytes, ...]
    expected: MechanismOutcome


@attrs.frozen
class ConformanceOptionSet:
    """A host configuration the conformance kit checks besides the defaults.

    ``options`` is the table a host writes under ``[sessions.<name>.options.<provider>]``;
    ``expected`` maps a sample's name to the outcome its client binding must get under this
    configuration when it differs from the sample's own ``expected`` (a stricter minimum
    algorithm turns a PASS into UNKNOWN, say).
    """

    name: str
    options: Mapping[str, Any]
    expected: Mapping[str, MechanismOutcome] = attrs.field(factory=dict)


@attrs.frozen
class Announcement:
    """What a daemon says about one hosted mechanism (an entry of a session's ``mechanisms``
    in the ``sessions`` answer), as a client reads it: the id and digest to pin, the
    ``pinned`` parameters (:meth:`MechanismProvider.announce`) and the ``accepted_bounds``
    (None: any size)."""

    mechanism_id: str
    mechanism_digest: str
    pinned: Mapping[str, str] = attrs.field(factory=dict)
    accepted_bounds: EvidenceBounds | None = None

    @classmethod
    def of(cls, provider: MechanismProvider[Any], mechanism: VerificationMechanism) -> Announcement:
        """What a daemon hosting ``mechanism`` announces for it."""
        return cls(
            mechanism.mechanism_id,
            mechanism.mechanism_digest,
            dict(provider.announce(mechanism)),
            accepted_bounds(mechanism),
        )

    @classmethod
    def from_wire(cls, described: Mapping[str, Any]) -> Announcement:
        """From a ``sessions`` answer's mechanism entry (``ValueError`` when malformed)."""
        identifier, digest = described.get("mechanism_id"), described.get("mechanism_digest")
        if type(identifier) is not str or type(digest) is not str:
            raise ValueError("the announced mechanism has no id or digest")
        pinned = described.get("pinned") or {}
        if not isinstance(pinned, Mapping) or not all(
            type(key) is str and type(value) is str for key, value in pinned.items()
        ):
            raise ValueError("the announced pinned parameters are not strings")
        bounds = described.get("accepted_bounds")
        accepted = None
        if bounds is not None:
            items = bounds.get("max_evidence_items") if isinstance(bounds, Mapping) else None
            size = bounds.get("max_evidence_bytes") if isinstance(bounds, Mapping) else None
            if type(items) is not int or type(size) is not int:
                raise ValueError("the announced accepted_bounds are not two integers")
            accepted = EvidenceBounds(items, size)
        return cls(identifier, digest, dict(pinned), accepted)


class HoldoutStepError(CallerError):
    """One holdout challenge cannot be observed (a view, render or binding is impossible)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class EvidenceCountError(CallerError, ValueError):
    """``honest_binding`` was given the wrong number of files (the message says how many)."""


class HoldoutOptionsRefused(CallerError):
    """A holdout ``CHECK_WITH_OPTIONS`` setting is refused (``code``: weakened/unsupported)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class HoldoutHandler(Protocol):
    """How the holdout instrument works with one mechanism's fixtures (``docs/holdout.md``).

    A case has two nodes, ``artifact`` and ``leaf``; ``evidence_roles`` says which node each
    ``evidence_refs`` position holds. Views are plain JSON values a recipe edits; rendering a
    view that cannot be rendered, or a step that cannot apply, raises
    :class:`HoldoutStepError`. ``configure`` receives the caller's check options *without* the
    generic evidence-bound options (the instrument applies those) and answers the mechanism to
    register and the honest binding of the pristine pair, or raises
    :class:`HoldoutOptionsRefused`. ``option_names`` are the options ``configure`` knows.
    """

    evidence_roles: tuple[str, str]
    option_names: frozenset[str]

    def artifact_view(self, data: bytes) -> Any: ...

    def leaf_view(self, data: bytes) -> Any: ...

    def render_artifact(self, view: Any) -> bytes: ...

    def render_leaf(self, view: Any) -> bytes: ...

    def reseal(self, artifact: Any, leaf_bytes: bytes) -> None: ...

    def recompose(self, leaf_bytes: bytes, pristine_artifact: bytes) -> bytes | None: ...

    def configure(
        self, artifact: bytes, leaf: bytes, options: dict[str, Any]
    ) -> tuple[VerificationMechanism, BoundProposition]: ...

    def splice(self, data: bytes, role: str, name: str, value: str) -> bytes: ...

    def resolve_checks(self, data: bytes, role: str, classify_json: Any) -> str | None: ...

    def identities(self, role: str, data: bytes, report: Any) -> dict[str, Any]: ...

    def baseline_report(self, artifact: bytes, leaf: bytes) -> Any: ...


def holdout_lower_only(options: Mapping[str, Any], ceilings: Mapping[str, int]) -> dict[str, int]:
    """The given check options among ``ceilings``, in ``ceilings`` order, each lower-only
    (:func:`session.lower_only`): a raised one is :data:`HOLDOUT_OPTIONS_WEAKENED`, one that is
    not a non-negative exact int :data:`HOLDOUT_OPTIONS_UNSUPPORTED`
    (:class:`HoldoutOptionsRefused`)."""
    lowered: dict[str, int] = {}
    for name, ceiling in ceilings.items():
        if name not in options:
            continue
        try:
            lowered[name] = lower_only(name, options[name], ceiling)
        except CeilingError as error:
            weakened = error.reason == "above-ceiling"
            raise HoldoutOptionsRefused(
                HOLDOUT_OPTIONS_WEAKENED if weakened else HOLDOUT_OPTIONS_UNSUPPORTED
            ) from None
    return lowered


def splice_octets(text: str) -> bytes:
    """The UTF-8 octets of holdout splice text, verbatim (a lone surrogate stays an invalid
    sequence, which resolution then reports as ``invalid-utf8``)."""
    return text.encode("utf-8", errors="surrogatepass")


class MechanismProvider(abc.ABC, Generic[OptionsT]):
    """The provider contract (module docstring). Subclass it and register an instance."""

    mechanism_id: ClassVar[str]
    options_type: ClassVar[type[Any]] = NoOptions

    def structure_options(self, raw: object, *, where: str = "options") -> OptionsT:
        """``raw`` structured into :attr:`options_type` (``OptionsError`` naming the path)."""
        from ._options import structure_options  # cattrs: imported when options are read

        options: OptionsT = structure_options(self.options_type, raw, where=where)
        return options

    def default_options(self) -> OptionsT:
        return self.structure_options({})

    def configure(self, raw: object, *, where: str = "options") -> VerificationMechanism:
        """The mechanism a host's option table ``raw`` creates (module rules): an
        ``OptionsError`` naming the path when it does not structure, or when the constructor
        refuses it (``ValueError``/``TypeError``; at ``<where>.<field>`` when the refusal
        begins with a field's name, as :func:`session.lower_only`'s do); then
        :meth:`prepare`."""
        from ._options import OptionsError

        options = self.structure_options(raw, where=where)
        try:
            mechanism = self.create(options)
        except (ValueError, TypeError) as error:
            path = where
            first = str(error).split(" ", 1)[0]
            if attrs.has(self.options_type) and first in attrs.fields_dict(self.options_type):
                path = f"{where}.{first}"
            raise OptionsError(
                f"{path}: refused by the provider: {type(error).__name__}: {error}"
            ) from error
        self.prepare(mechanism)
        return mechanism

    @abc.abstractmethod
    def create(self, options: OptionsT) -> VerificationMechanism:
        """A mechanism configured by ``options``."""

    @abc.abstractmethod
    def honest_binding(self, evidence: Sequence[bytes], options: OptionsT) -> BoundProposition:
        """The binding an honest client with only ``evidence`` pins (``ValueError`` if none)."""

    def prepare(self, mechanism: VerificationMechanism) -> None:
        """Import what evaluating ``mechanism`` loads lazily, for a host (module rules)."""

    def announce(self, mechanism: VerificationMechanism) -> Mapping[str, str]:
        """What a client must pin to be answered by ``mechanism`` (module rules)."""
        return {}

    def pin(self, binding: BoundProposition, announced: Mapping[str, str]) -> BoundProposition:
        """``binding`` with the ``announced`` parameters pinned (module rules)."""
        return binding

    def client_binding(
        self, evidence: Sequence[bytes], announcement: Announcement
    ) -> BoundProposition:
        """The binding a client pins for a mechanism a daemon announced (module rules)."""
        binding = self.honest_binding(evidence, self.default_options())
        if announcement.pinned:
            binding = self.pin(binding, announcement.pinned)
        accepted = announcement.accepted_bounds
        declared = binding.bounds
        if accepted is not None and isinstance(declared, EvidenceBounds):
            binding = attrs.evolve(
                binding,
                bounds=EvidenceBounds(
                    min(declared.max_evidence_items, accepted.max_evidence_items),
                    min(declared.max_evidence_bytes, accepted.max_evidence_bytes),
                ),
            )
        return attrs.evolve(binding, mechanism_digest=announcement.mechanism_digest)

    def catalog_metadata(self) -> CatalogMetadata | None:
        return None

    def holdout_handler(self) -> HoldoutHandler | None:
        return None

    def conformance_samples(self) -> Sequence[ConformanceSample]:
        return ()

    def conformance_scaled(
        self, sample: ConformanceSample, bounds: EvidenceBounds
    ) -> ConformanceSample | None:
        """``sample`` grown to fill ``bounds`` honestly, or None for the kit's growth."""
        return None

    def conformance_option_sets(self) -> Sequence[ConformanceOptionSet]:
        return ()

    def decision_schema(self) -> Mapping[str, Any] | None:
        """The JSON Schema of this mechanism's own decisions in a result, or None (module
        rules)."""
        return None


def accepted_bounds(mechanism: VerificationMechanism) -> EvidenceBounds | None:
    """The bounds ``mechanism`` states it accepts (``accepted_bounds``), or None for any size.

    The attribute is an :class:`EvidenceBounds` of exact ints, or a zero-argument callable
    returning one; anything else, or a callable that raises, is a ``ValueError`` (a host
    error, never silently ignored).
    """
    stated = getattr(mechanism, "accepted_bounds", None)
    if stated is None:
        return None
    try:
        value = stated() if callable(stated) else stated
    except Exception as error:
        raise ValueError(
            f"mechanism {mechanism.mechanism_id!r}: accepted_bounds failed: {error}"
        ) from None
    if (
        type(value) is not EvidenceBounds
        or type(value.max_evidence_items) is not int
        or type(value.max_evidence_bytes) is not int
    ):
        raise ValueError(
            f"mechanism {mechanism.mechanism_id!r}: accepted_bounds must be an EvidenceBounds "
            "of exact integers"
        )
    return value
