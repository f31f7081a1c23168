"""``evidenced config systemd-unit``: the systemd unit for this installation
(docs/operations.md §1).

Contract (the :mod:`session.cli` contract applies; the unit itself is
:mod:`daemon.config._systemd_unit`'s):

* ``config systemd-unit [--config FILE] [--credential NAME=PATH]... [--out FILE | --raw]``
  prints ``{"unit", "exec_start", "config", "credentials": [{"name", "source"}]}`` (and
  ``written`` with ``--out``, which writes the unit text, mode 0644); ``--raw`` prints the
  unit text itself. Exit 0; 2 for a malformed ``--credential``; 65 for a ``--config`` that is
  not TOML; 73 when ``--out`` cannot be written.
* ``ExecStart`` runs the ``evidenced`` of the installation running this command
  (:func:`~daemon.config._systemd_unit.evidenced_command`).
* ``--config`` (default ``/etc/evidenced/evidenced.toml``) is the file ``ExecStart`` names.
  When it can be read, each ``credential:NAME`` value in it (daemon.config._credentials)
  becomes ``LoadCredential=NAME:SOURCE``, SOURCE being the file ``NAME`` beside the
  configuration unless ``--credential NAME=PATH`` says otherwise: systemd copies it into the
  service's ``$CREDENTIALS_DIRECTORY``, readable by its ``DynamicUser``.
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

from daemon.config._systemd_unit import (
    DEFAULT_CONFIG,
    credential_names,
    evidenced_command,
    render_unit,
)
from session import cli
from session.cli import Exit, RejectedInput, UsageError

__all__ = ["register"]


def _credentials(config: Path, overrides: dict[str, str]) -> list[tuple[str, str]]:
    names: list[str] = []
    try:
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None  # not on this machine (yet): the unit is written for another one
    if text is not None:
        try:
            names = list(dict.fromkeys(credential_names(tomllib.loads(text))))
        except tomllib.TOMLDecodeError as error:
            raise RejectedInput(f"{config}: not TOML: {error}", code="CONFIG_INVALID") from None
    names += [name for name in overrides if name not in names]
    return [(name, overrides.get(name, str(config.parent / name))) for name in names]


def _unit(args: argparse.Namespace) -> int:
    overrides: dict[str, str] = {}
    for item in args.credential:
        name, equals, source = item.partition("=")
        if not equals or not name or "/" in name or not source.startswith("/"):
            raise UsageError(f"--credential {item!r}: expected NAME=/absolute/path")
        overrides[name] = source
    config = Path(args.config)
    credentials = _credentials(config, overrides)
    command = evidenced_command()
    unit = render_unit(command, str(config), credentials)
    if args.raw:
        cli.emit_bytes(unit.encode("utf-8"))
        return Exit.OK
    document: dict[str, Any] = {
        "unit": unit,
        "exec_start": command,
        "config": str(config),
        "credentials": [{"name": name, "source": source} for name, source in credentials],
    }
    if args.out is not None:
        cli.write_output(args.out, unit.encode("utf-8"))
        document["written"] = args.out
        cli.say(f"unit written to {args.out}; then: systemctl daemon-reload")
    cli.emit(document)
    return Exit.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``systemd-unit`` under the ``config`` command (registered before this)."""
    config = subparsers.choices["config"]
    commands = next(
        action
        for action in config._actions
        if isinstance(action, argparse._SubParsersAction)  # the config subcommands
    )
    unit = commands.add_parser(
        "systemd-unit", help="print (or write) a systemd unit running this installation"
    )
    unit.add_argument(
        "--config",
        metavar="FILE",
        default=DEFAULT_CONFIG,
        help="the configuration the unit serves; its credential:NAME values become "
        "LoadCredential= lines",
    )
    unit.add_argument(
        "--credential",
        metavar="NAME=PATH",
        action="append",
        default=[],
        help="where systemd reads credential NAME from (default: beside the configuration)",
    )
    output = unit.add_mutually_exclusive_group()
    output.add_argument("--out", metavar="FILE", help="write the unit text to FILE")
    output.add_argument("--raw", action="store_true", help="print the unit text, not JSON")
    unit.set_defaults(handler=_unit)
