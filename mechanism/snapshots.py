"""Private snapshot directories: a name that says whose they are, and removal of stale ones.

Rules (the contract):

1. A mechanism that must hand evidence to a library *by path* writes it into a directory made
   by :func:`make_snapshot_directory`: ``<tmp>/evidenced-snapshot-<pid>-<random>``, mode 0700,
   where ``<pid>`` is the process that made it. It removes the directory when done.
2. A process killed meanwhile (a crash, a deadline kill of an evaluation worker) leaves its
   directory behind. :func:`remove_stale_snapshots` removes such leftovers, and only them: an
   entry of the temporary directory whose name has exactly the form above, that is a real
   directory (not a symlink), owned by this process's effective user, whose ``<pid>`` is not
   this process and names no running process. Anything else — another user's folder, a live
   process's folder, a look-alike name, a symlink — is never touched. ``pid`` limits the
   sweep to one (dead) process's folders. Removal does not follow symlinks inside the folder.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from typing import Final

SNAPSHOT_PREFIX: Final = "evidenced-snapshot-"
_NAME: Final = re.compile(r"evidenced-snapshot-([1-9][0-9]{0,9})-[A-Za-z0-9_]{1,64}")


def make_snapshot_directory() -> str:
    """A fresh private directory (rule 1); the caller removes it."""
    directory = tempfile.mkdtemp(prefix=f"{SNAPSHOT_PREFIX}{os.getpid()}-")
    os.chmod(directory, 0o700)  # exactly 0700 whatever the process umask
    return directory


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def remove_stale_snapshots(directory: str | None = None, *, pid: int | None = None) -> list[str]:
    """Remove this user's snapshot folders left by processes that no longer run (rule 2);
    return the paths removed."""
    folder = directory if directory is not None else tempfile.gettempdir()
    prefix = SNAPSHOT_PREFIX if pid is None else f"{SNAPSHOT_PREFIX}{pid}-"
    removed: list[str] = []
    try:
        names = [name for name in os.listdir(folder) if name.startswith(prefix)]
    except OSError:
        return removed
    me, uid = os.getpid(), os.geteuid()
    for name in names:
        match = _NAME.fullmatch(name)
        if match is None:
            continue
        owner = int(match.group(1))
        if owner == me or _running(owner):
            continue
        path = os.path.join(folder, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            removed.append(path)
    return removed
