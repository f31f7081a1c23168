"""A serving worker's audit log: the sequencer's, reached over a socket (docs/adr/0015).

With ``--workers N`` (N > 1) each serving process hands its audit lines to the one sequencer
(:mod:`daemon.server._sequencer`, in the parent) instead of writing a file: :class:`AuditClient`
has the members of :class:`~daemon.audit._audit.AuditLog` the server and the pipeline call, so the
pipeline is the same code in both modes; with one worker the server keeps the in-process log.

Rules (the contract):

1. :meth:`AuditClient.record` (and ``record_shielded``, ``record_answer``) returns what
   :class:`~daemon.audit._audit.AuditLog` returns, once the sequencer acknowledged the line: its
   ``seq`` and ``line_digest`` after the line met the configured durability (the sequencer
   acknowledges only then), ``None`` when its overflow policy dropped it, or
   :class:`AuditLogError` (an outage, a failed write, the sequencer gone). Fields that cannot
   be encoded raise ``ValueError`` before anything is sent (nothing logged).
2. Batching: at most one frame is in flight; lines recorded while the sequencer commits it go
   out together in the next frame once it is acknowledged, so one round trip carries many
   lines (and they would wait for the next group commit anyway); the sequencer commits each
   frame's lines in one group commit.
3. :meth:`AuditClient.record_answer` calls ``answer`` with the acknowledged reference and
   line (:attr:`last_rendered`) once the line is durable; the in-process log calls it right
   after rendering, before the write, so an answer that cannot be encoded withdraws its line.
   Here the pipeline first encodes the answer statelessly with :data:`PLACEHOLDER_REF`
   (``daemon.server._pipeline`` rule 3): an unencodable answer is refused before anything is sent.
4. ``record_shielded`` and ``record_answer`` cannot be cancelled while they wait for the
   acknowledgement (an audited line is always answered or known failed).
5. The sequencer pushes the daemon's state every :data:`PUSH_INTERVAL` seconds
   (:attr:`cluster`: the audit and transparency status, the workers' figures); the client
   pushes this worker's figures (:attr:`stats`) as often, and once more at :meth:`close`.
   :attr:`failure_reason` is the sequencer's last reported one, or "the sequencer is gone"
   once its stream ended (then every record fails, and :attr:`on_gone` is called once).
6. Transparency requests are answered by the sequencer's transparency log
   (:meth:`transparency_answer`), and audit lines looked up by its lookup index
   (:meth:`find_line`).
7. Reloads: the sequencer's ``["reload", generation]`` asks this worker to reload to the
   parent's generation (:attr:`on_reload`); :meth:`report_reload` answers with the
   generation it serves after the attempt, ``APPLIED`` or ``REFUSED`` and the reason — the
   acknowledgement the parent writes ``config_reload`` after (``_supervisor`` rule 3a).
   :meth:`ready` names the generation the worker started on.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson
import trio

from daemon.audit._audit import AuditLogError, AuditRef, Durability, _Signal
from daemon.audit._transparency import RequestRefused, TransparencyRequest
from daemon.server._ipc import FrameReader, FrameWriter
from daemon.tlog._lookup import LineQuery
from daemon.wire._protocol import (
    CheckpointNote,
    CheckpointRequest,
    ConsistencyProof,
    InclusionProof,
    InclusionProofRequest,
)

__all__ = ["PLACEHOLDER_REF", "PUSH_INTERVAL", "AuditClient"]

#: Seconds between state pushes, both ways (rule 5).
PUSH_INTERVAL: Final = 0.25
#: The reference the trial encoding of an answer uses (rule 3).
PLACEHOLDER_REF: Final = AuditRef(1, "sha256:" + "0" * 64)
_RESERVED: Final = frozenset({"event", "seq", "prev", "line_digest", "timestamp"})
_GONE: Final = "the audit sequencer is gone (the daemon's parent process stopped)"
T = TypeVar("T")


class _Pending:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = _Signal()
        self.result: Any = None


class AuditClient:
    """One serving worker's end of the sequencer's stream (module rules)."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        path: Path,
        durability: Durability,
        in_tree: bool,
        index: int,
    ) -> None:
        self._reader = FrameReader(stream)
        self._writer = FrameWriter(stream)
        self._stream = stream
        #: The sequencer's log file.
        self.path = path
        self.durability = durability
        #: Whether the daemon keeps a transparency log (answers carry ``log_index``).
        self.in_tree = in_tree
        self.index = index
        self.pid = os.getpid()
        self._outgoing: list[Any] = []
        self._waiting: dict[int, _Pending] = {}
        self._next_id = 0
        self._wakeup = trio.Event()
        self._acked = trio.Event()
        self._last_rendered = ""
        self._closed = False
        self._gone = False
        self._scope: trio.CancelScope | None = None
        self._queries: dict[int, tuple[trio.Event, list[Any]]] = {}
        #: The daemon's state as the sequencer last pushed it (rule 5).
        self.cluster: dict[str, Any] = {}
        #: This worker's figures, pushed to the sequencer (rule 5).
        self.stats: Callable[[], dict[str, Any]] = dict
        #: Called once when the sequencer's stream ends (the server then shuts down).
        self.on_gone: Callable[[], object] = lambda: None
        #: Rule 7: called with the generation the parent asks this worker to reload to.
        self.on_reload: Callable[[int], object] = lambda generation: None
        #: Accepted for the server's sake; batches are the sequencer's to measure.
        self.on_batch: Callable[[int, float], None] | None = None

    # -- state (AuditLog's members the server reads)

    @property
    def failure_reason(self) -> str | None:
        if self._gone:
            return _GONE
        reason = self.cluster.get("failure_reason")
        return reason if isinstance(reason, str) else None

    @property
    def pending(self) -> int:
        """Lines sent and not yet acknowledged."""
        return len(self._waiting)

    @property
    def last_rendered(self) -> str:
        """Inside a :meth:`record_answer` callback: the line the answer is for."""
        return self._last_rendered

    def status(self) -> dict[str, Any] | None:
        audit = self.cluster.get("audit")
        return audit if isinstance(audit, dict) else None

    # -- recording

    async def record(self, event: str, **fields: Any) -> AuditRef | None:
        result = await self._record(event, fields, cancellable=True)
        return None if result is None else result[0]

    async def record_shielded(self, event: str, **fields: Any) -> AuditRef | None:
        result = await self._record(event, fields, cancellable=False)
        return None if result is None else result[0]

    async def record_answer(
        self, event: str, answer: Callable[[AuditRef | None], T], /, **fields: Any
    ) -> tuple[AuditRef | None, T]:
        """Rule 3: ``answer`` runs once the line is durable (the pipeline tried the answer's
        encoding before: :data:`PLACEHOLDER_REF`)."""
        result = await self._record(event, fields, cancellable=False)
        if result is None:
            return None, answer(None)
        ref, line = result
        self._last_rendered = line or ""
        return ref, answer(ref)

    async def _record(
        self, event: str, fields: dict[str, Any], *, cancellable: bool
    ) -> tuple[AuditRef, str | None] | None:
        if self._gone:
            raise AuditLogError(_GONE)
        if self._closed:
            raise AuditLogError("audit log is closed")
        if not _RESERVED.isdisjoint(fields):
            raise ValueError("reserved audit field")
        try:
            body = orjson.Fragment(orjson.dumps(fields))
        except TypeError as error:  # orjson.JSONEncodeError: as the log's renderer would
            raise ValueError(str(error)) from None
        ident = self._next_id = self._next_id + 1
        pending = self._waiting[ident] = _Pending()
        self._outgoing.append([ident, event, body])
        self._wakeup.set()
        await pending.done.wait(cancellable=cancellable)
        result = pending.result
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[no-any-return]

    def _settle(self, ident: int, result: Any) -> None:
        pending = self._waiting.pop(ident, None)
        if pending is not None:
            pending.result = result
            pending.done.set()

    def _acknowledged(self, acks: list[Any]) -> None:
        for ack in acks:
            ident, status = ack[0], ack[1]
            if status == "ok":
                self._settle(ident, (AuditRef(ack[2], ack[3]), ack[4]))
            elif status == "dropped":
                self._settle(ident, None)
            elif status == "invalid":
                self._settle(ident, ValueError(ack[2]))
            else:
                self._settle(ident, AuditLogError(ack[2]))

    # -- queries

    async def _ask(self, args: list[Any]) -> Any:
        """One ``["q", …]`` round trip (rule 6): the payload, or :class:`RequestRefused`."""
        ident = self._next_id = self._next_id + 1
        done = trio.Event()
        slot: list[Any] = []
        self._queries[ident] = (done, slot)
        try:
            if not await self._writer.send(["q", ident, *args]):
                raise RequestRefused("INTERNAL", _GONE)
            await done.wait()
        finally:
            self._queries.pop(ident, None)
        if not slot:
            raise RequestRefused("INTERNAL", _GONE)
        ok, payload = slot
        if not ok:
            raise RequestRefused(payload[0], payload[1])
        return payload

    async def transparency_answer(self, request: TransparencyRequest) -> Any:
        """The answer to a transparency request from the sequencer's log, or
        :class:`RequestRefused` (rule 6)."""
        if isinstance(request, CheckpointRequest):
            args: list[Any] = ["checkpoint"]
        elif isinstance(request, InclusionProofRequest):
            args = ["inclusion", request.index, request.tree_size]
        else:
            args = ["consistency", request.old_size, request.new_size]
        payload = await self._ask(args)
        if isinstance(request, CheckpointRequest):
            return CheckpointNote(request.request_id, payload)
        if isinstance(request, InclusionProofRequest):
            return InclusionProof(
                request.request_id, request.index, request.tree_size, tuple(payload)
            )
        return ConsistencyProof(
            request.request_id, request.old_size, request.new_size, tuple(payload)
        )

    async def find_line(self, query: LineQuery) -> tuple[int, bytes]:
        """``(log index, line)`` from the sequencer's lookup index (``daemon.tlog._lookup``
        rules 5–7), or :class:`RequestRefused` with its code (rule 6)."""
        index, line = await self._ask(["entry", query.index, query.decision_id, query.line_digest])
        return int(index), str(line).encode("utf-8")

    async def ready(self, generation: int = 0) -> None:
        """Tell the sequencer this worker serves, on ``generation`` (rule 7)."""
        await self._writer.send(["ready", self.index, self.pid, generation])

    async def report_reload(self, generation: int, status: str, reason: str | None) -> None:
        """Rule 7: a reload's outcome, the acknowledgement the parent waits for."""
        await self._writer.send(["g", generation, status, reason])

    # -- the client's tasks

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send batches, receive acknowledgements and pushes, until :meth:`close`."""
        with trio.CancelScope() as scope:
            self._scope = scope
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._receive)
                nursery.start_soon(self._push_stats)
                task_status.started()
                await self._send_batches()

    async def _send_batches(self) -> None:
        """One frame in flight at a time (rule 2): lines recorded while the sequencer commits
        a frame go out together once it is acknowledged, the next group commit's lines."""
        while not self._gone:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            if self._outgoing:
                lines, self._outgoing = self._outgoing, []
                self._acked = trio.Event()
                if not await self._writer.send(["r", lines]):
                    self._lost()
                await self._acked.wait()

    async def _push_stats(self) -> None:
        while not self._gone:
            await trio.sleep(PUSH_INTERVAL)
            await self._writer.send(["s", self.stats()])

    async def _receive(self) -> None:
        while True:
            message = await self._reader.receive()
            if message is None:
                self._lost()
                return
            kind = message[0]
            if kind == "a":
                self._acknowledged(message[1])
                self._acked.set()
            elif kind == "c":
                self.cluster = message[1]
            elif kind == "reload":
                self.on_reload(int(message[1]))
            elif kind == "q":
                query = self._queries.get(message[1])
                if query is not None:
                    query[1].extend(message[2:])
                    query[0].set()

    def _lost(self) -> None:
        """The sequencer's stream ended (rule 5)."""
        if self._gone:
            return
        self._gone = True
        self._wakeup.set()
        self._acked.set()
        for ident in list(self._waiting):
            self._settle(ident, AuditLogError(_GONE))
        for done, _ in self._queries.values():
            done.set()
        self.on_gone()

    async def recover(self) -> bool:
        """The sequencer recovers the log; True when it reports no outage."""
        return self.failure_reason is None

    async def close(self) -> None:
        """Wait for the acknowledgements of every line sent, push the final figures, and
        stop :meth:`run` (rule 5)."""
        self._closed = True
        while self._waiting and not self._gone:
            await trio.sleep(0.005)
        if not self._gone:
            await self._writer.send(["s", self.stats()])
        if self._scope is not None:
            self._scope.cancel()

    def close_sync(self) -> None:
        self._closed = True
