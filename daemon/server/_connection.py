"""The connection core under both front ends: one admitted connection's life, whatever its
framing.

A front end (:mod:`daemon.server._frontend` for EVD1, :mod:`daemon.server._http_server` for
HTTP/1.1) parses its framing and maps requests to pipeline calls; everything else about a
connection is decided here, once, for both.

Rules (the contract):

1. Life. :meth:`ConnectionCore.serve` runs one connection the acceptor admitted
   (:mod:`daemon.server._listeners`: registered and counted against its peer): the TLS
   handshake (rule 2), then the front end's conversation. One bad connection never kills
   the server: a catch-all logs to stderr and lets the front end answer ``INTERNAL``
   (audited only when a request was in progress). However it ends, the connection leaves
   the server's table and its peer's count exactly once (:mod:`daemon.server._table`), and
   its stream is closed.
2. TLS. With a TLS context on a TCP connection, the handshake must complete within the
   connection's first deadline (``pre_hello_timeout`` for EVD1, ``header_timeout`` for HTTP,
   either capped by ``idle_timeout``). A failed handshake is closed unanswered and unaudited
   (it made no request); one that times out is also a strike against the peer (not one
   evicted: rule 6). A verified client certificate adds ``requester.tls_client``.
3. Authorisation is a step of every request, not a fact of the connection. With a
   ``tokens_file``, a TCP requester must present one of its tokens (EVD1: in ``hello``;
   HTTP: in each request); its name becomes ``requester.token``. A Unix socket keeps its
   peer credentials and needs none. The core keeps a *generation* of its security
   (:meth:`ConnectionCore.apply`, called by a reload): a connection remembers the generation
   it was authorised in and the SHA-256 of the token it presented (never the token), and
   every later request is authorised against the current generation
   (:meth:`ConnectionCore.reauthorise` for EVD1, :meth:`ConnectionCore.authenticate` for each
   HTTP request): the same generation costs one integer compare; a new one re-checks the
   hash against the current tokens (its name may have changed), and a token a reload removed
   is refused ``UNAUTHENTICATED`` on that request and the connection closed. An HTTP
   connection presents a token with each request (behind a proxy, many clients' tokens share
   one connection): the last one verified in the current generation is taken without hashing
   again when the next request presents the same ``Authorization`` value. A failed
   authentication is a strike and, once a peer keeps failing, delayed before it is answered
   (:mod:`daemon.server._peers` rule 4): slowed, then penalized (rule 8).
4. Refusal accounting (:meth:`ConnectionCore.refusal`, docs/operations.md "Refusal
   accounting"). A refusal is one fsync'd audit line only when its request names an
   authenticated requester: on a listener with a ``tokens_file``, one whose token was
   verified; elsewhere, one that spoke the protocol far enough (the front end says which).
   Every other refusal — no or a wrong token, bytes that are not this protocol, a request
   malformed before it names a session — is *noise*: counted per peer by
   :mod:`daemon.server._noise` and summarised in one periodic ``noise`` line, never a line
   each. Unauthenticated bytes cannot buy disk. On a listener with a ``tokens_file``, each
   peer-fault noise refusal of a requester without a valid token is also a strike (as a failed
   token is), so a peer that keeps sending garbage or unknown routes is penalized too.
5. Deadlines. A connection has its first deadline for its handshake and first request unit
   (hello, request head); after each answer the next request must arrive within
   ``idle_timeout``. A body (EVD1 evidence, an HTTP body) is read under the minimum-rate rule
   (:func:`read_at_rate`): by time t after it began, at least ``min_evidence_rate * (t -
   evidence_grace)`` bytes, within the request's own deadline; too slow is ``IDLE_TIMEOUT``.
   Whatever stage it is cut in, an ``IDLE_TIMEOUT`` is a strike (unless the server drains).
6. Draining and eviction: a connection idle between requests when the server drains is
   closed without an answer (:meth:`Connection.idle` says when); so is one evicted to make
   room for a newcomer (:mod:`daemon.server._table` rule 4), without a strike either, whatever
   it was waiting for (its TLS handshake, its next request).
7. Keep-alive and open routes. A request that names no authenticated requester never keeps
   its connection (:meth:`ConnectionCore.keeps_alive`): a probe of a route that needs no token
   (HTTP ``/health``, ``/ready``) is answered and the connection closed, so idle probes cannot
   hold connection slots; at most :data:`OPEN_ROUTE_BUDGET` probes are answered at once per
   listener (:meth:`ConnectionCore.probing`; more are ``BUSY``, noise).
8. Probation (:mod:`daemon.server._peers` rule 5: a valid token is never refused for someone
   else's strikes). A penalized peer's connection on a listener that takes tokens is admitted
   on probation (:attr:`Connection.probation`): its first deadline, TLS handshake and first
   request each, is at most :data:`~daemon.server._peers.PROBATION_SECONDS`; a valid token
   lifts it. Every refusal of a request that names no authenticated requester while its peer
   is penalized — no or a wrong token, a probe, garbage, a stall — is answered ``BUSY`` with
   the cut-off message instead (:meth:`ConnectionCore.refusal`): noise, no strike, no delay,
   the peer's window restarted. A request with a valid token is served as any.
9. Trusted proxies (HTTP, ``[http] trusted_proxies``; :mod:`daemon.server._proxy`). A
   connection from a trusted proxy is first read for a PROXY header (before TLS, within its
   first deadline): the client it names becomes the connection's peer (its share, probation
   when penalized; over its share with none of its own connections yielding, or cut off
   without a token listener, the connection is closed unanswered, ``BUSY``), and the
   requester's ``client``; a malformed header closes it unanswered. Then each request's
   ``X-Forwarded-For`` (:meth:`ConnectionCore.forwarded`) names that request's client, whose
   peer its strikes, noise, probation and in-flight share count against.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio

from daemon.config._hosting import ServerConfig
from daemon.config._security import LoadedSecurity
from daemon.config._tls import peer_identity
from daemon.config._tokens import bearer_token
from daemon.server._peers import PENALIZED, PROBATION_SECONDS, PeerLedger, peer_key
from daemon.server._pipeline import Pipeline, Refused
from daemon.server._proxy import ProxyHeaderError, TrustedProxies, read_proxy_header
from daemon.wire import _logs as logs
from daemon.wire._echo import echo
from daemon.wire._protocol import ErrorCode, ErrorResponse, Fault, ServerConnection, State

if TYPE_CHECKING:
    from daemon.server._table import ConnectionTable

__all__ = ["OPEN_ROUTE_BUDGET", "Connection", "ConnectionCore", "read_at_rate"]

T = TypeVar("T")

#: Probes (open routes asked without a valid token) answered at once per listener (rule 7).
OPEN_ROUTE_BUDGET: Final = 32
#: Refusals that are strikes where they are decided (a failed token, a cut for slowness).
_STRUCK_ALREADY: Final = frozenset({ErrorCode.UNAUTHENTICATED, ErrorCode.IDLE_TIMEOUT})


class Connection:
    """Per-connection bookkeeping the server needs for shutdown, fairness and authorisation."""

    __slots__ = (
        "codec",
        "digest",
        "evicted",
        "generation",
        "idle_scope",
        "in_request",
        "name",
        "peer",
        "presented",
        "probation",
        "waited",
    )

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.idle_scope: trio.CancelScope | None = None
        self.in_request = False
        self.codec: ServerConnection | None = None
        #: It has been answered at least once: between requests it is an idle keep-alive one.
        self.waited = False
        #: Its peer was penalized when it was admitted and it has not presented a valid
        #: token yet (rule 8); closed to make room for a newcomer (:mod:`daemon.server._table`).
        self.probation = False
        self.evicted = False
        #: Rule 3: the security generation this connection was last authorised in, the
        #: SHA-256 of the token it presented (None: none verified), and for HTTP the
        #: ``Authorization`` value last verified and its token's name.
        self.generation = 0
        self.digest: bytes | None = None
        self.presented: str | None = None
        self.name: str | None = None

    def idle(self) -> bool:
        """No request in progress and no byte of the next frame received."""
        codec = self.codec
        return not self.in_request and (
            codec is None or (codec.buffered == 0 and codec.state is State.PREFIX)
        )

    def yields(self) -> bool:
        """Whether it may be closed to make room for a newcomer (:mod:`daemon.server._table`
        rule 3): waiting, idle, and answered before or on probation."""
        return (
            self.idle_scope is not None
            and not self.evicted
            and (self.probation or self.waited)
            and self.idle()
        )

    def evict(self) -> None:
        """Close it to make room (its slot is already released): its wait is cancelled and
        its front end closes it without an answer or a strike."""
        self.evicted = True
        if self.idle_scope is not None:
            self.idle_scope.cancel()


#: A front end's conversation over a secured stream, with the requester (TLS identity added).
Converse = Callable[[trio.abc.Stream, dict[str, Any]], Awaitable[None]]
#: A front end's answer to a failure caught by the catch-all: (stream, requester, message).
Fail = Callable[[trio.abc.Stream, dict[str, Any], str], Awaitable[None]]


class ConnectionCore:
    """One listener's connection policy (module rules), shared by its front end."""

    def __init__(
        self,
        *,
        config: ServerConfig,
        pipeline: Pipeline,
        peers: PeerLedger,
        connections: ConnectionTable,
        security: LoadedSecurity,
        first_timeout: float,
        https: bool = False,
        proxies: TrustedProxies | None = None,
    ) -> None:
        self.config = config
        #: Rule 9: the proxies whose word about the client is taken (None: none).
        self.proxies = proxies or None
        self.pipeline = pipeline
        self.peers = peers
        self.connections = connections
        self.security = security
        self.first_timeout = min(config.idle_timeout, first_timeout)
        self.https = https
        #: Rule 3: bumped by every :meth:`apply` (a reload), so each connection's next
        #: request is authorised against the tokens in force.
        self.generation = 0
        #: Probes being answered (rule 7).
        self.probes = 0

    # -- life (rules 1 and 2)

    async def serve(
        self,
        stream: trio.SocketStream,
        connection: Connection,
        requester: dict[str, Any],
        converse: Converse,
        fail: Fail,
    ) -> None:
        """Serve one admitted connection until it ends (rule 1)."""
        transport: trio.abc.Stream = stream
        try:
            if self.proxies is not None and requester.get("transport") == "tcp":
                proxied = await self._proxied(stream, connection, requester)
                if proxied is None:
                    return
                requester = proxied
            secured = await self._secure(stream, connection, requester)
            if secured is None:
                return
            transport, requester = secured
            await converse(transport, requester)
        except Exception as error:  # the catch-all: one bad connection never kills the server
            detail = f"{type(error).__name__}: {echo(str(error), 256)}"
            logs.error(
                "connection_failed",
                f"connection {echo(requester)} failed: {detail}",
                requester=requester,
                error=detail,
            )
            try:
                await fail(transport, requester, f"internal error: {type(error).__name__}")
            except Exception as failure:
                logs.error(
                    "refusal_failed",
                    f"answering a failed connection failed: {echo(str(failure))}",
                    error=echo(str(failure)),
                )
        finally:
            self.connections.release(connection)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await transport.aclose()

    async def _proxied(
        self, stream: trio.SocketStream, connection: Connection, requester: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Rule 9's PROXY header: the requester (with its ``client``), or None (closed)."""
        proxies = self.proxies
        assert proxies is not None
        if not proxies.trusts(str(requester.get("peer", "")).rsplit(":", 1)[0]):
            return requester
        header, client = False, None
        with trio.move_on_after(self.first_timeout) as scope:
            connection.idle_scope = scope
            try:
                header, client = await read_proxy_header(stream.socket)
            except (ProxyHeaderError, OSError):
                self.pipeline.noise.record(connection.peer)
                return None
            finally:
                connection.idle_scope = None
        if scope.cancelled_caught or not header or client is None:
            return None if scope.cancelled_caught else requester
        who = {**requester, "client": client}
        peer = peer_key(who)
        penalized = self.peers.penalized(peer)
        if penalized and not self.requires_token(who):
            self.peers.cut_off(peer)
            refusal: str | None = PENALIZED
        else:
            refusal = self.connections.rekey(connection, peer, probation=penalized)
        if refusal is not None:
            await self.pipeline.refusal(who, ErrorCode.BUSY, refusal, audit=False)
            return None
        return who

    def forwarded(
        self, requester: dict[str, Any], peer: str, forwarded_for: str | None
    ) -> tuple[dict[str, Any], str]:
        """Rule 9: one HTTP request's requester and peer, as its ``X-Forwarded-For`` names
        them when its immediate peer is a trusted proxy (else as they are)."""
        proxies = self.proxies
        if proxies is None or forwarded_for is None:
            return requester, peer
        hop = requester.get("client") or str(requester.get("peer", "")).rsplit(":", 1)[0]
        client = proxies.client(str(hop), forwarded_for)
        if client == hop:
            return requester, peer
        who = {**requester, "client": client}
        return who, peer_key(who)

    def tls(self, requester: dict[str, Any]) -> bool:
        """Whether this connection is (to be) TLS."""
        return self.security.ssl_context is not None and requester.get("transport") == "tcp"

    async def _secure(
        self, stream: trio.SocketStream, connection: Connection, requester: dict[str, Any]
    ) -> tuple[trio.abc.Stream, dict[str, Any]] | None:
        """Rule 2: (the secured stream, the requester) or None (nothing to answer)."""
        context = self.security.ssl_context
        if context is None or requester.get("transport") != "tcp":
            return stream, requester
        tls = trio.SSLStream(stream, context, server_side=True, https_compatible=self.https)
        with trio.move_on_after(self.first_timeout_of(connection)) as scope:
            connection.idle_scope = scope  # shutdown may close it meanwhile
            try:
                await tls.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            finally:
                connection.idle_scope = None
        if scope.cancelled_caught:
            if not connection.evicted:  # rule 6
                self.strike(connection.peer)
            return None
        identity = peer_identity(tls)
        if identity is not None:
            requester = {**requester, "tls_client": identity}
        return tls, requester

    # -- deadlines (rule 5)

    def first_timeout_of(self, connection: Connection) -> float:
        """Rule 5's first deadline, shorter on probation (rule 8)."""
        if connection.probation:
            return min(self.first_timeout, PROBATION_SECONDS)
        return self.first_timeout

    def first_deadline(self, connection: Connection) -> float:
        return trio.current_time() + self.first_timeout_of(connection)

    def idle_deadline(self) -> float:
        return trio.current_time() + self.config.idle_timeout

    def answered(self, connection: Connection) -> float:
        """``connection`` was answered and waits for its next request: idle since now (it
        may yield its slot, :mod:`daemon.server._table`), until the idle deadline returned."""
        connection.waited = True
        self.connections.answered(connection)
        return self.idle_deadline()

    def strike(self, peer: str) -> None:
        """An ``IDLE_TIMEOUT`` cut: a strike, unless the server drains."""
        if not self.pipeline.draining:
            self.peers.strike(peer)

    # -- authorisation (rule 3)

    def apply(self, security: LoadedSecurity) -> None:
        """Serve with ``security`` from now on (a reload): a new generation, so every
        connection's next request is authorised against it (rule 3)."""
        self.security = security
        self.generation += 1

    def requires_token(self, requester: dict[str, Any]) -> bool:
        return self.security.tokens is not None and requester.get("transport") == "tcp"

    def authenticate(
        self, connection: Connection, requester: dict[str, Any], token: str | None
    ) -> dict[str, Any] | None:
        """The requester with the name of the ``token`` it presents (as is when none is
        required), or None; remembered on ``connection`` for its later requests (rule 3)."""
        tokens = self.security.tokens
        if tokens is None or not self.requires_token(requester):
            return requester
        digest, name = tokens.verify(token)
        connection.generation = self.generation
        if name is None:
            connection.digest = None
            return None
        connection.digest = digest
        connection.probation = False  # rule 8: a valid token lifts it
        return {**requester, "token": name}

    def authenticate_bearer(
        self, connection: Connection, requester: dict[str, Any], authorization: str | None
    ) -> dict[str, Any] | None:
        """An HTTP request's :meth:`authenticate` from its ``Authorization`` value: the same
        value as the last one verified on ``connection`` in this generation is not hashed
        again (rule 3)."""
        name = connection.name
        if (
            name is not None
            and authorization == connection.presented
            and connection.generation == self.generation
            and self.requires_token(requester)
        ):
            return {**requester, "token": name}
        asker = self.authenticate(connection, requester, bearer_token(authorization))
        connection.presented = None if asker is None else authorization
        connection.name = None if asker is None else asker.get("token")
        return asker

    def reauthorise(
        self, connection: Connection, requester: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The next request of an EVD1 connection authenticated at its ``hello``: the
        requester as authorised in the current generation, or None when a reload removed its
        token (rule 3). One integer compare while the generation is the same."""
        if connection.generation == self.generation:
            return requester
        connection.generation = self.generation
        tokens = self.security.tokens
        if connection.digest is None or tokens is None or not self.requires_token(requester):
            return requester
        name = tokens.name_of_digest(connection.digest)
        if name is None:
            connection.digest = None
            return None
        return requester if requester.get("token") == name else {**requester, "token": name}

    def authenticated(self, requester: dict[str, Any]) -> bool:
        """Whether ``requester`` names an authenticated requester (rule 4)."""
        return not self.requires_token(requester) or "token" in requester

    async def unauthenticated(self, peer: str) -> None:
        """A failed authentication: a strike, and the delay a persistent failer earns (none
        while penalized: rule 8's answer comes at once)."""
        if self.peers.penalized(peer):
            return
        delay = self.peers.auth_failure(peer)
        if delay:
            await trio.sleep(delay)

    # -- keep-alive and open routes (rule 7)

    def keeps_alive(self, requester: dict[str, Any]) -> bool:
        """Whether a request of ``requester`` may keep its connection for another."""
        return self.authenticated(requester)

    @contextlib.contextmanager
    def probing(self) -> Iterator[None]:
        """Hold one of the probes' slots while a probe is answered; :class:`Refused`
        ``BUSY`` when all are taken."""
        if self.probes >= OPEN_ROUTE_BUDGET:
            raise Refused(ErrorCode.BUSY, f"{OPEN_ROUTE_BUDGET} probes being answered; retry later")
        self.probes += 1
        try:
            yield
        finally:
            self.probes -= 1

    # -- refusals (rule 4)

    async def refusal(
        self,
        requester: dict[str, Any],
        peer: str,
        code: ErrorCode,
        message: str,
        *,
        request_id: int | None = None,
        audit: bool = True,
        noise: bool = False,
        **fields: Any,
    ) -> ErrorResponse:
        """Count ``code`` and return the answer to send: audited (one line) when ``audit``
        and the request names an authenticated requester and is not ``noise``; counted as
        noise when it would have been audited but is not (rule 4); without an authenticated
        requester from a penalized peer, the cut-off answer (rule 8)."""
        if not self.authenticated(requester) and self.peers.penalized(peer):
            self.peers.cut_off(peer)
            self.pipeline.noise.record(peer)
            return await self.pipeline.refusal(
                requester, ErrorCode.BUSY, PENALIZED, request_id=request_id, audit=False
            )
        if audit and (noise or not self.authenticated(requester)):
            self.pipeline.noise.record(peer)
            audit = False
            # Rule 4: on a token listener, peer-fault noise without a valid token (garbage,
            # an unknown route, a malformed head) is a strike as a failed token is (counted
            # there), so a peer that keeps sending it is cut off at accept like one.
            if (
                code.fault is Fault.PEER
                and code not in _STRUCK_ALREADY
                and not self.authenticated(requester)  # on a token listener, no valid token
            ):
                self.strike(peer)
        return await self.pipeline.refusal(
            requester, code, message, request_id=request_id, audit=audit, **fields
        )


async def read_at_rate(
    step: Callable[[], Awaitable[T | None]],
    received: Callable[[], int],
    *,
    config: ServerConfig,
    deadline: float,
    what: str,
) -> T:
    """Await ``step`` (one wait for bytes and what they complete) until it returns a value,
    under the minimum-rate rule and ``deadline`` (rule 5): the one read loop of a body, for
    both front ends. ``received`` is the body bytes so far. Too slow or too late is
    :class:`Refused` ``IDLE_TIMEOUT`` (the pipeline's read stage strikes the peer)."""
    begin = trio.current_time()
    while True:
        rate_deadline = begin + config.evidence_grace + received() / config.min_evidence_rate
        with trio.move_on_at(min(deadline, rate_deadline)):
            result = await step()
            if result is not None:
                return result
            continue
        if rate_deadline < deadline:
            raise Refused(
                ErrorCode.IDLE_TIMEOUT,
                f"{what} arrived slower than {config.min_evidence_rate} bytes/s "
                f"({received()} bytes in {trio.current_time() - begin:.1f} s)",
            )
        raise Refused(
            ErrorCode.IDLE_TIMEOUT,
            f"{what} was not received within {config.idle_timeout} s",
        )
