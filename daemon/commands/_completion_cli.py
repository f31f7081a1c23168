"""``evidenced completion SHELL``: a shell completion script for every command (shtab).

Contract (the :mod:`cli` contract applies; this command is documented to write an artifact):
``completion bash|zsh|tcsh|fish`` prints the script itself on stdout, exit 0; another shell is
a usage error (2) naming the shells there are (shtab's, 1.9 or newer for fish). The script is
generated from the same parser tree ``evidenced --help`` shows, so it lists every command,
subcommand and option of this installation.

Install: ``evidenced completion bash > ~/.local/share/bash-completion/completions/evidenced``;
zsh: ``evidenced completion zsh > "${fpath[1]}/_evidenced"``; fish: ``evidenced completion fish >
~/.config/fish/completions/evidenced.fish``.
"""

from __future__ import annotations

import argparse
from typing import Final

from session import cli
from session.cli import Exit

__all__ = ["SHELLS", "register"]

SHELLS: Final = ("bash", "zsh", "tcsh", "fish")


def _completion(args: argparse.Namespace) -> int:
    import shtab

    from daemon.commands._main_cli import build_parser

    script = shtab.complete(build_parser(None), shell=args.shell)
    cli.emit_bytes(script.encode("utf-8") if script.endswith("\n") else (script + "\n").encode())
    return Exit.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``completion``."""
    completion = subparsers.add_parser(
        "completion", help=f"print a shell completion script ({', '.join(SHELLS)})"
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell")
    completion.set_defaults(handler=_completion)
