"""The corpus index's cases through their cattrs converter: the same refusals, in the same
words and the same order, as the hand-written reader they replaced.

``corpus_index_cases.jsonl`` was recorded from the hand-written reader before the converter
replaced it: one case per line, ``[index document, answer]``, the answer being ``[code,
message]`` or the cases read and the roots they file. It covers every member with every JSON
type and boundary, absent and unknown members, two to four faults at once (which one is
reported is the contract), repeated names and roots filed twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import testdata

from mechanism.holdout._corpus import Corpus, CorpusError

CASES = [
    json.loads(line)
    for line in testdata.repo("tests/holdout/corpus_index_cases.jsonl")
    .read_text("utf-8")
    .splitlines()
]


def _answer(index: Any) -> list[Any]:
    try:
        corpus = Corpus.from_index(Path("/nonexistent"), json.dumps(index).encode())
    except CorpusError as error:
        return [error.code, str(error)]
    cases = [[case.name, case.mechanism, case.artifact, case.leaf] for case in corpus.cases]
    roots = sorted([root, case.name, role] for root, (case, role) in corpus.by_root.items())
    return [cases, roots]


def test_every_recorded_index_gets_the_recorded_answer() -> None:
    assert len(CASES) > 150
    wrong = [(index, want, got) for index, want in CASES if (got := _answer(index)) != want]
    assert wrong == []


def test_the_packaged_corpus_still_reads() -> None:
    from mechanism.holdout._commitment import corpus_dir

    corpus = Corpus.load(corpus_dir())
    assert corpus.cases and all(corpus.lookup(case.artifact) for case in corpus.cases)
