"""Outgoing-state tracking for the sans-IO codec: what each side may send, and when.

The frame reader (:mod:`daemon.wire._protocol`) checks what the *peer* sends; this module checks
what *we* send, as h11 does: a connection object refuses to encode an event the protocol
forbids in its current state. Such a refusal is :class:`LocalProtocolError`: a bug in the
code driving the connection, never the peer's fault, so it is not a
:class:`~daemon.wire._protocol.ProtocolError` and has no wire code. The check runs before the
event is encoded and the state moves only once the event was encoded, so a refused or
unencodable event changes nothing.

Events are named by their wire ``kind``; :data:`ANSWER_KIND` pairs each request with its
answer. Rules (the contract):

Server (:class:`ServerSendState`). Each request the reader delivers (``hello`` included) is
owed one answer; answers go out in the order the requests came in (protocol rule 5 keeps that
queue at most one long for a well-behaved host).

1. An answer (anything but ``error``) must answer the oldest owed request: its kind is that
   request's :data:`ANSWER_KIND` and its ``request_id`` is the request's. So nothing but an
   ``error`` goes out before the ``hello`` was answered, and no answer goes out for a request
   never received.
2. A ``decision`` answers a ``submit`` (a ``decisions`` a ``submit_batch``) only once that
   request's evidence was delivered.
3. An ``error`` may go out at any time, with ``request_id`` null or the id of the latest
   request received. It is the connection's last frame: afterwards nothing may be sent.

Client (:class:`ClientSendState`):

====================  ==========================  ==================
state                 event                       next state
====================  ==========================  ==================
``START``             send ``hello``              ``AWAIT_HELLO``
``AWAIT_HELLO``       receive ``hello``           ``IDLE``
``IDLE``              send a request (not hello)  ``AWAIT_ANSWER``
``AWAIT_ANSWER``      receive its answer's kind   ``IDLE``
any                   receive ``error``           ``CLOSED``
====================  ==========================  ==================

4. Any other send is refused: nothing before ``hello``, a second ``hello``, a request before
   the ``hello`` was answered or while another request awaits its answer (one request at a
   time), anything after an ``error``. Received events not in the table leave the state
   unchanged (whether an answer fits its request is the receiving host's check).
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Final

from daemon.wire._errors import LocalProtocolError

__all__ = ["ANSWER_KIND", "ClientSendState", "LocalProtocolError", "ServerSendState"]

#: Each request kind → the kind of its answer.
ANSWER_KIND: Final = {
    "hello": "hello",
    "list": "sessions",
    "health": "health",
    "submit": "decision",
    "submit_batch": "decisions",
    "checkpoint": "checkpoint",
    "inclusion_proof": "inclusion_proof",
    "consistency_proof": "consistency_proof",
}
ERROR_KIND: Final = "error"
#: Requests followed by evidence: answerable once it was delivered (rule 2).
EVIDENCE_KINDS: Final = frozenset({"submit", "submit_batch"})


class ServerSendState:
    """What the server owes and may send (rules 1-3)."""

    __slots__ = ("_closed", "_latest_id", "_owed")

    def __init__(self) -> None:
        # (request kind, request id, answerable) for each request received, oldest first.
        self._owed: deque[tuple[str, int | None, bool]] = deque()
        self._latest_id: int | None = None
        self._closed = False

    def received(self, kind: str, request_id: int | None) -> None:
        """The reader delivered a request; a ``submit`` (``submit_batch``) is answerable once
        its evidence is."""
        self._owed.append((kind, request_id, kind not in EVIDENCE_KINDS))
        self._latest_id = request_id

    def evidence_received(self) -> None:
        """The reader delivered the evidence of the latest ``submit`` (``submit_batch``)."""
        kind, request_id, _ = self._owed[-1]
        self._owed[-1] = (kind, request_id, True)

    def check(self, kind: str, request_id: int | None) -> None:
        """Raise :class:`LocalProtocolError` unless sending this event is allowed now."""
        if self._closed:
            raise LocalProtocolError(f"cannot send {kind!r}: an error was already sent")
        if kind == ERROR_KIND:
            if request_id is not None and request_id != self._latest_id:
                raise LocalProtocolError(
                    f"cannot send an error for request {request_id}: no such request received"
                )
            return
        if not self._owed:
            raise LocalProtocolError(f"cannot send {kind!r}: no request awaits an answer")
        owed_kind, owed_id, answerable = self._owed[0]
        if ANSWER_KIND[owed_kind] != kind:
            hint = " (hello has not been answered)" if owed_kind == "hello" else ""
            raise LocalProtocolError(
                f"cannot send {kind!r}: the oldest request awaiting an answer is "
                f"{owed_kind!r}{hint}"
            )
        if owed_kind != "hello" and request_id != owed_id:
            raise LocalProtocolError(
                f"cannot send {kind!r} for request {request_id}: request {owed_id} awaits it"
            )
        if not answerable:
            raise LocalProtocolError(f"cannot send {kind!r}: the evidence was not received")

    def sent(self, kind: str) -> None:
        """Record a sent event that :meth:`check` allowed."""
        if kind == ERROR_KIND:
            self._closed = True
            self._owed.clear()
        else:
            self._owed.popleft()


class ClientState(enum.Enum):
    START = "START"
    AWAIT_HELLO = "AWAIT_HELLO"
    IDLE = "IDLE"
    AWAIT_ANSWER = "AWAIT_ANSWER"
    CLOSED = "CLOSED"


class ClientSendState:
    """What the client may send (rule 4 and the table)."""

    __slots__ = ("awaited", "state")

    def __init__(self) -> None:
        self.state = ClientState.START
        #: The answer kind awaited in ``AWAIT_HELLO`` / ``AWAIT_ANSWER``.
        self.awaited: str | None = None

    def check(self, kind: str) -> None:
        """Raise :class:`LocalProtocolError` unless sending a ``kind`` request is allowed."""
        state = self.state
        if state is ClientState.START and kind == "hello":
            return
        if state is ClientState.IDLE and kind != "hello" and kind in ANSWER_KIND:
            return
        reasons = {
            ClientState.START: "the first request must be hello",
            ClientState.AWAIT_HELLO: "hello has not been answered",
            ClientState.IDLE: "hello was already sent" if kind == "hello" else "not a request",
            ClientState.AWAIT_ANSWER: "another request awaits its answer",
            ClientState.CLOSED: "the server answered with an error (the connection is over)",
        }
        raise LocalProtocolError(f"cannot send {kind!r}: {reasons[state]}")

    def sent(self, kind: str) -> None:
        self.state = ClientState.AWAIT_HELLO if kind == "hello" else ClientState.AWAIT_ANSWER
        self.awaited = ANSWER_KIND[kind]

    def received(self, kind: str) -> None:
        if kind == ERROR_KIND:
            self.state, self.awaited = ClientState.CLOSED, None
        elif (
            self.state in (ClientState.AWAIT_HELLO, ClientState.AWAIT_ANSWER)
            and kind == self.awaited
        ):
            self.state, self.awaited = ClientState.IDLE, None
