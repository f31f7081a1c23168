"""Capped file reads for every command line and host configuration file.

Rules:

* :func:`read_capped` reads at most ``cap + 1`` bytes of ``path``; more than ``cap`` bytes
  raise :class:`InputTooLarge` before anything else is read, so ``/dev/zero``, a huge file or
  an endless pipe costs ``cap + 1`` bytes of memory, never more. A command maps it to exit 65
  ("rejected input") like any other unreadable file: it *is* an ``OSError`` (``EFBIG``) whose
  ``filename`` is the path and whose ``strerror`` names the cap, e.g. ``larger than the
  16,777,216-byte input cap``.
* :func:`read_prefix` reads at most ``limit`` bytes and never refuses: for callers whose
  format bound is below ``limit`` (a prefix that long is already over the bound, so the
  decision is the same as on the whole file).
* :data:`MAX_INPUT_FILE_BYTES` (16 MiB) is the default cap: above every format bound of the
  project (records 256 KiB, receipts 1 MiB, silo objects 4 MiB, holdout documents 8 MiB,
  catalog records 16 MiB), so every input a mechanism could judge still reaches it and gets
  the mechanism's own answer (a LIMIT, a TOO_LARGE code); only absurd inputs stop here.
* Opening follows the platform (a FIFO without a writer blocks, as ``cat`` would); other
  ``OSError`` (missing file, permission, a directory) pass through unchanged.

This module is the one place in ``session`` that touches a file: it sits in the bottom layer
only so that every package (mechanism, catalog, daemon, holdout) may import it without
breaking the layering. The session protocol itself never calls it.
"""

from __future__ import annotations

import errno
import os
from typing import Final

from session.canon import CallerError

__all__ = ["MAX_INPUT_FILE_BYTES", "InputTooLarge", "read_capped", "read_prefix"]

MAX_INPUT_FILE_BYTES: Final = 16 * 1024 * 1024


class InputTooLarge(CallerError, OSError):
    """A file holds more than the reader's cap (an ``OSError`` with ``errno.EFBIG``)."""

    def __init__(self, path: str | os.PathLike[str], cap: int) -> None:
        super().__init__(errno.EFBIG, f"larger than the {cap:,}-byte input cap", os.fspath(path))
        self.cap = cap


def read_prefix(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit`` bytes from the start of ``path`` (never refuses for size)."""
    with open(path, "rb") as handle:
        return handle.read(limit)


def read_capped(path: str | os.PathLike[str], cap: int = MAX_INPUT_FILE_BYTES) -> bytes:
    """The whole file, or :class:`InputTooLarge` when it holds more than ``cap`` bytes."""
    data = read_prefix(path, cap + 1)
    if len(data) > cap:
        raise InputTooLarge(path, cap)
    return data
