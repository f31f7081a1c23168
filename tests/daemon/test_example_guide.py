"""The example plugin does what ``docs/writing-a-mechanism.md`` says it does.

The guide is an author's only source; each claim it makes about the example
(``examples/evidenced-sri``) is checked against the example here: its file tree, its pre-check
snippet, the wrong number of files as a usage error (exit 2, ``EvidenceCountError``, through a
real daemon), and the pytest plugin opted in from the *root* ``conftest.py`` (the example's own
suite, run by a real pytest from the example's directory).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import clirun
import pytest
import testdata

from session import EvidenceCountError
from session import precheck as steps

EXAMPLE: Final = testdata.REPO / "examples" / "evidenced-sri"
GUIDE: Final = (testdata.REPO / "docs" / "writing-a-mechanism.md").read_text()


def _example_environment() -> dict[str, str]:
    environment = dict(os.environ)
    paths = [str(testdata.REPO), str(EXAMPLE), environment.get("PYTHONPATH", "")]
    environment["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    return environment


@pytest.fixture
def sri_socket(short_dir: Path) -> Iterator[str]:
    shutil.copyfile(EXAMPLE / "evidenced-sri.toml", short_dir / "evidenced-sri.toml")
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", "evidenced-sri.toml"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=short_dir,
        env=_example_environment(),
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    try:
        if not line:
            raise AssertionError(f"the daemon did not start: {process.communicate(timeout=10)}")
        assert json.loads(line)["sessions"] == ["sri"]
        yield str(short_dir / "evidenced-sri.sock")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def test_every_file_of_the_guides_tree_exists_in_the_example() -> None:
    tree = GUIDE.split("examples/evidenced-sri/\n", 1)[1].split("```", 1)[0]
    names = [line.split("#")[0].strip() for line in tree.splitlines() if line.strip()]
    assert "conftest.py" in names and "evidenced_sri/" in names
    folder = EXAMPLE
    for name in names:
        if name.endswith("/") and name != "tests/":
            folder = EXAMPLE / name.rstrip("/")
            assert folder.is_dir(), name
            continue
        base = (
            EXAMPLE if name in {"pyproject.toml", "conftest.py", "evidenced-sri.toml"} else folder
        )
        target = EXAMPLE / name if name == "tests/" else base / name
        assert target.exists(), name


def test_the_guides_precheck_snippet_is_the_examples() -> None:
    snippet = GUIDE.split("self.precheck = PairPrecheck((", 1)[1].split("))\n```", 1)[0]
    used = re.findall(r"steps\.(\w+)\(", snippet)
    source = (EXAMPLE / "evidenced_sri" / "_mechanism.py").read_text()
    assert used and "evidence_sizes" in used
    for name in used:
        assert hasattr(steps, name), name
        assert f"steps.{name}(" in source, name


def test_a_wrong_file_count_is_an_evidence_count_error_and_submit_exits_2(
    sri_socket: str, short_dir: Path
) -> None:
    from evidenced_sri import PROVIDER

    with pytest.raises(EvidenceCountError, match="two files"):
        PROVIDER.honest_binding([b"one file"], PROVIDER.default_options())
    alone = short_dir / "app.js"
    alone.write_bytes(b"console.log('alone');\n")
    result = clirun.in_process(["submit", "--socket", sri_socket, "--session", "sri", alone])
    assert result.returncode == 2, result.err
    assert "two files" in result.document()["error"]["message"]


def test_the_plugin_is_opted_in_from_the_examples_root_conftest() -> None:
    root = (EXAMPLE / "conftest.py").read_text()
    assert 'pytest_plugins = ["daemon.conformance"]' in root
    assert not (EXAMPLE / "tests" / "conftest.py").exists()
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        cwd=EXAMPLE,
        env=_example_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert re.search(r"\b8 passed\b", completed.stdout), output


def test_the_guides_option_refusal_path_is_what_the_daemon_says(tmp_path: Path) -> None:
    claimed = "sessions.sri.options.sri.max_resource_bytes: refused by the provider: CeilingError"
    assert claimed in GUIDE
    config = tmp_path / "c.toml"
    config.write_text(
        '[server]\nlisten = ""\nsocket = "s"\n[sessions.sri]\nmechanisms = ["sri"]\n'
        "[sessions.sri.options.sri]\nmax_resource_bytes = 2000000\n"
    )
    served: Any = clirun.in_process(["serve", "--config", config])
    assert served.returncode == 65
    assert claimed in served.err
