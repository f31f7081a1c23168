"""The ``evidenced`` command line (a public face: the console script ``evidenced`` and
``python -m daemon.cli`` run :func:`main`; the dispatcher is :mod:`daemon.commands._main_cli`,
whose docstring states the contract every subcommand keeps).

:func:`main` runs ``evidenced ARGV`` in this process and returns the exit code (it never raises
``SystemExit`` for a usage error or ``--help``); :func:`build_parser` is the finished parser
(of one command, of all, or of the one-line :data:`SUMMARIES`); :func:`installed_version` is
the installed distribution's version.

Before anything else, :func:`main` checks that the import package ``daemon`` is this
project's (:mod:`daemon.commands._package_check`: python-daemon installs the same
``daemon/__init__.py``) and otherwise exits 70 ``PACKAGE_REPLACED`` saying which distribution
replaced it and how to recover; the dispatcher is imported only after that answer.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from daemon.commands._package_check import refuse_if_replaced

if TYPE_CHECKING:
    from daemon.commands._main_cli import SUMMARIES, build_parser, installed_version

__all__ = ["SUMMARIES", "build_parser", "installed_version", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``evidenced ARGV`` (module docstring); exit 70 first when ``daemon`` is not ours."""
    refused = refuse_if_replaced()
    if refused is not None:
        return refused
    from daemon.commands._main_cli import main as run

    return run(argv)


def __getattr__(name: str) -> Any:
    if name in ("SUMMARIES", "build_parser", "installed_version"):
        from daemon.commands import _main_cli

        return getattr(_main_cli, name)
    raise AttributeError(f"module 'daemon.cli' has no attribute {name!r}")


if __name__ == "__main__":
    raise SystemExit(main())
