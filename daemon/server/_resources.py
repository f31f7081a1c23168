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
   evidence-sized buffers come from the heap, and a burst of them leaves the heap grown for
   good (53 -> 351 MB after 300 concurrent 1 MiB submits). The server calls
   :func:`trim_heap` (``malloc_trim(0)``: free heap pages, also inside the heap, go back to
   the OS) when nothing is in flight after a burst. (Pinning the mmap threshold instead cost
   page faults on every evidence buffer: ~20 % more CPU per large pair, 3x the burst time.)
   An evaluation worker runs one job at a time, so its heap is bounded by its largest job:
   :func:`keep_heap` raises both thresholds (32 MiB, 64 MiB) so the big buffers of a check
   are reused from the heap instead of being mapped, faulted in and unmapped each time. Both
   are no-ops where glibc is not the allocator.
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


def keep_heap() -> bool:
    """Evaluation workers: large blocks from the heap, kept for reuse (rule 2)."""
    if _LIBC is None:
        return False
    done = bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024))
    return bool(_LIBC.mallopt(_M_TRIM_THRESHOLD, 64 * 1024 * 1024)) and done


def trim_heap() -> None:
    """Return free heap pages to the OS (``malloc_trim(0)``); no-op without glibc."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
