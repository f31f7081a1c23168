"""The installed distributions a requirement pulls in, read from this venv's metadata.

Imported as ``distributions`` (``tests/_support`` is on pytest's ``pythonpath``). Rules:

* :func:`closure` follows ``Requires-Dist`` from one distribution with some of its extras,
  evaluating each requirement's marker for the extra that asked for it (``extra == "s3"``
  holds only under ``s3``; a requirement without an extra marker under every one), through
  the requirements' own extras (``evidenced[descriptor,...]`` under ``all``), until nothing new
  is found. Every distribution it names must be installed here (``PackageNotFoundError``
  otherwise: the test venv installs ``evidenced[test]``, which pulls in every extra).
* :func:`top_level` is what a distribution put at the top of ``site-packages`` (its RECORD's
  first path components: packages, modules, extension modules, its ``.dist-info``), without
  the shared ``__pycache__`` and what it installed elsewhere (scripts in ``bin/``).
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def closure(name: str, extras: Iterable[str] = ()) -> dict[str, metadata.Distribution]:
    """Canonical name → distribution, for ``name[extras]`` and everything it requires."""
    found: dict[str, metadata.Distribution] = {}
    seen: set[tuple[str, str]] = set()
    pending = [(name, extra) for extra in ("", *extras)]
    while pending:
        wanted, extra = pending.pop()
        key = canonicalize_name(wanted)
        if (key, extra) in seen:
            continue
        seen.add((key, extra))
        distribution = found.get(key) or metadata.distribution(wanted)
        found[key] = distribution
        for text in distribution.requires or ():
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
                continue
            pending.extend((requirement.name, more) for more in ("", *requirement.extras))
    return found


def top_level(distribution: metadata.Distribution) -> set[Path]:
    """The paths ``distribution`` put at the top of its ``site-packages`` (module rules)."""
    names = {str(entry).split("/", 1)[0] for entry in distribution.files or ()}
    return {
        Path(str(distribution.locate_file(name)))
        for name in names
        if name not in ("..", "__pycache__") and not name.endswith(".pth")
    }
