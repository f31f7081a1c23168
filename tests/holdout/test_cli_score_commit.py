"""``evidenced holdout score/commit/release/interop``: documents, refusals and exit codes.

The table of cases calls ``daemon.cli.main`` in-process; the smoke test at the end runs the real
``python -m daemon.cli`` process and requires the very same answer.

Defends: a challenge folder altered after commitment is refused; a folder without a
commitment is a usage error; the score document has exactly the documented shape; the exit
code is 0 only when the harness passed; the release id moves when one instrument byte moves.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import clirun
import pytest
import testdata

from mechanism import holdout

REPO_ROOT = testdata.REPO
SYNTHETIC = testdata.data("holdout/trvm-synthetic", directory=True)
SYNTHETIC_RELEASE = "srel-" + "0" * 64


def run(*args: str) -> tuple[int, Any, str]:
    result = clirun.in_process(["holdout", *args])
    assert "Traceback" not in result.err
    return result.returncode, result.document(), result.err


def _synthetic_folder(tmp_path: Path) -> Path:
    """The synthetic challenges as a frozen folder: one file per challenge plus INDEX.json."""
    folder = tmp_path / "challenges"
    folder.mkdir()
    challenges = json.loads((SYNTHETIC / "synthetic-challenges.json").read_bytes())
    entries = []
    for challenge in reversed(challenges):  # INDEX order, not file-name order, is the order
        name = f"{challenge['id']}.json"
        (folder / name).write_text(json.dumps(challenge, indent=1))
        entries.append({"file": name})
    (folder / "INDEX.json").write_text(json.dumps({"entries": entries}))
    return folder


def _score_synthetic(challenges: Path, *extra: str) -> tuple[int, Any, str]:
    return run(
        "score",
        "--challenges",
        str(challenges),
        "--observations",
        str(SYNTHETIC / "synthetic-observations.json"),
        "--schemas",
        str(SYNTHETIC),
        "--release",
        SYNTHETIC_RELEASE,
        *extra,
    )


def test_score_prints_the_documented_document_and_exits_1_on_fail() -> None:
    code, document, _ = _score_synthetic(SYNTHETIC / "synthetic-challenges.json")
    assert code == 1
    explanations = document.pop("explanations")
    assert document == {
        "verdict": "FAIL",
        "refusal": None,
        "by_challenge": {
            "S1": {"pass": 8, "fail": 0, "unresolved": 0},
            "S2": {"pass": 0, "fail": 8, "unresolved": 0},
            "S3": {"pass": 0, "fail": 0, "unresolved": 3},
        },
    }
    # one explanation per non-passing predicate, in order (tests/holdout/test_explanations.py)
    assert [(e["challenge"], e["result"]) for e in explanations] == [("S2", "fail")] * 8 + [
        ("S3", "unresolved")
    ] * 3


def test_committed_folder_scores_in_index_order(tmp_path: Path) -> None:
    folder = _synthetic_folder(tmp_path)
    code, committed, _ = run("commit", str(folder))
    assert code == 0
    assert committed["commitment"] == holdout.challenge_commitment(folder)
    code, document, _ = _score_synthetic(folder, "--commitment", committed["commitment"])
    assert code == 1
    assert list(document["by_challenge"]) == ["S3", "S2", "S1"]


def test_altered_challenge_folder_is_refused(tmp_path: Path) -> None:
    folder = _synthetic_folder(tmp_path)
    commitment = holdout.challenge_commitment(folder)
    s3 = json.loads((folder / "S3.json").read_text())
    s3["predicates"] = s3["predicates"][:1]  # quietly drop two unresolved predicates
    (folder / "S3.json").write_text(json.dumps(s3))
    code, document, stderr = _score_synthetic(folder, "--commitment", commitment)
    assert code == 65
    assert document == {
        "verdict": "REFUSED",
        "refusal": "commitment-mismatch",
        "by_challenge": {},
        "explanations": [],
    }
    assert "commitment-mismatch" in stderr


def test_an_added_file_alters_the_commitment(tmp_path: Path) -> None:
    folder = _synthetic_folder(tmp_path)
    before = holdout.challenge_commitment(folder)
    (folder / "NOTES.txt").write_text("x")
    assert holdout.challenge_commitment(folder) != before


def test_folder_without_commitment_is_a_usage_error(tmp_path: Path) -> None:
    code, document, stderr = _score_synthetic(_synthetic_folder(tmp_path))
    assert code == 2
    # A usage error is the contract's error document (docs/cli.md); nothing is scored.
    assert document["error"]["code"] == "commitment-required" and document["error"]["exit"] == 2
    assert "--commitment" in stderr


def test_wrong_implementation_label_is_refused() -> None:
    code, document, _ = _score_synthetic(
        SYNTHETIC / "synthetic-challenges.json", "--implementation", "go"
    )
    assert (code, document["refusal"]) == (65, "implementation-mismatch")


def test_default_release_refuses_the_synthetic_all_zero_release() -> None:
    code, document, _ = run(
        "score",
        "--challenges",
        str(SYNTHETIC / "synthetic-challenges.json"),
        "--observations",
        str(SYNTHETIC / "synthetic-observations.json"),
        "--schemas",
        str(SYNTHETIC),
    )
    assert (code, document["refusal"]) == (65, "release-mismatch")


def test_passing_harness_exits_0(tmp_path: Path) -> None:
    challenges = json.loads((SYNTHETIC / "synthetic-challenges.json").read_bytes())[:1]
    path = tmp_path / "s1.json"
    path.write_text(json.dumps(challenges))
    code, document, _ = _score_synthetic(path)
    assert (code, document["verdict"]) == (0, "PASS")


def test_missing_observation_fails_the_run(tmp_path: Path) -> None:
    challenges = json.loads((SYNTHETIC / "synthetic-challenges.json").read_bytes())[:1]
    challenges[0]["id"] = "S9"
    path = tmp_path / "s9.json"
    path.write_text(json.dumps(challenges))
    code, document, stderr = _score_synthetic(path)
    assert code == 1
    assert document["by_challenge"] == {"S9": {"pass": 0, "fail": 0, "unresolved": 8}}
    assert "S9" in stderr


@pytest.mark.parametrize(
    ("content", "refusal"),
    [
        (b'{"type": 1, "type": 2}', "observation-unreadable"),
        (b"\xef\xbb\xbf{}", "observation-unreadable"),
    ],
)
def test_unreadable_observation_document_is_refused(
    tmp_path: Path, content: bytes, refusal: str
) -> None:
    path = tmp_path / "obs.json"
    path.write_bytes(content)
    code, document, _ = run(
        "score",
        "--challenges",
        str(SYNTHETIC / "synthetic-challenges.json"),
        "--observations",
        str(path),
        "--schemas",
        str(SYNTHETIC),
        "--release",
        SYNTHETIC_RELEASE,
    )
    assert (code, document["refusal"]) == (65, refusal)


def test_release_moves_when_one_schema_byte_moves(tmp_path: Path) -> None:
    schemas = tmp_path / "schemas"
    shutil.copytree(holdout.schema_dir(), schemas, ignore=shutil.ignore_patterns("*.py*"))
    code, first, _ = run("release", "--schemas", str(schemas))
    assert code == 0
    assert first["spec_release_id"] == holdout.release_id()
    recipe = schemas / "holdout-recipe-v1.schema.json"
    recipe.write_bytes(recipe.read_bytes() + b" ")
    _, second, _ = run("release", "--schemas", str(schemas))
    assert second["spec_release_id"] != first["spec_release_id"]
    assert set(first["files"]) == set(holdout.RELEASE_FILES)


def test_interop_subcommand(tmp_path: Path) -> None:
    observations = SYNTHETIC / "synthetic-observations.json"
    code, document, _ = run("interop", str(observations))
    assert (code, document["status"]) == (0, "NOT MEASURED")
    planted = json.loads(observations.read_bytes())
    planted["observations"]["S1"]["baseline"]["D"]["structure"]["unique_artifacts"] = 9
    other = tmp_path / "other.json"
    other.write_text(json.dumps(planted))
    code, document, _ = run("interop", str(observations), str(other))
    assert code == 1
    assert [f["path"] for f in document["findings"]] == [
        "observations.S1.baseline.D.structure.unique_artifacts"
    ]


def test_the_real_process_answers_exactly_as_in_process(tmp_path: Path) -> None:
    folder = _synthetic_folder(tmp_path)
    for args in (["release"], ["score", "--challenges", str(folder), "--observations", "x"]):
        process = clirun.subprocess_run(["holdout", *args], cwd=REPO_ROOT)
        assert process == clirun.in_process(["holdout", *args])
        assert process.returncode in (0, 2) and process.document()
