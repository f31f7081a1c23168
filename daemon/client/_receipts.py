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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from daemon.client._client import Client, SubmitResult
from daemon.wire._errors import PeerError

if TYPE_CHECKING:  # the log room (and cryptography) loads when a receipt is fetched
    from daemon.tlog import VerifierKey


class ReceiptUnavailable(PeerError):
    """No receipt can be made for this decision (the message says why)."""


async def fetch_receipt(
    client: Client,
    result: SubmitResult,
    *,
    wait: float = 10.0,
    log_key: VerifierKey | None = None,
) -> dict[str, Any]:
    """The receipt of a decision (rule 2)."""
    index, line = result.log_index, result.audit_line
    if index is None or line is None:
        raise ReceiptUnavailable("the decision answer carries no log index (no transparency log)")
    return await receipt_for_line(client, index, line.encode("utf-8"), wait=wait, log_key=log_key)


async def receipt_for_line(
    client: Client,
    index: int,
    line: bytes,
    *,
    wait: float = 10.0,
    log_key: VerifierKey | None = None,
) -> dict[str, Any]:
    """The receipt of audit line ``line`` at leaf ``index`` (rules 2, 3)."""
    from daemon.tlog import make_receipt, peek_checkpoint, verify_receipt
    from daemon.tlog._receipt import encode_receipt

    deadline = trio.current_time() + wait
    delay = 0.05
    while True:
        note = await client.checkpoint()
        size = peek_checkpoint(note).size
        if size > index:
            break
        if trio.current_time() + delay > deadline:
            raise ReceiptUnavailable(
                f"no checkpoint covering log index {index} within {wait} s (latest: size {size})"
            )
        await trio.sleep(delay)
        delay = min(delay * 2, 0.5)
    proof = await client.inclusion_proof(index, size)
    receipt = make_receipt(line, index, size, proof, note)
    if log_key is not None:
        report = verify_receipt(encode_receipt(receipt), log_key)
        if not report.verified:
            raise ReceiptUnavailable(f"the daemon's receipt does not verify: {report.code}")
    return receipt
