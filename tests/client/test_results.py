"""Typed decisions (``daemon/client/_results.py``): exact types, open documents.

A result of the wrong shape is refused (a client never hands on a coerced value); a result or
an observation the client does not know is kept, never refused (a newer daemon's results stay
readable)."""

from __future__ import annotations

from typing import Any

import pytest

from daemon import Evaluation, ServerProtocolError
from daemon.client._outcomes import result_of
from daemon.wire._protocol import Decision
from session import MechanismOutcome


def result(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "binding_digest": "ab" * 32,
        "outcome": "FAIL",
        "mechanism_id": "vstd.bytes.sha256",
        "mechanism_digest": "sha256:" + "0" * 64,
        "evidence_refs": ["sha256:" + "1" * 64],
        "trust_roots": ["root"],
        "observed_evidence_bytes": 3,
        "details": "BYTES_MISMATCH",
        "observations": {
            "status": "INVALID",
            "reason_codes": ["BYTES_MISMATCH"],
            "residual_obligations": ["HASH_COLLISION_RESISTANCE_ASSUMED"],
            "formation_report": {"root": 1},
            "observed_digest": "sha256:" + "2" * 64,
        },
    }
    base.update(changes)
    return base


def decided(document: dict[str, Any]) -> Evaluation:
    evaluation = result_of(Decision(1, "id", "s", document)).evaluation
    assert evaluation is not None
    return evaluation


def test_a_result_reads_as_typed_fields() -> None:
    evaluation = decided(result())
    assert evaluation.outcome is MechanismOutcome.FAIL and not evaluation.passed
    assert evaluation.evidence_refs == ("sha256:" + "1" * 64,)
    observations = evaluation.observations
    assert observations.status == "INVALID"
    assert observations.reason_codes == ("BYTES_MISMATCH",)
    assert observations.residual_obligations == ("HASH_COLLISION_RESISTANCE_ASSUMED",)
    assert observations.reports == {"formation_report": {"root": 1}}
    assert observations.raw["observed_digest"] == "sha256:" + "2" * 64  # kept whole


def test_a_field_a_newer_daemon_adds_is_kept_not_refused() -> None:
    document = result(verdict_scope="future")
    evaluation = decided(document)
    assert evaluation.outcome == "FAIL"
    assert result_of(Decision(1, "id", "s", document)).result["verdict_scope"] == "future"


def test_observations_without_the_shared_parts_are_empty_not_refused() -> None:
    observations = decided(result(observations={})).observations
    assert (observations.status, observations.reason_codes, observations.reports) == (None, (), {})


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"outcome": "MAYBE"}, "outcome"),
        ({"outcome": 1}, "outcome"),
        ({"observed_evidence_bytes": True}, "observed_evidence_bytes"),  # a bool is no count
        ({"observed_evidence_bytes": "3"}, "observed_evidence_bytes"),  # nor a string
        ({"evidence_refs": "sha256:x"}, "evidence_refs"),
        ({"details": None}, "details"),
        ({"observations": []}, "observations"),
        ({"observations": {"reason_codes": "BYTES_MISMATCH"}}, "observations"),
        ({"observations": {"status": 3}}, "status"),
    ],
    ids=repr,
)
def test_a_result_of_the_wrong_shape_is_a_protocol_error(
    changes: dict[str, Any], named: str
) -> None:
    with pytest.raises(ServerProtocolError, match=named):
        decided(result(**changes))


def test_a_result_missing_a_field_is_a_protocol_error() -> None:
    document = result()
    del document["trust_roots"]
    with pytest.raises(ServerProtocolError, match="trust_roots: required"):
        decided(document)
