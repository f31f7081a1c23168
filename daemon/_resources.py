"""Process resources the server sizes itself against: descriptors and heap memory.

Rules (the contract):

1. Descriptors. :func:`raise_descriptor_limit` raises the ``RLIMIT_NOFILE`` soft limit to the
   hard limit (never lowers it; a refusal by the OS leaves it as it was) and returns the soft
   limit in force. :func:`connection_capacity` sizes the connection cap below that limit:
   the configured ``max_connections``, lowered to ``soft limit - headroom`` where the headroom
   (:data:`DESCRIPTOR_HEADROOM` plus two per evaluation worker) keeps descriptors for
   listeners, the audit log, workers and connections being refused — so ``accept`` never
   fails for want of descriptors before the connection cap is reached. At least 1.
2. Heap. glibc raises its mmap threshold each time a large block is freed, after which
   evidence-sized buffers come from the heap and a burst of them leaves the heap grown for
   good. :func:`pin_allocator` (once, at start) fixes the mmap threshold at 128 KiB and the
   trim threshold at 1 MiB, so every evidence-sized buffer is its own mapping returned to the
   OS when freed; :func:`trim_heap` (``malloc_trim(0)``) returns free heap pages after a
   burst. Both are no-ops where glibc is not the allocator.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import resource
from typing import Final

#: Descriptors kept free besides connections: listeners, audit log, stdio, libraries,
#: connections being refused.
DESCRIPTOR_HEADROOM: Final = 64
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
_MMAP_THRESHOLD: Final = 128 * 1024
_TRIM_THRESHOLD: Final = 1024 * 1024


def raise_descriptor_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; return the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return int(soft) if soft != resource.RLIM_INFINITY else 1 << 20


def connection_capacity(configured: int, descriptor_limit: int, workers: int) -> int:
    """The connection cap that fits ``descriptor_limit`` (rule 1)."""
    headroom = DESCRIPTOR_HEADROOM + 2 * workers
    return max(1, min(configured, descriptor_limit - headroom))


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    if not hasattr(libc, "mallopt") or not hasattr(libc, "malloc_trim"):
        return None
    return libc


_LIBC: Final = _libc()


def pin_allocator() -> bool:
    """Fix glibc's mmap and trim thresholds (rule 2); True when applied."""
    if _LIBC is None:
        return False
    done = bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD))
    return bool(_LIBC.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)) and done


def trim_heap() -> None:
    """Return free heap pages to the OS (``malloc_trim(0)``); no-op without glibc."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
