"""Secrets the service manager hands over: systemd's ``LoadCredential=`` (docs/operations.md).

Rules:

1. A file path in the configuration written ``credential:NAME`` (the transparency
   ``key_file``, a listener's ``tls_cert``, ``tls_key``, ``tls_client_ca``, ``tokens_file``)
   names the file ``NAME`` in ``$CREDENTIALS_DIRECTORY``: the private directory systemd fills
   from ``LoadCredential=NAME:/etc/evidenced/NAME`` before it starts the service, readable by
   the service's user, a ``DynamicUser=yes`` one included (a root-owned 0600 key in
   ``/etc/evidenced`` is not).
2. ``NAME`` is one plain file name (no ``/``, not ``.`` or ``..``, not empty); without
   ``$CREDENTIALS_DIRECTORY`` such a value is refused (``ValueError``, naming the variable):
   check a configuration by hand with ``CREDENTIALS_DIRECTORY=/etc/evidenced``.
3. Any other value is a path, resolved against the configuration's directory as before.

May import: nothing of the project.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["PREFIX", "resolve_file"]

PREFIX: Final = "credential:"


def resolve_file(value: str, base: Path, environ: Mapping[str, str] | None = None) -> str:
    """The file a configuration value names (module rules); ``ValueError`` when a
    credential cannot be resolved."""
    if not value.startswith(PREFIX):
        return str(base / value)
    name = value[len(PREFIX) :]
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{value!r}: a credential is one file name (credential:NAME)")
    directory = (os.environ if environ is None else environ).get("CREDENTIALS_DIRECTORY", "")
    if not directory:
        raise ValueError(
            f"{value!r} needs $CREDENTIALS_DIRECTORY (set by systemd's LoadCredential=)"
        )
    return str(Path(directory) / name)
