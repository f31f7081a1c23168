"""The layering: which project package may import which (README "What ships"; ADR 0010).

The installed top level is the four code packages the project was asked for (``session``,
``mechanism``, ``daemon``, ``catalog``) and the fixtures data package; the layers below are
areas inside them: ``session.canon`` and ``session.cli`` on the session's floor,
``mechanism.holdout`` beside the mechanisms. Every ``import`` statement of every module is read
with ``ast`` — at module level or inside a function, absolute or relative, so a lazy import
counts too — and checked against these contracts:

* ``canon`` (``session.canon``, the byte encodings and the error tree) imports nothing of the
  project;
* ``cli`` (``session.cli``, the command-line contract) imports only ``canon``; which modules
  may import it is ``tests/test_cli_layering.py``'s rule;
* ``session`` imports only ``canon``: no mechanism, daemon, catalog or holdout;
* a mechanism (``mechanism.formation``, ``mechanism.descriptor``) imports ``canon``,
  ``session`` and the shared ``mechanism`` modules (``mechanism.canonical``,
  ``mechanism._components``), never a daemon, the catalog, the holdout instrument, or the other
  mechanism;
* ``catalog`` imports only ``canon``: it describes mechanisms and never loads one, nor the
  session protocol (its reference registry is derived data);
* ``holdout`` (``mechanism.holdout``) imports ``canon``, ``session`` and the shared
  ``mechanism`` modules (mechanisms
  reach it through their providers), and its scorer sources — the files its release id binds —
  import nothing of the project but each other;
* ``daemon`` may import everything but ``holdout``;
* the formation checker never imports the producer, not even transitively;
* no package has an import cycle among its own modules (imports under ``if TYPE_CHECKING:``
  are annotations, not run, and do not count; lazy ones do);
* the formation mechanism's digest (its source inventory) covers every module of the
  ``mechanism`` package its evaluation imports, transitively;
* the daemon's request core (``daemon.server._pipeline``) imports no transport: no front end, no
  listener, no raw-socket fast path, no server lifecycle, no socket; the codec's state table
  (``daemon.wire._protocol_state``) imports nothing of the project; the configuration
  (``daemon.config._config``, ``daemon.config._hosting``) imports no part of the running server
  (ADR 0013).

Providers are loaded through entry points at run time: no static arrow points from the session,
the daemon or the holdout adapter to a mechanism's package, or to a plugin.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
import testdata

from mechanism.holdout._commitment import SCORER_SOURCES

ROOT = testdata.REPO
PACKAGES = ("session", "mechanism", "catalog", "daemon")
MECHANISMS = ("formation", "descriptor")
SHARED = "mechanism.shared"
#: Areas that live inside a package: the module prefix and the area's name.
INNER = (("session.canon", "canon"), ("session.cli", "cli"), ("mechanism.holdout", "holdout"))
_FLOORS = frozenset(prefix for prefix, _ in INNER)

ALLOWED: dict[str, frozenset[str]] = {
    "canon": frozenset(),
    "cli": frozenset({"canon"}),
    "session": frozenset({"canon"}),
    SHARED: frozenset({"canon", "session"}),
    "mechanism.formation": frozenset({"canon", "cli", "session", SHARED}),
    "mechanism.descriptor": frozenset({"canon", "cli", "session", SHARED}),
    "catalog": frozenset({"canon", "cli"}),
    "holdout": frozenset({"canon", "cli", "session", SHARED}),
    "daemon": frozenset(
        {
            "canon",
            "cli",
            "session",
            SHARED,
            "mechanism.formation",
            "mechanism.descriptor",
            "catalog",
        }
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
            floors = all(f"{imported}.{alias.name}" in _FLOORS for alias in node.names)
            if imported and not floors:
                # ``from session import canon`` runs the package's ``__init__`` (which loads
                # nothing: held by the catalog's non-execution test) and imports the floor
                yield node.lineno, imported
            for alias in node.names:
                yield node.lineno, f"{imported}.{alias.name}" if imported else alias.name


def _area(module: str) -> str | None:
    """The layer a module belongs to (None: not the project's)."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    for prefix, area in INNER:
        if module == prefix or module.startswith(f"{prefix}."):
            return area
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
    """The scorer's sources are the release id's: it imports only itself and the error tree
    (``session.canon._errors``, class names without behaviour, so its errors share the one
    root)."""
    for name in SCORER_SOURCES:
        path = ROOT / "mechanism" / "holdout" / name
        for line, imported in _imports(path):
            parts = imported.split(".")
            if (
                parts[0] not in PACKAGES
                or imported in ("mechanism", "mechanism.holdout")
                or parts[:3] == ["session", "canon", "_errors"]
            ):
                continue
            own = parts[:2] == ["mechanism", "holdout"] and f"{parts[2]}.py" in SCORER_SOURCES
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
    assert {"mechanism.canonical", "mechanism.formation._wire", "session.canon"} <= seen
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


# -- cycles, the formation digest's inventory, the daemon's seams


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(path: Path, module: str | None = None) -> set[str]:
    """What :func:`_imports` reads, less the imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    annotation_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:
                annotation_only.update(id(inner) for inner in ast.walk(statement))
    lines = {
        inner.lineno
        for inner in ast.walk(tree)
        if isinstance(inner, ast.Import | ast.ImportFrom) and id(inner) not in annotation_only
    }
    return {name for line, name in _imports(path, module) if line in lines}


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``: dotted name → file."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _own_name(name: str, path: Path) -> str:
    """The name :func:`_imports` resolves relative imports against (a package's ``__init__``
    is inside the package)."""
    return f"{name}.__init__" if path.name == "__init__.py" else name


def _cycles(modules: dict[str, Path]) -> list[list[str]]:
    """The import cycles among ``modules`` (strongly connected components of more than one
    module; ``from . import x`` in a package is not the package importing itself), each
    sorted."""
    graph = {
        name: sorted((_runtime_imports(path, _own_name(name, path)) & set(modules)) - {name})
        for name, path in modules.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in graph:  # Tarjan's algorithm, iterative
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
            successors = graph[node]
            if position < len(successors):
                work.append((node, position + 1))
                successor = successors[position]
                if successor not in index:
                    work.append((successor, 0))
                elif successor in stack:
                    low[node] = min(low[node], index[successor])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_has_an_import_cycle(package: str) -> None:
    assert _cycles(_modules(ROOT, package)) == []


def test_a_cycle_through_lazy_imports_is_seen_and_an_annotation_is_not(tmp_path: Path) -> None:
    """Guard: the cycle a command line and its adapter once made through imports inside
    functions is found; an import only for annotations is not a cycle."""
    package = tmp_path / "probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("def run():\n    from .adapter import observe\n")
    (package / "adapter.py").write_text("def observe():\n    from .cli import EXIT_OK\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .user import User\n"
    )
    (package / "user.py").write_text("from .typed import TYPE_CHECKING\n")
    assert _cycles(_modules(tmp_path, "probe")) == [["probe.adapter", "probe.cli"]]


def test_the_formation_digest_covers_every_module_its_evaluation_imports() -> None:
    """A module the mechanism runs but its source inventory omits could change a decision
    without changing ``mechanism_digest``."""
    from mechanism.formation import SOURCE_INVENTORY
    from session._identity import file_digest

    modules = _modules(ROOT, "mechanism")
    seen: set[str] = set()
    pending = ["mechanism.formation._mechanism"]
    while pending:
        module = pending.pop()
        if module in seen or module not in modules:
            continue
        seen.add(module)
        path = modules[module]
        pending.extend(_runtime_imports(path, _own_name(module, path)))
    assert {"mechanism.formation._checker", "mechanism.formation._wire"} <= seen
    inventory = {digest for _, digest in SOURCE_INVENTORY}
    omitted = sorted(m for m in seen if file_digest(modules[m]) not in inventory)
    assert omitted == [], f"the formation source inventory omits {omitted}"


_TRANSPORT = frozenset(
    {
        "daemon.server._connection",
        "daemon.server._frontend",
        "daemon.server._http_server",
        "daemon.server._fastpath",
        "daemon.server._listeners",
        "daemon.server._server",
        "socket",
    }
)
_RUNNING_SERVER = _TRANSPORT | {
    "daemon.server._pipeline",
    "daemon.server._evaluation",
    "daemon.server._workers",
}


@pytest.mark.parametrize(
    ("module", "refused"),
    [
        ("daemon.server._pipeline", _TRANSPORT | {"trio.socket"}),
        ("daemon.config._config", _RUNNING_SERVER),
        ("daemon.config._hosting", _RUNNING_SERVER),
    ],
)
def test_the_daemon_keeps_its_seams(module: str, refused: frozenset[str]) -> None:
    path = ROOT / (module.replace(".", "/") + ".py")
    assert not _runtime_imports(path, module) & refused


def test_the_codec_state_table_imports_nothing_of_the_project() -> None:
    path = ROOT / "daemon" / "wire" / "_protocol_state.py"
    imported = _runtime_imports(path, "daemon.wire._protocol_state")
    project = {name for name in imported if name.split(".")[0] in PACKAGES}
    # the error tree (daemon.wire._errors) imports nothing either
    assert project <= {"daemon.wire._errors", "daemon.wire._errors.LocalProtocolError"}


# -- the daemon's rooms (docs/architecture.md)

ROOMS = (
    "wire",
    "schema",
    "tlog",
    "audit",
    "retention",
    "config",
    "client",
    "server",
    "replay",
    "kit",
    "report",
    "fleet",
    "commands",
)
# Each room and the rooms it may import; anything else is refused. The floors, top to bottom:
# commands → replay, kit, report, fleet → server, client → config → retention → audit → tlog
# → schema → wire (whose ``_errors`` and ``_logs`` import nothing of the project: every room
# may raise and log; the schema declares every configuration key once, so every room holding a
# view of one reads it).
_BELOW_TLOG = frozenset({"wire", "schema"})
ROOM_ARROWS: dict[str, frozenset[str]] = {
    "wire": frozenset(),
    "schema": frozenset({"wire"}),
    "tlog": _BELOW_TLOG,
    "audit": _BELOW_TLOG | {"tlog"},
    "retention": _BELOW_TLOG | {"tlog", "audit"},
    "config": _BELOW_TLOG | {"tlog", "audit", "retention"},
    "client": _BELOW_TLOG | {"tlog", "config"},
    "server": _BELOW_TLOG | {"tlog", "audit", "retention", "config"},
    "replay": _BELOW_TLOG | {"tlog", "audit", "retention", "config"},
    "kit": _BELOW_TLOG,
    "report": _BELOW_TLOG | {"tlog", "audit"},
    "fleet": _BELOW_TLOG | {"tlog", "audit", "retention"},
    "commands": frozenset(ROOMS) - {"commands"},  # the top floor: every other room
}
# The public faces at the top of ``daemon/``: what users import, and the version the package
# metadata is built from. Every other module lives in a room.
FACES = frozenset({"__init__", "cli", "conformance", "protocol"})


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "daemon" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in ROOMS else None


def test_every_daemon_module_lives_in_a_room_or_is_a_public_face() -> None:
    loose = sorted(path.stem for path in (ROOT / "daemon").glob("*.py") if path.stem not in FACES)
    folders = sorted(
        path.name for path in (ROOT / "daemon").iterdir() if (path / "__init__.py").is_file()
    )
    assert loose == []
    assert folders == sorted(ROOMS)


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_only_the_rooms_below_it(room: str) -> None:
    for path in sorted((ROOT / "daemon" / room).rglob("*.py")):
        for line, imported in _imports(path):
            target = _room(imported)
            if target is not None and target != room:
                assert target in ROOM_ARROWS[room], f"{path}:{line}: {room} imports {imported}"


def test_every_room_states_its_job_and_what_it_may_import() -> None:
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((ROOT / "daemon" / room / "__init__.py").read_text()))
        assert doc and "May import" in doc, room


def test_an_upward_arrow_between_rooms_is_refused(tmp_path: Path) -> None:
    """Guard: a config module that reached into the running server would be seen."""
    probe = tmp_path / "probe.py"
    probe.write_text("from daemon.server._http_codec import DEFAULT_MAX_HEADERS\n")
    targets = {_room(name) for _, name in _imports(probe, "daemon.config._probe")}
    assert "server" in targets
    assert "server" not in ROOM_ARROWS["config"]


@pytest.mark.parametrize(
    ("statement", "refused"),
    [
        ("from daemon import open_client, SyncClient, fetch_receipt", "daemon.server"),
        (
            "import daemon.client._client, daemon.client._sync, daemon.client._http_transport",
            "daemon.server",
        ),
        ("import daemon.cli", "daemon.server"),
    ],
)
def test_importing_a_client_never_loads_the_server(statement: str, refused: str) -> None:
    import subprocess
    import sys

    loaded = f"sorted(m for m in sys.modules if m.startswith({refused!r}))"
    probe = f"import sys\n{statement}\nprint({loaded})"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()
    assert out == "[]", out
