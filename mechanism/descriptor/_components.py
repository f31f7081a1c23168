"""The descriptor provider's catalog declarations: one component per separately callable stage.

The encoder, descriptor preflight (strict decoding), validated operation discovery (the compiled
catalog constant), the host's final authorization (Axion ``final_authorization=true`` for
``t81vm``; the exact allowlist, instead of Axion, for ``native-weights``), the ``t81vm`` and
``native-weights`` providers, and the session adapter (which alone performs storage admission,
so it has no component of its own) — ``docs/spec/descriptor.md`` §6.1. They share the formation
family's vocabulary and planning surface (``VSTD-2``) and pin the compiled catalog with
``EXACT_COMPILED_CATALOG:<digest>``; the providers and the adapter require
``AUTHORITY:HOST_FINAL_AUTHORIZATION`` (settled by the authorization decision in readiness).
Ids, schemas, representations and digests are the package's own constants.
"""

from __future__ import annotations

from typing import Any, Final

from mechanism._components import PYTHON, STATELESS_FRESHNESS, Family, component, packaging
from session import CatalogMetadata

from ._authorization import ALLOWLIST_SCHEMA
from ._catalog import CATALOG_BY_PROVIDER, CATALOG_DIGEST, CATALOG_SCHEMA, PROFILE, SCHEMA
from ._mechanism import MECHANISM_ID

__all__ = ["catalog_metadata"]

SPEC_PATH: Final = "catalog/data/specifications/t81-experiment-descriptor-v1.txt"
CLAIM_BOUNDARY: Final = (
    "A planned mechanism match does not establish descriptor authenticity, provider capability, "
    "authorization or execution. The validation profile admits only the two exact "
    "object-interface fixtures; it does not establish general format validation, sandboxing, "
    "provider signatures, inferred logical identities, safety, self-derivation, completeness, "
    "authority axiom agency, or historical execution."
)
_TISC: Final = CATALOG_BY_PROVIDER["t81vm"].representation
_WEIGHTS: Final = CATALOG_BY_PROVIDER["native-weights"].representation
_HOST_AUTHORIZATION: Final = "AUTHORITY:HOST_FINAL_AUTHORIZATION"
_DESCRIPTOR_BYTES: Final = f"{SCHEMA} six-line descriptor bytes (exact, immutable)"
_CATALOG_NOTE: Final = (
    f"the compiled adapter catalog ({CATALOG_SCHEMA}, digest "
    f"{CATALOG_DIGEST}) under the {PROFILE} constraint profile"
)
_FAMILY: Final = Family(
    verifier_family_id="t81-experiment-descriptor",
    pinned_prerequisite=f"EXACT_COMPILED_CATALOG:{CATALOG_DIGEST}",
    native_system="T81 experiment descriptor, object-interface fixtures",
    native_versions=(SCHEMA, PROFILE, CATALOG_DIGEST),
    claim_boundary=CLAIM_BOUNDARY,
    domain_tags=("descriptor", "experimental", "t81"),
)


def _components() -> tuple[dict[str, Any], ...]:
    return (
        component(
            _FAMILY,
            component_id="component:t81-experiment-descriptor-encoder",
            kind="PROVER",
            implementation_ref="mechanism.descriptor:encode_descriptor",
            mode="STATIC",
            accepted=(_TISC, _WEIGHTS),
            emitted=(SCHEMA,),
            mechanism_id="mechanism:t81-descriptor-encoding",
            relation_id="relation:encodes-t81-experiment-descriptor",
            extra_prerequisites=(),
            vocabulary=(),
            inputs=("exact fixture payload bytes (base81-symbolic-tisc or safetensors-i8)",),
            outputs=(_DESCRIPTOR_BYTES,),
            loss=(
                "Encoding derives the six fields from the payload's fixture in "
                f"{_CATALOG_NOTE}; the descriptor asserts nothing that validation does not "
                "re-check, and carries no permission."
            ),
            freshness=STATELESS_FRESHNESS,
            tag="descriptor-encoding",
        ),
        component(
            _FAMILY,
            component_id="component:t81-experiment-descriptor-preflight",
            kind="CHECKER",
            implementation_ref="mechanism.descriptor:decode_descriptor",
            mode="OFFLINE_REPLAY",
            accepted=(SCHEMA,),
            emitted=(),
            mechanism_id="mechanism:t81-descriptor-preflight",
            relation_id="relation:decodes-t81-experiment-descriptor",
            extra_prerequisites=(),
            vocabulary=(),
            inputs=(_DESCRIPTOR_BYTES,),
            outputs=(
                "DescriptorFields or DescriptorError with a stable reason code (unversioned)",
            ),
            loss=(
                "Strict decoding admits exactly six fields; decoded fields remain untrusted "
                f"assertions until discovery checks them against {_CATALOG_NOTE}."
            ),
            freshness=STATELESS_FRESHNESS,
            tag="descriptor-preflight",
        ),
        component(
            _FAMILY,
            component_id="component:t81-validated-operation-discovery",
            kind="CHECKER",
            implementation_ref="mechanism.descriptor:CATALOG_BY_PROVIDER",
            mode="STATIC",
            accepted=(SCHEMA,),
            emitted=(),
            mechanism_id="mechanism:t81-validated-operation-discovery",
            relation_id="relation:discovers-validated-t81-operation",
            extra_prerequisites=(),
            vocabulary=(),
            inputs=(
                "decoded descriptor fields (unversioned)",
                "requested operation name pinned by the caller (unversioned)",
            ),
            outputs=("compiled ProviderAdapter record or a DISCOVERY_* refusal (unversioned)",),
            loss=(
                "Discovery is a lookup in the compiled constant, never in the declaration: a "
                "descriptor can neither add an adapter nor extend its singleton operations; "
                f"representation is checked by equality with the adapter's known fixture in "
                f"{_CATALOG_NOTE}."
            ),
            freshness=(
                "An immutable compiled constant; changing it changes the compiled catalog digest, "
                "the package digest and the adapter's mechanism digest."
            ),
            tag="operation-discovery",
            extra_versions=(CATALOG_SCHEMA,),
        ),
        component(
            _FAMILY,
            component_id="component:t81-host-final-authorization",
            kind="AUTHORIZER",
            implementation_ref="mechanism.descriptor:AuthorizationConfig.authorize",
            mode="OFFLINE_REPLAY",
            accepted=(ALLOWLIST_SCHEMA,),
            emitted=(),
            mechanism_id="mechanism:t81-final-authorization",
            relation_id="relation:authorizes-t81-operation",
            extra_prerequisites=("EXPLICIT_HOST_CONFIGURATION",),
            vocabulary=("AUTHORIZED", "DENIED", "UNKNOWN"),
            inputs=(
                "discovered provider, operation and payload reference (unversioned)",
                f"host Axion policy bytes and exact allowlist bytes ({ALLOWLIST_SCHEMA})",
            ),
            outputs=("AuthorizationReport mapping with the configuration digest (unversioned)",),
            loss=(
                "Exactly one path per provider: path B is one Axion evaluation with "
                "final_authorization=true for t81vm; path C, for native-weights, is an exact local "
                "allowlist instead of Axion (no patterns, nothing allowed by default). A catalog "
                "listing or a READY readiness report never grants this authorization."
            ),
            freshness=(
                "The implementation ref names an unbound instance method: the host constructs "
                "AuthorizationConfig(policy, allowlist) explicitly; catalog matching never "
                "instantiates it. Its configuration digest changes with any policy or allowlist "
                "byte."
            ),
            tag="authorization",
        ),
        component(
            _FAMILY,
            component_id="component:t81vm-fixture-provider",
            kind="PROVIDER",
            implementation_ref="mechanism.descriptor:run_program",
            mode="OFFLINE_REPLAY",
            accepted=(_TISC,),
            emitted=(),
            mechanism_id="mechanism:t81vm-run",
            relation_id="relation:runs-t81vm-fixture",
            extra_prerequisites=(_HOST_AUTHORIZATION, "AXION_INSTRUCTION_POLICY"),
            vocabulary=("HALTED", "STEP_LIMIT_EXHAUSTED", "TRAPPED"),
            inputs=(
                "decoded TISC instruction sequence from the admitted payload snapshot "
                "(unversioned)",
                "host Axion engine for instruction-level checks (unversioned)",
            ),
            outputs=("VmResult mapping: trace, traps, registers, Axion log (unversioned)",),
            loss=(
                "Runs only the operations of the fixture's opcode set; the observation must equal "
                f"the fixture's intended semantics in {_CATALOG_NOTE}. No sandbox is claimed."
            ),
            freshness=(
                "Deterministic over the admitted snapshot and the host policy; no state survives a "
                "run. Runs only after the host's final authorization."
            ),
            tag="provider",
        ),
        component(
            _FAMILY,
            component_id="component:native-weights-fixture-provider",
            kind="PROVIDER",
            implementation_ref="mechanism.descriptor:inspect_weights",
            mode="OFFLINE_REPLAY",
            accepted=(_WEIGHTS,),
            emitted=(),
            mechanism_id="mechanism:native-weights-inspect",
            relation_id="relation:inspects-safetensors-fixture",
            extra_prerequisites=(_HOST_AUTHORIZATION, "PRIVATE_SNAPSHOT"),
            vocabulary=("INVALID", "OBSERVED", "UNKNOWN"),
            inputs=("admitted safetensors-i8 payload snapshot bytes (unversioned)",),
            outputs=("WeightsReport mapping: tensor names, dtypes, shapes, digests (unversioned)",),
            loss=(
                "Loads a private 0600 snapshot by path with the safetensors library; the caller's "
                "original source is never reopened. The observation must equal the fixture's "
                f"intended semantics in {_CATALOG_NOTE}."
            ),
            freshness=(
                "Writes one private snapshot per call and reads only it; nothing is cached. Runs "
                "only after the host's final authorization."
            ),
            tag="provider",
        ),
        component(
            _FAMILY,
            component_id="component:t81-experiment-descriptor-session-mechanism",
            kind="ADAPTER",
            implementation_ref="mechanism.descriptor:DescriptorAuthorizationMechanism.evaluate",
            mode="OFFLINE_REPLAY",
            accepted=(),
            emitted=(),
            mechanism_id=MECHANISM_ID,
            relation_id="relation:checks-bound-t81-descriptor-proposition",
            extra_prerequisites=(
                _HOST_AUTHORIZATION,
                "CALLER_PINNED_REFERENCES",
                "EXACT_BOUND_PROPOSITION",
                "EXPLICIT_MECHANISM_INSTANCE",
            ),
            vocabulary=("PASS", "FAIL", "UNKNOWN"),
            inputs=(
                "BoundProposition typed native declaration (unversioned)",
                "ordered immutable descriptor/payload byte pair (unversioned)",
            ),
            outputs=(
                "MechanismDecision with separate storage, descriptor, discovery, authorization and "
                "provider reports and residual_obligations (unversioned)",
            ),
            loss=(
                "The adapter accepts typed native arguments and returns a MechanismDecision; "
                "neither acquires a serialized schema by being listed. PASS covers only the exact "
                f"fixture descriptor, discovery in {_CATALOG_NOTE}, the host's authorization and "
                "the provider's observation of the intended semantics; stage reports stay "
                "separate from the verdict."
            ),
            freshness=(
                "The implementation ref names an unbound instance method: catalog matching never "
                "instantiates it. EXPLICIT_MECHANISM_INSTANCE requires constructing "
                "DescriptorAuthorizationMechanism(policy=..., allowlist=...) (or "
                "default_mechanism()) and calling its bound evaluate method, or registering that "
                "instance with a VerificationSession. Its mechanism_digest binds the compiled "
                "catalog digest and its source bytes; any change requires fresh "
                "implementation-coordinate evidence."
            ),
            tag="session-adapter",
            extra_versions=(MECHANISM_ID,),
        ),
    )


_SPEC: Final = (("SPECIFICATION", SPEC_PATH),)
_CORE: Final = (
    "mechanism.descriptor:CATALOG_BY_PROVIDER",
    "mechanism.descriptor:canonfs_hash",
    "mechanism.canonical:canonical_digest",
)
_TISC_SOURCES: Final = ("mechanism.descriptor:decode_program", "mechanism.descriptor:PolicyEngine")
_AUTHORIZATION: Final = ("mechanism.descriptor:PolicyEngine", "mechanism.descriptor:DEFAULT_POLICY")
_WEIGHTS_DEPENDENCIES: Final = (*PYTHON, "numpy>=1.26", "safetensors>=0.4")


def _packaging() -> tuple[dict[str, Any], ...]:
    return (
        packaging(
            "component:t81-experiment-descriptor-encoder",
            ("mechanism.descriptor:encode_descriptor", *_CORE),
            _SPEC,
            PYTHON,
        ),
        packaging(
            "component:t81-experiment-descriptor-preflight",
            ("mechanism.descriptor:decode_descriptor", *_CORE),
            _SPEC,
            PYTHON,
        ),
        packaging("component:t81-validated-operation-discovery", _CORE, _SPEC, PYTHON),
        packaging(
            "component:t81-host-final-authorization",
            ("mechanism.descriptor:AuthorizationConfig.authorize", *_AUTHORIZATION),
            _SPEC,
            PYTHON,
        ),
        packaging(
            "component:t81vm-fixture-provider",
            ("mechanism.descriptor:run_program", *_TISC_SOURCES, *_CORE),
            _SPEC,
            PYTHON,
        ),
        packaging(
            "component:native-weights-fixture-provider",
            ("mechanism.descriptor:inspect_weights", *_CORE),
            _SPEC,
            _WEIGHTS_DEPENDENCIES,
        ),
        packaging(
            "component:t81-experiment-descriptor-session-mechanism",
            (
                "mechanism.descriptor:DescriptorAuthorizationMechanism.evaluate",
                "mechanism.descriptor:decode_descriptor",
                "mechanism.descriptor:AuthorizationConfig",
                "mechanism.descriptor:run_program",
                "mechanism.descriptor:inspect_weights",
                *_TISC_SOURCES,
                *_CORE,
                *_AUTHORIZATION,
            ),
            _SPEC,
            _WEIGHTS_DEPENDENCIES,
        ),
    )


def catalog_metadata() -> CatalogMetadata:
    """The descriptor stages and their packaging (plain data)."""
    return CatalogMetadata(_components(), _packaging())
