"""The ``sri`` mechanism provider: what a host, a client and the evidenced tools need.

* Options (:class:`SriOptions`, the host's ``[sessions.<name>.options.sri]`` table):
  ``max_resource_bytes`` (lower-only, 1 MiB) and ``minimum_algorithm`` (``sha256``).
* ``create`` → :class:`SriIntegrityMechanism`.
* ``honest_binding((resource, metadata), options)``: both references pinned, the metadata's as
  the one trust root, bounds ``EvidenceBounds(2, accepted bytes)``, no parameters.
* ``honest_binding`` raises :class:`session.EvidenceCountError` for anything but two files
  (``evidenced submit`` exits 2, a usage error).
* Catalog metadata: one ADAPTER component; conformance samples: a matching pair (PASS), the
  same metadata over a changed resource (FAIL), metadata in an unsupported algorithm (UNKNOWN);
  the matching pair grown to the bound with its own metadata (``conformance_scaled``); two
  option sets for the kit: a lowered ``max_resource_bytes``, and a ``sha512`` minimum (under
  which the sha384 samples are UNKNOWN).
* ``decision_schema()``: the JSON Schema of its decisions in a result, which a daemon hosting
  it serves in ``/openapi.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from session import (
    BoundProposition,
    CatalogMetadata,
    ConformanceOptionSet,
    ConformanceSample,
    EvidenceBounds,
    EvidenceCountError,
    MechanismOutcome,
    MechanismProvider,
)
from session.canon import digest_bytes

from ._integrity import ALGORITHMS, integrity_of
from ._mechanism import (
    EXPECTED,
    MAX_METADATA_BYTES,
    MAX_RESOURCE_BYTES,
    MECHANISM_DIGEST,
    MECHANISM_ID,
    REASON_CODES,
    RESIDUAL_OBLIGATIONS,
    SriIntegrityMechanism,
)

__all__ = ["PROVIDER", "SriOptions", "SriProvider"]

_OBSERVATIONS: Final = (
    "status",
    "reason_codes",
    "algorithm",
    "expected_values",
    "observed_value",
    "residual_obligations",
)


@attrs.frozen
class SriOptions:
    """``[sessions.<name>.options.sri]``."""

    max_resource_bytes: int = MAX_RESOURCE_BYTES
    minimum_algorithm: str = "sha256"


class SriProvider(MechanismProvider[SriOptions]):
    """Provider of ``example.sri.integrity.0.1`` (module rules)."""

    mechanism_id = MECHANISM_ID
    options_type = SriOptions

    def create(self, options: SriOptions) -> SriIntegrityMechanism:
        return SriIntegrityMechanism(
            max_resource_bytes=options.max_resource_bytes,
            minimum_algorithm=options.minimum_algorithm,
        )

    def honest_binding(self, evidence: Sequence[bytes], options: SriOptions) -> BoundProposition:
        if len(evidence) != 2:
            raise EvidenceCountError("an SRI submission is RESOURCE INTEGRITY-METADATA (two files)")
        resource, metadata = (digest_bytes(item) for item in evidence)
        return BoundProposition(
            subject_id=resource,
            predicate=MECHANISM_ID,
            expected=EXPECTED,
            mechanism_id=MECHANISM_ID,
            mechanism_digest=MECHANISM_DIGEST,
            evidence_refs=(resource, metadata),
            trust_roots=(metadata,),
            bounds=EvidenceBounds(2, options.max_resource_bytes + MAX_METADATA_BYTES),
        )

    def catalog_metadata(self) -> CatalogMetadata:
        return CatalogMetadata(
            components=(
                {
                    "component_id": "component:example-sri-integrity-session-mechanism",
                    "kind": "ADAPTER",
                    "implementation_ref": "evidenced_sri:SriIntegrityMechanism.evaluate",
                    "lifecycle": "EXPERIMENTAL",
                    "availability": "AVAILABLE",
                    "interaction_modes": ["OFFLINE_REPLAY"],
                    "verifier_family_ids": ["subresource-integrity"],
                    "planning_surface_schema_ids": ["VSTD-2"],
                    "accepted_schema_ids": [],
                    "emitted_schema_ids": [],
                    "mechanism_ids": [MECHANISM_ID],
                    "relation_ids": ["relation:checks-subresource-integrity"],
                    "execution_prerequisites": [
                        "EXACT_IMPLEMENTATION_COORDINATE",
                        "EXACT_NATIVE_INPUT",
                        "RESOURCE_BOUNDS",
                    ],
                    "optional_dependencies": [],
                    "trust_roots": [],
                    "native_system": "W3C Subresource Integrity",
                    "native_versions": ["SRI-1", MECHANISM_ID],
                    "native_result_vocabulary": ["PASS", "FAIL", "UNKNOWN"],
                    "native_inputs": ["resource bytes", "integrity metadata text (ASCII)"],
                    "native_outputs": ["MechanismDecision (unversioned)"],
                    "transformation_loss": "Only the strongest algorithm's values are compared.",
                    "freshness_behavior": "Stateless over exact immutable bytes.",
                    "claim_boundary": (
                        "A match says the resource hashes to a value the metadata lists; it "
                        "does not say who wrote the metadata."
                    ),
                    "domain_tags": ["example", "integrity"],
                },
            ),
        )

    def conformance_samples(self) -> Sequence[ConformanceSample]:
        script = b"document.title = 'evidence-bound';\n"
        metadata = (integrity_of(script, "sha384") + "\n").encode("ascii")
        return (
            ConformanceSample("matching", (script, metadata), MechanismOutcome.PASS),
            ConformanceSample(
                "changed resource", (script + b"//", metadata), MechanismOutcome.FAIL
            ),
            ConformanceSample("md5 only", (script, b"md5-AAAA\n"), MechanismOutcome.UNKNOWN),
        )

    def conformance_scaled(
        self, sample: ConformanceSample, bounds: EvidenceBounds
    ) -> ConformanceSample | None:
        """The matching pair with the largest resource the bound leaves room for."""
        if sample.name != "matching":
            return None
        script = sample.evidence[0]
        size = min(bounds.max_evidence_bytes - MAX_METADATA_BYTES, MAX_RESOURCE_BYTES)
        resource = (script * (size // len(script) + 1))[:size]
        metadata = (integrity_of(resource, "sha384") + "\n").encode("ascii")
        return ConformanceSample("matching", (resource, metadata), MechanismOutcome.PASS)

    def conformance_option_sets(self) -> Sequence[ConformanceOptionSet]:
        unknown = MechanismOutcome.UNKNOWN
        return (
            ConformanceOptionSet("lowered", {"max_resource_bytes": 4096}),
            ConformanceOptionSet(
                "sha512 minimum",
                {"minimum_algorithm": "sha512"},
                {"matching": unknown, "changed resource": unknown},
            ),
        )

    def decision_schema(self) -> Mapping[str, Any]:
        """What a result of this mechanism carries (``evidenced`` describes it in its HTTP API):
        exactly the observations its decisions write, with the status and the reason code that
        go with each outcome (:data:`REASON_CODES`)."""

        def refused(outcome: MechanismOutcome, status: str) -> dict[str, Any]:
            codes = sorted(code for code, given in REASON_CODES.items() if given is outcome)
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

        texts = {"type": "array", "items": {"type": "string"}}
        passed = {
            "properties": {
                "outcome": {"const": "PASS"},
                "details": {"const": ""},
                "observations": {
                    "properties": {"status": {"const": "CHECKED"}, "reason_codes": {"maxItems": 0}}
                },
            }
        }
        observations = {
            "type": "object",
            "additionalProperties": False,
            "required": [*_OBSERVATIONS],
            "properties": {
                "status": {"enum": ["CHECKED", "INVALID", "UNKNOWN"]},
                "reason_codes": {**texts, "maxItems": 1},
                "algorithm": {"enum": [*ALGORITHMS, None]},
                "expected_values": texts,
                "observed_value": {"type": ["string", "null"]},
                "residual_obligations": {"const": list(RESIDUAL_OBLIGATIONS)},
            },
        }
        return {
            "type": "object",
            "required": ["outcome", "details", "observations"],
            "properties": {"observations": observations},
            "oneOf": [
                passed,
                refused(MechanismOutcome.FAIL, "INVALID"),
                refused(MechanismOutcome.UNKNOWN, "UNKNOWN"),
            ],
        }


PROVIDER: Final = SriProvider()
