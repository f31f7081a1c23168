"""``evidenced config systemd-unit``: the systemd unit for this installation
(docs/operations.md §1).

Contract (the :mod:`cli` contract applies):

* ``config systemd-unit [--config FILE] [--credential NAME=PATH]... [--out FILE | --raw]``
  prints ``{"unit", "exec_start", "config", "credentials": [{"name", "source"}]}`` (and
  ``written`` with ``--out``, which writes the unit text, mode 0644); ``--raw`` prints the
  unit text itself. Exit 0; 2 for a malformed ``--credential``; 65 for a ``--config`` that is
  not TOML; 73 when ``--out`` cannot be written.
* ``ExecStart`` runs the ``evidenced`` of the installation running this command, by its
  resolved absolute path: the console script beside the interpreter (where pip, pipx and a
  virtual environment put it), else the first ``evidenced`` on ``PATH``; when neither exists,
  the interpreter with ``-m daemon.cli``. ``/usr/bin/evidenced`` is assumed nowhere.
* ``--config`` (default ``/etc/evidenced/evidenced.toml``) is the file ``ExecStart`` names.
  When it can be read, each ``credential:NAME`` value in it (daemon.config._credentials)
  becomes ``LoadCredential=NAME:SOURCE``, SOURCE being the file ``NAME`` beside the
  configuration unless ``--credential NAME=PATH`` says otherwise: systemd copies it into the
  service's ``$CREDENTIALS_DIRECTORY``, readable by its ``DynamicUser``.
* The unit is :data:`TEMPLATE`; ``packaging/evidenced.service`` is its rendering for
  ``/usr/local/bin/evidenced`` (a test holds them equal).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from session import cli
from session.cli import Exit, RejectedInput, UsageError

__all__ = ["TEMPLATE", "evidenced_command", "register", "render_unit"]

DEFAULT_CONFIG: Final = "/etc/evidenced/evidenced.toml"
PREFIX: Final = "credential:"

TEMPLATE: Final = """\
# systemd unit for `evidenced serve` (docs/operations.md). Written by
# `evidenced config systemd-unit`, which names the evidenced of the installation that runs it
# (pip, pipx and venvs put it beside their python; adjust ExecStart if you copy this file).
# Install:
#   evidenced config systemd-unit --out /etc/systemd/system/evidenced.service
#   cp evidenced.socket /etc/systemd/system/
#   install -D -m 0644 evidenced.toml /etc/evidenced/evidenced.toml
#   systemctl daemon-reload && systemctl enable --now evidenced.socket evidenced.service
# Check a changed configuration first (`evidenced config check /etc/evidenced/evidenced.toml`),
# then `systemctl reload evidenced` (SIGHUP: the sessions reload; a bad file is refused and the
# running configuration keeps serving; both are `config_reload` lines of the audit log).

[Unit]
Description=evidenced: evidence-bound verification sessions
After=network.target
Wants=evidenced.socket

[Service]
# READY once listening with the audit log open; RELOADING/READY around a reload; STOPPING.
Type=notify
NotifyAccess=main
ExecStart={exec_start} serve --config {config}
ExecReload=/bin/kill -HUP $MAINPID
# WATCHDOG=1 every half of this while the event loop runs; a stuck daemon is restarted.
WatchdogSec=30
Restart=on-failure
# SIGTERM drains in-flight requests for [server] shutdown_grace (10 s) and writes daemon_stop.
KillSignal=SIGTERM
TimeoutStopSec=30
# The audit log lives here ($STATE_DIRECTORY, /var/lib/evidenced), private to the service.
StateDirectory=evidenced
StateDirectoryMode=0700
RuntimeDirectory=evidenced
RuntimeDirectoryMode=0750
DynamicUser=yes
# Secrets (a transparency key, a TLS key, a tokens file): the configuration names each
# "credential:NAME" and systemd copies /etc/evidenced/NAME, readable by root only, into the
# service's $CREDENTIALS_DIRECTORY, readable by its dynamic user, e.g.
#   LoadCredential=transparency.key:/etc/evidenced/transparency.key
{credentials}\
# Operational messages on stderr are JSON lines in the journal (JOURNAL_STREAM is set).
LimitNOFILE=65536
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectControlGroups=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
SystemCallArchitectures=native

[Install]
WantedBy=multi-user.target
"""


def _quoted(word: str) -> str:
    """One ``ExecStart`` word (systemd's quoting: double quotes when it has a space)."""
    if any(c.isspace() or c in "\"'\\" for c in word):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def evidenced_command() -> list[str]:
    """The resolved command that runs this installation's ``evidenced`` (module rules)."""
    beside = Path(sys.executable).parent / "evidenced"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside.resolve())]
    found = shutil.which("evidenced")
    if found is not None:
        return [str(Path(found).resolve())]
    return [str(Path(sys.executable).resolve()), "-m", "daemon.cli"]


def render_unit(
    exec_start: Sequence[str], config: str, credentials: Sequence[tuple[str, str]] = ()
) -> str:
    """The unit text for ``exec_start`` (its words), ``config`` and ``(name, source)``
    credentials."""
    lines = "".join(f"LoadCredential={name}:{source}\n" for name, source in credentials)
    return TEMPLATE.format(
        exec_start=" ".join(_quoted(word) for word in exec_start),
        config=_quoted(config),
        credentials=lines,
    )


def _credential_names(value: Any) -> Iterator[str]:
    if isinstance(value, str) and value.startswith(PREFIX):
        yield value[len(PREFIX) :]
    elif isinstance(value, dict):
        for item in value.values():
            yield from _credential_names(item)
    elif isinstance(value, list):
        for item in value:
            yield from _credential_names(item)


def _credentials(config: Path, overrides: dict[str, str]) -> list[tuple[str, str]]:
    names: list[str] = []
    try:
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None  # not on this machine (yet): the unit is written for another one
    if text is not None:
        try:
            names = list(dict.fromkeys(_credential_names(tomllib.loads(text))))
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
