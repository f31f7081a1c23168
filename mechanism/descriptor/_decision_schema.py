"""The JSON Schema of the descriptor mechanism's decisions (``DescriptorProvider.decision_schema``).

What a result of ``t81.experiment_descriptor.authorized.0.1`` carries besides the session's
fields (:mod:`mechanism.descriptor._mechanism`'s contract, ``docs/spec/descriptor.md``):

1. ``observations`` has exactly ``status``, ``reason_codes``, ``failed_stage``,
   ``stage_order``, the five stage reports (``storage_report``, ``descriptor_report``,
   ``discovery``, ``authorization_report``, ``provider_report``; null for a stage not
   reached), ``catalog_digest``, ``residual_obligations``, ``trust_roots_meaning`` and
   ``claim_scope``.
2. ``PASS``: status ``CHECKED``, no reason, ``details`` ``""``, no failed stage and every
   report present. ``FAIL`` (status ``INVALID``) and ``UNKNOWN`` (status ``UNKNOWN``): the
   stage that decided and one reason of :data:`DECISION_REASON_CODES`, which ``details``
   repeats.
3. Each report's keys are described exactly but for the provider's own observation (the VM run,
   the tensors), which is an object whose shape is the provider's; a report quoting host or
   caller text may hold it escaped (``_canonical_report``). Built from the mechanism's own
   vocabularies, so a code or stage added there is described here;
   ``tests/daemon/test_openapi.py`` validates real answers of every outcome against it.
"""

from __future__ import annotations

from typing import Any, Final

from mechanism.descriptor._catalog import CATALOG_DIGEST
from mechanism.descriptor._mechanism import (
    CLAIM_SCOPE,
    DECISION_REASON_CODES,
    RESIDUAL_OBLIGATIONS,
    STAGE_ORDER,
    TRUST_ROOTS_MEANING,
)

__all__ = ["decision_schema"]

_DIGEST: Final = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_CANONFS: Final = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_NULL: Final = {"type": "null"}
_STRING: Final = {"type": "string"}
_FLAG: Final = {"type": "boolean"}
_REASONS: Final = {"type": "array", "maxItems": 1, "items": _STRING}


def _exact(properties: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(properties),
        "additionalProperties": False,
        "properties": {**properties, **(optional or {})},
    }


def _status(*values: str) -> dict[str, Any]:
    return {"enum": list(values)}


_STORAGE: Final = {
    "oneOf": [
        _exact(
            {
                "status": {"const": "ADMITTED"},
                "reason_codes": {"type": "array", "maxItems": 0},
                "items": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": 2,
                    "items": _exact(
                        {
                            "role": _status("descriptor", "payload"),
                            "size": {"type": "integer", "minimum": 0},
                            "digest": _DIGEST,
                        }
                    ),
                },
            }
        ),
        _exact({"status": {"const": "REFUSED"}, "reason_codes": {**_REASONS, "minItems": 1}}),
    ]
}
_DESCRIPTOR: Final = _exact(
    {
        "status": _status("VALID", "INVALID", "UNSUPPORTED", "LIMIT"),
        "reason_codes": _REASONS,
        "identity": _CANONFS,
        "identity_matches_pin": _FLAG,
        "payload_reference_observed": _CANONFS,
        "payload_matches_pin": _FLAG,
        "fields": {
            "oneOf": [{"type": "object", "additionalProperties": _STRING}, _NULL],
            "description": "the six decoded fields, once the descriptor decodes",
        },
        "declared_reference_matches_pin": {"oneOf": [_FLAG, _NULL]},
    }
)
_DISCOVERY: Final = _exact(
    {
        "status": _status("DISCOVERED", "REFUSED"),
        "reason_codes": _REASONS,
        "catalog_digest": _DIGEST,
        "provider": _STRING,
        "representation": _STRING,
        "operations": {"type": "array", "items": _STRING},
        "fixture_reference": _CANONFS,
        "representation_equals_fixture": _FLAG,
        "requested_operation": _STRING,
        "operation_offered": _FLAG,
    }
)
_AUTHORIZATION: Final = _exact(
    {
        "status": _status("AUTHORIZED", "DENIED", "UNKNOWN"),
        "reason_codes": _REASONS,
        "configuration_digest": _DIGEST,
        "paths": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path"],
                "properties": {
                    "path": _status(
                        "configuration", "exact_local_allowlist", "axion_final_authorization"
                    )
                },
            },
            "description": "the one authorization path taken and what it found",
        },
    }
)
_OBSERVED: Final = {"type": "object", "description": "the provider's own observation"}
_PROVIDER: Final = _exact(
    {
        "provider": _STRING,
        "operation": _STRING,
        "status": _status("OBSERVED", "INVALID", "UNKNOWN"),
        "reason_codes": _REASONS,
    },
    {
        "intended": _OBSERVED,
        "matches_intended": _FLAG,
        "policy_digest": _DIGEST,
        "max_steps": {"type": "integer", "minimum": 0},
        "vm": _OBSERVED,
        "weights": _OBSERVED,
    },
)
_REPORTS: Final = {
    "storage_report": _STORAGE,
    "descriptor_report": _DESCRIPTOR,
    "discovery": _DISCOVERY,
    "authorization_report": _AUTHORIZATION,
    "provider_report": _PROVIDER,
}


def _refused(outcome: str, status: str) -> dict[str, Any]:
    return {
        "properties": {
            "outcome": {"const": outcome},
            "details": {"minLength": 1},
            "observations": {
                "properties": {
                    "status": {"const": status},
                    "reason_codes": {"minItems": 1},
                    "failed_stage": {"enum": list(STAGE_ORDER)},
                }
            },
        }
    }


def decision_schema() -> dict[str, Any]:
    """The schema of a descriptor decision's ``outcome``, ``details`` and ``observations``."""
    codes = sorted(set(DECISION_REASON_CODES))
    observations = _exact(
        {
            "status": _status("CHECKED", "INVALID", "UNKNOWN"),
            "reason_codes": {"type": "array", "maxItems": 1, "items": {"enum": codes}},
            "failed_stage": {"oneOf": [{"enum": list(STAGE_ORDER)}, _NULL]},
            "stage_order": {"const": list(STAGE_ORDER)},
            **{name: {"oneOf": [report, _NULL]} for name, report in _REPORTS.items()},
            "catalog_digest": {"const": CATALOG_DIGEST},
            "residual_obligations": {"const": list(RESIDUAL_OBLIGATIONS)},
            "trust_roots_meaning": {"const": TRUST_ROOTS_MEANING},
            "claim_scope": {"const": CLAIM_SCOPE},
        }
    )
    return {
        "type": "object",
        "required": ["outcome", "details", "observations"],
        "properties": {
            "details": {"enum": ["", *codes], "description": "the reason code, or empty"},
            "observations": observations,
        },
        "oneOf": [
            {
                "properties": {
                    "outcome": {"const": "PASS"},
                    "details": {"const": ""},
                    "observations": {
                        "properties": {
                            "status": {"const": "CHECKED"},
                            "reason_codes": {"maxItems": 0},
                            "failed_stage": _NULL,
                            **{name: {"type": "object"} for name in _REPORTS},
                        }
                    },
                }
            },
            _refused("FAIL", "INVALID"),
            _refused("UNKNOWN", "UNKNOWN"),
        ],
    }
