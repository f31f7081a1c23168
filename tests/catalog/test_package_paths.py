"""Index-named package paths are checked in every command that loads a package:
``catalog plan`` and ``catalog readiness --package`` accepted an index whose
``package_path`` is ``../outside/pkg`` and loaded a package from outside the build folder,
while ``catalog package verify`` refused the same index."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import clirun
import pytest

import catalog
from catalog import build_index, build_package, write_package
from catalog._index import INDEX_NAME, verify_build

CHECKER = "component:artifact-network-typed-formation-checker"


def run(*args: str) -> tuple[int, Any, str]:
    completed = clirun.in_process_text(["catalog", *args])  # tests/catalog/test_cli.py: process
    assert "Traceback" not in completed.stderr
    document = json.loads(completed.stdout) if completed.stdout.strip() else None
    return completed.returncode, document, completed.stderr


def build_pointing_at(tmp_path: Path, package_path: str) -> Path:
    """A build folder whose (digest-consistent) index names ``package_path``."""
    package = build_package()
    build = tmp_path / "build"
    build.mkdir()
    write_package(package, tmp_path / "outside" / "pkg")
    index = build_index([(package, package_path)])
    (build / INDEX_NAME).write_text(json.dumps(index.to_dict(), sort_keys=True, indent=2))
    return build


@pytest.fixture
def escaping_build(tmp_path: Path) -> Path:
    return build_pointing_at(tmp_path, "../outside/pkg")


@pytest.fixture
def symlinked_build(tmp_path: Path) -> Path:
    build = build_pointing_at(tmp_path, "packages/pkg")
    (build / "packages").mkdir()
    os.symlink(tmp_path / "outside" / "pkg", build / "packages" / "pkg")
    return build


def _analysis_file(tmp_path: Path, kit: Any) -> str:
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(kit.analysis_for(CHECKER).to_dict()))
    return str(path)


@pytest.mark.parametrize("layout", ["escaping_build", "symlinked_build"])
def test_plan_refuses_a_package_outside_the_build_folder(
    layout: str, request: pytest.FixtureRequest, tmp_path: Path, kit: Any
) -> None:
    build: Path = request.getfixturevalue(layout)
    code, document, stderr = run("plan", _analysis_file(tmp_path, kit), "--package", str(build))
    assert code == 65 and document["error"]["exit"] == 65
    assert "package path" in stderr and len(stderr.splitlines()) == 1


def test_readiness_refuses_a_package_outside_the_build_folder(
    escaping_build: Path, tmp_path: Path, kit: Any
) -> None:
    analysis = kit.analysis_for(CHECKER)
    plan = catalog.plan_validation(analysis, catalog.reference_registry())
    (tmp_path / "plan.json").write_text(json.dumps(plan.to_dict()))
    (tmp_path / "declarations.json").write_text("[]")
    code, document, stderr = run(
        "readiness",
        "--analysis",
        _analysis_file(tmp_path, kit),
        "--plan",
        str(tmp_path / "plan.json"),
        "--declarations",
        str(tmp_path / "declarations.json"),
        "--package",
        str(escaping_build),
    )
    assert code == 65 and document["error"]["exit"] == 65
    assert "not a portable relative path" in stderr


@pytest.mark.parametrize("layout", ["escaping_build", "symlinked_build"])
def test_verify_refuses_the_same_layouts(layout: str, request: pytest.FixtureRequest) -> None:
    build: Path = request.getfixturevalue(layout)
    report = verify_build(build)
    assert report["result"] == "INVALID" and report["packages"] == []
    assert "package path" in report["errors"][0]


def test_a_package_inside_the_build_folder_still_loads(tmp_path: Path, kit: Any) -> None:
    build = tmp_path / "b"
    code, _, _ = run("package", "build", str(build))
    assert code == 0
    code, document, _ = run("plan", _analysis_file(tmp_path, kit), "--package", str(build))
    assert code == 0 and document["binding_scope"] == "STORED_PACKAGE"
