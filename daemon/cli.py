"""The ``evidenced`` command line (a public face: the console script ``evidenced`` and
``python -m daemon.cli`` run :func:`main`; the dispatcher is :mod:`daemon.commands._main_cli`,
whose docstring states the contract every subcommand keeps).

:func:`main` runs ``evidenced ARGV`` in this process and returns the exit code (it never raises
``SystemExit`` for a usage error or ``--help``); :func:`build_parser` is the finished parser
(of one command, of all, or of the one-line :data:`SUMMARIES`); :func:`installed_version` is
the installed distribution's version.
"""

from daemon.commands._main_cli import SUMMARIES, build_parser, installed_version, main

__all__ = ["SUMMARIES", "build_parser", "installed_version", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
