"""One entry-point group read from the installed distributions' files, without
``importlib.metadata`` (whose import and scan cost a one-shot command line more than the rest
of its lookup: docs/benchmarks.md, "The CLI's imports").

Rules (the contract):

1. :func:`group_entries` answers exactly what ``importlib.metadata.entry_points(group=group)``
   answers — each entry's name and value, its distribution's ``Name`` and ``Version`` — or
   ``None`` whenever it cannot be sure it does; the caller then asks ``importlib.metadata``.
2. It reads what the standard path finder reads: the ``*.dist-info`` and ``*.egg-info``
   directories directly in each ``sys.path`` directory, in ``sys.path`` order, the first
   distribution of a normalized name winning (names grouped per directory as
   ``importlib.metadata`` groups them); each one's ``entry_points.txt`` (UTF-8, its sections
   and ``name = value`` lines parsed by ``importlib.metadata``'s rules) and, for a
   distribution with an entry in the group, the ``Name`` and ``Version`` headers of its
   ``METADATA`` (else ``PKG-INFO``).
3. ``None`` (ask ``importlib.metadata``) when: a finder on ``sys.meta_path`` other than the
   standard ``PathFinder`` finds distributions; a ``sys.path`` entry is not a string, is a
   file (a zip archive may hold distributions) or an ``.egg``; a metadata directory's name is
   one whose distribution name ``importlib.metadata`` reads from its metadata (no exact
   ``.dist-info``/``.egg-info`` suffix, an empty name); a file cannot be read as UTF-8 or
   raises anything but not-found, not-a-directory or permission errors; an
   ``entry_points.txt`` has a line ``importlib.metadata`` refuses (no ``=`` in a section);
   a ``METADATA`` without ``Name`` or ``Version``, or with either folded over several lines,
   or with a header line the email parser reads otherwise (an empty name, ``From``, a first
   line that continues nothing).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Final

__all__ = ["group_entries"]

#: (entry name, entry value, distribution name, distribution version).
Entry = tuple[str, str, str, str]

_SUFFIXES: Final = (".dist-info", ".egg-info")
#: ``importlib.metadata``'s distribution-name normalization (``Prepared.normalize``).
_SEPARATORS: Final = re.compile(r"[-_.]+")
#: The email parser's header line (``email.feedparser.headerRE``): a line that does not match
#: ends the header block.
_HEADER: Final = re.compile(r"^(From |[\041-\071\073-\176]*:|[\t ])")
#: Errors ``importlib.metadata`` reads as "no such file" (``PathDistribution.read_text``).
_ABSENT: Final = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


class _Unsure(Exception):
    """This reader cannot be sure to answer as ``importlib.metadata`` does (rule 3)."""


def group_entries(group: str) -> tuple[Entry, ...] | None:
    """The group's entries (rule 1), in distribution order, or ``None`` (rule 3)."""
    try:
        if not _only_path_finder():
            return None
        found: list[Entry] = []
        for path in _distributions():
            pairs = _group_pairs(_read(os.path.join(path, "entry_points.txt")), group)
            if pairs:
                name, version = _name_and_version(path)
                found.extend((key, value, name, version) for key, value in pairs)
        return tuple(found)
    except _Unsure:
        return None


def _only_path_finder() -> bool:
    from importlib.machinery import PathFinder

    return all(
        finder is PathFinder or getattr(finder, "find_distributions", None) is None
        for finder in sys.meta_path
    )


def _distributions() -> list[str]:
    """The metadata directories ``importlib.metadata.distributions()`` yields, first of each
    normalized name only (rule 2)."""
    seen: set[str] = set()
    unique: list[str] = []
    for root in sys.path:
        if type(root) is not str or os.path.basename(root).lower().endswith(".egg"):
            raise _Unsure
        try:
            children = os.listdir(root or ".")
        except OSError:
            if os.path.exists(root or "."):
                raise _Unsure from None
            continue
        groups: dict[str, str] = {}
        for child in children:
            if not child.lower().endswith(_SUFFIXES):
                continue
            stem, suffix = os.path.splitext(child)
            key = _SEPARATORS.sub("-", stem.partition("-")[0]).lower().replace("-", "_")
            if suffix not in _SUFFIXES or not key:
                raise _Unsure
            groups.setdefault(key, os.path.join(root, child))
        for key, path in groups.items():
            if key not in seen:
                seen.add(key)
                unique.append(path)
    return unique


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read()
    except _ABSENT:
        return None
    except (OSError, ValueError):
        raise _Unsure from None


def _group_pairs(text: str | None, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` pairs of ``[group]`` (``importlib.metadata``'s ``Sectioned``)."""
    pairs: list[tuple[str, str]] = []
    section = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        if section is None:
            continue
        if "=" not in line:
            raise _Unsure  # importlib.metadata raises: let it
        if section == group:
            name, _, value = line.partition("=")
            pairs.append((name.strip(), value.strip()))
    return pairs


def _name_and_version(path: str) -> tuple[str, str]:
    """The first ``Name`` and ``Version`` headers of the distribution's ``METADATA`` (an
    ``.egg-info``'s ``PKG-INFO`` when there is none, as ``importlib.metadata`` reads it)."""
    text = _read(os.path.join(path, "METADATA")) or _read(os.path.join(path, "PKG-INFO"))
    if not text:
        raise _Unsure
    headers: dict[str, str] = {}
    last = None
    for line in text.split("\n"):
        if _HEADER.match(line) is None:
            break
        if line.startswith((" ", "\t")):  # a folded header's next line
            if last is None or last in ("name", "version"):
                raise _Unsure
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or line.startswith("From "):
            raise _Unsure
        last = name.lower()
        headers.setdefault(last, value.lstrip(" \t"))
    if "name" not in headers or "version" not in headers:
        raise _Unsure
    return headers["name"], headers["version"]
