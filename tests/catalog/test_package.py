"""Stored packages and indexes: exact bytes retained, and any changed byte refused."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from catalog import ComponentIndexError, StoredPackage, validate_package


def _flip(data: bytes, position: int | None = None) -> bytes:
    index = len(data) // 2 if position is None else position
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def test_package_retains_the_exact_source_tree_bytes(reference_package: StoredPackage) -> None:
    root = Path(catalog.__file__).resolve().parent.parent
    roles = {a["path"]: a["role"] for a in reference_package.manifest["artifacts"]}
    assert {"PROFILE", "SCHEMA", "SPECIFICATION", "SOURCE"} <= set(roles.values())
    for path, data in reference_package.artifacts:
        assert (root / path).read_bytes() == data, path
    assert validate_package(reference_package) == catalog.core_digest(reference_package.manifest)


def test_package_build_is_deterministic(reference_package: StoredPackage) -> None:
    again = catalog.build_package()
    assert again == reference_package
    assert validate_package(again) == validate_package(reference_package)


def test_every_packaged_artifact_is_bound_byte_for_byte(reference_package: StoredPackage) -> None:
    """A changed byte anywhere in any artifact (first, middle, last) is refused, naming it."""
    for path, data in reference_package.artifacts:
        for position in (0, len(data) // 2, len(data) - 1):
            tampered = reference_package.with_artifact(path, _flip(data, position))
            with pytest.raises(ComponentIndexError, match=f"artifact {path} changed"):
                validate_package(tampered)


def test_changed_size_missing_and_extra_artifacts_are_refused(
    reference_package: StoredPackage,
) -> None:
    path, data = reference_package.artifacts[0]
    with pytest.raises(ComponentIndexError, match="changed: size"):
        validate_package(reference_package.with_artifact(path, data + b"\n"))
    without = StoredPackage(reference_package.manifest_bytes, reference_package.artifacts[1:])
    with pytest.raises(ComponentIndexError, match="missing"):
        validate_package(without)
    extra = reference_package.with_artifact("mechanism/formation/_producer_v2.py", b"x = 1\n")
    with pytest.raises(ComponentIndexError, match="undeclared"):
        validate_package(extra)


def _with_manifest(package: StoredPackage, manifest: dict[str, object]) -> StoredPackage:
    return StoredPackage(catalog.core_bytes(manifest), package.artifacts)


def test_consistently_edited_manifest_changes_the_package_digest(
    reference_package: StoredPackage,
) -> None:
    """Re-declaring a changed artifact's hash yields a self-consistent but different package."""
    path, data = reference_package.artifacts[-1]
    changed = _flip(data)
    manifest = reference_package.manifest
    for artifact in manifest["artifacts"]:
        if artifact["path"] == path:
            artifact["sha256"] = catalog._codec.sha256_hex(changed)
    forged = _with_manifest(reference_package, manifest).with_artifact(path, changed)
    assert validate_package(forged) != validate_package(reference_package)
    entry = catalog.build_index([(reference_package, "packages/p")]).entries[0]
    with pytest.raises(ComponentIndexError, match="differs from the index"):
        entry.validate_package(forged)
    assert entry.validate_package(reference_package) == entry.package_sha256


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m["registry"]["components"][0].update(kind="PROVIDER"), "registry_sha256"),
        (lambda m: m.update(registry_sha256="0" * 64), "registry_sha256"),
        (lambda m: m.update(schema_version="EVIDENCED-COMPONENT-PACKAGE-9"), "unsupported"),
        (lambda m: m.update(verdict="CHECKED"), "keys differ"),
        (lambda m: m["artifacts"].reverse(), "sorted"),
        (lambda m: m["components"][0].update(implementation_ref="x:y"), "implementation_ref"),
        (lambda m: m["components"][0].update(implementation_path="absent.py"), "implementation"),
        (lambda m: m["artifacts"][0].update(role="EXECUTABLE"), "unknown role"),
        (lambda m: m["artifacts"][0].update(size_bytes=True), "changed: size"),
        (lambda m: m["components"].pop(), "do not match"),
    ],
)
def test_malformed_manifest_is_refused(
    reference_package: StoredPackage, edit: object, message: str
) -> None:
    manifest = reference_package.manifest
    edit(manifest)  # type: ignore[operator]
    with pytest.raises(ComponentIndexError, match=message):
        validate_package(_with_manifest(reference_package, manifest))


def test_validate_package_refuses_non_packages() -> None:
    values: tuple[object, ...] = (None, b"{}", {"manifest": {}})
    for value in values:
        with pytest.raises(ComponentIndexError):
            validate_package(value)


def test_written_build_verifies_and_names_a_changed_file(
    reference_package: StoredPackage, tmp_path: Path
) -> None:
    index = catalog.write_build(reference_package, tmp_path / "out")
    report = catalog.verify_build(tmp_path / "out")
    assert report["result"] == "VALID", report
    assert report["index_digest"] == index.canonical_digest()
    package_dir = tmp_path / "out" / index.entries[0].package_path
    loaded = catalog.load_package(package_dir)
    assert loaded == reference_package
    target = package_dir / "artifacts" / "mechanism/formation/data/typed-formation-0.1.json"
    target.write_bytes(_flip(target.read_bytes()))
    broken = catalog.verify_build(tmp_path / "out")
    assert broken["result"] == "INVALID"
    assert any("typed-formation-0.1.json changed" in e for e in broken["errors"])


def test_written_index_is_digest_bound(reference_package: StoredPackage, tmp_path: Path) -> None:
    catalog.write_build(reference_package, tmp_path)
    index_path = tmp_path / "index.json"
    data = json.loads(index_path.read_text())
    data["entries"][0]["component"]["availability"] = "UNAVAILABLE"
    index_path.write_text(json.dumps(data))
    report = catalog.verify_build(tmp_path)
    assert report["result"] == "INVALID" and "index_digest" in report["errors"][0]
    with pytest.raises(ComponentIndexError):
        catalog.load_index(tmp_path)


def test_duplicate_keys_in_a_stored_manifest_are_refused(
    reference_package: StoredPackage, tmp_path: Path
) -> None:
    catalog.write_package(reference_package, tmp_path)
    manifest = tmp_path / "package.json"
    manifest.write_text('{"package_id": "x", ' + manifest.read_text()[1:])
    with pytest.raises(ComponentIndexError, match="duplicate"):
        catalog.load_package(tmp_path)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks here")
def test_symlinked_artifact_is_refused(reference_package: StoredPackage, tmp_path: Path) -> None:
    catalog.write_package(reference_package, tmp_path / "p")
    (tmp_path / "outside.txt").write_bytes(b"outside")
    os.symlink(tmp_path / "outside.txt", tmp_path / "p" / "artifacts" / "link.txt")
    with pytest.raises(ComponentIndexError, match="symlink"):
        catalog.load_package(tmp_path / "p")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_among_the_artifacts_is_refused_without_being_read(
    reference_package: StoredPackage, tmp_path: Path
) -> None:
    """Reading a FIFO blocks until a writer appears: a stored package holds regular files only."""
    catalog.write_package(reference_package, tmp_path / "p")
    os.mkfifo(tmp_path / "p" / "artifacts" / "pipe.txt")
    with pytest.raises(ComponentIndexError, match="not a regular file"):
        catalog.load_package(tmp_path / "p")


def test_build_refuses_a_non_empty_output_directory(
    reference_package: StoredPackage, tmp_path: Path
) -> None:
    (tmp_path / "keep.txt").write_text("precious")
    with pytest.raises(ComponentIndexError, match="not empty"):
        catalog.write_build(reference_package, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(_paths(item, (*prefix, index)))
    return out


def _replace(document: Any, path: tuple[object, ...], new: object) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(document))
    target = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return copy


_junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=4,
)


@pytest.fixture(scope="module")
def written_build(
    reference_package: StoredPackage, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    directory = tmp_path_factory.mktemp("fuzz") / "build"
    catalog.write_build(reference_package, directory)
    return directory


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(["index", "manifest"]), junk=_junk)
def test_any_edit_of_a_stored_record_is_invalid_and_never_raises(
    written_build: Path, data: st.DataObject, which: str, junk: object
) -> None:
    package_dir = next((written_build / "packages").iterdir())
    target = written_build / "index.json" if which == "index" else package_dir / "package.json"
    original = target.read_bytes()
    document = json.loads(original)
    path = data.draw(st.sampled_from(_paths(document)))
    mutated = _replace(document, path, junk)
    try:
        target.write_text(json.dumps(mutated, indent=1, sort_keys=True))
        report = catalog.verify_build(written_build)
        if mutated == document:
            assert report["result"] == "VALID"
        else:
            assert report["result"] == "INVALID", (path, junk)
            assert report["errors"]
    finally:
        target.write_bytes(original)


def test_reference_build_entry_point_writes_a_verifiable_index_and_package(
    tmp_path: Path,
) -> None:
    """docs/spec/formation.md §7.2: build(output, source_ref="WORKTREE") writes index.json plus a
    package whose digest the index binds; the index keeps the package's source_ref."""
    index = catalog.build(tmp_path / "out", source_ref="WORKTREE")
    assert (tmp_path / "out" / "index.json").is_file()
    assert catalog.verify_build(tmp_path / "out")["result"] == "VALID"
    loaded = catalog.load_index(tmp_path / "out")
    assert loaded.canonical_digest() == index.canonical_digest()
    other = catalog.build(tmp_path / "tagged", source_ref="git:abc123")
    assert other.source_ref == "git:abc123"
    (entry, *_) = other.entries
    package = catalog.load_package(tmp_path / "tagged" / entry.package_path)
    assert package.manifest["source_ref"] == "git:abc123"
    assert entry.validate_package(package) == entry.package_sha256


def test_an_invented_rule_profile_is_not_bound_by_the_package() -> None:
    """docs/spec/formation.md §7.2–§7.3: the package binds the exact compiled-profile bytes
    and discovery preserves the selected rule-profile prerequisite, so a component whose
    ``EXACT_RULE_PROFILE:`` digest is not the digest of a profile the package retains for it
    (an invented value) cannot be packaged, and a plan or readiness over it is refused."""
    import attrs

    registry = catalog.reference_registry()
    invented = "EXACT_RULE_PROFILE:sha256:" + "ee" * 32
    checker_id = "component:artifact-network-typed-formation-checker"
    components = [
        attrs.evolve(
            c,
            execution_prerequisites=[
                invented if p.startswith("EXACT_RULE_PROFILE:") else p
                for p in c.execution_prerequisites
            ],
        )
        if c.component_id == checker_id
        else c
        for c in registry.components
    ]
    forged = catalog.ComponentRegistry(components, registry_version=registry.registry_version)
    with pytest.raises(ComponentIndexError, match="EXACT_RULE_PROFILE"):
        catalog.build_package(forged)
    # The same check guards a stored package whose manifest was rewritten consistently.
    package = catalog.build_package()
    manifest = package.manifest
    manifest["registry"] = forged.canonical_dict()
    manifest["registry_sha256"] = forged.canonical_digest()
    rewritten = StoredPackage(catalog.core_bytes(manifest), package.artifacts)
    with pytest.raises(ComponentIndexError, match="EXACT_RULE_PROFILE"):
        validate_package(rewritten)
    analysis = catalog.ValidationAnalysis(
        "a",
        [
            catalog.AnalysisHole(
                "h",
                "VSTD-2",
                "OFFLINE_REPLAY",
                relation_id="relation:checks-typed-formation-certificate",
            )
        ],
    )
    plan = catalog.plan_validation(analysis, forged)  # registry only: nothing to bind it to
    report = catalog.assess_execution_readiness(
        analysis, plan, forged, [], None, None, package=rewritten
    )
    assert report.status == "INVALID"
    assert any("EXACT_RULE_PROFILE" in f for f in report.findings)
