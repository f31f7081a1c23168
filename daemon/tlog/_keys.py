"""Key files and the log's origin (``docs/spec/transparency.md §6.3``).

Rules (the contract):

1. :func:`write_key_file` creates the file exclusively (``O_EXCL``, never through a symbolic
   link) with mode 0600 and writes the signer key in the Go ``sumdb/note`` form plus a
   newline; an existing path is refused (:class:`KeyFileError`), never overwritten.
2. :func:`load_signer` refuses, in order: a path that is not a regular file, a file any group
   or other permission bit is set on (``mode & 0o077``: a signing key readable by others is
   no longer the log's alone), a file that is not exactly one signer key.
3. :func:`default_origin` is ``<host name>/evidenced/<absolute log path without the leading
   slash>``, with any character a key name cannot hold (Unicode space, ``+``) replaced by
   ``_``: unique per host and log, stable across restarts.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from daemon.tlog._note import KeyFormatError, SignerKey, valid_key_name
from daemon.wire._errors import PeerError


class KeyFileError(PeerError):
    """A key file cannot be written or is not safe or valid to sign with."""


def write_key_file(path: str | os.PathLike[str], signer: SignerKey) -> Path:
    target = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise KeyFileError(f"{target} exists; refusing to overwrite a key file") from None
    except OSError as error:
        raise KeyFileError(f"cannot create {target}: {error.strerror or error}") from None
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, (signer.encode() + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return target


def load_signer(path: str | os.PathLike[str]) -> SignerKey:
    target = Path(path)
    try:
        info = target.stat()
    except OSError as error:
        raise KeyFileError(f"cannot read key file {target}: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise KeyFileError(f"key file {target} is not a regular file")
    if info.st_mode & 0o077:
        raise KeyFileError(
            f"key file {target} has mode {stat.S_IMODE(info.st_mode):04o}: group or others may"
            " access it; chmod 600 it (and consider the key exposed)"
        )
    try:
        text = target.read_text(encoding="ascii")
        return SignerKey.parse(text)
    except (UnicodeDecodeError, KeyFormatError) as error:
        raise KeyFileError(f"key file {target} is not a signer key: {error}") from None


def default_origin(log_path: str | os.PathLike[str]) -> str:
    host = socket.gethostname() or "localhost"
    path = str(Path(log_path).absolute()).lstrip("/")
    origin = f"{host}/evidenced/{path}"
    cleaned = "".join("_" if (c.isspace() or c == "+") else c for c in origin)
    assert valid_key_name(cleaned)
    return cleaned
