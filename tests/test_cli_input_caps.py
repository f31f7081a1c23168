"""Every file a command reads is capped (the "unbounded CLI read" defect).

``formation check /dev/zero …`` and ``descriptor check /dev/zero /dev/zero`` used to read
forever and end in ``MemoryError`` (exit 70). Each command now reads at most the cap plus one
byte and exits 65 with the cap in its one-line message; files under the cap still reach the
mechanism and get its own answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import clirun
import pytest
import testdata

from session import MAX_INPUT_FILE_BYTES, InputTooLarge, read_capped, read_prefix

REPO = testdata.REPO
ZERO = "/dev/zero"
CAP_TEXT = f"{MAX_INPUT_FILE_BYTES:,}-byte input cap"
FORMATION = testdata.fixture("formation", directory=True)

pytestmark = pytest.mark.skipif(not os.path.exists(ZERO), reason="needs /dev/zero")


def evidenced(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``evidenced ARGS`` in-process (``daemon.cli.main``), answered like ``subprocess.run``."""
    return clirun.in_process_text(args)


def assert_refused_naming_the_cap(completed: subprocess.CompletedProcess[str]) -> None:
    assert completed.returncode == 65, completed.stderr
    assert CAP_TEXT in completed.stderr
    assert "Traceback" not in completed.stderr and "MemoryError" not in completed.stderr
    assert len(completed.stderr.splitlines()) == 1


def test_read_capped_takes_the_cap_and_refuses_one_byte_more(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    assert read_capped(path, 1000) == b"x" * 1000
    with pytest.raises(InputTooLarge) as refused:
        read_capped(path, 999)
    assert refused.value.filename == str(path) and "999-byte input cap" in str(refused.value)
    assert isinstance(refused.value, OSError)
    assert read_prefix(path, 10) == b"x" * 10


def test_endless_input_costs_the_cap_and_no_more() -> None:
    with pytest.raises(InputTooLarge):
        read_capped(ZERO, 1 << 20)


def test_formation_check_of_dev_zero_is_rejected_input_naming_the_cap() -> None:
    assert_refused_naming_the_cap(evidenced("formation", "check", ZERO, ZERO))


def test_descriptor_check_of_dev_zero_is_rejected_input_naming_the_cap() -> None:
    completed = evidenced("descriptor", "check", ZERO, ZERO, "--operation", "run")
    assert_refused_naming_the_cap(completed)


def test_holdout_score_of_endless_observations_is_refused_naming_the_cap(
    tmp_path: Path,
) -> None:
    challenges = tmp_path / "challenges.json"
    challenges.write_text(
        json.dumps(
            [
                {
                    "id": "S1",
                    "name": "n",
                    "fixture": {"artifact": "formation-identity", "root": "root-" + "a" * 64},
                    "recipe": [{"op": "IDENTITY"}],
                    "predicates": [{"op": "REFUSAL_SET_EQ", "value": []}],
                }
            ]
        )
    )
    completed = evidenced("holdout", "score", "--challenges", challenges, "--observations", ZERO)
    assert completed.returncode == 65
    document = json.loads(completed.stdout)
    assert document["refusal"] == "observation-unreadable"
    assert CAP_TEXT in completed.stderr


def test_submit_of_an_endless_file_is_refused_before_connecting() -> None:
    # Nothing listens on this socket: the file is refused before any connection is tried.
    completed = evidenced("submit", "--socket", "/nonexistent/s", "--session", "s", ZERO)
    assert_refused_naming_the_cap(completed)


def test_serve_with_an_endless_config_file_is_refused() -> None:
    """As a real process: ``serve`` is the one command here that owns the process."""
    completed = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", ZERO],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    assert_refused_naming_the_cap(completed)


def test_catalog_plan_of_an_endless_analysis_is_refused() -> None:
    assert_refused_naming_the_cap(evidenced("catalog", "plan", ZERO))


def test_a_record_over_its_bound_but_under_the_cap_still_gets_the_mechanism_answer(
    tmp_path: Path,
) -> None:
    """The cap is far above every format bound: the checker still reports its LIMIT."""
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 300_000)
    completed = evidenced("formation", "check", big, FORMATION / "atom.certificate.json")
    assert completed.returncode == 3
    assert json.loads(completed.stdout)["reason_codes"] == ["FORMATION_LIMIT_EXCEEDED"]
