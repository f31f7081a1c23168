"""The JSON Schema of the formation mechanism's decisions (``FormationProvider.decision_schema``).

What a result of ``vstd.typed_formation.checked.0.1`` carries besides the session's fields
(``docs/spec/formation.md`` §3.5 and §5; :mod:`mechanism.formation._mechanism`'s contract):

1. ``observations`` has exactly ``status``, ``reason_codes``, ``formation_report``,
   ``residual_obligations`` (the fixed eight), ``trust_roots_meaning`` and ``claim_scope``.
2. ``PASS``: status ``CHECKED``, no reason, ``details`` ``""``, and a CHECKED report with its
   root observation. ``FAIL``: status ``INVALID``, ``details`` and the one reason a code the
   adapter answers FAIL with; ``UNKNOWN``: status ``UNKNOWN``, an UNKNOWN code. The report is
   null for a preflight refusal, else the checker's (§3.5): exactly seven keys, CHECKED with an
   observation and no reason, INVALID or UNKNOWN with a null observation and one reason of
   that status's set.
3. Built from the mechanism's own vocabularies (:data:`ADAPTER_REASON_CODES`, the checker's
   :data:`~mechanism.formation._checker.REASON_CODES`, the residual obligations, the compiled
   profile digest), so a code added there is described here; ``tests/daemon/test_openapi.py``
   validates real answers of every outcome against it.
"""

from __future__ import annotations

from typing import Any, Final

from mechanism.formation._checker import REASON_CODES
from mechanism.formation._mechanism import (
    ADAPTER_REASON_CODES,
    CLAIM_SCOPE,
    TRUST_ROOTS_MEANING,
)
from mechanism.formation._wire import MAX_PATH_STEPS, PROFILE_DIGEST, RESIDUAL_OBLIGATIONS
from session import MechanismOutcome

__all__ = ["decision_schema"]

_DIGEST: Final = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_NULL: Final = {"type": "null"}
_INDICES: Final = {
    "type": "array",
    "items": {"type": "integer", "minimum": 0},
    "uniqueItems": True,
}


def _exact(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(properties),
        "additionalProperties": False,
        "properties": properties,
        **extra,
    }


def _codes(outcome: MechanismOutcome) -> list[str]:
    return sorted(code for code, given in ADAPTER_REASON_CODES.items() if given is outcome)


def _checker_codes(status: str) -> list[str]:
    return sorted(code for code, given in REASON_CODES.items() if given == status)


_OBSERVATION: Final = _exact(
    {
        "type": {
            "type": "string",
            "pattern": r"^(CODE\()*(FORM|PATH)\)*$",
            "description": "FORM or PATH, wrapped in CODE(...) once per quotation",
        },
        "denotation_digest": _DIGEST,
        "source_digest": {"oneOf": [_DIGEST, _NULL], "description": "null unless PATH"},
        "target_digest": {"oneOf": [_DIGEST, _NULL], "description": "null unless PATH"},
        "path_steps": {
            "type": "array",
            "maxItems": MAX_PATH_STEPS,
            "items": _exact({"source_digest": _DIGEST, "target_digest": _DIGEST}),
        },
        "quote_rank": {"type": "integer", "minimum": 0},
        "required_depth": {"type": "integer", "minimum": 1},
        "formation_digest": _DIGEST,
        "dependency_nodes": {**_INDICES, "minItems": 1},
        "quote_origins": _INDICES,
    },
    description="the root's typed value (docs/spec/formation.md §3.5)",
)

_REPORT: Final = _exact(
    {
        "status": {"enum": ["CHECKED", "INVALID", "UNKNOWN"]},
        "subject_digest": {"oneOf": [_DIGEST, _NULL]},
        "profile_digest": {"const": PROFILE_DIGEST},
        "root": {"oneOf": [{"type": "integer", "minimum": 0}, _NULL]},
        "observation": {"oneOf": [_OBSERVATION, _NULL]},
        "reason_codes": {"type": "array", "maxItems": 1, "items": {"enum": sorted(REASON_CODES)}},
        "residual_obligations": {"const": list(RESIDUAL_OBLIGATIONS)},
    },
    oneOf=[
        {
            "properties": {
                "status": {"const": "CHECKED"},
                "observation": {"type": "object"},
                "reason_codes": {"maxItems": 0},
            }
        },
        *(
            {
                "properties": {
                    "status": {"const": status},
                    "observation": _NULL,
                    "reason_codes": {"minItems": 1, "items": {"enum": _checker_codes(status)}},
                }
            }
            for status in ("INVALID", "UNKNOWN")
        ),
    ],
    description="the pure checker's report (docs/spec/formation.md §3.5)",
)


def _refused(outcome: MechanismOutcome, status: str) -> dict[str, Any]:
    codes = _codes(outcome)
    return {
        "properties": {
            "outcome": {"const": outcome.value},
            "details": {"enum": codes},
            "observations": {
                "properties": {
                    "status": {"const": status},
                    "reason_codes": {"minItems": 1, "items": {"enum": codes}},
                }
            },
        }
    }


def decision_schema() -> dict[str, Any]:
    """The schema of a formation decision's ``outcome``, ``details`` and ``observations``."""
    observations = _exact(
        {
            "status": {"enum": ["CHECKED", "INVALID", "UNKNOWN"]},
            "reason_codes": {
                "type": "array",
                "maxItems": 1,
                "items": {"enum": sorted(ADAPTER_REASON_CODES)},
            },
            "formation_report": {"oneOf": [_REPORT, _NULL]},
            "residual_obligations": {"const": list(RESIDUAL_OBLIGATIONS)},
            "trust_roots_meaning": {"const": TRUST_ROOTS_MEANING},
            "claim_scope": {"const": CLAIM_SCOPE},
        }
    )
    return {
        "type": "object",
        "required": ["outcome", "details", "observations"],
        "properties": {"details": {"type": "string"}, "observations": observations},
        "oneOf": [
            {
                "properties": {
                    "outcome": {"const": "PASS"},
                    "details": {"const": ""},
                    "observations": {
                        "properties": {
                            "status": {"const": "CHECKED"},
                            "reason_codes": {"maxItems": 0},
                            "formation_report": {
                                "type": "object",
                                "properties": {"status": {"const": "CHECKED"}},
                            },
                        }
                    },
                }
            },
            _refused(MechanismOutcome.FAIL, "INVALID"),
            _refused(MechanismOutcome.UNKNOWN, "UNKNOWN"),
        ],
    }
