"""The fast lane: the common HTTP submit on one straight path, the same bytes as the general one.

The general path (:meth:`daemon.server._pipeline.Pipeline.submit_body` over the HTTP front
end's body transport) admits any submit — any media type, framing, pace or refusal — through
stages, objects and hops built for all of them. Nearly every request is the same one: an
HTTP/1.1 keep-alive ``POST /v1/sessions/{name}/decisions`` to a configured session, a JSON
body already received whole, evidence within bounds, honestly bound. The lane serves that
request in one pass and hands every other one, untouched, to the general path.

Rules (the contract):

1. Taken or not, decided before any effect. :meth:`FastLane.submit` returns ``None`` — the
   request is then the general path's, exactly as if the lane did not exist (nothing read
   from the codec, no slot held, nothing counted, nothing logged) — unless all of these
   hold: the head took the codec's llhttp path (HTTP/1.x, ``Content-Length`` framing, no
   ``Expect``, no ``Transfer-Encoding``: :meth:`~daemon.server._http_codec.HttpServerCodec.
   whole_body`), its media type is ``application/json``, the session it names is hosted
   and retains no evidence (:meth:`daemon.retention.Retention.retains`), the declared
   ``Content-Length`` is within the session's body limit
   (:func:`~daemon.server._http_body.body_limit`, checked before a body byte is read), the
   whole body is already received, it parses under the general path's strict JSON rules
   (:func:`~daemon.server._http_body.parse_json`: UTF-8, no BOM, no duplicate key, no
   NaN, no lone surrogate) to exactly ``{"binding": {...}, "evidence": [{"base64": str},
   ...]}``, the items are within the session's effective bounds (counted before a byte is
   decoded), each is canonical standard base64 (``validate=True``, length a multiple of 4),
   the binding passes every field rule (:func:`~daemon.wire._binding.binding_from_wire`),
   the server is not draining and a server slot and one of the peer's in-flight slots are
   free. So every refusal, and every request that is unusual in any way, is the general
   path's, in its words.
2. Once taken, the request is the general path's stages 5-8 in one function: the body is
   consumed from the codec as if read to its end, the slots are held until the exchange
   ends (released exactly once), and the pair goes through the general path's own stage
   functions: :meth:`~daemon.server._pipeline.Pipeline.evaluate` (the session's generation's
   evaluator, inline or in a worker, under the deadline) and
   :meth:`~daemon.server._pipeline.Pipeline.record` (the line rendered once, chained, with
   its transparency leaf, appended to the open group commit; the answer's bytes built from
   the rendered line before it is written and sent once the line meets the durability
   policy; the decision counted and reported). What the lane skips is the transport around
   them, not a stage.
3. The same bytes. The answer and the audit line are byte-identical to what the general
   path writes for the same request, but for what is inherently per decision (the
   timestamps, the decision id, the chain, the measured nanoseconds);
   ``tests/daemon/test_fast_lane.py`` feeds the same requests to both and compares.
4. Failures after admission are the general path's own: an answer that cannot be encoded
   withdraws the line (``INTERNAL``), a line that cannot be written is ``AUDIT_FAILED``
   (fail-stop: the log's outage refuses every later one), a cancellation (forced shutdown)
   is recorded as a ``SHUTTING_DOWN`` refusal before it proceeds; each is answered through
   the general path's refusal (:meth:`~daemon.server._pipeline.Pipeline.refuse_admitted`).
5. Off switch: ``EVIDENCED_FAST_LANE=0`` in the daemon's environment (:func:`enabled`,
   read when a front end is built) sends every request down the general path — for
   comparison and diagnosis; it is not a configuration key.
"""

from __future__ import annotations

import base64
import binascii
import os
import time
from typing import Any, Final

import trio

from daemon.config._hosting import HostedSession, ServerConfig
from daemon.server._fastpath import send, stream_fd
from daemon.server._http_body import JSON_TYPE, body_limit, parse_json
from daemon.server._http_codec import HttpServerCodec, RequestHead
from daemon.server._http_errors import HttpRefusal
from daemon.server._pipeline import Pipeline, Refused
from daemon.wire._binding import BindingWireError, binding_from_wire
from daemon.wire._echo import echo
from daemon.wire._protocol import Decision, Submit, encode_header

__all__ = ["ENVIRONMENT", "FastLane", "enabled"]

#: The environment variable that turns the lane off (rule 5).
ENVIRONMENT: Final = "EVIDENCED_FAST_LANE"
_KEYS: Final = frozenset({"binding", "evidence"})


def enabled() -> bool:
    """Whether the lane serves (rule 5): unless ``EVIDENCED_FAST_LANE=0``."""
    return os.environ.get(ENVIRONMENT, "1").strip() != "0"


class _Bounds:
    """One hosted session's lane bounds, computed once per session object (a reload makes
    new ones)."""

    __slots__ = ("limit", "max_bytes", "max_items", "session")

    def __init__(self, session: HostedSession, config: ServerConfig) -> None:
        self.session = session
        self.max_items = min(session.effective_items, config.max_items)
        self.max_bytes = min(session.effective_bytes, config.max_frame_bytes)
        self.limit = body_limit(
            max_items=self.max_items,
            max_bytes=self.max_bytes,
            max_binding_bytes=config.max_header_bytes,
        )


class FastLane:
    """The lane of one HTTP front end (module rules)."""

    def __init__(self, front: Any) -> None:
        #: The :class:`~daemon.server._http_server.HttpFrontEnd` (its refusals, rule 4).
        self.front = front
        self.pipeline: Pipeline = front.pipeline
        self.config: ServerConfig = front.config
        self._bounds: dict[str, _Bounds] = {}

    def _bounds_of(self, name: str | None) -> _Bounds | None:
        if name is None:
            return None
        session = self.pipeline.sessions.get(name)
        if session is None:
            return None
        bounds = self._bounds.get(name)
        if bounds is None or bounds.session is not session:
            bounds = self._bounds[name] = _Bounds(session, self.config)
        return bounds

    async def submit(
        self,
        stream: trio.abc.Stream,
        connection: Any,
        codec: HttpServerCodec,
        head: RequestHead,
        requester: dict[str, Any],
        peer: str,
        number: int,
        started: int,
    ) -> bool | None:
        """Serve the submit ``head`` on the lane: True/False (the connection may go on / not)
        when taken, ``None`` when it is the general path's (rule 1)."""
        pipeline = self.pipeline
        if head.content_type != JSON_TYPE or pipeline.draining:
            return None
        bounds = self._bounds_of(head.session)
        if bounds is None or head.content_length is None or head.content_length > bounds.limit:
            return None
        session = bounds.session
        name = session.name
        if pipeline.retention.retains(name):
            return None
        body = codec.whole_body()
        if body is None:
            return None
        admitted = _admit(body, bounds)
        if admitted is None:
            return None
        wire_binding, items = admitted
        try:
            binding = binding_from_wire(wire_binding)
        except BindingWireError:
            return None
        slot = object()
        capacity = pipeline.capacity
        try:
            capacity.acquire_on_behalf_of_nowait(slot)
        except trio.WouldBlock:
            return None
        peers = pipeline.peers
        if not peers.start_request(peer):
            capacity.release_on_behalf_of(slot)
            return None
        # -- taken (rule 2): from here on, the request is this function's
        codec.take_body(bounds.limit)
        connection.in_request = True
        received = time.perf_counter_ns()
        sizes = tuple(len(item) for item in items)
        nbytes = sum(sizes)
        try:
            try:
                frame = await self._decide(
                    session, binding, items, codec, requester, number, started, received
                )
            except Refused as refused:
                request = self._request(number, name, wire_binding, sizes, requester, peer)
                request.binding = binding
                transport = self.front.submit_transport(stream, codec, number, name)
                return await pipeline.refuse_admitted(request, transport, refused)
            return await send(stream, frame, stream_fd(stream))
        except trio.Cancelled:
            request = self._request(number, name, wire_binding, sizes, requester, peer)
            await pipeline.record_cancellation(request)
            raise
        finally:
            pipeline.received_evidence(nbytes)
            capacity.release_on_behalf_of(slot)
            peers.end_request(peer)
            pipeline.after_release()
            connection.in_request = False

    def _request(
        self,
        number: int,
        name: str,
        wire_binding: dict[str, Any],
        sizes: tuple[int, ...],
        requester: dict[str, Any],
        peer: str,
    ) -> Any:
        """The general path's request context, for a failure after admission (rule 4)."""
        request = self.pipeline.new_request(
            Submit(number, name, wire_binding, sizes), requester, peer
        )
        request.context = {"session": echo(name), "declared_items": list(sizes)}
        return request

    async def _decide(
        self,
        session: HostedSession,
        binding: Any,
        items: tuple[bytes, ...],
        codec: HttpServerCodec,
        requester: dict[str, Any],
        number: int,
        started: int,
        received: int,
    ) -> bytes:
        """Stages 5 and 7 of the general path (a session that retains nothing has no stage
        6), by the pipeline's own functions: evaluated, recorded once, the answer's bytes
        once durable."""
        pipeline = self.pipeline
        evaluated = await pipeline.evaluate(session, binding, items)

        def encode(decision: Decision) -> bytes:
            return codec.respond(200, encode_header(decision.to_header()))

        ref, frame = await pipeline.record(
            number, requester, session, evaluated, {}, items, encode, started, received
        )
        if (
            ref is None
        ):  # dropped by the overflow policy, unwaited: the fair turn (front end rule 7)
            await trio.lowlevel.checkpoint()
        return frame


def _admit(body: bytes, bounds: _Bounds) -> tuple[dict[str, Any], tuple[bytes, ...]] | None:
    """(the binding's wire form, the decoded items) of a body the lane takes (rule 1), else
    None: anything the general path would refuse, or decide differently, is its own."""
    try:
        document = parse_json(body, "the request body")
    except HttpRefusal:
        return None
    if type(document) is not dict or document.keys() != _KEYS:
        return None
    binding, evidence = document["binding"], document["evidence"]
    if type(binding) is not dict or type(evidence) is not list:
        return None
    if len(evidence) > bounds.max_items:
        return None
    texts = []
    declared = 0
    for item in evidence:
        if type(item) is not dict or len(item) != 1:
            return None
        text = item.get("base64")
        if type(text) is not str or len(text) % 4:
            return None
        texts.append(text)
        if text:
            declared += len(text) // 4 * 3 - text[-2:].count("=")
    session = bounds.session
    if (
        declared > bounds.max_bytes
        or len(texts) > session.effective_items
        or declared > session.effective_bytes
    ):
        return None
    try:
        items = tuple(base64.b64decode(text, validate=True) for text in texts)
    except (binascii.Error, ValueError):
        return None
    if sum(len(item) for item in items) != declared:
        return None
    return binding, items
