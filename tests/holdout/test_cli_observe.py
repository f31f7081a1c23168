"""``evidenced holdout observe`` then ``score`` over the S-series set.

In-process through ``daemon.cli.main``; the smoke test at the end runs the real
``python -m daemon.cli`` process for ``observe`` and requires the very same answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import clirun
import testdata

REPO_ROOT = testdata.REPO
CHALLENGES = testdata.fixture("holdout/challenges", directory=True)


def run(*args: str) -> tuple[int, Any, str]:
    result = clirun.in_process(["holdout", *args])
    assert "Traceback" not in result.err
    return result.returncode, result.document(), result.err


def test_observe_then_score_reports_the_declared_split(tmp_path: Path) -> None:
    out = tmp_path / "obs.json"
    code, summary, _ = run("observe", str(CHALLENGES / "public-s.json"), "--out", str(out))
    assert code == 0
    assert summary["written"] is True
    assert summary["not_observed"] == []
    code, document, _ = run(
        "score",
        "--challenges",
        str(CHALLENGES / "public-s.json"),
        "--observations",
        str(out),
        "--implementation",
        "evidenced-python",
    )
    expected = json.loads((CHALLENGES / "public-s-expected.json").read_bytes())
    assert document["by_challenge"] == expected["by_challenge"]
    assert (code, document["verdict"], document["refusal"]) == (1, "FAIL", None)


def test_observe_a_committed_folder_and_score_the_passing_arms(tmp_path: Path) -> None:
    challenges = json.loads((CHALLENGES / "public-s.json").read_bytes())
    expected = json.loads((CHALLENGES / "public-s-expected.json").read_bytes())["by_challenge"]
    clean = [
        c for c in challenges if expected[c["id"]]["fail"] + expected[c["id"]]["unresolved"] == 0
    ]
    folder = tmp_path / "set"
    folder.mkdir()
    for challenge in clean:
        (folder / f"{challenge['id']}.json").write_text(json.dumps(challenge))
    index = {"entries": [{"file": f"{c['id']}.json"} for c in clean]}
    (folder / "INDEX.json").write_text(json.dumps(index))
    _, committed, _ = run("commit", str(folder))
    out = tmp_path / "obs.json"
    code, _, _ = run(
        "observe", str(folder), "--out", str(out), "--commitment", committed["commitment"]
    )
    assert code == 0
    code, document, _ = run(
        "score",
        "--challenges",
        str(folder),
        "--commitment",
        committed["commitment"],
        "--observations",
        str(out),
    )
    assert (code, document["verdict"]) == (0, "PASS")
    assert len(document["by_challenge"]) == len(clean) > 0


def test_observe_refuses_an_unknown_operator_and_writes_nothing(tmp_path: Path) -> None:
    challenges = json.loads((CHALLENGES / "public-s.json").read_bytes())
    challenges[3]["recipe"].append({"op": "TELEPORT"})
    path = tmp_path / "set.json"
    path.write_text(json.dumps(challenges))
    out = tmp_path / "obs.json"
    code, summary, stderr = run("observe", str(path), "--out", str(out))
    assert code == 65
    assert summary == {"written": False, "refusal": "challenge-schema"}
    assert "TELEPORT" in stderr
    assert not out.exists()


def test_observe_reports_a_label_disagreement_and_exits_1(tmp_path: Path) -> None:
    challenges = json.loads((CHALLENGES / "public-s.json").read_bytes())[:2]
    challenges[1]["fixture"]["leaf"] = "formation-apply"
    path = tmp_path / "set.json"
    path.write_text(json.dumps(challenges))
    out = tmp_path / "obs.json"
    code, summary, stderr = run("observe", str(path), "--out", str(out))
    assert code == 1
    assert [p["id"] for p in summary["not_observed"]] == ["S2"]
    assert "fixture-label-disagreement" in stderr
    assert list(json.loads(out.read_bytes())["observations"]) == ["S1"]


def test_the_real_process_answers_exactly_as_in_process(tmp_path: Path) -> None:
    challenges = json.loads((CHALLENGES / "public-s.json").read_bytes())[:1]
    path = tmp_path / "set.json"
    path.write_text(json.dumps(challenges))
    args = ["holdout", "observe", str(path), "--out", str(tmp_path / "obs.json")]
    process = clirun.subprocess_run(args, cwd=REPO_ROOT)
    written = (tmp_path / "obs.json").read_bytes()
    assert process == clirun.in_process(args)
    assert process.returncode == 0 and (tmp_path / "obs.json").read_bytes() == written
