"""The ``bytes-sha256`` provider (entry point ``evidenced.mechanisms``: ``bytes-sha256``).

It creates :class:`BytesDigestMechanism` (no options). The honest binding of one file pins
the file's own reference as subject, expected digest, evidence and trust root, with bounds
``EvidenceBounds(1, <file size>)``; any other number of files is not bindable (``ValueError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from canon import digest_bytes

from ._bytes_digest import BytesDigestMechanism
from ._provider import ConformanceSample, EvidenceCountError, MechanismProvider, NoOptions
from ._types import BoundProposition, EvidenceBounds, MechanismOutcome

__all__ = ["PROVIDER", "BytesDigestProvider"]


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


PROVIDER: Final = BytesDigestProvider()
