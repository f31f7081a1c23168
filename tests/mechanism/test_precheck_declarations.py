"""Both built-in mechanisms declare their pre-checks on the shared pipeline, in the order their
module contracts (and the preflight-order suites) pin, and their digests are source identities
whose documents the network canonical codec digests to the same value."""

from __future__ import annotations

import mechanism.descriptor as descriptor
import mechanism.formation as formation
from mechanism.canonical import canonical_digest
from mechanism.formation import PRECHECK as FORMATION_PRECHECK


def test_both_mechanisms_declare_their_preflight_steps_in_their_documented_order() -> None:
    assert FORMATION_PRECHECK.names == (
        "binding",
        "implementation",
        "predicate",
        "parameters",
        "profile",
        "trust_roots",
        "bounds",
        "references",
        "subject",
        "evidence",
        "evidence_type",
        "evidence_size",
        "rehash",
    )
    assert [s.code for s in FORMATION_PRECHECK.steps] == [
        code for code in formation.ADAPTER_REASON_CODES if code.startswith("FORMATION_")
    ][:13]
    descriptor_steps = descriptor.default_mechanism().precheck
    assert descriptor_steps.names[4] == "authorization_policy"
    assert [s.code for s in descriptor_steps.steps] == list(descriptor.DECISION_REASON_CODES[:13])


def test_a_source_identity_document_has_one_digest_in_both_codecs() -> None:
    document = formation.source_identity()
    assert canonical_digest(document) == formation.MECHANISM_DIGEST
