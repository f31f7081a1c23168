"""The HTTP/JSON API's transports on httpx: :class:`AsyncHttp` (asyncio or trio, through
httpx's anyio-based pool) and :class:`BlockingHttp` (``httpx.Client``).

Rules (the contract):

1. One ``httpx`` client per daemon client, kept for its life: a pool of keep-alive
   connections (at most :data:`MAX_CONNECTIONS`; an idle one is dropped after
   ``keepalive_expiry`` seconds, and the pool never reuses a connection the server closed),
   so concurrent calls of the async client go out on connections of their own. ``http://``,
   ``https://`` (verified against the caller's :class:`ssl.SSLContext`: a CA bundle, a
   client certificate) and ``http+unix:`` (httpx's Unix-socket transport, ``uds=``) targets.
   Nothing is read from the environment (``trust_env=False``: no proxy variables, no
   ``.netrc``): a client reaches the daemon it was given.
2. Every request carries ``User-Agent`` and, with a token, ``Authorization: Bearer``.
   httpx's own retries are off: whether a call is tried again is
   :mod:`daemon.client._retry`'s rule, and no layer below it resends anything.
3. ``connect_timeout`` bounds connecting (the TLS handshake included); the async transport
   gives the whole exchange ``request_timeout`` (a deadline), the blocking one gives it to
   each read and write (httpx's timeouts: there is no deadline without an event loop). A
   body over ``max_response_bytes`` is :class:`ServerProtocolError`, read no further.
4. httpx's failures become the room's: a timeout :class:`ClientTimeout`, no connection or a
   broken one :class:`TransportError`, an answer that is not HTTP
   :class:`ServerProtocolError`. The answer itself is read by the call
   (:mod:`daemon.client._http_calls`).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator
from typing import Any, Final, TypeVar

import anyio
import httpx

from daemon.client._http_calls import Answer, HttpCall
from daemon.client._outcomes import (
    CLIENT_NAME,
    ClientTimeout,
    ServerProtocolError,
    TransportError,
)
from daemon.client._targets import Target

__all__ = ["MAX_CONNECTIONS", "AsyncHttp", "BlockingHttp"]

T = TypeVar("T")
#: The most connections one client's pool opens to its daemon at once.
MAX_CONNECTIONS: Final = 16


def _options(
    target: Target,
    ssl_context: ssl.SSLContext | None,
    token: str | None,
    connect_timeout: float,
    request_timeout: float,
    keepalive_expiry: float,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the transport's keywords, the client's keywords) for ``target`` (rules 1-3)."""
    headers = {"User-Agent": CLIENT_NAME}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if target.scheme == "http+unix":
        base = "http://localhost"
    else:
        host = f"[{target.host}]" if target.host and ":" in target.host else target.host
        base = f"{'https' if target.tls else 'http'}://{host}:{target.port}"
    transport = {
        "verify": ssl_context if ssl_context is not None else True,
        "uds": target.path if target.scheme == "http+unix" else None,
        "retries": 0,
        "limits": httpx.Limits(
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_CONNECTIONS,
            keepalive_expiry=keepalive_expiry,
        ),
    }
    client = {
        "base_url": base,
        "headers": headers,
        "timeout": httpx.Timeout(request_timeout, connect=connect_timeout),
        "trust_env": False,
        "follow_redirects": False,
    }
    return transport, client


class _Once:
    """An async iterator over one chunk (a class, not an async generator)."""

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> _Once:
        return self

    async def __anext__(self) -> bytes:
        if self._data is None:
            raise StopAsyncIteration
        data, self._data = self._data, None
        return data


class _RequestBody(httpx.AsyncByteStream, httpx.SyncByteStream):
    """A request body that never leaves an async generator behind: httpx's own body stream
    is one, and a connection that fails while it is being sent leaves it to the garbage
    collector, which trio reports (and this project's tests treat as an error)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __aiter__(self) -> _Once:
        return _Once(self._data)

    def __iter__(self) -> Iterator[bytes]:
        return iter((self._data,))


def _request(client: httpx.Client | httpx.AsyncClient, call: HttpCall[Any]) -> httpx.Request:
    headers = {}
    if call.method == "POST":
        headers = {"Content-Type": "application/json", "Content-Length": str(len(call.body))}
    request = client.build_request(call.method, call.path, headers=headers)
    if call.body:
        request.stream = _RequestBody(call.body)
    return request


def _failure(target: Target, error: httpx.HTTPError, seconds: float) -> Exception:
    """The room's error for an httpx failure (rule 4)."""
    if isinstance(error, httpx.ConnectTimeout):
        return ClientTimeout(f"no connection within {seconds} s")
    if isinstance(error, httpx.TimeoutException):
        return ClientTimeout(f"no answer within {seconds} s")
    if isinstance(error, httpx.ConnectError):
        return TransportError(f"cannot connect to {target}: {error}")
    if isinstance(error, httpx.RemoteProtocolError) and "without sending" not in str(error):
        return ServerProtocolError(f"malformed HTTP answer: {error}")
    if isinstance(error, httpx.TransportError):
        return TransportError(f"connection lost: {error}")
    return ServerProtocolError(f"unexpected HTTP failure: {error}")


class _Body:
    """An answer body, collected up to its cap (rule 3)."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._chunks: list[bytes] = []
        self._size = 0

    def add(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._cap:
            raise ServerProtocolError(f"answer body over {self._cap} bytes")
        self._chunks.append(chunk)

    def answer(self, response: httpx.Response) -> Answer:
        return Answer(
            response.status_code,
            b"".join(self._chunks),
            response.headers.get("content-type", ""),
            response.headers.get("retry-after"),
        )


class AsyncHttp:
    """The async HTTP transport (module rules)."""

    def __init__(
        self,
        target: Target,
        *,
        ssl_context: ssl.SSLContext | None,
        token: str | None,
        connect_timeout: float,
        request_timeout: float,
        keepalive_expiry: float,
        max_response_bytes: int,
    ) -> None:
        transport, client = _options(
            target, ssl_context, token, connect_timeout, request_timeout, keepalive_expiry
        )
        self._target = target
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._cap = max_response_bytes
        self._client = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(**transport), **client)

    async def call(self, call: HttpCall[T]) -> T:
        body = _Body(self._cap)
        try:
            with anyio.fail_after(self._request_timeout):
                response = await self._client.send(_request(self._client, call), stream=True)
                try:
                    # Closed here, not by the garbage collector, whatever ends the loop.
                    chunks = response.aiter_bytes()
                    async with contextlib.aclosing(chunks):  # type: ignore[type-var]
                        async for chunk in chunks:
                            body.add(chunk)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise ClientTimeout(f"no answer within {self._request_timeout} s") from None
        except httpx.HTTPError as error:
            raise _failure(self._target, error, self._connect_timeout) from None
        return call.read(body.answer(response))

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._client.aclose()


class BlockingHttp:
    """The blocking HTTP transport (module rules)."""

    def __init__(
        self,
        target: Target,
        *,
        ssl_context: ssl.SSLContext | None,
        token: str | None,
        connect_timeout: float,
        request_timeout: float,
        keepalive_expiry: float,
        max_response_bytes: int,
    ) -> None:
        transport, client = _options(
            target, ssl_context, token, connect_timeout, request_timeout, keepalive_expiry
        )
        self._target = target
        self._connect_timeout = connect_timeout
        self._cap = max_response_bytes
        self._client = httpx.Client(transport=httpx.HTTPTransport(**transport), **client)

    def call(self, call: HttpCall[T]) -> T:
        body = _Body(self._cap)
        try:
            response = self._client.send(_request(self._client, call), stream=True)
            try:
                for chunk in response.iter_bytes():
                    body.add(chunk)
            finally:
                response.close()
        except httpx.HTTPError as error:
            raise _failure(self._target, error, self._connect_timeout) from None
        return call.read(body.answer(response))

    def close(self) -> None:
        self._client.close()
