"""The scorer loads no protocol code: no session, mechanism, daemon or catalog import.

The scorer lives in ``mechanism.holdout`` and its errors join the one error tree
(``session.canon._errors``): the packages ``mechanism`` and ``session`` themselves (whose
``__init__`` loads nothing), ``mechanism.holdout`` and ``session.canon`` are what it may load;
every other module of the four packages is protocol code. Two independent defences: a static
AST check of every scorer source file (the files the release id binds as ``scorer/...``), and a
subprocess that blocks the protocol modules at import time and still scores the synthetic
fixture correctly.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import testdata

from mechanism import holdout
from mechanism.holdout._commitment import SCORER_SOURCES


def synthetic_dir() -> Path:
    """TRVM's synthetic fixture, vendored byte for byte under ``tests/data/``."""
    return testdata.data("holdout/trvm-synthetic", directory=True)


FORBIDDEN = ("session", "mechanism", "daemon", "catalog")
#: What of the forbidden packages the scorer may load (see the module docstring).
ALLOWED = ("mechanism.holdout", "session.canon")


def _allowed(module: str) -> bool:
    return module in ("mechanism", "session") or any(
        module == floor or module.startswith(f"{floor}.") for floor in ALLOWED
    )


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
                assert top not in FORBIDDEN or module == "session.canon._errors", (
                    f"{name} imports {module}"
                )
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

def allowed(name):
    return name in ("mechanism", "session") or any(
        name == floor or name.startswith(floor + ".") for floor in {allowed!r})

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {forbidden!r} and not allowed(name):
            raise ImportError("blocked: " + name)
        return None

sys.meta_path.insert(0, Block())
from mechanism import holdout
from mechanism.holdout._commitment import load_schemas
folder = Path({folder!r})
schemas = load_schemas(folder)
challenges = holdout.read_challenge_array((folder / "synthetic-challenges.json").read_bytes())
document = holdout.read_json((folder / "synthetic-observations.json").read_bytes())
report = holdout.score(challenges, document, schemas=schemas,
                       expect_release=document["spec_release_id"])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r} and not allowed(m))
print(json.dumps({{"report": report.to_dict(), "loaded": loaded}}))
"""


def test_scorer_runs_with_protocol_packages_blocked() -> None:
    script = _BLOCKED_RUN.format(
        forbidden=set(FORBIDDEN), allowed=ALLOWED, folder=str(synthetic_dir())
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["loaded"] == []
    split = {cid: list(t.values()) for cid, t in result["report"]["by_challenge"].items()}
    assert split == {"S1": [8, 0, 0], "S2": [0, 8, 0], "S3": [0, 0, 3]}


def test_the_block_in_the_subprocess_really_blocks() -> None:
    script = _BLOCKED_RUN.split("from mechanism import holdout")[0] + "import session._types\n"
    script = script.format(forbidden=set(FORBIDDEN), allowed=ALLOWED, folder="")
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert completed.returncode != 0
    assert "blocked: session._types" in completed.stderr
