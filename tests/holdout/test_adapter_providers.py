"""The holdout adapter works with a mechanism only through its provider's holdout handler.

Defends against: an adapter that still knows the built-in mechanisms by name (a case whose
mechanism no installed provider handles must be reported, never crash or fall back), and a
handler whose options bypass the provider (the mechanism a challenge evaluates is the one the
provider creates, with the caller's lowered ceilings).
"""

from __future__ import annotations

from typing import Any

import pytest

from mechanism import holdout
from mechanism.holdout.adapter import HANDLERS, Corpus, observe
from session import load_provider

CORPUS = Corpus.load(holdout.corpus_index_path().parent)


def _challenge(identifier: str, name: str, recipe: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": identifier,
        "name": "probe",
        "fixture": {"artifact": name, "root": CORPUS.case(name).artifact},
        "recipe": recipe,
        "predicates": [],
    }


def test_every_corpus_mechanism_is_handled_by_its_installed_provider() -> None:
    for case in CORPUS.cases:
        assert case.mechanism in HANDLERS
        handler = HANDLERS[case.mechanism]
        assert handler is not None
        provider = load_provider(case.mechanism)
        mechanism, binding = handler.configure(
            CORPUS.read(case.artifact), CORPUS.read(case.leaf), {}
        )
        assert mechanism.mechanism_id == binding.mechanism_id == provider.mechanism_id


def test_a_mechanism_without_a_handler_is_reported_not_crashed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(HANDLERS, "descriptor")
    emission = observe(
        [
            _challenge("S1", "descriptor-tisc", [{"op": "IDENTITY"}]),
            _challenge("S2", "formation-identity", [{"op": "IDENTITY"}]),
        ]
    )
    assert [(p["id"], p["code"]) for p in emission.problems] == [("S1", "mechanism-unavailable")]
    assert "'descriptor'" in emission.problems[0]["detail"]
    assert list(emission.document["observations"]) == ["S2"]
