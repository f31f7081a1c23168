"""The ``session.cli`` package's place in the layering (docs/cli.md, "Layering").

* ``session.cli`` imports nothing of the project but the error tree, so every package's command
  line may import it (the catalog's, which loads no session module; the holdout instrument's; a
  mechanism's).
* Only command-line modules import ``session.cli``: a module named ``cli.py`` or
  ``_<name>_cli.py``, or the ``demo`` command. Library modules never do, so a library never
  prints, exits or depends on the command line.

Every ``import`` of every module is read with ``ast`` (lazy imports inside functions count).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import testdata

ROOT = testdata.REPO
PROJECT = ("session", "mechanism", "catalog", "daemon")
CLI = "session.cli"
COMMAND_LINE_EXTRA = {"daemon/commands/demo.py"}


def _imports_cli(path: Path) -> bool:
    """Whether ``path`` imports ``session.cli`` or a module of it, in any spelling."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        if any(name == CLI or name.startswith(f"{CLI}.") for name in named):
            return True
    return False


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py")) if (ROOT / package).is_dir() else []


def _is_command_line(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return (
        path.name == "cli.py" or path.name.endswith("_cli.py") or relative in (COMMAND_LINE_EXTRA)
    )


def _module_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_cli_imports_nothing_of_the_project_but_the_error_tree() -> None:
    """``session.cli`` may import ``session.canon._errors`` (so ``CliError`` has the product's
    one root, which imports nothing) and nothing else of the project."""
    sources = _sources("session/cli")
    assert sources
    for path in sources:
        project = {name for name in _module_imports(path) if name.split(".")[0] in PROJECT}
        assert project <= {"session.canon._errors"} | {
            name for name in project if name.startswith(f"{CLI}.")
        }, path


@pytest.mark.parametrize(
    "path",
    [
        p
        for package in PROJECT
        for p in _sources(package)
        if not p.relative_to(ROOT).as_posix().startswith("session/cli/")
    ],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_only_command_line_modules_import_cli(path: Path) -> None:
    if _imports_cli(path):
        assert _is_command_line(path), f"{path} is a library module and imports session.cli"


def test_the_rule_sees_a_lazy_import_in_every_spelling(tmp_path: Path) -> None:
    for spelling in (
        "from session import cli",
        "import session.cli",
        "from session.cli import emit",
    ):
        probe = tmp_path / "probe.py"
        probe.write_text(f"def late():\n    {spelling}\n")
        assert _imports_cli(probe), spelling
    probe.write_text("def late():\n    from session import canon\n")
    assert not _imports_cli(probe)
