"""The descriptor provider (entry point ``evidenced.mechanisms``: ``descriptor``).

* Options (:class:`DescriptorOptions`): the host's authorization configuration as text —
  ``policy`` (Axion policy) and ``allowlist`` (JSON), each the embedded default when absent —
  and the lower-only limits ``max_descriptor_bytes``, ``max_item_bytes`` and ``max_steps``
  (refused when the mechanism is created if raised).
* ``create`` → :class:`DescriptorAuthorizationMechanism` (:func:`default_mechanism` for the
  defaults); it states ``accepted_bounds`` ``EvidenceBounds(2, 2 * max_item_bytes)``. Without
  the weights library (numpy, safetensors: the ``descriptor`` extra) it raises
  :class:`session.ExtraMissing` (looked up, not imported: ``evidenced mechanisms`` lists the
  provider without loading numpy). ``prepare`` imports that library for a host (its evaluation
  workers inherit it); building a binding needs neither.
* ``honest_binding((descriptor, payload), options)`` → :func:`descriptor_binding` for the
  mechanism those options create (the compiled catalog's operation for the pair;
  ``DescriptorError``, a ``ValueError``, when neither file is a compiled fixture's).
* ``announce(mechanism)`` → ``{"authorization_policy", "policy_digest", "allowlist_digest"}``
  of that mechanism's host configuration; ``pin(binding, announced)`` pins the announced
  ``authorization_policy`` (the parameter, and in place of the default among the sorted trust
  roots), so a client of a daemon
  configured with another policy or allowlist binds to that configuration.
* Catalog metadata: :mod:`._components`; holdout handler: :mod:`._holdout`; conformance samples:
  the packaged fixtures — the TISC program and the safetensors weights (PASS) and the TISC
  payload re-described as native weights (FAIL) — when they are installed; decision schema:
  :mod:`._decision_schema`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any, Final

import attrs

from session import (
    BoundProposition,
    CatalogMetadata,
    ConformanceSample,
    EvidenceCountError,
    HoldoutHandler,
    MechanismOutcome,
    MechanismProvider,
    VerificationMechanism,
    require_extra,
)

from ._codec import MAX_DESCRIPTOR_BYTES
from ._defaults import DEFAULT_ALLOWLIST, DEFAULT_POLICY
from ._mechanism import (
    MAX_ITEM_BYTES,
    MECHANISM_ID,
    DescriptorAuthorizationMechanism,
    default_mechanism,
    descriptor_binding,
)
from ._vm import DEFAULT_MAX_STEPS
from ._weights import load_library

__all__ = ["PROVIDER", "DescriptorOptions", "DescriptorProvider"]


@attrs.frozen
class DescriptorOptions:
    """``[sessions.<name>.options.descriptor]``: authorization configuration and limits."""

    # Text whose first character is known: a one-line value that does not start with it is a
    # file path given by mistake, refused by the daemon's configuration (policy_file names one).
    policy: str | None = attrs.field(default=None, metadata={"evidenced.text_starts_with": "("})
    allowlist: str | None = attrs.field(default=None, metadata={"evidenced.text_starts_with": "{"})
    max_descriptor_bytes: int = MAX_DESCRIPTOR_BYTES
    max_item_bytes: int = MAX_ITEM_BYTES
    max_steps: int = DEFAULT_MAX_STEPS


class DescriptorProvider(MechanismProvider[DescriptorOptions]):
    """Provider of ``t81.experiment_descriptor.authorized.0.1`` (module rules)."""

    mechanism_id = MECHANISM_ID
    options_type = DescriptorOptions

    def create(self, options: DescriptorOptions) -> DescriptorAuthorizationMechanism:
        require_extra("descriptor")  # every decision may inspect weights: numpy or nothing
        return self._mechanism(options)

    def prepare(self, mechanism: VerificationMechanism) -> None:
        load_library()  # a host's evaluation workers inherit numpy (``_weights`` rule 6)

    def _mechanism(self, options: DescriptorOptions) -> DescriptorAuthorizationMechanism:
        if options == DescriptorOptions():
            return default_mechanism()
        return DescriptorAuthorizationMechanism(
            DEFAULT_POLICY if options.policy is None else options.policy,
            DEFAULT_ALLOWLIST if options.allowlist is None else options.allowlist,
            max_descriptor_bytes=options.max_descriptor_bytes,
            max_item_bytes=options.max_item_bytes,
            max_steps=options.max_steps,
        )

    def honest_binding(
        self, evidence: Sequence[bytes], options: DescriptorOptions
    ) -> BoundProposition:
        if len(evidence) != 2:
            raise EvidenceCountError("a descriptor submission is DESCRIPTOR PAYLOAD (two files)")
        return descriptor_binding(evidence[0], evidence[1], mechanism=self._mechanism(options))

    def announce(self, mechanism: VerificationMechanism) -> Mapping[str, str]:
        if not isinstance(mechanism, DescriptorAuthorizationMechanism):
            return {}
        record = mechanism.authorization.record
        return {
            "authorization_policy": mechanism.authorization_policy_digest,
            "policy_digest": record["axion_policy"],
            "allowlist_digest": record["allowlist"],
        }

    def pin(self, binding: BoundProposition, announced: Mapping[str, str]) -> BoundProposition:
        policy = announced.get("authorization_policy")
        pinned = binding.parameters.get("authorization_policy")
        if not isinstance(policy, str) or policy == pinned:
            return binding
        roots = (set(binding.trust_roots) - {pinned}) | {policy}
        return attrs.evolve(
            binding,
            parameters={**binding.parameters, "authorization_policy": policy},
            trust_roots=tuple(sorted(roots)),
        )

    def catalog_metadata(self) -> CatalogMetadata:
        from ._components import catalog_metadata

        return catalog_metadata()

    def holdout_handler(self) -> HoldoutHandler:
        from ._holdout import DescriptorHoldoutHandler

        return DescriptorHoldoutHandler(self)

    def decision_schema(self) -> Mapping[str, Any]:
        from ._decision_schema import decision_schema

        return decision_schema()

    def conformance_samples(self) -> Sequence[ConformanceSample]:
        try:
            folder = files("evidenced_fixtures") / "descriptor"
            tisc = (folder / "descriptor-tisc.txt").read_bytes()
            tisc_payload = (folder / "tisc-fixture.bin").read_bytes()
            weights = (folder / "descriptor-safetensors.txt").read_bytes()
            weights_payload = (folder / "safetensors-fixture.bin").read_bytes()
        except (ModuleNotFoundError, OSError):  # an installation without the fixtures
            return ()
        forged = tisc.replace(b"\nt81vm\n", b"\nnative-weights\n")
        return (
            ConformanceSample("tisc", (tisc, tisc_payload), MechanismOutcome.PASS),
            ConformanceSample("weights", (weights, weights_payload), MechanismOutcome.PASS),
            ConformanceSample("forged", (forged, tisc_payload), MechanismOutcome.FAIL),
        )


PROVIDER: Final = DescriptorProvider()
