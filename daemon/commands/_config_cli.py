"""CLI commands ``config check``, ``config keys`` and ``config default``: a configuration an
operator can check.

The :mod:`cli` contract applies. Per command:

* ``config check [FILE] [--insecure-listen]`` (default: the embedded configuration) validates
  FILE exactly as ``serve`` would at start — the shape, every value, option files read, every
  session's mechanism constructed, and the listener checks of :mod:`daemon.config._checks`
  (a non-loopback listener without TLS and authentication is invalid unless
  ``--insecure-listen``; the TLS and tokens files are read and checked) — without listening or
  opening the audit log, and prints
  ``{"status": "VALID", "config": <effective configuration>, "sessions": [names hosted],
  "skipped": [messages], "exposed": [listeners served exposed under --insecure-listen]}``.
  Exit 0 valid; 65 invalid (``CONFIG_INVALID``, the message names the key path); 66 FILE
  missing or unreadable; 69 valid, but a session that is not ``optional`` needs an extra this
  installation lacks (``EXTRA_MISSING``: ``session 'S' not hosted: <feature> needs the
  '<extra>' extra: pip install 'evidenced[<extra>]'``; an optional one is listed in
  ``skipped`` with that line, and the check is VALID). ``serve --check`` does the same with
  ``serve``'s flags applied.
* ``config keys`` prints ``{"keys": [{"table", "key", "type", "default", "required", "rule",
  "choices", "doc"}, ...]}``: every key of the schema, the one declaration of each
  (:mod:`daemon.schema._tables`, read by :mod:`daemon.config._config_schema`);
  ``--markdown`` prints the key table of ``docs/configuration.md`` instead (a test holds the
  two equal). Exit 0.
* ``config default`` prints ``{"text": <the embedded default TOML>, "config": <its effective
  configuration>}`` (the TOML is generated from the schema: :mod:`daemon.config._default_file`);
  ``--raw`` prints the TOML text itself and ``--out FILE`` writes it to FILE (a starting point
  to edit). Exit 0; 73 when FILE cannot be written.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from daemon.config._checks import check_listeners
from daemon.config._config import ConfigError, DaemonConfig, default_config_text, load_config
from daemon.config._config_schema import key_rows, key_table
from daemon.config._hosting import ServerConfig
from daemon.config._security import ExposureRefused
from daemon.config._tls import TlsConfigError
from daemon.config._tokens import TokenFileError
from session import cli
from session.cli import Exit, RejectedInput, UsageError

__all__ = ["check_document", "register"]


def check_document(
    config: DaemonConfig,
    server: ServerConfig | None = None,
    *,
    source_config: Any = None,
    inherited: Sequence[socket.socket] = (),
) -> dict[str, Any]:
    """Run every check ``serve`` runs at start on ``config`` (with ``server``, the settings
    after the command line's overrides; default ``config.server``): build every session, then
    the listener checks (:func:`~daemon.config._checks.check_listeners`, on the ``inherited``
    sockets of socket activation when there are any), then the transparency key against the
    log's origin (:func:`~daemon.audit._transparency.transparency_signer`, the function
    ``serve`` opens the transparency log with). Any failure is :class:`ConfigError`, naming
    what is wrong."""
    hosted, skipped = config.build_sessions()
    settings = config.server if server is None else server
    try:
        checked = check_listeners(settings, inherited)
    except (ExposureRefused, TlsConfigError, TokenFileError) as error:
        raise ConfigError(str(error)) from None
    if settings.transparency is not None:
        from daemon.audit._transparency import TransparencyStartError, transparency_signer

        try:
            transparency_signer(settings.transparency, Path(settings.audit_path))
        except TransparencyStartError as error:
            raise ConfigError(f"[transparency] {error}") from None
    return {
        "status": "VALID",
        "config": config.effective() if source_config is None else source_config,
        "sessions": sorted(session.name for session in hosted),
        "skipped": skipped,
        "exposed": list(checked.exposed),
    }


def _load(path: str | None) -> DaemonConfig:
    try:  # a missing or unreadable file is an OSError: the contract makes it 66
        return load_config(path)
    except ConfigError as error:
        raise RejectedInput(f"invalid configuration: {error}", code="CONFIG_INVALID") from None


def _check(args: argparse.Namespace) -> int:
    config = _load(args.file)
    server = attrs.evolve(config.server, insecure_listen=args.insecure_listen)
    try:
        document = check_document(config, server)
    except ConfigError as error:
        raise RejectedInput(f"invalid configuration: {error}", code="CONFIG_INVALID") from None
    cli.emit(document)
    for message in document["skipped"]:
        cli.say(message)
    cli.say(f"{config.source}: valid; sessions {', '.join(document['sessions'])}")
    return Exit.OK


def _keys(args: argparse.Namespace) -> int:
    if args.markdown:
        cli.emit_bytes(key_table().encode("utf-8"))
    else:
        cli.emit({"keys": key_rows()})
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
    check.add_argument(
        "--insecure-listen",
        action="store_true",
        help="as serve --insecure-listen: a non-loopback listener without TLS and "
        "authentication is reported, not refused",
    )
    check.set_defaults(handler=_check)
    keys = commands.add_parser("keys", help="list every configuration key (the schema's)")
    keys.add_argument(
        "--markdown", action="store_true", help="print the key table of docs/configuration.md"
    )
    keys.set_defaults(handler=_keys)
    default = commands.add_parser("default", help="print the embedded default configuration")
    default.add_argument("--out", metavar="FILE", help="write the TOML text to FILE")
    default.add_argument("--raw", action="store_true", help="print the TOML text instead of JSON")
    default.set_defaults(handler=_default)
