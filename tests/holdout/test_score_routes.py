"""The three routes into a scoring run decide alike: parsed challenges (copied), the bytes of a
challenge-set file (read here, not copied) and the command line's own reading (``score_read``).

Defends: a fast route that scores differently from the reference route (byte-identical
reports, explanations included); a route that lets a broken challenge file be refused as
something else, or out of the documented refusal order.
"""

from __future__ import annotations

import json
from typing import Any

import testdata

from mechanism import holdout
from mechanism.holdout._commitment import load_schemas
from mechanism.holdout._scorer import score_read

SYNTHETIC = testdata.data("holdout/trvm-synthetic", directory=True)
RELEASE = "srel-" + "0" * 64


def _reports(challenge_bytes: bytes, document: bytes) -> list[dict[str, Any]]:
    schemas = load_schemas(SYNTHETIC)
    parsed = holdout.read_challenge_array(challenge_bytes)
    reports = [
        holdout.score_bytes(parsed, document, schemas=schemas, expect_release=RELEASE),
        holdout.score_bytes(challenge_bytes, document, schemas=schemas, expect_release=RELEASE),
        score_read(
            holdout.read_challenge_array(challenge_bytes),
            document,
            schemas=schemas,
            expect_release=RELEASE,
        ),
    ]
    return [report.to_dict() for report in reports]


def test_every_route_gives_the_same_report() -> None:
    challenges = (SYNTHETIC / "synthetic-challenges.json").read_bytes()
    document = (SYNTHETIC / "synthetic-observations.json").read_bytes()
    first, *others = _reports(challenges, document)
    assert first["verdict"] == "FAIL" and len(first["explanations"]) == 11
    for other in others:
        assert json.dumps(other) == json.dumps(first)


def test_unreadable_challenge_bytes_are_refused_before_the_document_is_read() -> None:
    schemas = load_schemas(SYNTHETIC)
    for challenges, code in (
        (b'[{"id": "S1", "id": "S2"}]', "challenge-unreadable"),  # a duplicate member
        (b'{"not": "an array"}', "challenge-unreadable"),
        (b"[]", "observation-unreadable"),
    ):
        report = holdout.score_bytes(
            challenges, b"\xef\xbb\xbf{}", schemas=schemas, expect_release=RELEASE
        )
        assert (report.verdict, report.refusal) == ("REFUSED", code)


def test_challenge_schema_is_checked_on_the_bytes_route_too() -> None:
    challenges = json.loads((SYNTHETIC / "synthetic-challenges.json").read_bytes())
    challenges[0]["recipe"] = [{"op": "EIGHTH_OPERATOR"}]
    report = holdout.score_bytes(
        json.dumps(challenges).encode(),
        (SYNTHETIC / "synthetic-observations.json").read_bytes(),
        schemas=load_schemas(SYNTHETIC),
        expect_release=RELEASE,
    )
    assert report.refusal == "challenge-schema"
