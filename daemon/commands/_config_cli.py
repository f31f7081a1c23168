"""CLI commands ``config check`` and ``config default``: a configuration an operator can check.

The :mod:`cli` contract applies. Per command:

* ``config check [FILE]`` (default: the embedded configuration) validates FILE exactly as
  ``serve`` would at start — the shape, every value, option files read, every session's
  mechanism constructed — without listening or opening the audit log, and prints
  ``{"status": "VALID", "config": <effective configuration>, "sessions": [names hosted],
  "skipped": [messages]}``. Exit 0 valid; 65 invalid (``CONFIG_INVALID``, the message names
  the key path); 66 FILE missing or unreadable. ``serve --check`` does the same with ``serve``'s
  flags applied.
* ``config default`` prints ``{"text": <the embedded default TOML>, "config": <its effective
  configuration>}``; ``--raw`` prints the TOML text itself and ``--out FILE`` writes it to FILE
  (a starting point to edit). Exit 0; 73 when FILE cannot be written.
"""

from __future__ import annotations

import argparse
from typing import Any

import cli
from cli import Exit, RejectedInput, UsageError
from daemon.config._config import ConfigError, DaemonConfig, default_config_text, load_config

__all__ = ["check_document", "register"]


def check_document(config: DaemonConfig, *, source_config: Any = None) -> dict[str, Any]:
    """Build every session of ``config`` (as ``serve`` does) and describe the result; a
    session that cannot be hosted is :class:`ConfigError`."""
    hosted, skipped = config.build_sessions()
    return {
        "status": "VALID",
        "config": config.effective() if source_config is None else source_config,
        "sessions": sorted(session.name for session in hosted),
        "skipped": skipped,
    }


def _load(path: str | None) -> DaemonConfig:
    try:  # a missing or unreadable file is an OSError: the contract makes it 66
        return load_config(path)
    except ConfigError as error:
        raise RejectedInput(f"invalid configuration: {error}", code="CONFIG_INVALID") from None


def _check(args: argparse.Namespace) -> int:
    config = _load(args.file)
    try:
        document = check_document(config)
    except ConfigError as error:
        raise RejectedInput(f"invalid configuration: {error}", code="CONFIG_INVALID") from None
    cli.emit(document)
    for message in document["skipped"]:
        cli.say(message)
    cli.say(f"{config.source}: valid; sessions {', '.join(document['sessions'])}")
    return Exit.OK


def _default(args: argparse.Namespace) -> int:
    if args.raw and args.out is not None:
        raise UsageError("--raw and --out exclude each other")
    text = default_config_text()
    if args.raw:
        cli.emit_bytes(text.encode("utf-8"))
        return Exit.OK
    document: dict[str, Any] = {"text": text, "config": load_config(None).effective()}
    if args.out is not None:
        cli.write_output(args.out, text.encode("utf-8"))
        document["written"] = args.out
    cli.emit(document)
    return Exit.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``config check`` and ``config default``."""
    config = subparsers.add_parser("config", help="check a configuration, print the default")
    commands = config.add_subparsers(dest="config_command", metavar="COMMAND")
    check = commands.add_parser(
        "check", help="validate a configuration without starting; print the effective one"
    )
    check.add_argument(
        "file", nargs="?", metavar="FILE", help="TOML configuration (default: the embedded one)"
    )
    check.set_defaults(handler=_check)
    default = commands.add_parser("default", help="print the embedded default configuration")
    default.add_argument("--out", metavar="FILE", help="write the TOML text to FILE")
    default.add_argument("--raw", action="store_true", help="print the TOML text instead of JSON")
    default.set_defaults(handler=_default)
