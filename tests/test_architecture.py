"""The layering: which project package may import which (README "What ships"; ADR 0010).

Every ``import`` statement of every module of the six code packages is read with ``ast`` — at
module level or inside a function, absolute or relative, so a lazy import counts too — and
checked against these contracts:

* ``canon`` (the byte encodings) imports nothing of the project;
* ``session`` imports only ``canon``: no mechanism, daemon, catalog or holdout;
* a mechanism (``mechanism.formation``, ``mechanism.descriptor``) imports ``canon``,
  ``session`` and the shared ``mechanism`` modules (``mechanism.canonical``,
  ``mechanism._components``), never a daemon, the catalog, the holdout instrument, or the other
  mechanism;
* ``catalog`` imports only ``canon``: it describes mechanisms and never loads one, nor the
  session protocol (its reference registry is derived data);
* ``holdout`` imports ``canon``, ``session`` and the shared ``mechanism`` modules (mechanisms
  reach it through their providers), and its scorer sources — the files its release id binds —
  import nothing of the project but each other;
* ``daemon`` may import everything but ``holdout``;
* the formation checker never imports the producer, not even transitively.

Providers are loaded through entry points at run time: no static arrow points from the session,
the daemon or the holdout adapter to a mechanism's package, or to a plugin.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
import testdata

from holdout._commitment import SCORER_SOURCES

ROOT = testdata.REPO
PACKAGES = ("canon", "session", "mechanism", "catalog", "daemon", "holdout")
MECHANISMS = ("formation", "descriptor")
SHARED = "mechanism.shared"

ALLOWED: dict[str, frozenset[str]] = {
    "canon": frozenset(),
    "session": frozenset({"canon"}),
    SHARED: frozenset({"canon", "session"}),
    "mechanism.formation": frozenset({"canon", "session", SHARED}),
    "mechanism.descriptor": frozenset({"canon", "session", SHARED}),
    "catalog": frozenset({"canon"}),
    "holdout": frozenset({"canon", "session", SHARED}),
    "daemon": frozenset(
        {"canon", "session", SHARED, "mechanism.formation", "mechanism.descriptor", "catalog"}
    ),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path`` (``from a import b`` also
    yields ``a.b``: it may name a module)."""
    name_of = module or _module_name(path)
    is_package = module is None and path.name == "__init__.py"
    package = name_of.split(".") if is_package else name_of.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                imported = ".".join([*base, node.module] if node.module else base)
            else:
                imported = node.module or ""
            if imported:
                yield node.lineno, imported
            for alias in node.names:
                yield node.lineno, f"{imported}.{alias.name}" if imported else alias.name


def _area(module: str) -> str | None:
    """The layer a module belongs to (None: not the project's)."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    if parts[0] != "mechanism":
        return parts[0]
    if len(parts) > 1 and parts[1] in MECHANISMS:
        return f"mechanism.{parts[1]}"
    return SHARED


def _sources() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_follows_the_layering(path: Path) -> None:
    source = _area(_module_name(path))
    assert source is not None
    for line, imported in _imports(path):
        target = _area(imported)
        if target is not None and target != source:
            assert target in ALLOWED[source], f"{path}:{line}: {source} imports {imported}"


def test_the_holdout_scorer_imports_nothing_of_the_project_but_itself() -> None:
    for name in SCORER_SOURCES:
        path = ROOT / "holdout" / name
        for line, imported in _imports(path):
            parts = imported.split(".")
            if parts[0] not in PACKAGES or imported == "holdout":
                continue
            own = parts[0] == "holdout" and f"{parts[1]}.py" in SCORER_SOURCES
            assert own, f"{path}:{line}: the scorer imports {imported}"


def test_the_formation_checker_never_imports_the_producer_even_transitively() -> None:
    seen: set[str] = set()
    pending = ["mechanism.formation._checker"]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        relative = module.replace(".", "/")
        for candidate in (ROOT / f"{relative}.py", ROOT / relative / "__init__.py"):
            if candidate.is_file():
                pending.extend(name for _, name in _imports(candidate) if _area(name))
                break
    assert {"mechanism.canonical", "mechanism.formation._wire", "canon"} <= seen
    assert not any("producer" in module for module in seen), sorted(seen)


def test_a_lazy_relative_import_is_seen_and_refused(tmp_path: Path) -> None:
    """Guard: the reader sees imports inside functions and relative ones, so the contracts
    above cannot pass by not looking."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def late():\n"
        "    from mechanism.formation import check_formation\n"
        "    from .. import daemon\n"
    )
    imported = {name for _, name in _imports(probe, "session._probe")}
    assert {"mechanism.formation", "daemon"} <= imported
    refused = {_area(name) for name in imported} - ALLOWED["session"] - {None, "session"}
    assert refused == {"mechanism.formation", "daemon"}
