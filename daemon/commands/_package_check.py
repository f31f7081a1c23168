"""Is the import package ``daemon`` this project's? What every ``evidenced`` command asks first.

``daemon`` is also python-daemon's import name (a dependency of Airflow and many services).
Installed into one environment, the last one installed wins ``daemon/__init__.py``: pip warns of
nothing and ``pip check`` passes, and evidenced then fails somewhere deep with an
``ImportError`` or a ``KeyError``. Uninstalling the other distribution removes that file too.

Rules (the contract):

1. :func:`replaced_package` answers ``None`` when ``daemon/__init__.py`` is evidenced's (it
   names :data:`DISTRIBUTION` in ``daemon.__distribution__``), else one sentence saying what
   happened — which other installed distribution's file it is (name and version, from the
   installed metadata's file lists), or that the file is missing (a distribution sharing it
   was uninstalled) — and how to recover: an environment of its own.
2. :func:`refuse_if_replaced` turns that sentence into the command line's failure: the error
   document ``{"error": {"code": "PACKAGE_REPLACED", "exit": 70, "message": …}}`` on stdout and
   the ``evidenced:`` line on stderr (``docs/cli.md``), and returns exit 70.
3. Only the standard library and ``daemon/__init__.py``'s module object are touched (the
   commands room's ``__init__`` imports nothing): nothing of the project is imported before
   the answer, so the check itself cannot fail the way the commands would.
"""

from __future__ import annotations

import json
import sys
from typing import Final

__all__ = ["CODE", "DISTRIBUTION", "refuse_if_replaced", "replaced_package"]

DISTRIBUTION: Final = "evidenced"
CODE: Final = "PACKAGE_REPLACED"
_EXIT_INTERNAL: Final = 70
_RECOVER: Final = (
    "evidenced and that distribution cannot share an environment: install evidenced into a "
    "virtual environment of its own (python -m venv, or pipx), or uninstall the other one and "
    "reinstall evidenced (pip install --force-reinstall, from its wheel or checkout)"
)


def _owners() -> list[str]:
    """The installed distributions other than evidenced whose files include
    ``daemon/__init__.py``, as ``name version``."""
    from importlib.metadata import distributions

    found = set()
    for distribution in distributions():
        name = distribution.metadata["Name"] or "?"
        if name.lower() == DISTRIBUTION:
            continue
        files = distribution.files or ()
        if any(str(path).replace("\\", "/") == "daemon/__init__.py" for path in files):
            found.add(f"{name} {distribution.version}")
    return sorted(found)


def replaced_package() -> str | None:
    """``None`` when ``daemon`` is evidenced's package, else what happened and how to recover
    (rule 1)."""
    package = sys.modules.get("daemon")
    if package is None:  # run as a file: nothing to compare
        return None
    if getattr(package, "__distribution__", None) == DISTRIBUTION:
        return None
    owners = _owners()
    if getattr(package, "__file__", None) is None:
        what = (
            "evidenced's daemon/__init__.py is missing (a distribution that installed the same "
            "file was uninstalled and took it)"
        )
    elif owners:
        what = (
            f"the import package 'daemon' is {', '.join(owners)}'s, not evidenced's (both "
            "install daemon/__init__.py; the last one installed overwrote it)"
        )
    else:
        what = f"the import package 'daemon' at {package.__file__} is not evidenced's"
    return f"{what}; {_RECOVER}"


def refuse_if_replaced() -> int | None:
    """Exit 70 with the error document and the stderr line when ``daemon`` is not ours
    (rule 2); ``None`` when it is."""
    problem = replaced_package()
    if problem is None:
        return None
    document = {"error": {"code": CODE, "exit": _EXIT_INTERNAL, "message": problem}}
    sys.stdout.write(json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    sys.stderr.write(f"evidenced: {problem}\n")
    return _EXIT_INTERNAL
