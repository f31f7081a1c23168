"""Building, indexing, searching, planning and readiness never import a component.

The component here raises on import (package and module); the whole pipeline still works."""

from __future__ import annotations

import hashlib
import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import catalog
from catalog import (
    ArtifactDeclaration,
    ComponentDescriptor,
    ComponentIndexError,
    ComponentPackaging,
    ComponentRegistry,
)
from catalog._sources import resolve_source

# The digest of the hostile tree's profile.json bytes (conftest): the package must retain it.
PROFILE = "sha256:" + hashlib.sha256(b'{"rules":[]}').hexdigest()


def _descriptor(component_id: str, ref: str, kind: str, mechanism: str) -> ComponentDescriptor:
    return ComponentDescriptor(
        component_id=component_id,
        kind=kind,
        implementation_ref=ref,
        lifecycle="EXPERIMENTAL",
        availability="AVAILABLE",
        interaction_modes=["OFFLINE_REPLAY"],
        verifier_family_ids=["boom"],
        planning_surface_schema_ids=["VSTD-2"],
        accepted_schema_ids=["BOOM-SUBJECT-1"],
        emitted_schema_ids=[],
        mechanism_ids=[mechanism],
        relation_ids=["relation:checks-boom"],
        execution_prerequisites=["EXACT_NATIVE_INPUT", f"EXACT_RULE_PROFILE:{PROFILE}"],
        optional_dependencies=[],
        trust_roots=[],
        native_system="boom",
        native_versions=["1"],
        native_result_vocabulary=["CHECKED"],
        native_inputs=["boom subject bytes"],
        native_outputs=["mapping"],
        transformation_loss="all",
        freshness_behavior="none",
        claim_boundary="nothing",
        domain_tags=["boom"],
    )


def _registry_and_packaging() -> tuple[ComponentRegistry, list[ComponentPackaging]]:
    checker = _descriptor("component:boom-checker", "boomcomp:check", "CHECKER", "mechanism:boom")
    adapter = _descriptor(
        "component:boom-adapter", "boomcomp:Checker.evaluate", "ADAPTER", "boom.checked.1"
    )
    files = (
        ArtifactDeclaration("PROFILE", "boomcomp/data/profile.json"),
        ArtifactDeclaration("SPECIFICATION", "boomcomp/SPEC.txt"),
    )
    packaging = [
        ComponentPackaging("component:boom-checker", ("boomcomp:check",), files, ("python",)),
        ComponentPackaging(
            "component:boom-adapter", ("boomcomp:Checker.evaluate",), files, ("python",)
        ),
    ]
    return ComponentRegistry([checker, adapter], registry_version="boom-1"), packaging


def test_the_hostile_component_really_fails_on_import(hostile_tree: Path) -> None:
    """Guard: the fixture must be hostile, or the non-import test below proves nothing."""
    completed = subprocess.run(
        [sys.executable, "-c", "import boomcomp"],
        cwd=hostile_tree,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode != 0
    assert "boomcomp" in completed.stderr


def test_component_that_fails_on_import_still_packages_indexes_plans_and_is_ready(
    hostile_tree: Path, tmp_path: Path, kit: Any
) -> None:
    sys.path.insert(0, str(hostile_tree))
    try:
        registry, packaging = _registry_and_packaging()
        package = catalog.build_package(registry, packaging, source_root=hostile_tree)
        manifest = package.manifest
        paths = {c["component_id"]: c["implementation_path"] for c in manifest["components"]}
        assert paths == {
            "component:boom-adapter": "boomcomp/_impl.py",
            "component:boom-checker": "boomcomp/_impl.py",
        }
        assert (
            package.artifact_bytes("boomcomp/_impl.py")
            == (hostile_tree / "boomcomp/_impl.py").read_bytes()
        )
        index = catalog.write_build(package, tmp_path / "build")
        loaded = catalog.load_index(tmp_path / "build")
        assert catalog.verify_build(tmp_path / "build")["result"] == "VALID"
        found = loaded.search_exact("VSTD-2", "OFFLINE_REPLAY", mechanism_id="boom.checked.1")
        assert [m["component_id"] for m in found["matches"]] == ["component:boom-adapter"]
        assert found["index_digest"] == index.canonical_digest()
        analysis = catalog.ValidationAnalysis(
            "a",
            [catalog.AnalysisHole("h", "VSTD-2", "OFFLINE_REPLAY", mechanism_id="mechanism:boom")],
        )
        plan = catalog.plan_validation(analysis, registry, package=package)
        (candidate,) = plan.candidates
        assert "PACKAGE_DEPENDENCY:python" in candidate.prerequisites
        declaration = kit.honest_declaration(candidate, [b"boom"], ["BOOM-SUBJECT-1"])
        report = catalog.assess_execution_readiness(
            analysis,
            plan,
            registry,
            [declaration],
            kit.authorized(plan),
            kit.reassess(plan),
            package=package,
        )
        assert report.status == "READY", report.findings
        assert "boomcomp" not in sys.modules
        assert "boomcomp._impl" not in sys.modules
    finally:
        sys.path.remove(str(hostile_tree))
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("boomcomp")  # off the path again: nothing was cached


def test_static_resolution_follows_relative_absolute_and_aliased_reexports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "from pkg.sub import exported as renamed\nfrom ._local import Local\n"
        "try:\n    from ._optional import maybe\nexcept ImportError:\n    maybe = None\n"
    )
    (pkg / "_local.py").write_text("class Local:\n    def evaluate(self): ...\n")
    (pkg / "sub" / "__init__.py").write_text("from .._deep import exported\n")
    (pkg / "_deep.py").write_text("def exported(): ...\nCONSTANT: int = 3\n")
    assert resolve_source(tmp_path, "pkg:renamed") == "pkg/_deep.py"
    assert resolve_source(tmp_path, "pkg:Local.evaluate") == "pkg/_local.py"
    assert resolve_source(tmp_path, "pkg:maybe") == "pkg/__init__.py"
    assert resolve_source(tmp_path, "pkg._deep:CONSTANT") == "pkg/_deep.py"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("pkg:absent", "neither defined nor imported"),
        ("nowhere:thing", "no source file"),
        ("pkg.broken:thing", "not parseable"),
        ("pkg:loop", "hops"),
        ("pkg", "module:attribute"),
    ],
)
def test_static_resolution_failures_are_index_errors(
    tmp_path: Path, ref: str, message: str
) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg import loop\n")
    (pkg / "broken.py").write_text("def (:\n")
    with pytest.raises(ComponentIndexError, match=message):
        resolve_source(tmp_path, ref)


@pytest.mark.parametrize("path", ["../etc/passwd", "/etc/passwd", "a/./b", "a\\b", ""])
def test_artifact_paths_cannot_escape_the_source_root(tmp_path: Path, path: str) -> None:
    registry, packaging = _registry_and_packaging()
    bad = [
        ComponentPackaging(
            p.component_id, p.source_refs, (ArtifactDeclaration("SCHEMA", path),), ()
        )
        for p in packaging
    ]
    with pytest.raises(ComponentIndexError):
        catalog.build_package(registry, bad, source_root=tmp_path)


def test_missing_declared_artifact_fails_the_build(hostile_tree: Path) -> None:
    registry, packaging = _registry_and_packaging()
    (hostile_tree / "boomcomp" / "SPEC.txt").unlink()
    with pytest.raises(ComponentIndexError, match=r"SPEC\.txt is missing"):
        catalog.build_package(registry, packaging, source_root=hostile_tree)
