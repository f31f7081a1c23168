"""Static location of component source files: read as bytes, never imported.

Rules:

* The source root is the directory that holds the ``catalog`` package (the repository root in a
  checkout, ``site-packages`` in an install). It is found from this file's own location, so
  locating a component never imports it, its package, or any parent package.
* ``module_file(root, "a.b.c")`` is ``root/a/b/c.py`` or ``root/a/b/c/__init__.py``; anything
  else (a path that escapes the root, a symlink leaving it, a missing file) is a
  :class:`ComponentIndexError`.
* ``resolve_source(root, "a.b:name[.method]")`` finds the file that *defines* ``name``: it parses
  the module's source with :mod:`ast` (never executes it); a top-level ``def``/``class``/
  assignment defines the name there; a ``from X import name [as alias]`` (relative or absolute) is
  followed to ``X``, at most 8 hops. Anything else is a :class:`ComponentIndexError`.
* ``read_exact(root, path)`` returns the exact bytes of a root-relative POSIX path (no ``..``, no
  absolute path, no backslash, must stay inside the root after resolving symlinks).
"""

from __future__ import annotations

import ast
from pathlib import Path, PurePosixPath

from ._errors import ComponentIndexError

__all__ = ["default_source_root", "module_file", "read_exact", "resolve_source"]

_MAX_HOPS = 8


def default_source_root() -> Path:
    """The directory holding the ``catalog`` package."""
    return Path(__file__).resolve().parent.parent


def _checked_relative(path: str) -> PurePosixPath:
    if type(path) is not str or not path or "\\" in path or "\x00" in path:
        raise ComponentIndexError(f"artifact path {path!r} is not a portable relative path")
    pure = PurePosixPath(path)
    if pure.is_absolute() or any(part in ("", ".", "..") for part in path.split("/")):
        raise ComponentIndexError(f"artifact path {path!r} is not a portable relative path")
    return pure


def _inside(root: Path, relative: PurePosixPath) -> Path:
    candidate = root.joinpath(*relative.parts)
    resolved_root = root.resolve()
    resolved = candidate.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise ComponentIndexError(f"artifact path {relative} leaves the source root")
    return candidate


def read_exact(root: Path, path: str) -> bytes:
    """Exact bytes of a root-relative file (refusing escapes and non-files)."""
    candidate = _inside(root, _checked_relative(path))
    if not candidate.is_file():
        raise ComponentIndexError(f"artifact {path} is missing from the source root {root}")
    return candidate.read_bytes()


def module_file(root: Path, module: str) -> str:
    """Root-relative path of a module's source file, without importing anything."""
    parts = module.split(".")
    if not parts or not all(part.isidentifier() for part in parts):
        raise ComponentIndexError(f"{module!r} is not a module path")
    for relative in ("/".join(parts) + ".py", "/".join([*parts, "__init__.py"])):
        candidate = _inside(root, _checked_relative(relative))
        if candidate.is_file():
            return relative
    raise ComponentIndexError(f"module {module} has no source file under {root}")


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Top-level statements, descending into ``if``/``try`` blocks (not functions/classes)."""
    out: list[ast.stmt] = []
    for statement in body:
        out.append(statement)
        if isinstance(statement, ast.If):
            out.extend(_statements(statement.body))
            out.extend(_statements(statement.orelse))
        elif isinstance(statement, ast.Try):
            out.extend(_statements(statement.body))
            for handler in statement.handlers:
                out.extend(_statements(handler.body))
            out.extend(_statements(statement.orelse))
            out.extend(_statements(statement.finalbody))
    return out


def _defines(statement: ast.stmt, name: str) -> bool:
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return statement.name == name
    if isinstance(statement, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in statement.targets)
    if isinstance(statement, ast.AnnAssign):
        return isinstance(statement.target, ast.Name) and statement.target.id == name
    return False


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level - 1 >= len(base):
        raise ComponentIndexError(f"relative import beyond the top-level package in {module}")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _parsed(root: Path, path: str, parsed: dict[str, ast.Module]) -> ast.Module:
    """The parsed module at ``path``, read and parsed once per ``parsed`` cache."""
    tree = parsed.get(path)
    if tree is None:
        source = read_exact(root, path)
        try:
            tree = ast.parse(source, filename=path)
        except (SyntaxError, ValueError) as error:
            raise ComponentIndexError(f"{path} is not parseable Python: {error}") from None
        parsed[path] = tree
    return tree


def _imported(
    statements: list[ast.stmt], name: str, module: str, path: str
) -> tuple[str, str] | None:
    """The (module, name) the first ``from … import`` binding ``name`` re-exports, if any."""
    for statement in statements:
        if isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                if (alias.asname or alias.name) == name:
                    return _absolute(module, path.endswith("__init__.py"), statement), alias.name
    return None


def resolve_source(root: Path, ref: str, cache: dict[str, ast.Module] | None = None) -> str:
    """Root-relative path of the file that defines the object a ``module:attr`` ref names.

    ``cache`` (path → parsed module) lets one build parse each file once.
    """
    parsed = {} if cache is None else cache
    module, sep, attribute = ref.partition(":")
    if not sep or not attribute:
        raise ComponentIndexError(f"{ref!r} is not a module:attribute reference")
    name = attribute.split(".")[0]
    for _ in range(_MAX_HOPS):
        path = module_file(root, module)
        statements = _statements(_parsed(root, path, parsed).body)
        if any(_defines(statement, name) for statement in statements):
            return path
        imported = _imported(statements, name, module, path)
        if imported is None:
            raise ComponentIndexError(f"{ref}: {name} is neither defined nor imported in {path}")
        module, name = imported
    raise ComponentIndexError(f"{ref}: more than {_MAX_HOPS} re-export hops")
