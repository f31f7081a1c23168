"""Connecting: :func:`open_client` and the synchronous :class:`SyncClient`
(``daemon.client._client``
rules 1 and 5 state the contract).

The one module that knows both clients: it parses the target, opens (and, for TLS, handshakes)
the stream within ``connect_timeout``, and hands it to the binary
:class:`~daemon.client._client.Client` (which then says ``hello``) or to the
:class:`~daemon.client._http_client.HttpClient`. Neither client imports this module.
"""

from __future__ import annotations

import contextlib
import math
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import Any

import trio

from daemon.client._client import (
    Client,
    ClientTimeout,
    RejectedError,
    SubmitResult,
    TransportError,
)
from daemon.client._http_client import HttpClient
from daemon.client._targets import Target, parse_target
from daemon.config._tls import client_context
from session import BoundProposition


@contextlib.asynccontextmanager
async def open_client(
    url: str | None = None,
    *,
    tcp: tuple[str, int] | None = None,
    unix: str | None = None,
    token: str | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    connect_timeout: float = 5.0,
    request_timeout: float = 60.0,
    max_response_header_bytes: int = 16 * 1024 * 1024,
) -> AsyncIterator[Client]:
    """Connect (rule 1), handshake, yield a :class:`Client`, close on exit."""
    if sum(value is not None for value in (url, tcp, unix)) != 1:
        raise ValueError("give exactly one of url, tcp=(host, port) or unix=path")
    for value in (connect_timeout, request_timeout):
        if not math.isfinite(value) or value <= 0:
            raise ValueError("timeouts must be positive numbers of seconds")
    if url is not None:
        target = parse_target(url)
    elif tcp is not None:
        target = Target("tcp", tcp[0], tcp[1])
    else:
        assert unix is not None
        target = Target("unix", path=unix)
    if target.tls and ssl_context is None:
        ssl_context = client_context(ca=tls_ca, cert=tls_cert, key=tls_key)
    stream: trio.abc.Stream | None = None
    with trio.move_on_after(connect_timeout):
        stream = await _connect(target, ssl_context)
    if stream is None:
        raise ClientTimeout(f"no connection within {connect_timeout} s")
    client: Client
    if target.http:
        host = target.host or "localhost"
        client = HttpClient(
            stream,
            host=f"[{host}]:{target.port}" if ":" in host else f"{host}:{target.port}",
            token=token,
            request_timeout=request_timeout,
            max_response_bytes=max_response_header_bytes,
        )
    else:
        client = Client(
            stream,
            request_timeout=request_timeout,
            max_response_header_bytes=max_response_header_bytes,
            token=token,
        )
    if not target.http:

        async def reopen() -> trio.abc.Stream:
            stream: trio.abc.Stream | None = None
            with trio.move_on_after(connect_timeout):
                stream = await _connect(target, ssl_context)
            if stream is None:
                raise ClientTimeout(f"no connection within {connect_timeout} s")
            return stream

        client.reconnect_with(reopen, connect_timeout)
    try:
        if not target.http:
            handshake = connect_timeout
            client._request_timeout, saved = handshake, request_timeout
            await client._hello()
            client._request_timeout = saved
        yield client
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()


async def _connect(target: Target, context: ssl.SSLContext | None) -> trio.abc.Stream:
    """The connected (and, for TLS, handshaken) stream to ``target``."""
    try:
        if target.scheme == "unix":
            assert target.path is not None
            return await trio.open_unix_socket(target.path)
        assert target.host is not None and target.port is not None
        stream = await trio.open_tcp_stream(target.host, target.port)
    except OSError as error:
        raise TransportError(f"cannot connect to {target}: {error.strerror or error}") from None
    if context is None:
        return stream
    tls = trio.SSLStream(stream, context, server_hostname=target.host, https_compatible=target.http)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError as error:
        await trio.aclose_forcefully(tls)
        cause = error.__cause__ or error
        raise TransportError(f"TLS handshake with {target} failed: {cause}") from None
    return tls


class SyncClient:
    """Synchronous facade: each call connects, performs one request and closes."""

    def __init__(
        self,
        url: str | None = None,
        *,
        tcp: tuple[str, int] | None = None,
        unix: str | None = None,
        token: str | None = None,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        connect_timeout: float = 5.0,
        request_timeout: float = 60.0,
    ) -> None:
        if sum(value is not None for value in (url, tcp, unix)) != 1:
            raise ValueError("give exactly one of url, tcp=(host, port) or unix=path")
        if url is not None:
            parse_target(url)  # a malformed URL fails here, not at the first call
        self._options: dict[str, Any] = {
            "url": url,
            "tcp": tcp,
            "unix": unix,
            "token": token,
            "tls_ca": tls_ca,
            "tls_cert": tls_cert,
            "tls_key": tls_key,
            "connect_timeout": connect_timeout,
            "request_timeout": request_timeout,
        }

    def _run(self, method: str, *args: Any) -> Any:
        async def call() -> Any:
            async with open_client(**self._options) as client:
                return await getattr(client, method)(*args)

        return trio.run(call)

    def list_sessions(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._run("list_sessions")
        return result

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._run("health")
        return result

    def submit(
        self, session: str, binding: BoundProposition | dict[str, Any], evidence: Sequence[bytes]
    ) -> SubmitResult:
        result: SubmitResult = self._run("submit", session, binding, list(evidence))
        return result

    def submit_batch(
        self,
        session: str,
        pairs: Sequence[tuple[BoundProposition | dict[str, Any], Sequence[bytes]]],
    ) -> list[SubmitResult | RejectedError]:
        """The async client's ``submit_batch`` on a connection of its own."""
        copied = [(binding, list(evidence)) for binding, evidence in pairs]
        result: list[SubmitResult | RejectedError] = self._run("submit_batch", session, copied)
        return result

    def checkpoint(self) -> bytes:
        result: bytes = self._run("checkpoint")
        return result

    def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        result: list[bytes] = self._run("inclusion_proof", index, tree_size)
        return result

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        result: list[bytes] = self._run("consistency_proof", old_size, new_size)
        return result
