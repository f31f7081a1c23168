"""``evidenced formation inspect-silo`` and ``evidenced formation receipt build|recheck``.

(Placeholder while the silo inspector lands; the commands are registered so the formation
CLI can call :func:`add_silo_commands` unconditionally.)
"""

from __future__ import annotations

import argparse
import sys


def _not_ready(args: argparse.Namespace) -> int:
    sys.stderr.write("evidenced: silo commands are not available yet\n")
    return 70


def add_silo_commands(
    formation_subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Add ``inspect-silo`` and ``receipt`` (``build``/``recheck``) to ``formation``."""
    inspect = formation_subparsers.add_parser("inspect-silo", help="inspect a retained silo")
    inspect.set_defaults(handler=_not_ready)
    receipt = formation_subparsers.add_parser("receipt", help="portable formation receipts")
    receipt.set_defaults(handler=_not_ready)
