"""VSTD typed formation 0.1: profile, wire, producer, independent checker, session adapter.

Public names only; the implementation lives in private modules:

* ``_wire`` — constants, the compiled profile bytes, record admission (§2.2, §3.1–§3.3);
* ``_checker`` — :func:`check_formation`, the independent checker (§3.4–§3.6); it never
  imports the producer;
* ``_producer`` — :func:`produce_formation_certificate` (§4); shares no inference code with
  the checker, and is imported only when that name is first used, so everything else here
  imports and runs with the producer module unavailable;
* ``_mechanism`` — :class:`FormationPathCertificateMechanism` and :func:`formation_binding`
  (§5), the evidence-bound session adapter.
"""

from typing import TYPE_CHECKING, Any

from mechanism.formation._checker import REASON_CODES, check_formation
from mechanism.formation._mechanism import (
    ADAPTER_REASON_CODES,
    MECHANISM_DIGEST,
    PRECHECK,
    SOURCE_INVENTORY,
    FormationPathCertificateMechanism,
    formation_binding,
    source_identity,
)
from mechanism.formation._receipt import (
    FormationReceiptError,
    build_formation_receipt,
    recheck_formation_receipt,
)
from mechanism.formation._silo import inspect_silo_formation
from mechanism.formation._wire import (
    CERTIFICATE_SCHEMA,
    MAX_DEPTH,
    MAX_JSON_CONTAINERS,
    MAX_JSON_DEPTH,
    MAX_NODES,
    MAX_PATH_STEPS,
    MAX_RECORD_BYTES,
    MECHANISM_ID,
    PROFILE_DIGEST,
    PROFILE_SCHEMA,
    RESIDUAL_OBLIGATIONS,
    SUBJECT_SCHEMA,
    TAGS,
    CeilingError,
    FormationError,
    FormationLimitError,
    UnsupportedFormation,
    admit_certificate,
    admit_subject,
    profile_bytes,
    profile_digest,
    schema_bytes,
)

__all__ = [
    "ADAPTER_REASON_CODES",
    "CERTIFICATE_SCHEMA",
    "MAX_DEPTH",
    "MAX_JSON_CONTAINERS",
    "MAX_JSON_DEPTH",
    "MAX_NODES",
    "MAX_PATH_STEPS",
    "MAX_RECORD_BYTES",
    "MECHANISM_DIGEST",
    "MECHANISM_ID",
    "PRECHECK",
    "PROFILE_DIGEST",
    "PROFILE_SCHEMA",
    "REASON_CODES",
    "RESIDUAL_OBLIGATIONS",
    "SOURCE_INVENTORY",
    "SUBJECT_SCHEMA",
    "TAGS",
    "CeilingError",
    "FormationError",
    "FormationLimitError",
    "FormationPathCertificateMechanism",
    "FormationReceiptError",
    "UnsupportedFormation",
    "admit_certificate",
    "admit_subject",
    "build_formation_receipt",
    "check_formation",
    "formation_binding",
    "inspect_silo_formation",
    "produce_formation_certificate",
    "profile_bytes",
    "profile_digest",
    "recheck_formation_receipt",
    "schema_bytes",
    "source_identity",
]

if TYPE_CHECKING:
    from mechanism.formation._producer import produce_formation_certificate


def __getattr__(name: str) -> Any:
    # The producer is imported on first use only, so the checker, the adapter and the silo
    # inspector import and run with the producer module unavailable (docs/spec/formation.md
    # §3.6: the checker must not depend on the producer).
    if name == "produce_formation_certificate":
        from mechanism.formation._producer import produce_formation_certificate

        globals()[name] = produce_formation_certificate
        return produce_formation_certificate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
