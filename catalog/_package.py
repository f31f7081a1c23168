"""Stored packages: the exact bytes of every declared artifact, bound by one digest.

Rules:

* :func:`build_package` reads (never imports) each component's source files — the module that
  defines every ``source_refs`` entry, located statically — and its declared schema,
  specification, profile and fixture files, keeping their **exact bytes**.
* The package **manifest** is ``{schema_version, package_id, package_version, source_ref,
  registry, registry_sha256, artifacts: [{path, role, sha256, size_bytes}] sorted by path,
  components: [{component_id, implementation_ref, implementation_path, artifact_paths,
  dependencies}] sorted by id}``. The **package digest** is the bare hex core-codec digest of
  the manifest, so it binds the registry and every artifact byte.
* :func:`validate_package` recomputes everything from the retained bytes and returns the package
  digest, or raises :class:`ComponentIndexError` naming the first discrepancy: manifest shape,
  registry digest, a missing, extra or changed artifact (one changed byte suffices), a component
  without its implementation source, or an ``EXACT_RULE_PROFILE:<digest>`` prerequisite whose
  digest is not the SHA-256 of a PROFILE artifact the package retains for that component (an
  invented rule profile). :func:`build_package` validates what it builds, so it refuses the same.
* On disk a package is a directory holding ``package.json`` (the manifest) and ``artifacts/<path>``
  (exact bytes). :func:`load_package` refuses symlinks, non-regular files (a FIFO would block)
  and paths that leave the directory, an artifact of more than 16 MiB and a package of more
  than :data:`MAX_PACKAGE_BYTES` in all (each before reading past it); it does not validate
  (call :func:`validate_package`).
"""

from __future__ import annotations

import ast
import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ._codec import core_bytes, core_digest, is_bare_hex, sha256_hex
from ._descriptor import ComponentDescriptor
from ._entries import PACKAGING, REGISTRY_VERSION, ComponentPackaging, reference_registry
from ._errors import CatalogError, ComponentIndexError
from ._jsonio import read_file_capped, read_json_file
from ._registry import ComponentRegistry
from ._sources import default_source_root, read_exact, resolve_source

__all__ = [
    "ARTIFACT_ROLES",
    "PACKAGE_SCHEMA_VERSION",
    "StoredPackage",
    "build_package",
    "load_package",
    "validate_package",
    "write_package",
]

PACKAGE_SCHEMA_VERSION = "EVIDENCED-COMPONENT-PACKAGE-0.1"
DEFAULT_PACKAGE_ID = "package:evidenced-reference-components"
DEFAULT_PACKAGE_VERSION = "0.1.0"
ARTIFACT_ROLES = frozenset({"FIXTURE", "POLICY", "PROFILE", "SCHEMA", "SOURCE", "SPECIFICATION"})
MANIFEST_NAME = "package.json"
ARTIFACT_DIR = "artifacts"
MAX_PACKAGE_BYTES = 64 * 1024 * 1024  # the reference package holds about 270 KB

_MANIFEST_KEYS = frozenset(
    {
        "schema_version",
        "package_id",
        "package_version",
        "source_ref",
        "registry",
        "registry_sha256",
        "artifacts",
        "components",
    }
)
_ARTIFACT_KEYS = frozenset({"path", "role", "sha256", "size_bytes"})
_COMPONENT_KEYS = frozenset(
    {"component_id", "implementation_ref", "implementation_path", "artifact_paths", "dependencies"}
)


def _artifact_pairs(
    value: Mapping[str, bytes] | Iterable[tuple[str, bytes]],
) -> tuple[tuple[str, bytes], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(path), bytes(data)) for path, data in items))


@attrs.frozen
class StoredPackage:
    """A package as retained bytes: the manifest (core-codec bytes) and every artifact's bytes.

    Holding the manifest as bytes keeps the object immutable; :attr:`manifest` parses a fresh copy.
    """

    manifest_bytes: bytes
    artifacts: tuple[tuple[str, bytes], ...] = attrs.field(converter=_artifact_pairs)

    @property
    def manifest(self) -> dict[str, Any]:
        """A fresh copy of the manifest dict."""
        value = json.loads(self.manifest_bytes)
        if type(value) is not dict:
            raise ComponentIndexError("package manifest is not an object")
        return value

    def artifact_bytes(self, path: str) -> bytes | None:
        """The retained bytes at ``path``, or ``None``."""
        for candidate, data in self.artifacts:
            if candidate == path:
                return data
        return None

    def with_artifact(self, path: str, data: bytes) -> StoredPackage:
        """A copy with one artifact's bytes replaced (or added): used to prove tamper refusal."""
        others = [(p, d) for p, d in self.artifacts if p != path]
        return StoredPackage(self.manifest_bytes, [*others, (path, data)])

    @property
    def package_id(self) -> str:
        return str(self.manifest.get("package_id"))

    @property
    def package_version(self) -> str:
        return str(self.manifest.get("package_version"))

    def registry(self) -> ComponentRegistry:
        """The packaged registry (validated structurally, not against the artifacts)."""
        return ComponentRegistry.from_dict(self.manifest.get("registry"))


def build_package(
    registry: ComponentRegistry | None = None,
    packaging: Iterable[ComponentPackaging] | None = None,
    *,
    source_root: Path | None = None,
    package_id: str = DEFAULT_PACKAGE_ID,
    package_version: str = DEFAULT_PACKAGE_VERSION,
    source_ref: str = "WORKTREE",
) -> StoredPackage:
    """Build a package from the source tree, reading bytes only. Raises ComponentIndexError."""
    registry = reference_registry() if registry is None else registry
    declared = {p.component_id: p for p in (PACKAGING if packaging is None else packaging)}
    root = default_source_root() if source_root is None else Path(source_root)
    for text in (package_id, package_version, source_ref):
        if type(text) is not str or not text:
            raise ComponentIndexError("package id, version and source ref must be non-empty")
    roles: dict[str, str] = {}
    files: dict[str, bytes] = {}
    parsed: dict[str, ast.Module] = {}

    def retain(path: str, role: str) -> None:
        if role not in ARTIFACT_ROLES:
            raise ComponentIndexError(f"artifact role {role!r} is not recognised")
        if roles.setdefault(path, role) != role:
            raise ComponentIndexError(f"artifact {path} declared as {roles[path]} and {role}")
        if path not in files:
            files[path] = read_exact(root, path)

    components = [
        _component_entry(descriptor, declared.get(descriptor.component_id), root, parsed, retain)
        for descriptor in registry.components
    ]
    manifest = {
        "schema_version": PACKAGE_SCHEMA_VERSION,
        "package_id": package_id,
        "package_version": package_version,
        "source_ref": source_ref,
        "registry": registry.canonical_dict(),
        "registry_sha256": registry.canonical_digest(),
        "artifacts": [
            {"path": p, "role": roles[p], "sha256": sha256_hex(d), "size_bytes": len(d)}
            for p, d in sorted(files.items())
        ],
        "components": components,
    }
    package = StoredPackage(core_bytes(manifest), files)
    validate_package(package)  # e.g. an EXACT_RULE_PROFILE: digest no retained profile has
    return package


def _component_entry(
    descriptor: ComponentDescriptor,
    spec: ComponentPackaging | None,
    root: Path,
    parsed: dict[str, ast.Module],
    retain: Callable[[str, str], None],
) -> dict[str, Any]:
    """One component's manifest entry; ``retain`` keeps each of its files' bytes."""
    if spec is None:
        raise ComponentIndexError(f"no packaging declared for {descriptor.component_id}")
    if not spec.source_refs or spec.source_refs[0] != descriptor.implementation_ref:
        raise ComponentIndexError(
            f"{descriptor.component_id}: first source ref must be its implementation_ref"
        )
    paths: set[str] = set()
    implementation_path = ""
    for index, ref in enumerate(spec.source_refs):
        path = resolve_source(root, ref, parsed)
        retain(path, "SOURCE")
        paths.add(path)
        if index == 0:
            implementation_path = path
    for artifact in spec.artifacts:
        retain(artifact.path, artifact.role)
        paths.add(artifact.path)
    return {
        "component_id": descriptor.component_id,
        "implementation_ref": descriptor.implementation_ref,
        "implementation_path": implementation_path,
        "artifact_paths": sorted(paths),
        "dependencies": sorted(set(spec.dependencies)),
    }


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ComponentIndexError(message)


def validate_package(package: object) -> str:
    """Recompute a package from its retained bytes; return its digest, else raise.

    Only :class:`ComponentIndexError` escapes, whatever the manifest contains.
    """
    try:
        return _validate_package(package)
    except ComponentIndexError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as error:
        raise ComponentIndexError(
            f"package manifest is malformed: {type(error).__name__}: {error}"
        ) from None


def _validate_package(package: object) -> str:
    """The checks in the order of the module's rule: manifest, artifacts, then components."""
    _require(type(package) is StoredPackage, "not a StoredPackage")
    assert isinstance(package, StoredPackage)
    manifest, registry = _checked_manifest(package)
    seen, digests = _checked_artifacts(manifest["artifacts"], dict(package.artifacts))
    components = manifest["components"]
    _require(type(components) is list, "package components must be a list")
    ids = [c.get("component_id") if type(c) is dict else None for c in components]
    _require(
        ids == [d.component_id for d in registry.components],
        "package components do not match the packaged registry",
    )
    for entry, descriptor in zip(components, registry.components, strict=True):
        _check_component(entry, descriptor, seen, digests)
    return core_digest(manifest)


def _checked_manifest(package: StoredPackage) -> tuple[dict[str, Any], ComponentRegistry]:
    """The manifest's JSON, keys, schema, identity and packaged registry (with its digest)."""
    try:
        manifest = json.loads(package.manifest_bytes)
    except ValueError:
        raise ComponentIndexError("package manifest is not JSON") from None
    _require(type(manifest) is dict, "package manifest is not an object")
    _require(
        set(manifest) == _MANIFEST_KEYS,
        f"package manifest keys differ from {sorted(_MANIFEST_KEYS)}",
    )
    _require(
        manifest["schema_version"] == PACKAGE_SCHEMA_VERSION,
        f"unsupported package schema {manifest['schema_version']!r}",
    )
    for key in ("package_id", "package_version", "source_ref"):
        _require(type(manifest[key]) is str and bool(manifest[key]), f"package {key} is invalid")
    try:
        registry = ComponentRegistry.from_dict(manifest["registry"])
    except CatalogError as error:
        raise ComponentIndexError(f"packaged registry is malformed: {error}") from None
    _require(
        manifest["registry_sha256"] == registry.canonical_digest(),
        "packaged registry does not match registry_sha256",
    )
    return manifest, registry


def _checked_artifacts(
    declared: object, retained: dict[str, bytes]
) -> tuple[dict[str, str], dict[str, str]]:
    """Every declared artifact against the retained bytes; returns roles and digests by path."""
    _require(type(declared) is list, "package artifacts must be a list")
    assert isinstance(declared, list)
    seen: dict[str, str] = {}
    digests: dict[str, str] = {}
    for entry in declared:
        _require(type(entry) is dict and set(entry) == _ARTIFACT_KEYS, "malformed artifact entry")
        path, role = entry["path"], entry["role"]
        _require(type(path) is str and path not in seen, f"duplicate artifact path {path!r}")
        _require(role in ARTIFACT_ROLES, f"artifact {path}: unknown role {role!r}")
        _require(is_bare_hex(entry["sha256"]), f"artifact {path}: sha256 is not bare hex")
        data = retained.get(path)
        _require(data is not None, f"artifact {path} is missing from the package")
        assert data is not None
        _require(
            type(entry["size_bytes"]) is int and entry["size_bytes"] == len(data),
            f"artifact {path} changed: size {len(data)} != declared {entry['size_bytes']}",
        )
        _require(
            sha256_hex(data) == entry["sha256"],
            f"artifact {path} changed: sha256 {sha256_hex(data)} != declared {entry['sha256']}",
        )
        seen[path] = role
        digests[path] = entry["sha256"]
    _require(
        [e["path"] for e in declared] == sorted(seen), "package artifacts are not sorted by path"
    )
    extra = sorted(set(retained) - set(seen))
    _require(not extra, f"package retains undeclared artifacts: {extra}")
    return seen, digests


def _check_component(
    entry: dict[str, Any],
    descriptor: ComponentDescriptor,
    seen: dict[str, str],
    digests: dict[str, str],
) -> None:
    """One component entry against its registry descriptor and the retained artifacts."""
    _require(set(entry) == _COMPONENT_KEYS, f"{descriptor.component_id}: malformed entry")
    _require(
        entry["implementation_ref"] == descriptor.implementation_ref,
        f"{descriptor.component_id}: implementation_ref differs from the registry",
    )
    paths = entry["artifact_paths"]
    _require(
        type(paths) is list and paths == sorted(set(paths)) and all(p in seen for p in paths),
        f"{descriptor.component_id}: artifact paths are not retained artifacts",
    )
    _require(
        entry["implementation_path"] in paths
        and seen.get(entry["implementation_path"]) == "SOURCE",
        f"{descriptor.component_id}: implementation source is not retained",
    )
    deps = entry["dependencies"]
    _require(
        type(deps) is list
        and deps == sorted(set(deps))
        and all(type(d) is str and d for d in deps),
        f"{descriptor.component_id}: dependencies must be sorted unique strings",
    )
    retained_profiles = {f"sha256:{digests[path]}" for path in paths if seen.get(path) == "PROFILE"}
    for profile in descriptor.rule_profile_digests:
        _require(
            profile in retained_profiles,
            f"{descriptor.component_id}: EXACT_RULE_PROFILE:{profile} names no profile the "
            "package retains for it",
        )


def write_package(package: StoredPackage, directory: Path) -> None:
    """Write ``package.json`` and ``artifacts/`` into a new or empty directory."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise ComponentIndexError(f"package directory {directory} is not empty")
    manifest = package.manifest
    (directory / ARTIFACT_DIR).mkdir(parents=True, exist_ok=True)
    for path, data in package.artifacts:
        target = directory / ARTIFACT_DIR / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    text = json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=True) + "\n"
    (directory / MANIFEST_NAME).write_text(text, encoding="ascii")


def load_package(directory: Path) -> StoredPackage:
    """Read a package directory's manifest and every artifact byte (no validation)."""
    directory = Path(directory)
    manifest = read_json_file(directory / MANIFEST_NAME, ComponentIndexError, "package manifest")
    if type(manifest) is not dict:
        raise ComponentIndexError(f"package manifest in {directory} is not an object")
    files: dict[str, bytes] = {}
    total = 0
    base = directory / ARTIFACT_DIR
    if base.is_symlink() or not base.is_dir():
        raise ComponentIndexError(f"{base} is not a directory")
    for current, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(current)
        for name in (*dirnames, *filenames):
            if (here / name).is_symlink():
                raise ComponentIndexError(f"package contains a symlink: {here / name}")
        for name in filenames:
            full = here / name
            if not stat.S_ISREG(full.lstat().st_mode):  # a FIFO would block the read
                raise ComponentIndexError(f"package artifact {full} is not a regular file")
            data = read_file_capped(full, ComponentIndexError, "package artifact")
            total += len(data)
            if total > MAX_PACKAGE_BYTES:
                raise ComponentIndexError(f"package {directory} exceeds {MAX_PACKAGE_BYTES} bytes")
            files[full.relative_to(base).as_posix()] = data
    try:
        manifest_bytes = core_bytes(manifest)
    except ValueError as error:
        raise ComponentIndexError(f"package manifest in {directory}: {error}") from None
    return StoredPackage(manifest_bytes, files)


__all__ += ["DEFAULT_PACKAGE_ID", "DEFAULT_PACKAGE_VERSION", "REGISTRY_VERSION"]
