"""Many pairs, one answer: a batch's pairs through the submit pipeline, for both front ends.

A batch — HTTP's ``POST .../decisions:batch`` (:mod:`daemon.server._batch`) or EVD1's
``submit_batch`` (:mod:`daemon.server._frontend`, ``docs/protocol.md`` §4.1) — reads its
evidence, then hands its pairs here; each comes back as the bytes of the answer a single submit
of that pair would have been given, in pair order, for the front end to send as one answer.

Rules (the contract):

1. Each admitted pair (its binding's wire form and its items) runs :meth:`Pipeline.submit` as a
   :class:`~daemon.wire._protocol.Submit` of the batch's ``request_id`` and session, through a
   transport of its own (:class:`PairTransport`) whose evidence is already here: its own
   bounds, binding, capacity slot, evaluation, retention, audit line and answer, so a pair is
   decided exactly as the same pair sent alone would be. Its answer is kept, not sent.
2. A pair the front end already refused (a :class:`~daemon.server._pipeline.Refused`: its own
   reading of the pair failed) is audited here as a single submit's refusal is (the batch's
   ``request_id``, the session) and that refusal is its answer; the other pairs go on.
3. The admitted pairs run concurrently, so their audit lines share a group commit: a batch
   waits for one ``fsync``, not one per pair. :func:`decide_pairs` returns once every pair has
   its answer (every admitted line durable).
4. An exception of ours (a bug) in one pair's run is that pair's audited ``INTERNAL`` refusal,
   logged as ``connection_failed`` with the front end's ``listener``, so one pair never takes
   the others' answers (nor an exception group) with it.
5. A decision's answer is its header, canonical (:func:`~daemon.wire._protocol.encode_header`);
   a refusal's is what the front end's ``refusal`` makes of it (HTTP: its error document;
   EVD1: the ``error`` header).
6. A batch holds one server slot (:class:`BatchSlot`) from before its evidence is read; it
   becomes its pairs' slots: :func:`decide_pairs` releases it right before the pairs take
   their own, so a batch of ``n`` pairs holds at most ``n`` slots, never ``n + 1`` (under
   ``max_in_flight = 64`` a batch of 64 is decided whole, not 63 and a ``BUSY``). The front
   end releases it (once, whichever comes first) when the batch ends before that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import trio

from daemon.server._pipeline import Pipeline, Refused
from daemon.wire import _logs as logs
from daemon.wire._echo import echo
from daemon.wire._protocol import Decision, ErrorCode, ErrorResponse, Submit, encode_header

__all__ = ["BatchSlot", "Pair", "PairTransport", "decide_pairs"]

#: One pair of a batch: (the binding's wire form, its items), or the front end's refusal of it.
Pair = tuple[dict[str, Any], tuple[bytes, ...]] | Refused


class BatchSlot:
    """A batch's own server slot (rule 6): :meth:`acquire_nowait` (``trio.WouldBlock`` when
    none is free), released exactly once by :meth:`release`."""

    __slots__ = ("capacity", "held")

    def __init__(self, capacity: trio.CapacityLimiter) -> None:
        self.capacity = capacity
        self.held = False

    def acquire_nowait(self) -> None:
        self.capacity.acquire_on_behalf_of_nowait(self)
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.capacity.release_on_behalf_of(self)


class PairTransport:
    """One pair's side of a batch (a :class:`~daemon.server._pipeline.SubmitTransport`): the
    evidence is already read; the answer is kept for the batch's one answer (rules 1, 5)."""

    __slots__ = ("answer", "items", "refusal")

    def __init__(self, items: tuple[bytes, ...], refusal: Callable[[ErrorResponse], bytes]) -> None:
        self.items = items
        self.refusal = refusal
        self.answer = b""

    async def read_evidence(self) -> tuple[bytes, ...]:
        items, self.items = self.items, ()
        return items

    def encode(self, answer: Decision) -> bytes:
        return encode_header(answer.to_header())

    async def send(self, data: bytes) -> bool:
        self.answer = data
        return True

    async def refuse(self, answer: ErrorResponse) -> None:
        self.answer = self.refusal(answer)


async def decide_pairs(
    pipeline: Pipeline,
    request_id: int,
    session: str,
    pairs: Sequence[Pair],
    requester: dict[str, Any],
    peer: str,
    *,
    started: int,
    refusal: Callable[[ErrorResponse], bytes],
    listener: str,
    slot: BatchSlot,
) -> list[bytes]:
    """Every pair's answer, in order (module rules); ``slot``: the batch's, released as its
    pairs take theirs (rule 6)."""
    transports: list[PairTransport] = []
    slot.release()
    async with trio.open_nursery() as nursery:
        for pair in pairs:
            if isinstance(pair, Refused):
                transport = PairTransport((), refusal)
                answer = await pipeline.refusal(
                    requester,
                    pair.code,
                    pair.message,
                    request_id=request_id,
                    session=echo(session),
                )
                await transport.refuse(answer)
                transports.append(transport)
                continue
            binding, items = pair
            transport = PairTransport(items, refusal)
            transports.append(transport)
            submit = Submit(request_id, session, binding, tuple(len(item) for item in items))
            nursery.start_soon(
                _one, pipeline, submit, transport, requester, peer, started, listener
            )
    return [transport.answer for transport in transports]


async def _one(
    pipeline: Pipeline,
    submit: Submit,
    transport: PairTransport,
    requester: dict[str, Any],
    peer: str,
    started: int,
    listener: str,
) -> None:
    """One pair through the pipeline (rules 1, 4)."""
    try:
        await pipeline.submit(submit, transport, requester, peer, started=started)
    except Exception as error:
        detail = f"{type(error).__name__}: {echo(str(error), 256)}"
        logs.error(
            "connection_failed",
            f"a batch pair of {echo(requester)} failed: {detail}",
            listener=listener,
            requester=requester,
            error=detail,
        )
        answer = await pipeline.refusal(
            requester,
            ErrorCode.INTERNAL,
            f"internal error: {type(error).__name__}",
            request_id=submit.request_id,
            session=echo(submit.session),
        )
        await transport.refuse(answer)
