"""The component index and exact discovery (docs/spec/formation.md §7.2).

Rules:

* An index lists one entry per (package, component): ``{package_id, package_version,
  package_path, package_sha256, registry_sha256, component}``, sorted by component id, package id,
  version. The **index digest** is the bare hex core-codec digest of ``{schema_version, index_id,
  index_version, source_ref, entries}``; ``index.json`` stores that dict plus ``index_digest``.
* :meth:`IndexEntry.validate_package` validates a package's retained bytes and additionally
  requires its digest to equal the entry's ``package_sha256`` and its registry to declare the
  entry's component identically; it returns the package digest or raises ComponentIndexError.
* :meth:`ComponentIndex.search_exact` is pure data lookup. The result always has the fixed keys
  of §7.2 (``package_availability: NOT_CHECKED``, ``native_qualification: NOT_ESTABLISHED``,
  ``ecosystem_completeness: UNKNOWN``, ``execution_performed: false``, the claim boundary) and
  ``result`` ``DECLARED_MATCHES`` or ``NO_DECLARED_MATCH_IN_THIS_INDEX``. Matching is
  :meth:`ComponentDescriptor.matches_exact`, filtered by package id/version when given.
* :func:`write_build` writes ``index.json`` and ``packages/<name>/`` (the index keeps the package's
  ``source_ref``); :func:`build` (``build(output, source_ref="WORKTREE")``,
  docs/spec/formation.md §7.2) packages the source tree and writes both; :func:`verify_build`
  re-reads everything and reports every discrepancy (it never raises for tampered bytes).
* Every command that loads a package named by an index entry goes through
  :func:`load_build_package`, which checks the entry's ``package_path`` first (one check for
  all): a non-empty ``/``-separated relative path without empty, ``.`` or ``..`` parts, that
  still lies inside the build directory once symlinks are resolved; anything else is a
  :class:`ComponentIndexError` and nothing outside the build directory is read.
* Nothing here imports, executes or instantiates a component.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._codec import core_digest, is_bare_hex
from ._descriptor import ComponentDescriptor
from ._errors import CatalogError, ComponentIndexError
from ._jsonio import read_json_file
from ._package import (
    StoredPackage,
    build_package,
    load_package,
    validate_package,
    write_package,
)

__all__ = [
    "INDEX_SCHEMA_VERSION",
    "SEARCH_CLAIM_BOUNDARY",
    "ComponentIndex",
    "IndexEntry",
    "build",
    "build_index",
    "load_index",
    "verify_build",
    "write_build",
]

INDEX_SCHEMA_VERSION = "EVIDENCED-COMPONENT-INDEX-0.1"
SEARCH_SCHEMA_VERSION = "EVIDENCED-COMPONENT-SEARCH-0.1"
DEFAULT_INDEX_ID = "index:evidenced-reference-components"
DEFAULT_INDEX_VERSION = "0.1.0"
INDEX_NAME = "index.json"
SEARCH_CLAIM_BOUNDARY = (
    "A declared match records only what this index declares about stored packages. It does not "
    "check package availability, establish native qualification, rule-profile compatibility or "
    "ecosystem completeness, load retained source, or execute a component."
)
_ENTRY_KEYS = frozenset(
    {
        "package_id",
        "package_version",
        "package_path",
        "package_sha256",
        "registry_sha256",
        "component",
    }
)
_INDEX_KEYS = frozenset({"schema_version", "index_id", "index_version", "source_ref", "entries"})


@attrs.frozen
class IndexEntry:
    """One (package, component) declaration of an index."""

    package_id: str
    package_version: str
    package_path: str
    package_sha256: str
    registry_sha256: str
    component: ComponentDescriptor

    def to_dict(self) -> dict[str, Any]:
        return {
            "package_id": self.package_id,
            "package_version": self.package_version,
            "package_path": self.package_path,
            "package_sha256": self.package_sha256,
            "registry_sha256": self.registry_sha256,
            "component": self.component.to_dict(),
        }

    def validate_package(self, package: object) -> str:
        """Validate ``package`` against this entry; return its digest or raise."""
        digest = validate_package(package)
        assert isinstance(package, StoredPackage)
        if digest != self.package_sha256:
            raise ComponentIndexError(
                f"package digest {digest} differs from the index's {self.package_sha256}"
            )
        registry = package.registry()
        if registry.canonical_digest() != self.registry_sha256:
            raise ComponentIndexError("package registry differs from the index's registry_sha256")
        if registry.get(self.component.component_id) != self.component:
            raise ComponentIndexError(
                f"package does not declare {self.component.component_id} as the index does"
            )
        return digest


def _sort_key(entry: IndexEntry) -> tuple[str, str, str]:
    return (entry.component.component_id, entry.package_id, entry.package_version)


def _index_entry(item: object) -> IndexEntry:
    """One stored index entry, checked field by field (the strict inverse of its ``to_dict``)."""
    if type(item) is not dict or set(item) != _ENTRY_KEYS:
        raise ComponentIndexError("malformed index entry")
    for key in ("package_id", "package_version", "package_path"):
        if type(item[key]) is not str or not item[key]:
            raise ComponentIndexError(f"index entry {key} is invalid")
    if not (is_bare_hex(item["package_sha256"]) and is_bare_hex(item["registry_sha256"])):
        raise ComponentIndexError("index entry digests must be bare hex")
    try:
        component = ComponentDescriptor.from_dict(item["component"])
    except CatalogError as error:
        raise ComponentIndexError(f"index entry component: {error}") from None
    return IndexEntry(
        item["package_id"],
        item["package_version"],
        item["package_path"],
        item["package_sha256"],
        item["registry_sha256"],
        component,
    )


class ComponentIndex:
    """An immutable, digest-bound list of :class:`IndexEntry`."""

    __slots__ = ("_digest", "entries", "index_id", "index_version", "source_ref")

    def __init__(
        self,
        entries: Iterable[IndexEntry],
        *,
        index_id: str = DEFAULT_INDEX_ID,
        index_version: str = DEFAULT_INDEX_VERSION,
        source_ref: str = "WORKTREE",
    ) -> None:
        self.entries = tuple(sorted(entries, key=_sort_key))
        keys = [_sort_key(e) for e in self.entries]
        if len(set(keys)) != len(keys):
            raise ComponentIndexError("duplicate (component, package, version) index entries")
        self.index_id = index_id
        self.index_version = index_version
        self.source_ref = source_ref
        self._digest: str | None = None

    def canonical_dict(self) -> dict[str, Any]:
        return {
            "schema_version": INDEX_SCHEMA_VERSION,
            "index_id": self.index_id,
            "index_version": self.index_version,
            "source_ref": self.source_ref,
            "entries": [e.to_dict() for e in self.entries],
        }

    def canonical_digest(self) -> str:
        """Bare hex core-codec digest of :meth:`canonical_dict` (computed once: immutable)."""
        if self._digest is None:
            self._digest = core_digest(self.canonical_dict())
        return self._digest

    def to_dict(self) -> dict[str, Any]:
        """What ``index.json`` stores: the canonical dict plus ``index_digest``."""
        return {**self.canonical_dict(), "index_digest": self.canonical_digest()}

    @classmethod
    def from_dict(cls, data: object) -> ComponentIndex:
        """Strict inverse of :meth:`to_dict`; the stored digest must match."""
        if type(data) is not dict or set(data) != {*_INDEX_KEYS, "index_digest"}:
            raise ComponentIndexError("an index is exactly the index keys plus index_digest")
        if data["schema_version"] != INDEX_SCHEMA_VERSION:
            raise ComponentIndexError(f"unsupported index schema {data['schema_version']!r}")
        entries = data["entries"]
        if type(entries) is not list:
            raise ComponentIndexError("index entries must be a list")
        parsed = [_index_entry(item) for item in entries]
        for key in ("index_id", "index_version", "source_ref"):
            if type(data[key]) is not str or not data[key]:
                raise ComponentIndexError(f"index {key} is invalid")
        index = cls(
            parsed,
            index_id=data["index_id"],
            index_version=data["index_version"],
            source_ref=data["source_ref"],
        )
        if [e.to_dict() for e in index.entries] != entries:
            raise ComponentIndexError("index entries are not in canonical order")
        if index.canonical_digest() != data["index_digest"]:
            raise ComponentIndexError("index_digest does not match the index contents")
        return index

    def search_exact(
        self,
        schema_id: object,
        interaction_mode: object,
        mechanism_id: object = None,
        relation_id: object = None,
        package_id: object = None,
        package_version: object = None,
    ) -> dict[str, Any]:
        """Exact declared discovery with the §7.2 result shape. Never raises for query values."""
        matches = [
            {
                "component_id": e.component.component_id,
                "package_id": e.package_id,
                "package_version": e.package_version,
                "package_sha256": e.package_sha256,
                "package_path": e.package_path,
                "registry_sha256": e.registry_sha256,
                "component": e.component.to_dict(),
            }
            for e in self.entries
            if (package_id is None or (type(package_id) is str and package_id == e.package_id))
            and (
                package_version is None
                or (type(package_version) is str and package_version == e.package_version)
            )
            and e.component.matches_exact(
                schema_id, interaction_mode, relation_id=relation_id, mechanism_id=mechanism_id
            )
        ]

        def echo(value: object) -> object:
            return value if value is None or type(value) is str else repr(value)

        return {
            "schema_version": SEARCH_SCHEMA_VERSION,
            "index_id": self.index_id,
            "index_version": self.index_version,
            "index_digest": self.canonical_digest(),
            "query": {
                "schema_id": echo(schema_id),
                "interaction_mode": echo(interaction_mode),
                "relation_id": echo(relation_id),
                "mechanism_id": echo(mechanism_id),
                "package_id": echo(package_id),
                "package_version": echo(package_version),
            },
            "result": "DECLARED_MATCHES" if matches else "NO_DECLARED_MATCH_IN_THIS_INDEX",
            "match_count": len(matches),
            "matches": matches,
            "package_availability": "NOT_CHECKED",
            "native_qualification": "NOT_ESTABLISHED",
            "ecosystem_completeness": "UNKNOWN",
            "execution_performed": False,
            "claim_boundary": SEARCH_CLAIM_BOUNDARY,
        }


def _package_dirname(package: StoredPackage) -> str:
    name = f"{package.package_id}-{package.package_version}".split(":", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def build_index(
    packages: Sequence[tuple[StoredPackage, str]],
    *,
    index_id: str = DEFAULT_INDEX_ID,
    index_version: str = DEFAULT_INDEX_VERSION,
    source_ref: str = "WORKTREE",
) -> ComponentIndex:
    """Index every component of every (validated) package; ``package_path`` is as given."""
    entries: list[IndexEntry] = []
    for package, path in packages:
        digest = validate_package(package)
        registry = package.registry()
        for component in registry.components:
            entries.append(
                IndexEntry(
                    package.package_id,
                    package.package_version,
                    path,
                    digest,
                    registry.canonical_digest(),
                    component,
                )
            )
    return ComponentIndex(
        entries, index_id=index_id, index_version=index_version, source_ref=source_ref
    )


def write_build(package: StoredPackage, directory: Path) -> ComponentIndex:
    """Write ``packages/<name>/`` and ``index.json`` into a new or empty directory."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise ComponentIndexError(f"output directory {directory} is not empty")
    relative = f"packages/{_package_dirname(package)}"
    index = build_index([(package, relative)], source_ref=str(package.manifest.get("source_ref")))
    write_package(package, directory / relative)
    text = json.dumps(index.to_dict(), sort_keys=True, indent=2, ensure_ascii=True) + "\n"
    (directory / INDEX_NAME).write_text(text, encoding="ascii")
    return index


def build(output: Path, source_ref: str = "WORKTREE") -> ComponentIndex:
    """The reference's component-index build: package the source tree (bytes only, nothing
    imported) and write ``index.json`` plus the package into ``output`` (new or empty)."""
    return write_build(build_package(source_ref=source_ref), Path(output))


def load_index(path: Path) -> ComponentIndex:
    """Read and check an ``index.json`` (or a build directory containing one)."""
    path = Path(path)
    if path.is_dir():
        path = path / INDEX_NAME
    return ComponentIndex.from_dict(read_json_file(path, ComponentIndexError, "index"))


def _package_dir(root: Path, relative: str) -> Path:
    parts = relative.split("/")
    if not relative or relative.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ComponentIndexError(f"package path {relative!r} is not a portable relative path")
    candidate = root.joinpath(*parts)
    resolved_root = root.resolve()
    if resolved_root not in candidate.resolve().parents:
        raise ComponentIndexError(f"package path {relative!r} leaves the build directory")
    return candidate


def load_build_package(directory: Path, entry: IndexEntry) -> StoredPackage:
    """Load the package an index entry points at, relative to the build directory."""
    return load_package(_package_dir(Path(directory), entry.package_path))


def verify_build(directory: Path) -> dict[str, Any]:
    """Re-read a build directory; report ``VALID`` or ``INVALID`` with every error found."""
    directory = Path(directory)
    errors: list[str] = []
    packages: list[dict[str, Any]] = []
    index_digest: str | None = None
    try:
        index = load_index(directory)
        index_digest = index.canonical_digest()
    except (CatalogError, OSError, TypeError, ValueError, KeyError, RecursionError) as error:
        return {
            "result": "INVALID",
            "index_digest": None,
            "packages": [],
            "errors": [f"index: {error}"],
            "execution_performed": False,
        }
    by_path: dict[str, list[IndexEntry]] = {}
    for entry in index.entries:
        by_path.setdefault(entry.package_path, []).append(entry)
    for path, entries in sorted(by_path.items()):
        try:
            package = load_build_package(directory, entries[0])
            digest = validate_package(package)
            for entry in entries:
                entry.validate_package(package)
            packages.append({"package_path": path, "package_sha256": digest})
        except (CatalogError, OSError) as error:
            errors.append(f"{path}: {error}")
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as error:
            errors.append(f"{path}: malformed package: {type(error).__name__}: {error}")
    return {
        "result": "INVALID" if errors else "VALID",
        "index_digest": index_digest,
        "packages": packages,
        "errors": errors,
        "execution_performed": False,
    }
