"""The systemd unit of an installation (``evidenced config systemd-unit``, docs/operations.md §1).

Rules (the contract):

1. ``ExecStart`` runs the ``evidenced`` of the installation running this code, by its
   resolved absolute path (:func:`evidenced_command`): the console script beside the
   interpreter (where pip, pipx and a virtual environment put it), else the first
   ``evidenced`` on ``PATH``; when neither exists, the interpreter with ``-m daemon.cli``.
   ``/usr/bin/evidenced`` is assumed nowhere.
2. The unit is :data:`TEMPLATE`, rendered by :func:`render_unit` with systemd's quoting (a word
   with a space, a quote or a backslash in double quotes); each credential is one
   ``LoadCredential=NAME:SOURCE`` line. ``packaging/evidenced.service`` is its rendering for
   ``/usr/local/bin/evidenced`` (a test holds them equal).
3. :func:`credential_names` finds every ``credential:NAME`` value
   (:mod:`daemon.config._credentials`) of a parsed configuration, in document order.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from daemon.config._credentials import PREFIX

__all__ = ["DEFAULT_CONFIG", "TEMPLATE", "credential_names", "evidenced_command", "render_unit"]

#: The configuration file ``ExecStart`` names by default.
DEFAULT_CONFIG: Final = "/etc/evidenced/evidenced.toml"
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


def credential_names(value: Any) -> Iterator[str]:
    """Every ``credential:NAME`` value's ``NAME`` in a parsed configuration, in order."""
    if isinstance(value, str) and value.startswith(PREFIX):
        yield value[len(PREFIX) :]
    elif isinstance(value, dict):
        for item in value.values():
            yield from credential_names(item)
    elif isinstance(value, list):
        for item in value:
            yield from credential_names(item)
