"""The request core: protocol events in, an answer or an audited refusal out, whatever the
transport. The submit pipeline is one function per stage.

A front end (:mod:`daemon.server._frontend`, the EVD1 socket protocol;
:mod:`daemon.server._http_server`, HTTP) turns its bytes into the events of
:mod:`daemon.wire._protocol` and hands them here: a query (:meth:`Pipeline.answer`), a
:class:`~daemon.wire._protocol.Submit` with a :class:`SubmitTransport` of its own
(:meth:`Pipeline.submit`; a submit whose header is in its body, :meth:`Pipeline.submit_body`,
admitted once by the same stages), or a refusal of its own making (:meth:`Pipeline.refusal`).
Nothing here touches a socket or a codec.

Rules (the contract):

1. Submit stages, in this order; a stage returns its product or raises :class:`Refused`, and
   the first refusal decides (it is audited with the request's context, then answered through
   :meth:`SubmitTransport.refuse`, and the exchange ends):

   ====  ===============  ======================================  ============================
   #     stage            product                                 refusals
   ====  ===============  ======================================  ============================
   1     ``bounds``       the :class:`HostedSession`               ``UNKNOWN_SESSION``,
                                                                  ``EVIDENCE_ITEMS_EXCEEDED``,
                                                                  ``EVIDENCE_BYTES_EXCEEDED``
   2     ``binding``      the :class:`~session.BoundProposition`  ``BINDING_INVALID``
   3     ``capacity``     a slot (server and peer)                ``SHUTTING_DOWN``, ``BUSY``
   4     ``read``         the evidence items                      the transport's (protocol
                                                                  codes, ``TRUNCATED_FRAME``,
                                                                  ``IDLE_TIMEOUT``)
   5     ``evaluate``     the evaluated proposition (and its      none (an overrun or a dead
                          wire form), the items' references       worker is an ``UNKNOWN``
                                                                  decision)
   6     ``retain``       the evidence stored (the session's      ``AUDIT_FAILED``
                          retention), the line's fields
   7     ``audit``        the answer's bytes, its line durable    ``INTERNAL`` (not encodable),
                                                                  ``AUDIT_FAILED``
   8     ``answer``       sent (True: the connection may go on)   none
   ====  ===============  ======================================  ============================

   Stages 1-3 run on the declared sizes, before any evidence byte is read (bounds before
   reads). Stage 6's writes start when stage 5 does, so evidence is stored while the pair is
   evaluated (:mod:`daemon.retention`); a decision is never answered as retained without its
   evidence stored. Effective bounds are the session's declared bounds clamped to its mechanisms
   (:mod:`daemon.config._hosting`). Capacity is ``acquire_nowait``: never an unbounded queue.
2. From stage 3 on the request holds one server slot and one of its peer's in-flight slots;
   both are released exactly once when the exchange ends, however it ends (the refusal or the
   answer is sent while they are held). An ``IDLE_TIMEOUT`` refusal of stage 4 is a strike
   against the peer (:mod:`daemon.server._peers`). A cancellation (forced shutdown) after stage 3
   is still audited, as a ``SHUTTING_DOWN`` refusal, before it proceeds.
3. Audit before answer: the transport encodes the answer (:meth:`SubmitTransport.encode`)
   right after the audit line is rendered, before it is written, so the answer carries the
   line's ``seq``, ``line_digest`` and (with a transparency log) ``log_index`` and
   ``audit_line``; an answer that cannot be encoded withdraws the line (``INTERNAL``); a line
   that cannot be written answers ``AUDIT_FAILED`` (no line, ``decision_id`` null).
4. Refusals (:meth:`Pipeline.refusal`): the message is bounded (:mod:`daemon.wire._echo`), the
   refusal counted, and, unless the front end says the connection made no request, audited
   first; a refusal whose line cannot be written becomes ``AUDIT_FAILED`` (never an
   unrecorded refusal that looks recorded).
5. Queries (:meth:`Pipeline.answer`): ``list`` and ``health`` are always answered; a
   transparency request is answered or refused with the transparency log's code. A proof
   reads tiles: :meth:`Pipeline.query` computes it off the event loop through
   :attr:`Pipeline.file_reads` (:mod:`daemon.tlog._served_files` rule 6: its own limiter and
   deadline, ``BUSY`` past it); the checkpoint is answered from memory. An audit line asked
   by index, decision id or line digest (:meth:`Pipeline.find_line`) is found by the one
   guarded lookup (:mod:`daemon.tlog._lookup` rules 5–7), in this process's index or, in a
   worker, its sequencer's.

Hooks for later work belong in these stages: metrics around each stage, other evaluation
placements inside ``evaluate``, another front end as another :class:`SubmitTransport`.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import trio

from daemon.audit._audit import AuditLog, AuditLogError, AuditRef
from daemon.audit._transparency import RequestRefused, TransparencyRequest
from daemon.audit._transparency import answer as transparency_answer
from daemon.config._hosting import HostedSession
from daemon.retention._retainer import Retention, RetentionFailed
from daemon.server._audit_client import PLACEHOLDER_REF, AuditClient
from daemon.server._evaluation import Evaluator
from daemon.server._noise import NoiseLedger
from daemon.server._peers import PeerLedger
from daemon.server._resources import trim_heap
from daemon.tlog import TransparencyLog
from daemon.tlog._lookup import (
    IndexFailed,
    IndexRebuilding,
    LineLookup,
    LineNotFound,
    LineQuery,
)
from daemon.tlog._names import DecisionIds
from daemon.tlog._served_files import FileReads, ReadsStuck
from daemon.wire._binding import BindingWireError, binding_from_wire
from daemon.wire._echo import bounded_message, echo
from daemon.wire._errors import EvidencedError
from daemon.wire._protocol import (
    CheckpointRequest,
    Decision,
    ErrorCode,
    ErrorResponse,
    Fault,
    HealthReport,
    HealthRequest,
    ListSessions,
    SessionList,
    Submit,
    encode_header,
)
from session import BoundProposition, EvaluatedProposition

__all__ = ["BodyTransport", "Pipeline", "Refused", "SubmitTransport"]

#: Received evidence bytes after which an idle moment (nothing in flight) trims the heap.
TRIM_AFTER_BYTES: Final = 16 * 1024 * 1024


class Refused(EvidencedError):
    """A stage (or a transport) refuses the request with ``code``; ``message`` says why."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def fault(self) -> Fault:
        """Whose fault the refusal is (its code's)."""
        return self.code.fault


class SubmitTransport(Protocol):
    """What a front end provides for one submit (rule 1): its own way to read the evidence,
    encode and send the answer, and send a refusal."""

    async def read_evidence(self) -> tuple[bytes, ...]:
        """Accept the declared sizes and read exactly those items. Raises :class:`Refused`:
        a protocol code, ``TRUNCATED_FRAME`` (the transport broke), ``IDLE_TIMEOUT`` (too
        slow)."""
        ...

    def encode(self, answer: Decision) -> bytes:
        """The answer's bytes (``ValueError`` when it cannot be encoded)."""
        ...

    async def send(self, data: bytes) -> bool:
        """Send encoded answer bytes; False when the peer is gone (the exchange ends)."""
        ...

    async def refuse(self, answer: ErrorResponse) -> None:
        """Send an (already audited) refusal; the transport then ends the exchange."""
        ...


class BodyTransport(SubmitTransport, Protocol):
    """A transport whose submit header travels inside its body (HTTP;
    :meth:`Pipeline.submit_body`)."""

    async def read_request(self, session: HostedSession) -> tuple[Submit, tuple[bytes, ...]]:
        """Read the body, bounded by ``session``'s effective bounds: the submit it carries
        and its items. Raises :class:`Refused` as :meth:`SubmitTransport.read_evidence`."""
        ...


class _Retaining(Protocol):
    """One request's retention writes (:meth:`daemon.retention.Retention.start`)."""

    async def settle(
        self, outcome: str, binding: BoundProposition, result: Mapping[str, Any]
    ) -> dict[str, Any]: ...


#: Stage 5's product: the result, its wire form, evaluation ns, the items' references.
_Evaluated = tuple[EvaluatedProposition, dict[str, Any], int, list[str]]


class _Request:
    """One submit's context, refusals' audit fields included."""

    __slots__ = ("binding", "context", "peer", "requester", "submit")

    def __init__(self, submit: Submit, requester: dict[str, Any], peer: str) -> None:
        self.submit = submit
        self.requester = requester
        self.peer = peer
        self.binding: BoundProposition | None = None
        self.context: dict[str, Any] = {
            "session": echo(submit.session),
            "declared_items": list(submit.item_sizes),
        }


def _clamp_note(session: HostedSession) -> str:
    if not session.clamped:
        return ""
    return " (its declared bounds, clamped to what its mechanisms accept)"


class Pipeline:
    """The transport-neutral core of one running server (module rules)."""

    def __init__(
        self,
        *,
        sessions: dict[str, HostedSession],
        audit: AuditLog | AuditClient,
        transparency: TransparencyLog | None,
        evaluator: Evaluator,
        retention: Retention,
        capacity: trio.CapacityLimiter,
        peers: PeerLedger,
        counters: Counter[str],
        session_list: list[dict[str, Any]],
        health: Callable[[], dict[str, Any]],
        decision_ids: DecisionIds | None = None,
    ) -> None:
        self.sessions = sessions
        self.audit = audit
        self.transparency = transparency
        self.evaluator = evaluator
        self.retention = retention
        self.capacity = capacity
        self.peers = peers
        self.counters = counters
        self.session_list = session_list
        self.health = health
        #: Names decisions and audited refusals (replica-aware: :mod:`daemon.tlog._names`).
        self.decision_ids = decision_ids or DecisionIds(None)
        self._new_id = self.decision_ids.new
        #: Set once the server stops accepting: new submits are refused ``SHUTTING_DOWN``.
        self.draining = False
        #: Connections that never spoke this protocol (:mod:`daemon.server._noise`).
        self.noise = NoiseLedger()
        #: Sessions replaced by a reload whose requests may still be evaluating, with the
        #: evaluator of their generation (:mod:`daemon.server._reload`).
        self.previous: list[tuple[dict[str, HostedSession], Evaluator]] = []
        #: Called once per decision answered, after its audit line (``daemon.server._metrics``):
        #: ``(session, outcome, receive_ns, evaluate_ns, audit_ns, total_ns, evidence_bytes)``.
        self.on_decision: Callable[[str, str, int, int, int, int, int], None] | None = None
        self._received_since_trim = 0
        #: A worker of a multi-process daemon answers transparency requests from its
        #: parent's log (:meth:`daemon.server._audit_client.AuditClient.transparency_answer`).
        self.remote_transparency: Callable[[TransparencyRequest], Awaitable[Any]] | None = None
        #: Reads of the log's files for requests (rule 5; ``daemon.tlog._served_files`` rule 6).
        self.file_reads = FileReads()
        #: The guarded line lookup (rule 5): this process's index, or (a worker) the
        #: sequencer's (:meth:`daemon.server._audit_client.AuditClient.find_line`).
        self.line_lookup: Callable[[LineQuery], Awaitable[tuple[int, bytes]]] | None = None
        index = audit.line_index if isinstance(audit, AuditLog) else None
        if index is not None:
            self.line_lookup = LineLookup(index, self.file_reads).find

    # -- queries and refusals

    def answer(self, request: ListSessions | HealthRequest | TransparencyRequest) -> Any:
        """The answer to a query (rule 5); :class:`Refused` for a refused transparency
        request."""
        if isinstance(request, ListSessions):
            return SessionList(request.request_id, self.session_list)
        if isinstance(request, HealthRequest):
            return HealthReport(request.request_id, self.health())
        if not isinstance(request, TransparencyRequest):
            raise AssertionError(f"not a query: {request!r}")
        try:
            return transparency_answer(self.transparency, request)
        except RequestRefused as refused:
            raise Refused(ErrorCode[refused.code], str(refused)) from None

    async def query(self, request: ListSessions | HealthRequest | TransparencyRequest) -> Any:
        """:meth:`answer`, with a transparency request answered by the parent's log in a
        worker of a multi-process daemon."""
        remote = self.remote_transparency
        if isinstance(request, ListSessions | HealthRequest):
            return self.answer(request)
        try:
            if remote is not None:
                return await remote(request)
            if isinstance(request, CheckpointRequest):
                return self.answer(request)  # from memory
            return await self.file_reads.run(self.answer, request)  # a proof reads tiles
        except RequestRefused as refused:
            raise Refused(ErrorCode[refused.code], str(refused)) from None
        except ReadsStuck as stuck:
            raise Refused(ErrorCode.BUSY, str(stuck)) from None

    async def find_line(self, query: LineQuery) -> tuple[int, bytes]:
        """``(log index, line)`` of the audit line ``query`` names (rule 5), or
        :class:`Refused`: ``TRANSPARENCY_DISABLED`` without a lookup, ``UNKNOWN_KIND`` for no
        such line, ``BUSY`` while the index is rebuilt or a read is stuck, ``INTERNAL`` when
        the files cannot be read."""
        lookup = self.line_lookup
        if lookup is None:
            raise Refused(ErrorCode.TRANSPARENCY_DISABLED, "this daemon keeps no lookup index")
        try:
            return await lookup(query)
        except RequestRefused as refused:  # a worker: the sequencer's refusal
            raise Refused(ErrorCode[refused.code], str(refused)) from None
        except LineNotFound as error:
            raise Refused(ErrorCode.UNKNOWN_KIND, str(error)) from None
        except (IndexRebuilding, ReadsStuck) as busy:
            raise Refused(ErrorCode.BUSY, str(busy)) from None
        except (IndexFailed, OSError) as error:
            raise Refused(ErrorCode.INTERNAL, f"the audit log cannot be read: {error}") from None

    async def refusal(
        self,
        requester: dict[str, Any],
        code: ErrorCode,
        message: str,
        *,
        request_id: int | None = None,
        audit: bool = True,
        **fields: Any,
    ) -> ErrorResponse:
        """Count and (``audit``) record a refusal; return the answer to send (rule 4).
        ``fields`` must already be bounded by the caller."""
        message = bounded_message(message)
        self.counters["refusals"] += 1
        decided: str | None = None
        # AUDIT_FAILED answers a request whose line could not be written: no line for it.
        if audit and code is not ErrorCode.AUDIT_FAILED:
            decided = self._new_id()
            try:
                with trio.CancelScope(shield=True):
                    await self.audit.record(
                        "refusal",
                        decision_id=decided,
                        code=code.name,
                        fault=code.fault.value,
                        message=message,
                        request_id=request_id,
                        requester=requester,
                        **fields,
                    )
            except AuditLogError as error:
                # Never an unrecorded refusal that looks recorded: the answer says why.
                message = f"the {code.name} refusal could not be recorded: {error}"
                code, decided = ErrorCode.AUDIT_FAILED, None
        self.counters[f"refusal:{code.name}"] += 1
        return ErrorResponse(request_id, code.name, message, decided)

    # -- the submit pipeline

    async def submit(
        self,
        submit: Submit,
        transport: SubmitTransport,
        requester: dict[str, Any],
        peer: str,
        *,
        started: int | None = None,
    ) -> bool:
        """Run one submit through the stages (rule 1); True when the transport may carry
        another request. ``started`` (``perf_counter_ns``): when the request began, if its
        transport read part of it before (HTTP reads the body first); default now."""
        started = time.perf_counter_ns() if started is None else started
        request = _Request(submit, requester, peer)
        try:
            session = self.bounds(request)
            binding = request.binding = self.parse_binding(request)
            self.acquire_capacity(request)
        except Refused as refused:
            return await self._refuse(request, transport, refused)
        try:
            try:
                items = await self.read_evidence(request, transport)
                received = time.perf_counter_ns()
                frame = await self._decide(
                    request, session, binding, items, transport, started, received
                )
            except Refused as refused:
                return await self._refuse(request, transport, refused)
            return await self.send_answer(frame, transport)
        except trio.Cancelled:
            await self._record_cancellation(request)
            raise
        finally:
            self.release_capacity(request)

    async def submit_body(
        self,
        request_id: int,
        name: str,
        transport: BodyTransport,
        requester: dict[str, Any],
        peer: str,
        *,
        started: int,
    ) -> bool:
        """A submit whose header travels inside its body (HTTP), admitted once by the same
        stages in the order a body allows: the session (stage 1's lookup) and capacity
        (stage 3) before a body byte is read; the body read by the transport, bounded by
        that session (stage 4); stage 1's bounds on the items received, against the *same*
        session, and stage 2; then stages 5-8. A request so admitted finishes under the
        session (the configuration generation) it was admitted by."""
        request = _Request(Submit(request_id, name, {}, ()), requester, peer)
        request.context = {"session": echo(name)}  # the sizes are known once read
        try:
            session = self.session_named(name)
            self.acquire_capacity(request)
        except Refused as refused:
            return await self._refuse(request, transport, refused)
        try:
            try:
                try:
                    submit, items = await transport.read_request(session)
                except Refused as refused:
                    if refused.code is ErrorCode.IDLE_TIMEOUT:
                        self.peers.strike(peer)
                    raise
                received = time.perf_counter_ns()
                request.submit = submit
                request.context["declared_items"] = list(submit.item_sizes)
                self._received_since_trim += sum(submit.item_sizes)
                self.bounds(request, session)
                binding = request.binding = self.parse_binding(request)
                frame = await self._decide(
                    request, session, binding, items, transport, started, received
                )
            except Refused as refused:
                return await self._refuse(request, transport, refused)
            return await self.send_answer(frame, transport)
        except trio.Cancelled:
            await self._record_cancellation(request)
            raise
        finally:
            self.release_capacity(request)

    async def _decide(
        self,
        request: _Request,
        session: HostedSession,
        binding: BoundProposition,
        items: tuple[bytes, ...],
        transport: SubmitTransport,
        started: int,
        received: int,
    ) -> bytes:
        """Stages 5-7: evaluated, retained, recorded; the answer's bytes."""
        retaining = self.retention.start(session.name, items)  # stores while evaluating
        evaluated = await self.evaluate(session, binding, items)
        retained = await self.retain(retaining, binding, evaluated)
        _, frame = await self.record(
            request.submit.request_id,
            request.requester,
            session,
            evaluated,
            retained,
            items,
            transport.encode,
            started,
            received,
        )
        return frame

    def session_named(self, name: str) -> HostedSession:
        """Stage 1's lookup: the hosted session called ``name``."""
        session = self.sessions.get(name)
        if session is None:
            raise Refused(ErrorCode.UNKNOWN_SESSION, f"no session named '{echo(name, 64)}'")
        return session

    def bounds(self, request: _Request, session: HostedSession | None = None) -> HostedSession:
        """Stage 1: the session (``session``, when the request was admitted by it already),
        and the declared sizes within its effective bounds."""
        submit = request.submit
        if session is None:
            session = self.session_named(submit.session)
        declared = submit.item_sizes
        if len(declared) > session.effective_items:
            raise Refused(
                ErrorCode.EVIDENCE_ITEMS_EXCEEDED,
                f"{len(declared)} evidence items declared; session '{echo(session.name, 64)}' "
                f"admits {session.effective_items}{_clamp_note(session)}",
            )
        if sum(declared) > session.effective_bytes:
            raise Refused(
                ErrorCode.EVIDENCE_BYTES_EXCEEDED,
                f"{sum(declared)} evidence bytes declared; session '{echo(session.name, 64)}' "
                f"admits {session.effective_bytes}{_clamp_note(session)}",
            )
        return session

    def parse_binding(self, request: _Request) -> BoundProposition:
        """Stage 2: the bound proposition, well formed."""
        try:
            return binding_from_wire(request.submit.binding)
        except BindingWireError as error:
            raise Refused(ErrorCode.BINDING_INVALID, str(error)) from None

    def acquire_capacity(self, request: _Request) -> None:
        """Stage 3: not shutting down, a free server slot, the peer under its in-flight cap.
        Held until :meth:`release_capacity` (rule 2)."""
        if self.draining:
            raise Refused(ErrorCode.SHUTTING_DOWN, "the server is shutting down")
        try:
            self.capacity.acquire_on_behalf_of_nowait(request)
        except trio.WouldBlock:
            raise Refused(
                ErrorCode.BUSY,
                f"{self.capacity.total_tokens} requests in flight; retry later",
            ) from None
        if not self.peers.start_request(request.peer):
            self.capacity.release_on_behalf_of(request)
            raise Refused(
                ErrorCode.BUSY,
                f"{self.peers.in_flight_cap} requests in flight from this peer; retry later",
            )

    def release_capacity(self, request: _Request) -> None:
        """Undo :meth:`acquire_capacity`; after a burst, with nothing in flight, trim the
        heap."""
        self.capacity.release_on_behalf_of(request)
        self.peers.end_request(request.peer)
        self.after_release()

    def after_release(self) -> None:
        """After a request's slots are released: with nothing in flight after a burst of
        evidence, trim the heap."""
        if self.capacity.borrowed_tokens == 0 and self._received_since_trim >= TRIM_AFTER_BYTES:
            self._received_since_trim = 0
            trim_heap()

    def received_evidence(self, nbytes: int) -> None:
        """Count evidence bytes received (the heap trim's measure)."""
        self._received_since_trim += nbytes

    # -- for the fast lane (daemon.server._lane): the general path's own pieces

    def new_request(self, submit: Submit, requester: dict[str, Any], peer: str) -> _Request:
        """A submit's context, as the stages keep it (for a refusal after admission)."""
        return _Request(submit, requester, peer)

    def new_decision_id(self) -> str:
        """The next decision id."""
        return self._new_id()

    async def refuse_admitted(
        self, request: _Request, transport: SubmitTransport, refused: Refused
    ) -> bool:
        """Audit and answer the refusal of an admitted request, as the stages do (False)."""
        return await self._refuse(request, transport, refused)

    async def record_cancellation(self, request: _Request) -> None:
        """Rule 2's record of a request cancelled by a forced shutdown."""
        await self._record_cancellation(request)

    async def read_evidence(
        self, request: _Request, transport: SubmitTransport
    ) -> tuple[bytes, ...]:
        """Stage 4: the transport reads the declared items; a transport too slow to deliver
        them is a strike against its peer."""
        try:
            items = await transport.read_evidence()
        except Refused as refused:
            if refused.code is ErrorCode.IDLE_TIMEOUT:
                self.peers.strike(request.peer)
            raise
        self._received_since_trim += sum(request.submit.item_sizes)
        return items

    async def evaluate(
        self, session: HostedSession, binding: BoundProposition, items: tuple[bytes, ...]
    ) -> _Evaluated:
        """Stage 5: (result, its wire form, evaluation ns, the items' references) under the
        deadline, inline or in a worker (:mod:`daemon.server._evaluation`)."""
        result, evaluate_ns, refs = await self.evaluator_of(session).evaluate(
            session, binding, items
        )
        return result, result.to_dict(), evaluate_ns, refs

    def evaluator_of(self, session: HostedSession) -> Evaluator:
        """The evaluator of the generation ``session`` was admitted in: a request admitted
        before a reload finishes on the sessions and workers it was admitted by."""
        if self.sessions.get(session.name) is session:
            return self.evaluator
        for sessions, evaluator in self.previous:
            if sessions.get(session.name) is session:
                return evaluator
        return self.evaluator

    async def retain(
        self, retaining: _Retaining, binding: BoundProposition, evaluated: _Evaluated
    ) -> dict[str, Any]:
        """Stage 6: the evidence stored as the session retains it (started with stage 5);
        the decision line's retention fields (none without retention)."""
        wire_result = evaluated[1]
        try:
            fields: dict[str, Any] = await retaining.settle(
                wire_result["outcome"], binding, wire_result
            )
        except RetentionFailed as error:
            raise Refused(ErrorCode.AUDIT_FAILED, str(error)) from None
        return fields

    async def record(
        self,
        request_id: int,
        requester: dict[str, Any],
        session: HostedSession,
        evaluated: _Evaluated,
        retained: dict[str, Any],
        items: tuple[bytes, ...],
        encode: Callable[[Decision], bytes],
        started: int,
        received: int,
    ) -> tuple[AuditRef | None, bytes]:
        """Stage 7: the decision's audit line, and its answer encoded (``encode``: the
        transport's, or the fast lane's) from the rendered line (rule 3); the line's place
        (``None``: dropped by the overflow policy) and the answer's bytes once the line is
        durable (the decision is then counted)."""
        result, wire_result, evaluate_ns, refs = evaluated
        metrics = {
            "receive_ns": received - started,
            "evaluate_ns": evaluate_ns,
            "total_ns": time.perf_counter_ns() - started,
        }
        decided = self._new_id()
        observations = wire_result["observations"]
        codes = observations.get("reason_codes") if isinstance(observations, dict) else None
        if not isinstance(codes, list) or any(type(c) is not str for c in codes):
            codes = []
        audit = self.audit
        in_tree = audit.in_tree

        def decision(line: AuditRef | None) -> Decision:
            return Decision(
                request_id,
                decided,
                session.name,
                wire_result,
                None if line is None else line.seq,
                None if line is None else line.line_digest,
                # the transparency log's leaf (docs/spec/transparency.md §10.1)
                None if line is None or not in_tree else line.seq - 1,
                None if line is None or not in_tree else audit.last_rendered,
            )

        def answer(line: AuditRef | None) -> bytes:
            # Encoded once, right after the line is rendered and before it is written:
            # an unencodable decision is withdrawn from the log (ValueError below).
            return encode(decision(line))

        if isinstance(audit, AuditClient):
            # A worker's line is rendered by the sequencer and answered once durable: the
            # answer is tried (statelessly) first, so an unencodable one is never logged.
            try:
                encode_header(decision(PLACEHOLDER_REF).to_header())
            except ValueError as error:
                raise Refused(
                    ErrorCode.INTERNAL, f"the mechanism's decision cannot be encoded: {error}"
                ) from None

        writing = time.perf_counter_ns()
        try:
            ref, frame = await audit.record_answer(
                "decision",
                answer,
                decision_id=decided,
                request_id=request_id,
                session=session.name,
                mechanism_id=echo(result.mechanism_id),
                mechanism_digest=echo(wire_result["mechanism_digest"]),
                binding_digest=result.binding_digest,
                evidence=[
                    {"digest": ref, "size": len(item)}
                    for ref, item in zip(refs, items, strict=True)
                ],
                outcome=wire_result["outcome"],
                details=bounded_message(result.details),
                reason_codes=codes,
                observed_evidence_bytes=result.observed_evidence_bytes,
                metrics=metrics,
                requester=requester,
                **retained,
            )
        except ValueError as error:
            raise Refused(
                ErrorCode.INTERNAL, f"the mechanism's decision cannot be encoded: {error}"
            ) from None
        except AuditLogError as error:
            raise Refused(ErrorCode.AUDIT_FAILED, str(error)) from None
        self.counters["decisions"] += 1
        self.counters[f"outcome:{wire_result['outcome']}"] += 1
        if self.on_decision is not None:
            done = time.perf_counter_ns()
            self.on_decision(
                session.name,
                wire_result["outcome"],
                metrics["receive_ns"],
                evaluate_ns,
                done - writing,
                done - started,
                sum(len(item) for item in items),
            )
        return ref, frame

    def send_answer(self, frame: bytes, transport: SubmitTransport) -> Awaitable[bool]:
        """Stage 8: send the recorded decision's answer."""
        return transport.send(frame)

    # -- endings

    async def _refuse(
        self, request: _Request, transport: SubmitTransport, refused: Refused
    ) -> bool:
        if request.binding is not None:  # digested only when a refusal needs it
            request.context["binding_digest"] = request.binding.digest()
            request.context["mechanism_id"] = echo(request.binding.mechanism_id)
        answer = await self.refusal(
            request.requester,
            refused.code,
            refused.message,
            request_id=request.submit.request_id,
            **request.context,
        )
        await transport.refuse(answer)
        return False

    async def _record_cancellation(self, request: _Request) -> None:
        """Forced shutdown (grace expired or a second signal) before an answer: the request
        is still recorded, as a refusal, before the cancellation proceeds (rule 2)."""
        with (
            trio.CancelScope(shield=True),
            trio.move_on_after(2),
            contextlib.suppress(AuditLogError),
        ):
            await self.audit.record(
                "refusal",
                decision_id=self._new_id(),
                code=ErrorCode.SHUTTING_DOWN.name,
                fault=ErrorCode.SHUTTING_DOWN.fault.value,
                message="cancelled by shutdown before a decision was answered",
                request_id=request.submit.request_id,
                requester=request.requester,
                **request.context,
            )
