"""The evidence-bound session protocol: pure, synchronous, no sockets, files or clocks.

A host registers mechanism instances in a :class:`VerificationSession`; a caller pins a
:class:`BoundProposition` (mechanism id and digest, exact evidence references, trust roots,
bounds, parameters); the session resolves and bounds the evidence, runs the mechanism on a
snapshot of the binding, and returns an :class:`EvaluatedProposition` whose outcome is
``PASS``, ``FAIL`` or ``UNKNOWN``. See ``docs/spec/formation.md`` §1. While the mechanism runs,
:func:`resolved_references` of the evidence tuple it was handed answers the references the
store proved its items to hash to, so the mechanism need not hash them again.

One edge helper lives here as well, :func:`read_capped` (with :func:`read_prefix`,
:class:`InputTooLarge` and :data:`MAX_INPUT_FILE_BYTES`): the capped file read every command
line uses. It is in the bottom layer only so that every package may import it; the protocol
above never calls it.

Beside the protocol, what every mechanism and host shares (``docs/writing-a-mechanism.md``):

* the provider contract — :class:`MechanismProvider`, typed options
  (:func:`structure_options`), :class:`CatalogMetadata`, :class:`HoldoutHandler`,
  :func:`accepted_bounds` — and the ``evidenced.mechanisms`` entry points that register
  providers (:func:`provider_entries`, :func:`load_provider`);
* the pair pre-check pipeline (:class:`PairPrecheck` and its standard steps);
* source identities (:class:`SourceIdentity`) and lower-only ceilings (:func:`lower_only`);
  the byte encodings, digests and the strict JSON reader are :mod:`session.canon`'s;
* which extra of the distribution provides which optional library (:data:`EXTRAS`,
  :func:`require_extra`, :class:`ExtraMissing`: :mod:`session._extras`), so a provider, a
  host and a command line say the same one line when one is not installed.

Two floors live inside the package: :mod:`session.canon` (the byte encodings, digests, the
strict JSON reader and the product's one error tree) and :mod:`session.cli` (the command-line
contract every package's command line builds on). Importing the package loads nothing: every
public name (and :mod:`session.precheck`) loads from its module the first time it is asked for,
with the same object every time.
"""

from typing import TYPE_CHECKING, Any

# Every name loads on first use, from the module this table names: a client that only sends a
# binding never builds the provider contract, the pre-check pipeline, the session or the
# options converter (cattrs), a host loads each the first time it asks for it
# (docs/benchmarks.md, "The CLI's imports"), and importing the package's floor
# (``session.canon``, ``session.cli``: what the catalog uses) loads nothing of the protocol.
_LAZY: dict[str, str] = {
    "MAX_INPUT_FILE_BYTES": "._capped_read",
    "InputTooLarge": "._capped_read",
    "read_capped": "._capped_read",
    "read_prefix": "._capped_read",
    "CeilingError": "._limits",
    "lower_only": "._limits",
    "BoundProposition": "._types",
    "EvaluatedProposition": "._types",
    "EvidenceBindingError": "._types",
    "EvidenceBounds": "._types",
    "FrozenInstanceError": "._types",
    "MechanismDecision": "._types",
    "MechanismOutcome": "._types",
    "VerificationMechanism": "._types",
    "core_digest": "._types",
    "normalise_digest": "._types",
    "precheck": "",
    "BytesDigestMechanism": "._bytes_digest",
    "EXTRAS": "._extras",
    "ExtraMissing": "._extras",
    "missing_extra": "._extras",
    "require_extra": "._extras",
    "SourceIdentity": "._identity",
    "file_digest": "._identity",
    "OPTIONS_CONVERTER": "._options",
    "OptionsError": "._options",
    "structure_options": "._options",
    "ENTRY_POINT_GROUP": "._plugins",
    "ProviderEntry": "._plugins",
    "ProviderLookupError": "._plugins",
    "as_provider": "._plugins",
    "load_provider": "._plugins",
    "load_reference": "._plugins",
    "load_target": "._plugins",
    "provider_entries": "._plugins",
    "providers_for_mechanism": "._plugins",
    "PairPrecheck": "._precheck",
    "PairState": "._precheck",
    "PrecheckFailed": "._precheck",
    "PrecheckStep": "._precheck",
    "Refusal": "._precheck",
    "HOLDOUT_OPTIONS_UNSUPPORTED": "._provider",
    "HOLDOUT_OPTIONS_WEAKENED": "._provider",
    "Announcement": "._provider",
    "CatalogMetadata": "._provider",
    "ConformanceOptionSet": "._provider",
    "ConformanceSample": "._provider",
    "EvidenceCountError": "._provider",
    "HoldoutHandler": "._provider",
    "HoldoutOptionsRefused": "._provider",
    "HoldoutStepError": "._provider",
    "MechanismProvider": "._provider",
    "NoOptions": "._provider",
    "accepted_bounds": "._provider",
    "holdout_lower_only": "._provider",
    "splice_octets": "._provider",
    "resolved_references": "._resolved",
    "VerificationSession": "._session",
    "EvidenceStore": "._store",
}

if TYPE_CHECKING:
    from . import precheck
    from ._bytes_digest import BytesDigestMechanism
    from ._capped_read import MAX_INPUT_FILE_BYTES, InputTooLarge, read_capped, read_prefix
    from ._extras import EXTRAS, ExtraMissing, missing_extra, require_extra
    from ._identity import SourceIdentity, file_digest
    from ._limits import CeilingError, lower_only
    from ._options import OPTIONS_CONVERTER, OptionsError, structure_options
    from ._plugins import (
        ENTRY_POINT_GROUP,
        ProviderEntry,
        ProviderLookupError,
        as_provider,
        load_provider,
        load_reference,
        load_target,
        provider_entries,
        providers_for_mechanism,
    )
    from ._precheck import PairPrecheck, PairState, PrecheckFailed, PrecheckStep, Refusal
    from ._provider import (
        HOLDOUT_OPTIONS_UNSUPPORTED,
        HOLDOUT_OPTIONS_WEAKENED,
        Announcement,
        CatalogMetadata,
        ConformanceOptionSet,
        ConformanceSample,
        EvidenceCountError,
        HoldoutHandler,
        HoldoutOptionsRefused,
        HoldoutStepError,
        MechanismProvider,
        NoOptions,
        accepted_bounds,
        holdout_lower_only,
        splice_octets,
    )
    from ._resolved import resolved_references
    from ._session import VerificationSession
    from ._store import EvidenceStore
    from ._types import (
        BoundProposition,
        EvaluatedProposition,
        EvidenceBindingError,
        EvidenceBounds,
        FrozenInstanceError,
        MechanismDecision,
        MechanismOutcome,
        VerificationMechanism,
        core_digest,
        normalise_digest,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    if not module:  # a submodule
        value: Any = importlib.import_module(f".{name}", __name__)
    else:
        value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ENTRY_POINT_GROUP",
    "EXTRAS",
    "HOLDOUT_OPTIONS_UNSUPPORTED",
    "HOLDOUT_OPTIONS_WEAKENED",
    "MAX_INPUT_FILE_BYTES",
    "OPTIONS_CONVERTER",
    "Announcement",
    "BoundProposition",
    "BytesDigestMechanism",
    "CatalogMetadata",
    "CeilingError",
    "ConformanceOptionSet",
    "ConformanceSample",
    "EvaluatedProposition",
    "EvidenceBindingError",
    "EvidenceBounds",
    "EvidenceCountError",
    "EvidenceStore",
    "ExtraMissing",
    "FrozenInstanceError",
    "HoldoutHandler",
    "HoldoutOptionsRefused",
    "HoldoutStepError",
    "InputTooLarge",
    "MechanismDecision",
    "MechanismOutcome",
    "MechanismProvider",
    "NoOptions",
    "OptionsError",
    "PairPrecheck",
    "PairState",
    "PrecheckFailed",
    "PrecheckStep",
    "ProviderEntry",
    "ProviderLookupError",
    "Refusal",
    "SourceIdentity",
    "VerificationMechanism",
    "VerificationSession",
    "accepted_bounds",
    "as_provider",
    "core_digest",
    "file_digest",
    "holdout_lower_only",
    "load_provider",
    "load_reference",
    "load_target",
    "lower_only",
    "missing_extra",
    "normalise_digest",
    "precheck",
    "provider_entries",
    "providers_for_mechanism",
    "read_capped",
    "read_prefix",
    "require_extra",
    "resolved_references",
    "splice_octets",
    "structure_options",
]
