"""The formation provider's catalog declarations: four components and their packaging.

Field by field as ``docs/spec/formation.md`` §7.1 declares them, with the implementation refs
adapted to this project (``docs/catalog.md``, "Mapping to the reference"): producer
``mechanism.formation:produce_formation_certificate``, checker
``mechanism.formation:check_formation``, receipt rechecker
``mechanism.formation:recheck_formation_receipt``, session adapter
``mechanism.formation:FormationPathCertificateMechanism.evaluate``. Ids, schemas and digests
are the mechanism's own constants. Packaging retains the module file of every source ref and
the profile, schema and specification files (paths relative to the source root).
"""

from __future__ import annotations

from typing import Any, Final

from mechanism._components import PYTHON, STATELESS_FRESHNESS, Family, component, packaging
from mechanism.formation._receipt import RECEIPT_SCHEMA, SELECTION_SCHEMA
from mechanism.formation._silo import COMMIT_SCHEMA
from mechanism.formation._wire import (
    CERTIFICATE_SCHEMA,
    MECHANISM_ID,
    PROFILE_DIGEST,
    PROFILE_SCHEMA,
    SUBJECT_SCHEMA,
)
from session import CatalogMetadata

__all__ = ["PROFILE_PATH", "catalog_metadata"]

PROFILE_PATH: Final = "mechanism/formation/data/typed-formation-0.1.json"
SCHEMA_PATH: Final = "mechanism/formation/data/vstd-typed-formation-0.1.schema.json"
SPEC_PATH: Final = "catalog/data/specifications/vstd-typed-formation-0.1.txt"
REFERENCE_PROFILE_PATH: Final = "src/verifier/profiles/typed-formation-0.1.json"

CLAIM_BOUNDARY: Final = (
    "A planned mechanism match does not establish rule-profile compatibility or execution. "
    "Finite formation does not establish source self-derivation, grounding, completeness, "
    "authority axiom agency, historical execution, implementation independence, or a "
    "silo-status upgrade."
)
_SUBJECT_BYTES: Final = f"{SUBJECT_SCHEMA} canonical immutable subject bytes"
_CERTIFICATE_BYTES: Final = f"{CERTIFICATE_SCHEMA} canonical immutable certificate bytes"
_PROFILE_NOTE: Final = (
    f"the compiled profile {PROFILE_PATH} (retained byte-identically; the reference "
    f"retains the same bytes as {REFERENCE_PROFILE_PATH}, digest {PROFILE_DIGEST})"
)
_FAMILY: Final = Family(
    verifier_family_id="artifact-network",
    pinned_prerequisite=f"EXACT_RULE_PROFILE:{PROFILE_DIGEST}",
    native_system="Verifier Standard experimental finite typed formation",
    native_versions=(PROFILE_SCHEMA, PROFILE_DIGEST),
    claim_boundary=CLAIM_BOUNDARY,
    domain_tags=("artifact", "experimental", "typed-formation"),
)


def _components() -> tuple[dict[str, Any], ...]:
    return (
        component(
            _FAMILY,
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
            freshness=STATELESS_FRESHNESS,
            tag="certificate",
        ),
        component(
            _FAMILY,
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
            freshness=STATELESS_FRESHNESS,
            tag="certificate",
        ),
        component(
            _FAMILY,
            component_id="component:artifact-network-typed-formation-receipt-rechecker",
            kind="CHECKER",
            implementation_ref="mechanism.formation:recheck_formation_receipt",
            mode="OFFLINE_REPLAY",
            accepted=(COMMIT_SCHEMA, RECEIPT_SCHEMA, SELECTION_SCHEMA),
            emitted=(),
            mechanism_id="mechanism:typed-formation-receipt-recheck",
            relation_id="relation:rechecks-typed-formation-receipt",
            extra_prerequisites=("EXACT_FORMATION_SELECTION", "OBSERVED_CENSUS_BYTES"),
            vocabulary=(
                "BOUND",
                "COMPLETE",
                "INCOMPLETE",
                "MATCHED",
                "CHECKED",
                "INVALID",
                "UNKNOWN",
            ),
            inputs=(
                f"{RECEIPT_SCHEMA} canonical immutable receipt bytes",
                f"{SELECTION_SCHEMA} canonical immutable selection bytes",
                f"{COMMIT_SCHEMA} canonical immutable commit bytes",
                "exact dict of sha256 digest to immutable evidence bytes (unversioned)",
            ),
            outputs=("silo formation inspection mapping (unversioned)",),
            loss=(
                "The recomputed inspection is an unversioned native mapping, not a VSTD-2 record. "
                "A reproduced receipt binds only the observed census bytes and the selection; the "
                f"formation report inside it is relative to {_PROFILE_NOTE}."
            ),
            freshness=(
                "Rebuilds the receipt from the caller's exact selection, commit and evidence on "
                "every "
                "call and requires byte equality; nothing is cached. Any change to the packaged "
                "source, schema, specification or profile bytes requires fresh "
                "implementation-coordinate evidence."
            ),
            tag="receipt",
        ),
        component(
            _FAMILY,
            component_id="component:artifact-network-typed-formation-session-mechanism",
            kind="ADAPTER",
            implementation_ref="mechanism.formation:FormationPathCertificateMechanism.evaluate",
            mode="OFFLINE_REPLAY",
            accepted=(),
            emitted=(),
            mechanism_id=MECHANISM_ID,
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
                "The adapter accepts typed native arguments and returns a MechanismDecision; "
                "neither "
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
            extra_versions=(MECHANISM_ID,),
        ),
    )


_FILES: Final = (("PROFILE", PROFILE_PATH), ("SCHEMA", SCHEMA_PATH), ("SPECIFICATION", SPEC_PATH))
_WIRE_SOURCES: Final = ("mechanism.formation:admit_subject", "mechanism.canonical:canonical_bytes")


def _packaging() -> tuple[dict[str, Any], ...]:
    return (
        packaging(
            "component:artifact-network-typed-formation-producer",
            ("mechanism.formation:produce_formation_certificate", *_WIRE_SOURCES),
            _FILES,
            PYTHON,
        ),
        packaging(
            "component:artifact-network-typed-formation-checker",
            ("mechanism.formation:check_formation", *_WIRE_SOURCES),
            _FILES,
            PYTHON,
        ),
        packaging(
            "component:artifact-network-typed-formation-receipt-rechecker",
            (
                "mechanism.formation:recheck_formation_receipt",
                "mechanism.formation:inspect_silo_formation",
                "mechanism.formation._silo_commit:admit_commit",
                "mechanism.formation:check_formation",
                *_WIRE_SOURCES,
            ),
            _FILES,
            PYTHON,
        ),
        packaging(
            "component:artifact-network-typed-formation-session-mechanism",
            (
                "mechanism.formation:FormationPathCertificateMechanism.evaluate",
                "mechanism.formation:check_formation",
                *_WIRE_SOURCES,
            ),
            _FILES,
            PYTHON,
        ),
    )


def catalog_metadata() -> CatalogMetadata:
    """The formation components and their packaging (plain data)."""
    return CatalogMetadata(_components(), _packaging())
