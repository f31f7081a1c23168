"""The ``bytes-sha256`` provider (entry point ``evidenced.mechanisms``: ``bytes-sha256``).

It creates :class:`BytesDigestMechanism` (no options). The honest binding of one file pins
the file's own reference as subject, expected digest, evidence and trust root, with bounds
``EvidenceBounds(1, <file size>)``; any other number of files is not bindable (``ValueError``).
Its decisions (:meth:`BytesDigestProvider.decision_schema`): PASS or FAIL with
``{"observed_digest"}`` and ``details`` ``observed <d>; expected <d>``, or UNKNOWN with empty
observations for a binding or an item of another shape (:mod:`session._bytes_digest`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from session.canon import digest_bytes

from ._bytes_digest import BytesDigestMechanism
from ._provider import ConformanceSample, EvidenceCountError, MechanismProvider, NoOptions
from ._types import BoundProposition, EvidenceBounds, MechanismOutcome

__all__ = ["PROVIDER", "BytesDigestProvider"]

_DIGEST: Final = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}


class BytesDigestProvider(MechanismProvider[NoOptions]):
    """Provider of ``vstd.bytes.sha256``."""

    mechanism_id = BytesDigestMechanism.mechanism_id
    options_type = NoOptions

    def create(self, options: NoOptions) -> BytesDigestMechanism:
        return BytesDigestMechanism()

    def honest_binding(self, evidence: Sequence[bytes], options: NoOptions) -> BoundProposition:
        if len(evidence) != 1:
            raise EvidenceCountError(f"a {self.mechanism_id} submission is one file")
        reference = digest_bytes(evidence[0])
        return BoundProposition(
            subject_id=reference,
            predicate="bytes.sha256",
            expected=reference,
            mechanism_id=self.mechanism_id,
            mechanism_digest=BytesDigestMechanism.mechanism_digest,
            evidence_refs=(reference,),
            trust_roots=(reference,),
            bounds=EvidenceBounds(1, len(evidence[0])),
        )

    def conformance_samples(self) -> Sequence[ConformanceSample]:
        return (ConformanceSample("one item", (b"evidence-bound bytes",), MechanismOutcome.PASS),)

    def decision_schema(self) -> Mapping[str, Any]:
        return {
            "type": "object",
            "required": ["outcome", "details", "observations"],
            "oneOf": [
                {
                    "properties": {
                        "outcome": {"enum": ["PASS", "FAIL"]},
                        "details": {
                            "type": "string",
                            "pattern": "^observed sha256:[0-9a-f]{64}; expected ",
                        },
                        "observations": {
                            "type": "object",
                            "required": ["observed_digest"],
                            "additionalProperties": False,
                            "properties": {"observed_digest": _DIGEST},
                        },
                    }
                },
                {
                    "properties": {
                        "outcome": {"const": "UNKNOWN"},
                        "details": {"const": "this mechanism checks one bytes.sha256 proposition"},
                        "observations": {"type": "object", "maxProperties": 0},
                    }
                },
            ],
        }


PROVIDER: Final = BytesDigestProvider()
