"""The scorer loads no protocol code: no session, mechanism, daemon or catalog import.

Two independent defences: a static AST check of every scorer source file (the files the
release id binds as ``scorer/...``), and a subprocess that blocks those packages at import
time and still scores the synthetic fixture correctly.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import testdata

import holdout
from holdout._commitment import SCORER_SOURCES


def synthetic_dir() -> Path:
    """TRVM's synthetic fixture, vendored byte for byte under ``tests/data/``."""
    return testdata.data("holdout/trvm-synthetic", directory=True)


FORBIDDEN = ("session", "mechanism", "daemon", "catalog")
HOLDOUT_DIR = Path(holdout.__file__).resolve().parent


def _imported_modules(source: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((0, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


def test_no_scorer_source_imports_a_protocol_package() -> None:
    for name in SCORER_SOURCES:
        for level, module in _imported_modules((HOLDOUT_DIR / name).read_text()):
            top = module.split(".")[0]
            if level == 0:
                assert top not in FORBIDDEN, f"{name} imports {module}"
                assert top != "holdout" or module.split(".")[1:2] == [], name
            else:
                # Relative imports may only reach other scorer sources.
                assert level == 1 and f"{top}.py" in SCORER_SOURCES, f"{name}: .{module}"
            assert "__import__" not in module and top != "importlib", name


def test_no_scorer_source_uses_dynamic_import() -> None:
    for name in SCORER_SOURCES:
        tree = ast.parse((HOLDOUT_DIR / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                assert node.id not in ("__import__", "importlib"), name


_BLOCKED_RUN = """
import importlib.abc, json, sys
from pathlib import Path

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {forbidden!r}:
            raise ImportError("blocked: " + name)
        return None

sys.meta_path.insert(0, Block())
import holdout
from holdout._commitment import load_schemas
folder = Path({folder!r})
schemas = load_schemas(folder)
challenges = holdout.read_challenge_array((folder / "synthetic-challenges.json").read_bytes())
document = holdout.read_json((folder / "synthetic-observations.json").read_bytes())
report = holdout.score(challenges, document, schemas=schemas,
                       expect_release=document["spec_release_id"])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})
print(json.dumps({{"report": report.to_dict(), "loaded": loaded}}))
"""


def test_scorer_runs_with_protocol_packages_blocked() -> None:
    script = _BLOCKED_RUN.format(forbidden=set(FORBIDDEN), folder=str(synthetic_dir()))
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["loaded"] == []
    split = {cid: list(t.values()) for cid, t in result["report"]["by_challenge"].items()}
    assert split == {"S1": [8, 0, 0], "S2": [0, 8, 0], "S3": [0, 0, 3]}


def test_the_block_in_the_subprocess_really_blocks() -> None:
    script = _BLOCKED_RUN.split("import holdout")[0] + "import session\n"
    script = script.format(forbidden=set(FORBIDDEN), folder="")
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode != 0
    assert "blocked: session" in completed.stderr
