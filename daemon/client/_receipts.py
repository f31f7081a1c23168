"""Building a decision receipt from a daemon (``docs/spec/transparency.md §7``, ``§10``).

Rules (the contract):

1. A receipt is built for a decision answer that carries ``log_index`` and ``audit_line``;
   an answer without them (no transparency log, or a dropped line) has no receipt
   (:class:`ReceiptUnavailable`).
2. :func:`fetch_receipt` polls the daemon's ``checkpoint`` until one covers the line (size
   greater than ``log_index``; the daemon signs one within its ``checkpoint_interval``), at
   most ``wait`` seconds, then asks for the inclusion proof against exactly that checkpoint's
   size. The receipt is verified before it is returned when a log key is given (a daemon
   that answers with a proof that does not verify is caught here, not later).
3. :func:`receipt_for_line` does the same for a line found after the fact (``evidenced log
   receipt``): any client whose ``checkpoint`` and ``inclusion_proof`` work (binary or HTTP).
4. :func:`fetch_receipt_sync` and :func:`receipt_for_line_sync` are the same for a
   :class:`~daemon.client._sync.SyncClient`; the steps between the calls are shared
   (:class:`_Polling`, :func:`_made`), so both build the same receipt.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from daemon.client._outcomes import SubmitResult
from daemon.wire._errors import PeerError

if TYPE_CHECKING:  # the log room (and cryptography) loads when a receipt is fetched
    from daemon.client._client import Client
    from daemon.client._sync import SyncClient
    from daemon.tlog import VerifierKey

__all__ = [
    "ReceiptUnavailable",
    "fetch_receipt",
    "fetch_receipt_sync",
    "receipt_for_line",
    "receipt_for_line_sync",
]


class ReceiptUnavailable(PeerError):
    """No receipt can be made for this decision (the message says why)."""


def _line_of(result: SubmitResult) -> tuple[int, bytes]:
    index, line = result.log_index, result.audit_line
    if index is None or line is None:
        raise ReceiptUnavailable("the decision answer carries no log index (no transparency log)")
    return index, line.encode("utf-8")


class _Polling:
    """The wait for a checkpoint covering leaf ``index`` (rule 2): :meth:`next_delay` reads
    each note polled."""

    def __init__(self, index: int, wait: float, now: float) -> None:
        self.index = index
        self.wait = wait
        self._deadline = now + wait
        self._delay = 0.05
        self.size = 0

    def next_delay(self, note: bytes, now: float) -> float | None:
        """``None`` when ``note`` covers the line, else the seconds to wait before polling."""
        from daemon.tlog import peek_checkpoint

        self.size = peek_checkpoint(note).size
        if self.size > self.index:
            return None
        if now + self._delay > self._deadline:
            raise ReceiptUnavailable(
                f"no checkpoint covering log index {self.index} within {self.wait} s "
                f"(latest: size {self.size})"
            )
        delay, self._delay = self._delay, min(self._delay * 2, 0.5)
        return delay


def _made(
    line: bytes, index: int, size: int, proof: list[bytes], note: bytes, key: VerifierKey | None
) -> dict[str, Any]:
    from daemon.tlog import make_receipt, verify_receipt
    from daemon.tlog._receipt import encode_receipt

    receipt = make_receipt(line, index, size, proof, note)
    if key is not None:
        report = verify_receipt(encode_receipt(receipt), key)
        if not report.verified:
            raise ReceiptUnavailable(f"the daemon's receipt does not verify: {report.code}")
    return receipt


async def fetch_receipt(
    client: Client, result: SubmitResult, *, wait: float = 10.0, log_key: VerifierKey | None = None
) -> dict[str, Any]:
    """The receipt of a decision (rule 2)."""
    index, line = _line_of(result)
    return await receipt_for_line(client, index, line, wait=wait, log_key=log_key)


async def receipt_for_line(
    client: Client,
    index: int,
    line: bytes,
    *,
    wait: float = 10.0,
    log_key: VerifierKey | None = None,
) -> dict[str, Any]:
    """The receipt of audit line ``line`` at leaf ``index`` (rules 2, 3)."""
    import anyio

    polling = _Polling(index, wait, anyio.current_time())
    while True:
        note = await client.checkpoint()
        delay = polling.next_delay(note, anyio.current_time())
        if delay is None:
            break
        await anyio.sleep(delay)
    proof = await client.inclusion_proof(index, polling.size)
    return _made(line, index, polling.size, proof, note, log_key)


def fetch_receipt_sync(
    client: SyncClient,
    result: SubmitResult,
    *,
    wait: float = 10.0,
    log_key: VerifierKey | None = None,
) -> dict[str, Any]:
    """:func:`fetch_receipt` for a blocking client (rule 4)."""
    index, line = _line_of(result)
    return receipt_for_line_sync(client, index, line, wait=wait, log_key=log_key)


def receipt_for_line_sync(
    client: SyncClient,
    index: int,
    line: bytes,
    *,
    wait: float = 10.0,
    log_key: VerifierKey | None = None,
) -> dict[str, Any]:
    """:func:`receipt_for_line` for a blocking client (rule 4)."""
    polling = _Polling(index, wait, time.monotonic())
    while True:
        note = client.checkpoint()
        delay = polling.next_delay(note, time.monotonic())
        if delay is None:
            break
        time.sleep(delay)
    proof = client.inclusion_proof(index, polling.size)
    return _made(line, index, polling.size, proof, note, log_key)
