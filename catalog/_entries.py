"""The reference registry of this project: declarations only (docs/spec/formation.md §7.1).

Rules:

* The four formation entries follow docs/spec/formation.md §7.1 field by field. Their
  implementation refs are adapted to this project (see ``docs/catalog.md``, "Mapping to the
  reference"):

  - producer ``…formation_producer:produce_formation_certificate`` →
    ``mechanism.formation:produce_formation_certificate``
  - checker ``…formation_checker:check_formation`` → ``mechanism.formation:check_formation``
  - receipt rechecker ``…formation_receipt:recheck_formation_receipt`` →
    ``mechanism.formation:recheck_formation_receipt``
  - adapter ``…formation_mechanism:FormationPathCertificateMechanism.evaluate`` →
    ``mechanism.formation:FormationPathCertificateMechanism.evaluate``

* The descriptor mechanism contributes one entry per separately callable stage: the encoder,
  descriptor preflight (strict decoding), validated operation discovery (the compiled catalog
  constant), the host's final authorization (Axion ``final_authorization=true`` for ``t81vm``;
  the exact allowlist, instead of Axion, for ``native-weights``), the ``t81vm`` and
  ``native-weights`` providers, and the session adapter (which alone performs storage
  admission, so it has no entry of its own). They reuse the formation entries' vocabulary and
  planning surface (``VSTD-2``) and pin the compiled catalog with
  ``EXACT_COMPILED_CATALOG:<digest>``; the providers and the adapter require
  ``AUTHORITY:HOST_FINAL_AUTHORIZATION`` (settled by the authorization decision in readiness).
* :data:`PACKAGING` declares, per component, which exact files a stored package retains: the
  module file of every source ref (resolved statically, never imported) and the schema,
  specification, profile and fixture files. Paths are relative to the source root (the directory
  holding the ``catalog`` package).
* Nothing here imports a mechanism: ids and digests are written out as data, and tests compare
  them with the mechanisms' own constants.
"""

from __future__ import annotations

import functools

import attrs

from ._descriptor import ComponentDescriptor
from ._registry import ComponentRegistry

__all__ = [
    "DESCRIPTOR_MECHANISM_ID",
    "FORMATION_MECHANISM_ID",
    "FORMATION_PROFILE_DIGEST",
    "FORMATION_PROFILE_PATH",
    "PACKAGING",
    "REGISTRY_VERSION",
    "ArtifactDeclaration",
    "ComponentPackaging",
    "reference_registry",
]

REGISTRY_VERSION = "EVIDENCED-REFERENCE-COMPONENTS-0.1"

FORMATION_MECHANISM_ID = "vstd.typed_formation.checked.0.1"
FORMATION_PROFILE_DIGEST = "sha256:271760d604e1ade55cba4974c658b92263bd3ee8ae343677dd91d0e713fb677f"
FORMATION_PROFILE_PATH = "mechanism/formation/data/typed-formation-0.1.json"
FORMATION_SCHEMA_PATH = "mechanism/formation/data/vstd-typed-formation-0.1.schema.json"
FORMATION_SPEC_PATH = "catalog/data/specifications/vstd-typed-formation-0.1.txt"
REFERENCE_PROFILE_PATH = "src/verifier/profiles/typed-formation-0.1.json"

SUBJECT_SCHEMA = "VSTD-TYPED-FORMATION-0.1"
CERTIFICATE_SCHEMA = "VSTD-TYPED-FORMATION-CERTIFICATE-0.1"
PROFILE_SCHEMA = "VSTD-TYPED-FORMATION-PROFILE-0.1"

DESCRIPTOR_MECHANISM_ID = "t81.experiment_descriptor.authorized.0.1"
DESCRIPTOR_SCHEMA = "t81.experiment-descriptor.v1"
DESCRIPTOR_PROFILE = "object-interface-fixtures-v1"
DESCRIPTOR_SPEC_PATH = "catalog/data/specifications/t81-experiment-descriptor-v1.txt"

PLANNING_SURFACE = ("VSTD-2",)
BASE_PREREQUISITES = ("EXACT_IMPLEMENTATION_COORDINATE", "EXACT_NATIVE_INPUT", "RESOURCE_BOUNDS")

FORMATION_CLAIM_BOUNDARY = (
    "A planned mechanism match does not establish rule-profile compatibility or execution. "
    "Finite formation does not establish source self-derivation, grounding, completeness, "
    "authority axiom agency, historical execution, implementation independence, or a "
    "silo-status upgrade."
)
DESCRIPTOR_CLAIM_BOUNDARY = (
    "A planned mechanism match does not establish descriptor authenticity, provider capability, "
    "authorization or execution. The validation profile admits only the two exact "
    "object-interface fixtures; it does not establish general format validation, sandboxing, "
    "provider signatures, inferred logical identities, safety, self-derivation, completeness, "
    "authority axiom agency, or historical execution."
)

_SUBJECT_BYTES = f"{SUBJECT_SCHEMA} canonical immutable subject bytes"
_CERTIFICATE_BYTES = f"{CERTIFICATE_SCHEMA} canonical immutable certificate bytes"
_PROFILE_NOTE = (
    f"the compiled profile {FORMATION_PROFILE_PATH} (retained byte-identically; the reference "
    f"retains the same bytes as {REFERENCE_PROFILE_PATH}, digest {FORMATION_PROFILE_DIGEST})"
)
_STATELESS_FRESHNESS = (
    "Stateless function over exact immutable bytes; no cache or session state. Any change to the "
    "packaged source, schema, specification or profile bytes changes the package digest and "
    "requires fresh implementation-coordinate evidence."
)


@attrs.frozen
class _Family:
    """What every entry of one mechanism family shares."""

    verifier_family_id: str
    pinned_prerequisite: str
    native_system: str
    native_versions: tuple[str, ...]
    claim_boundary: str
    domain_tags: tuple[str, ...]


def _entry(
    family: _Family,
    *,
    component_id: str,
    kind: str,
    implementation_ref: str,
    mode: str,
    accepted: tuple[str, ...],
    emitted: tuple[str, ...],
    mechanism_id: str,
    relation_id: str,
    extra_prerequisites: tuple[str, ...],
    vocabulary: tuple[str, ...],
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    loss: str,
    freshness: str,
    tag: str,
    extra_versions: tuple[str, ...] = (),
) -> ComponentDescriptor:
    return ComponentDescriptor(
        component_id=component_id,
        kind=kind,
        implementation_ref=implementation_ref,
        lifecycle="EXPERIMENTAL",
        availability="AVAILABLE",
        interaction_modes=(mode,),
        verifier_family_ids=(family.verifier_family_id,),
        planning_surface_schema_ids=PLANNING_SURFACE,
        accepted_schema_ids=accepted,
        emitted_schema_ids=emitted,
        mechanism_ids=(mechanism_id,),
        relation_ids=(relation_id,),
        execution_prerequisites=(
            *BASE_PREREQUISITES,
            family.pinned_prerequisite,
            *extra_prerequisites,
        ),
        optional_dependencies=(),
        trust_roots=(),
        native_system=family.native_system,
        native_versions=(*family.native_versions, *extra_versions),
        native_result_vocabulary=vocabulary,
        native_inputs=inputs,
        native_outputs=outputs,
        transformation_loss=loss,
        freshness_behavior=freshness,
        claim_boundary=family.claim_boundary,
        domain_tags=(*family.domain_tags, tag),
    )


_FORMATION_FAMILY = _Family(
    verifier_family_id="artifact-network",
    pinned_prerequisite=f"EXACT_RULE_PROFILE:{FORMATION_PROFILE_DIGEST}",
    native_system="Verifier Standard experimental finite typed formation",
    native_versions=(PROFILE_SCHEMA, FORMATION_PROFILE_DIGEST),
    claim_boundary=FORMATION_CLAIM_BOUNDARY,
    domain_tags=("artifact", "experimental", "typed-formation"),
)
_formation = functools.partial(_entry, _FORMATION_FAMILY)


FORMATION_COMPONENTS = (
    _formation(
        component_id="component:artifact-network-typed-formation-producer",
        kind="PROVER",
        implementation_ref="mechanism.formation:produce_formation_certificate",
        mode="STATIC",
        accepted=(SUBJECT_SCHEMA,),
        emitted=(CERTIFICATE_SCHEMA,),
        mechanism_id="mechanism:typed-formation-certificate-production",
        relation_id="relation:produces-typed-formation-certificate",
        extra_prerequisites=(),
        vocabulary=(),
        inputs=(_SUBJECT_BYTES,),
        outputs=(_CERTIFICATE_BYTES,),
        loss=(
            "Native subject and certificate bytes are not VSTD-2 planning records. The emitted "
            "certificate carries only the ordered construction steps fixed by "
            f"{_PROFILE_NOTE}; it carries no type, observation or verdict, and producing it is "
            "not checking it."
        ),
        freshness=_STATELESS_FRESHNESS,
        tag="certificate",
    ),
    _formation(
        component_id="component:artifact-network-typed-formation-checker",
        kind="CHECKER",
        implementation_ref="mechanism.formation:check_formation",
        mode="OFFLINE_REPLAY",
        accepted=(SUBJECT_SCHEMA, CERTIFICATE_SCHEMA),
        emitted=(),
        mechanism_id="mechanism:typed-formation-certificate-check",
        relation_id="relation:checks-typed-formation-certificate",
        extra_prerequisites=(),
        vocabulary=("CHECKED", "INVALID", "UNKNOWN"),
        inputs=(_SUBJECT_BYTES, _CERTIFICATE_BYTES),
        outputs=("typed-formation report mapping (unversioned)",),
        loss=(
            "The typed-formation report is an unversioned native mapping, not a VSTD-2 record; "
            "listing the checker gives it no serialized schema. Checking is relative to "
            f"{_PROFILE_NOTE} and retains every residual obligation."
        ),
        freshness=_STATELESS_FRESHNESS,
        tag="certificate",
    ),
    _formation(
        component_id="component:artifact-network-typed-formation-receipt-rechecker",
        kind="CHECKER",
        implementation_ref="mechanism.formation:recheck_formation_receipt",
        mode="OFFLINE_REPLAY",
        accepted=(
            "VSTD-SILO-COMMIT-0.1",
            "VSTD-SILO-FORMATION-RECEIPT-0.1",
            "VSTD-SILO-FORMATION-SELECTION-0.1",
        ),
        emitted=(),
        mechanism_id="mechanism:typed-formation-receipt-recheck",
        relation_id="relation:rechecks-typed-formation-receipt",
        extra_prerequisites=("EXACT_FORMATION_SELECTION", "OBSERVED_CENSUS_BYTES"),
        vocabulary=("BOUND", "COMPLETE", "INCOMPLETE", "MATCHED", "CHECKED", "INVALID", "UNKNOWN"),
        inputs=(
            "VSTD-SILO-FORMATION-RECEIPT-0.1 canonical immutable receipt bytes",
            "VSTD-SILO-FORMATION-SELECTION-0.1 canonical immutable selection bytes",
            "VSTD-SILO-COMMIT-0.1 canonical immutable commit bytes",
            "exact dict of sha256 digest to immutable evidence bytes (unversioned)",
        ),
        outputs=("silo formation inspection mapping (unversioned)",),
        loss=(
            "The recomputed inspection is an unversioned native mapping, not a VSTD-2 record. "
            "A reproduced receipt binds only the observed census bytes and the selection; the "
            f"formation report inside it is relative to {_PROFILE_NOTE}."
        ),
        freshness=(
            "Rebuilds the receipt from the caller's exact selection, commit and evidence on every "
            "call and requires byte equality; nothing is cached. Any change to the packaged "
            "source, schema, specification or profile bytes requires fresh "
            "implementation-coordinate evidence."
        ),
        tag="receipt",
    ),
    _formation(
        component_id="component:artifact-network-typed-formation-session-mechanism",
        kind="ADAPTER",
        implementation_ref="mechanism.formation:FormationPathCertificateMechanism.evaluate",
        mode="OFFLINE_REPLAY",
        accepted=(),
        emitted=(),
        mechanism_id=FORMATION_MECHANISM_ID,
        relation_id="relation:checks-bound-typed-formation-proposition",
        extra_prerequisites=(
            "DECLARED_CONTEXT_DIGESTS",
            "EXACT_BOUND_PROPOSITION",
            "EXPLICIT_MECHANISM_INSTANCE",
        ),
        vocabulary=("PASS", "FAIL", "UNKNOWN"),
        inputs=(
            "BoundProposition typed native declaration (unversioned)",
            "ordered immutable subject/certificate byte pair (unversioned)",
        ),
        outputs=(
            "MechanismDecision with preserved formation_report and residual_obligations "
            "(unversioned)",
        ),
        loss=(
            "The adapter accepts typed native arguments and returns a MechanismDecision; neither "
            "acquires a serialized schema by being listed. PASS covers only the exact finite "
            f"certificate predicate under {_PROFILE_NOTE}; the formation report and residual "
            "obligations stay separate from the verdict."
        ),
        freshness=(
            "The implementation ref names an unbound instance method: catalog matching never "
            "instantiates it. EXPLICIT_MECHANISM_INSTANCE requires constructing "
            "FormationPathCertificateMechanism() and calling its bound evaluate method, or "
            "registering that instance with a VerificationSession. Its mechanism_digest binds "
            "the adapter, checker, wire and codec source bytes read at import; any change "
            "requires fresh implementation-coordinate evidence."
        ),
        tag="certificate",
        extra_versions=(FORMATION_MECHANISM_ID,),
    ),
)


@attrs.frozen
class ArtifactDeclaration:
    """One exact file a stored package retains: ``role`` and source-root-relative ``path``."""

    role: str
    path: str


@attrs.frozen
class ComponentPackaging:
    """What a stored package retains for one component.

    ``source_refs`` are ``module:attribute`` refs whose defining module files are retained (the
    first is the component's own ``implementation_ref``); ``artifacts`` are the other exact files;
    ``dependencies`` become ``PACKAGE_DEPENDENCY:`` planning prerequisites.
    """

    component_id: str
    source_refs: tuple[str, ...]
    artifacts: tuple[ArtifactDeclaration, ...]
    dependencies: tuple[str, ...]


_FORMATION_FILES = (
    ArtifactDeclaration("PROFILE", FORMATION_PROFILE_PATH),
    ArtifactDeclaration("SCHEMA", FORMATION_SCHEMA_PATH),
    ArtifactDeclaration("SPECIFICATION", FORMATION_SPEC_PATH),
)
_WIRE_SOURCES = ("mechanism.formation:admit_subject", "mechanism.canonical:canonical_bytes")
_PYTHON = ("python>=3.11",)

_FORMATION_PACKAGING = (
    ComponentPackaging(
        "component:artifact-network-typed-formation-producer",
        ("mechanism.formation:produce_formation_certificate", *_WIRE_SOURCES),
        _FORMATION_FILES,
        _PYTHON,
    ),
    ComponentPackaging(
        "component:artifact-network-typed-formation-checker",
        ("mechanism.formation:check_formation", *_WIRE_SOURCES),
        _FORMATION_FILES,
        _PYTHON,
    ),
    ComponentPackaging(
        "component:artifact-network-typed-formation-receipt-rechecker",
        (
            "mechanism.formation:recheck_formation_receipt",
            "mechanism.formation:inspect_silo_formation",
            "mechanism.formation:check_formation",
            *_WIRE_SOURCES,
        ),
        _FORMATION_FILES,
        _PYTHON,
    ),
    ComponentPackaging(
        "component:artifact-network-typed-formation-session-mechanism",
        (
            "mechanism.formation:FormationPathCertificateMechanism.evaluate",
            "mechanism.formation:check_formation",
            *_WIRE_SOURCES,
        ),
        _FORMATION_FILES,
        _PYTHON,
    ),
)


# ---------------------------------------------------------------------------------------------
# The descriptor mechanism's separate stages (docs/spec/descriptor.md §6.1: storage admission,
# validated operation discovery and authorization are separate) and its session adapter.

DESCRIPTOR_CATALOG_DIGEST = (
    "sha256:80b5189ba51beefea223cdfbbbe52526b7e907e444484f6a37a7176da18d5ede"
)
DESCRIPTOR_CATALOG_SCHEMA = "t81.descriptor-adapter-catalog.v1"
ALLOWLIST_SCHEMA = "t81.descriptor-allowlist.v1"
TISC_REPRESENTATION = "base81-symbolic-tisc"
WEIGHTS_REPRESENTATION = "safetensors-i8"
HOST_AUTHORIZATION = "AUTHORITY:HOST_FINAL_AUTHORIZATION"
_DESCRIPTOR_BYTES = f"{DESCRIPTOR_SCHEMA} six-line descriptor bytes (exact, immutable)"
_CATALOG_NOTE = (
    f"the compiled adapter catalog ({DESCRIPTOR_CATALOG_SCHEMA}, digest "
    f"{DESCRIPTOR_CATALOG_DIGEST}) under the {DESCRIPTOR_PROFILE} constraint profile"
)


_DESCRIPTOR_FAMILY = _Family(
    verifier_family_id="t81-experiment-descriptor",
    pinned_prerequisite=f"EXACT_COMPILED_CATALOG:{DESCRIPTOR_CATALOG_DIGEST}",
    native_system="T81 experiment descriptor, object-interface fixtures",
    native_versions=(DESCRIPTOR_SCHEMA, DESCRIPTOR_PROFILE, DESCRIPTOR_CATALOG_DIGEST),
    claim_boundary=DESCRIPTOR_CLAIM_BOUNDARY,
    domain_tags=("descriptor", "experimental", "t81"),
)
_descriptor_stage = functools.partial(_entry, _DESCRIPTOR_FAMILY)


DESCRIPTOR_COMPONENTS = (
    _descriptor_stage(
        component_id="component:t81-experiment-descriptor-encoder",
        kind="PROVER",
        implementation_ref="mechanism.descriptor:encode_descriptor",
        mode="STATIC",
        accepted=(TISC_REPRESENTATION, WEIGHTS_REPRESENTATION),
        emitted=(DESCRIPTOR_SCHEMA,),
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
        freshness=_STATELESS_FRESHNESS,
        tag="descriptor-encoding",
    ),
    _descriptor_stage(
        component_id="component:t81-experiment-descriptor-preflight",
        kind="CHECKER",
        implementation_ref="mechanism.descriptor:decode_descriptor",
        mode="OFFLINE_REPLAY",
        accepted=(DESCRIPTOR_SCHEMA,),
        emitted=(),
        mechanism_id="mechanism:t81-descriptor-preflight",
        relation_id="relation:decodes-t81-experiment-descriptor",
        extra_prerequisites=(),
        vocabulary=(),
        inputs=(_DESCRIPTOR_BYTES,),
        outputs=("DescriptorFields or DescriptorError with a stable reason code (unversioned)",),
        loss=(
            "Strict decoding admits exactly six fields; decoded fields remain untrusted "
            f"assertions until discovery checks them against {_CATALOG_NOTE}."
        ),
        freshness=_STATELESS_FRESHNESS,
        tag="descriptor-preflight",
    ),
    _descriptor_stage(
        component_id="component:t81-validated-operation-discovery",
        kind="CHECKER",
        implementation_ref="mechanism.descriptor:CATALOG_BY_PROVIDER",
        mode="STATIC",
        accepted=(DESCRIPTOR_SCHEMA,),
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
        extra_versions=(DESCRIPTOR_CATALOG_SCHEMA,),
    ),
    _descriptor_stage(
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
            "host Axion policy bytes and exact allowlist bytes (t81.descriptor-allowlist.v1)",
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
    _descriptor_stage(
        component_id="component:t81vm-fixture-provider",
        kind="PROVIDER",
        implementation_ref="mechanism.descriptor:run_program",
        mode="OFFLINE_REPLAY",
        accepted=(TISC_REPRESENTATION,),
        emitted=(),
        mechanism_id="mechanism:t81vm-run",
        relation_id="relation:runs-t81vm-fixture",
        extra_prerequisites=(HOST_AUTHORIZATION, "AXION_INSTRUCTION_POLICY"),
        vocabulary=("HALTED", "STEP_LIMIT_EXHAUSTED", "TRAPPED"),
        inputs=(
            "decoded TISC instruction sequence from the admitted payload snapshot (unversioned)",
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
    _descriptor_stage(
        component_id="component:native-weights-fixture-provider",
        kind="PROVIDER",
        implementation_ref="mechanism.descriptor:inspect_weights",
        mode="OFFLINE_REPLAY",
        accepted=(WEIGHTS_REPRESENTATION,),
        emitted=(),
        mechanism_id="mechanism:native-weights-inspect",
        relation_id="relation:inspects-safetensors-fixture",
        extra_prerequisites=(HOST_AUTHORIZATION, "PRIVATE_SNAPSHOT"),
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
    _descriptor_stage(
        component_id="component:t81-experiment-descriptor-session-mechanism",
        kind="ADAPTER",
        implementation_ref="mechanism.descriptor:DescriptorAuthorizationMechanism.evaluate",
        mode="OFFLINE_REPLAY",
        accepted=(),
        emitted=(),
        mechanism_id=DESCRIPTOR_MECHANISM_ID,
        relation_id="relation:checks-bound-t81-descriptor-proposition",
        extra_prerequisites=(
            HOST_AUTHORIZATION,
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
        extra_versions=(DESCRIPTOR_MECHANISM_ID,),
    ),
)

_DESCRIPTOR_SPEC = (ArtifactDeclaration("SPECIFICATION", DESCRIPTOR_SPEC_PATH),)
_DESCRIPTOR_CORE = (
    "mechanism.descriptor:CATALOG_BY_PROVIDER",
    "mechanism.descriptor:canonfs_hash",
    "mechanism.canonical:canonical_digest",
)
_DESCRIPTOR_TISC = (
    "mechanism.descriptor:decode_program",
    "mechanism.descriptor:PolicyEngine",
)
_DESCRIPTOR_AUTHORIZATION = (
    "mechanism.descriptor:PolicyEngine",
    "mechanism.descriptor:DEFAULT_POLICY",
)

_DESCRIPTOR_PACKAGING = (
    ComponentPackaging(
        "component:t81-experiment-descriptor-encoder",
        ("mechanism.descriptor:encode_descriptor", *_DESCRIPTOR_CORE),
        _DESCRIPTOR_SPEC,
        _PYTHON,
    ),
    ComponentPackaging(
        "component:t81-experiment-descriptor-preflight",
        ("mechanism.descriptor:decode_descriptor", *_DESCRIPTOR_CORE),
        _DESCRIPTOR_SPEC,
        _PYTHON,
    ),
    ComponentPackaging(
        "component:t81-validated-operation-discovery",
        _DESCRIPTOR_CORE,
        _DESCRIPTOR_SPEC,
        _PYTHON,
    ),
    ComponentPackaging(
        "component:t81-host-final-authorization",
        ("mechanism.descriptor:AuthorizationConfig.authorize", *_DESCRIPTOR_AUTHORIZATION),
        _DESCRIPTOR_SPEC,
        _PYTHON,
    ),
    ComponentPackaging(
        "component:t81vm-fixture-provider",
        ("mechanism.descriptor:run_program", *_DESCRIPTOR_TISC, *_DESCRIPTOR_CORE),
        _DESCRIPTOR_SPEC,
        _PYTHON,
    ),
    ComponentPackaging(
        "component:native-weights-fixture-provider",
        ("mechanism.descriptor:inspect_weights", *_DESCRIPTOR_CORE),
        _DESCRIPTOR_SPEC,
        (*_PYTHON, "numpy>=1.26", "safetensors>=0.4"),
    ),
    ComponentPackaging(
        "component:t81-experiment-descriptor-session-mechanism",
        (
            "mechanism.descriptor:DescriptorAuthorizationMechanism.evaluate",
            "mechanism.descriptor:decode_descriptor",
            "mechanism.descriptor:AuthorizationConfig",
            "mechanism.descriptor:run_program",
            "mechanism.descriptor:inspect_weights",
            *_DESCRIPTOR_TISC,
            *_DESCRIPTOR_CORE,
            *_DESCRIPTOR_AUTHORIZATION,
        ),
        _DESCRIPTOR_SPEC,
        (*_PYTHON, "numpy>=1.26", "safetensors>=0.4"),
    ),
)

REFERENCE_COMPONENTS: tuple[ComponentDescriptor, ...] = (
    *FORMATION_COMPONENTS,
    *DESCRIPTOR_COMPONENTS,
)
PACKAGING: tuple[ComponentPackaging, ...] = (*_FORMATION_PACKAGING, *_DESCRIPTOR_PACKAGING)


def reference_registry() -> ComponentRegistry:
    """This project's registry: the formation entries and the descriptor mechanism's stages."""
    return ComponentRegistry(REFERENCE_COMPONENTS, registry_version=REGISTRY_VERSION)
