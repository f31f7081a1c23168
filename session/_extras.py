"""The optional parts of the ``evidenced`` distribution: which extra provides which import.

``pip install evidenced`` (the wheel) installs what ``evidenced serve`` needs for the
``formation`` and ``bytes-sha256`` mechanisms, the clients and the command line; each feature
beyond that names the extra that installs its libraries (ADR 0020). Rules:

1. :data:`EXTRAS` is the one declaration: each extra's name, the top-level modules the
   project's code imports from it, and the feature that needs them. ``pyproject.toml``'s
   ``[project.optional-dependencies]`` installs them (a test holds every module of an extra to
   a distribution that extra pulls in, and no core distribution to one of them).
2. :func:`missing_extra` answers whether an extra is installed without importing it: a module
   is missing when :func:`importlib.util.find_spec` finds no top-level module of that name (a
   module that is found but breaks on import is that library's error, raised where it is
   imported).
3. :func:`require_extra` raises :class:`ExtraMissing` for a missing one. Its message is one
   line, the same wherever it is raised: ``<feature> needs the '<extra>' extra: pip install
   'evidenced[<extra>]'`` (:func:`install_command`), which adds the extra's libraries to the
   installed ``evidenced``.
4. :class:`ExtraMissing` is an ``ImportError`` with the stable ``code`` ``EXTRA_MISSING``; the
   command line exits 69 (``EX_UNAVAILABLE``: a part this installation lacks) with the error
   document, never a traceback (docs/cli.md §3).

This module imports nothing of the project, and nothing beyond the standard library.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, NamedTuple

from session.canon._errors import EnvironmentFault

__all__ = [
    "EXTRAS",
    "EXTRA_MISSING",
    "Extra",
    "ExtraMissing",
    "install_command",
    "missing_extra",
    "require_extra",
]

#: The error code of a missing extra (the CLI's error document, a session's skip reason).
EXTRA_MISSING: Final = "EXTRA_MISSING"


class Extra(NamedTuple):
    """One extra: the modules the project imports from it, and what needs them."""

    modules: tuple[str, ...]
    feature: str


#: Extra name → what it provides (rule 1). ``all`` is every one of them.
EXTRAS: Final[Mapping[str, Extra]] = MappingProxyType(
    {
        "descriptor": Extra(("numpy", "safetensors"), "the T81 descriptor mechanism"),
        "explain": Extra(
            ("grandalf",), "formation explain's grandalf layout (svg, html without Graphviz)"
        ),
        "holdout": Extra(
            ("jsonschema", "jsonschema_rs", "jsonschema_specifications", "referencing", "rfc8785"),
            "the holdout instrument",
        ),
        "s3": Extra(("boto3",), "the s3:// evidence store"),
    }
)


def install_command(extra: str) -> str:
    """The command that adds ``extra`` to the installed distribution (rule 3)."""
    return f"pip install 'evidenced[{extra}]'"


class ExtraMissing(EnvironmentFault, ImportError):
    """A feature's extra is not installed (rule 4): ``extra``, ``feature``, ``missing``
    (the modules not found) and the one-line message with the install command."""

    code: Final = EXTRA_MISSING

    def __init__(self, extra: str, feature: str, missing: tuple[str, ...]) -> None:
        super().__init__(
            f"{feature} needs the {extra!r} extra: {install_command(extra)}", name=missing[0]
        )
        self.extra = extra
        self.feature = feature
        self.missing = missing


def missing_extra(extra: str, feature: str | None = None) -> ExtraMissing | None:
    """The :class:`ExtraMissing` to raise when ``extra`` is not installed, else None (rule 2);
    ``feature`` names the caller's feature instead of the declared one."""
    declared = EXTRAS[extra]
    missing = tuple(name for name in declared.modules if importlib.util.find_spec(name) is None)
    if not missing:
        return None
    return ExtraMissing(extra, declared.feature if feature is None else feature, missing)


def require_extra(extra: str, feature: str | None = None) -> None:
    """Raise :class:`ExtraMissing` when ``extra`` is not installed (rule 3)."""
    error = missing_extra(extra, feature)
    if error is not None:
        raise error
