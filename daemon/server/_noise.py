"""Noise on the daemon's port: counted and summarised, never one durable line each.

Rules (docs/audit-log.md, "Noise"):

1. **Noise** is a refused request that names no authenticated requester
   (:mod:`daemon.server._connection` rule 4): bytes that are not the protocol (``BAD_MAGIC``
   before any ``hello``: an HTTP probe on the binary port, a port scanner, a TLS client), an
   HTTP head malformed or stalled before it names a session, and on a listener with a
   ``tokens_file`` anything refused before a valid token (``UNAUTHENTICATED`` included), on
   either front end. It is answered and closed like any refusal, and
   :meth:`NoiseLedger.record` counts it, per peer (a TCP host or IPv6 /64, a Unix uid). It
   writes no audit line of its own: unauthenticated bytes cannot buy an fsync each.
2. Every ``interval`` seconds (60) in which noise arrived, and once more before ``daemon_stop``,
   one ``noise`` audit line summarises it: ``count`` (refusals since the last summary),
   ``peers`` (the :data:`MAX_PEERS` noisiest, ``{peer: count}``), ``other_peers`` (how many
   more), ``interval_s``. A busy port therefore costs at most one line per interval.
3. Every refusal of an authenticated request — a bad frame after a valid hello, an unknown
   session, a body over its bound — is audited as before (a ``refusal`` line each).
4. ``health`` reports ``noise``: ``total`` since start, ``pending`` (not yet summarised),
   ``summaries`` written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Final

import trio

__all__ = ["MAX_PEERS", "NOISE_INTERVAL_SECONDS", "NoiseLedger"]

NOISE_INTERVAL_SECONDS: Final = 60.0
MAX_PEERS: Final = 16
#: Distinct peers remembered per interval; more are only counted (bounded memory).
_MAX_TRACKED: Final = 4096


class NoiseLedger:
    """Counts noise and writes its summaries (module rules)."""

    def __init__(self, interval: float = NOISE_INTERVAL_SECONDS) -> None:
        self.interval = interval
        self.total = 0
        self.summaries = 0
        self._pending = 0
        self._peers: Counter[str] = Counter()
        self._untracked = 0

    def record(self, peer: str) -> None:
        """One noise refusal from ``peer`` (rule 1)."""
        self.total += 1
        self._pending += 1
        if peer in self._peers or len(self._peers) < _MAX_TRACKED:
            self._peers[peer] += 1
        else:
            self._untracked += 1

    def status(self) -> dict[str, Any]:
        return {"total": self.total, "pending": self._pending, "summaries": self.summaries}

    def take_summary(self) -> dict[str, Any] | None:
        """The fields of the next ``noise`` line (rule 2), or None when nothing arrived."""
        if not self._pending:
            return None
        top = self._peers.most_common(MAX_PEERS)
        summary = {
            "count": self._pending,
            "peers": dict(top),
            "other_peers": len(self._peers) - len(top) + (1 if self._untracked else 0),
            "interval_s": self.interval,
        }
        self._pending = 0
        self._peers.clear()
        self._untracked = 0
        self.summaries += 1
        return summary

    async def flush(self, record: Callable[..., Awaitable[Any]]) -> None:
        """Write the pending summary, if any, with ``record("noise", **fields)``."""
        summary = self.take_summary()
        if summary is not None:
            await record("noise", **summary)

    async def run(self, record: Callable[..., Awaitable[Any]]) -> None:
        """Summarise every :attr:`interval` seconds until cancelled (rule 2)."""
        while True:
            await trio.sleep(self.interval)
            await self.flush(record)
