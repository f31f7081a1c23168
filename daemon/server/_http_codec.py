"""The HTTP/1.1 front end's sans-IO codec: bytes in, request events out; answers in, bytes out.

Built on ``httptools`` (llhttp) for the common request and ``h11`` (one
:class:`h11.Connection` per request cycle) for the rest (rule 7), with the limits both leave to
their host. Nothing here touches a socket, a clock or a file; the trio listener
(:mod:`daemon.server._http_server`) moves bytes and keeps the deadlines.

Rules (the contract):

1. Head first, bounded. Until a request head is complete its bytes are only buffered and
   scanned for the blank line that ends it: more than ``max_header_bytes`` without one, or a
   head longer than that, is ``HEADER_TOO_LARGE`` (431) whatever the read sizes; more than
   ``max_headers`` header fields is ``HEADER_TOO_LARGE`` too. Only a head within both limits
   is handed to h11, whose parse errors (a bad request line, a bad header, conflicting
   ``Content-Length`` values, a transfer coding other than ``chunked``) are
   ``HEADER_INVALID`` (400).
2. Framing is unambiguous or refused (``HEADER_INVALID``, 400): ``Content-Length`` or
   ``Host`` or ``Transfer-Encoding`` given twice (even with equal values), both
   ``Content-Length`` and ``Transfer-Encoding``, a request target that is not a path
   (origin form), a path that is not UTF-8 once percent-decoded.
3. Routes: those of the one route table (:data:`daemon.server._routes.TABLE`, its rule 2:
   :data:`ROUTES` the exact paths, the session paths ``POST /v1/sessions/{name}/decisions``
   and ``...:batch``, the tile prefix); a query string is ignored here (the log routes read
   theirs). A known path asked with another method (``HEAD`` included) is ``UNKNOWN_KIND``
   with status 405 and ``Allow``; any other path is ``UNKNOWN_KIND`` (404). A route is
   checked when its head arrives, before any body byte is read.
4. Bodies are read only after the host accepts them (:meth:`HttpServerCodec.accept_body`
   with a byte limit): a declared ``Content-Length`` over the limit is refused at once, before
   a byte of the body is read (the host then answers without reading it); body bytes, chunked
   or not, are counted as they arrive and refused the moment they pass the limit. A client
   that asked ``Expect: 100-continue`` is told to continue only then
   (:meth:`~HttpServerCodec.continue_bytes`). A ``GET`` body is refused (limit 0). The
   stream ending inside a head or a body is ``TRUNCATED_FRAME``; ending between requests is
   :data:`CLOSED`.
5. Answers. h11 parses; answers are framed here, from fixed fields only (status line,
   ``Content-Type``, ``Content-Length``, ``Server``, the refusal's own fields):
   :meth:`~HttpServerCodec.respond` frames one complete answer per request (a second is a
   ``RuntimeError``, our bug); :meth:`~HttpServerCodec.refuse` frames a refusal
   (:mod:`daemon.server._http_errors`) with ``Connection: close`` and puts the codec in its closed
   state. After an answer, :meth:`~HttpServerCodec.next_cycle` is True when the connection
   may carry another request: HTTP/1.1, no ``Connection: close`` from the client, and the
   request read to its end when it was answered (else the answer says ``Connection:
   close``); bytes the client already sent for the next request (pipelining) are kept, in
   order.
6. The codec raises :class:`~daemon.server._http_errors.HttpRefusal` for every peer error and
   nothing else for peer bytes.
7. Two parsers, one behaviour. A complete head (rule 1) whose request line matches h11's own
   grammar with version 1.0 or 1.1, that llhttp parses, that repeats no field, names no
   ``Transfer-Encoding`` or ``Expect`` and (1.1) has a ``Host``, is parsed by llhttp (about a
   twentieth of h11's cost; docs/benchmarks.md) and its body framed here by its
   ``Content-Length``. Every other head goes to h11 exactly as before, which accepts it or
   words its refusal. Either way the events, refusals and words are the same
   (``tests/daemon/test_http_codec_llhttp.py`` holds the two paths equal on any head).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from http import HTTPStatus
from typing import Final
from urllib.parse import unquote_to_bytes

import attrs
import h11
import httptools

from daemon.config._http_config import DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_HEADERS
from daemon.server._http_errors import HttpRefusal, error_document
from daemon.server._routes import EXACT_ROUTES, SESSION_PATTERN, TILE_PREFIX, Route
from daemon.wire._echo import echo
from daemon.wire._protocol import ErrorCode

__all__ = [
    "CLOSED",
    "END_OF_BODY",
    "NEED_DATA",
    "ROUTES",
    "HttpServerCodec",
    "RequestHead",
    "Route",
    "route",
]

SERVER_HEADER: Final = "evidenced"


class _Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"
    END_OF_BODY = "END_OF_BODY"
    CLOSED = "CLOSED"


NEED_DATA: Final = _Sentinel.NEED_DATA
END_OF_BODY: Final = _Sentinel.END_OF_BODY
CLOSED: Final = _Sentinel.CLOSED


#: Path → (route, the one method it answers); with ``TILE_PREFIX`` (``GET /tile/...``, parsed
#: by daemon.server._http_tlog) and the session paths' pattern (``{name}`` matched by
#: :func:`route`), derived from the one route table (daemon.server._routes).
ROUTES: Final = EXACT_ROUTES
_SUBMIT_PATH: Final = SESSION_PATTERN
_HEAD_END: Final = re.compile(rb"\r?\n\r?\n")
#: h11's own request-line grammar (``h11._abnf.request_line``), versions 1.0 and 1.1 only: a
#: head whose request line h11 would refuse never takes the llhttp path (rule 7).
_REQUEST_LINE: Final = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+ [\x21-\x7e]+ HTTP/1\.[01]\r\n")
#: Fields that must not repeat: framing (rule 2), who is asking, what the body is.
_SINGLE: Final = frozenset(
    {b"content-length", b"transfer-encoding", b"host", b"authorization", b"content-type"}
)


@attrs.frozen
class RequestHead:
    """A request head that passed rules 1-3.

    ``route`` and ``session`` (the percent-decoded ``{name}`` of a submit, else None) say what
    is asked; ``content_length`` is the declared body size (None: chunked or no body);
    ``chunked`` says the body is chunked; ``content_type`` is the media type, lower case,
    without parameters (``""`` when absent) and ``boundary`` its multipart boundary (or
    None); ``authorization`` the raw ``Authorization`` value (or None);
    ``expects_continue`` whether the client waits for ``100 Continue``; ``forwarded_for`` the
    ``X-Forwarded-For`` fields joined in order with commas (or None), which only a trusted
    proxy is believed about (:mod:`daemon.server._proxy`)."""

    method: str
    target: str
    route: Route
    session: str | None
    content_length: int | None
    chunked: bool
    content_type: str
    boundary: str | None
    authorization: str | None
    expects_continue: bool
    head_bytes: int
    forwarded_for: str | None = None


def route(method: str, path: str) -> tuple[Route, str | None]:
    """The route of ``method`` ``path`` (rule 3); :class:`HttpRefusal` when none."""
    match = _SUBMIT_PATH.match(path)
    if match is not None:
        raw = unquote_to_bytes(match.group(1))
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID, "the session name in the path is not UTF-8"
            ) from None
        if method != "POST":
            raise _wrong_method(method, "POST")
        return (Route.SUBMIT if match.group(2) is None else Route.BATCH), name
    known = ROUTES.get(path)
    if known is None and path.startswith(TILE_PREFIX):
        known = (Route.TILE, "GET")
    if known is None:
        raise HttpRefusal(ErrorCode.UNKNOWN_KIND, f"no resource at {_short(path)}")
    if method != known[1]:
        raise _wrong_method(method, known[1])
    return known[0], None


def _named_session(target: bytes) -> str | None:
    """The session a request target's path names, if it is a submit path (rule 3)."""
    path = target.split(b"?", 1)[0].decode("ascii", "replace")
    match = _SUBMIT_PATH.match(path)
    if match is None:
        return None
    try:
        return unquote_to_bytes(match.group(1)).decode("utf-8")
    except UnicodeDecodeError:
        return None


class _Fields:
    """llhttp callbacks: the request target and the header fields, as sent (a value without
    its trailing whitespace, as h11 gives it)."""

    __slots__ = ("fields", "target")

    def __init__(self) -> None:
        self.target = b""
        self.fields: list[tuple[bytes, bytes]] = []

    def on_url(self, url: bytes) -> None:
        self.target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name, value.rstrip(b" \t")))


def _parse_fast(
    head: bytes,
) -> tuple[bytes, bytes, bytes, list[tuple[bytes, bytes]], frozenset[bytes]] | None:
    """(method, target, version, fields, lower-case field names) of a complete head that
    takes the llhttp path
    (rule 7), else None: the head goes to h11, which accepts it or words its refusal."""
    if _REQUEST_LINE.match(head) is None:
        return None
    found = _Fields()
    parser = httptools.HttpRequestParser(found)
    try:
        parser.feed_data(head)
    except (httptools.HttpParserError, httptools.HttpParserUpgrade):
        return None  # h11 refuses it in its words (an upgrade: as it always did)
    version = parser.get_http_version().encode("ascii")
    lowered = [name.lower() for name, _ in found.fields]
    names = frozenset(lowered)
    if len(names) != len(lowered):
        return None  # a repeated field: h11 merges or refuses it first, in its words
    if b"transfer-encoding" in names or b"expect" in names:
        return None  # chunked bodies and 100-continue: h11 frames them
    if version == b"1.1" and b"host" not in names:
        return None  # h11 refuses it, in its words
    return parser.get_method(), found.target, version, found.fields, names


def _wrong_method(method: str, allowed: str) -> HttpRefusal:
    return HttpRefusal(
        ErrorCode.UNKNOWN_KIND,
        f"method {_short(method)} is not allowed here; use {allowed}",
        status=405,
        headers=[("Allow", allowed)],
    )


def _short(text: str) -> str:
    return echo(text, 96)


def _media_type(value: str) -> tuple[str, str | None]:
    """(``type/subtype`` lower case, the ``boundary`` parameter or None)."""
    kind, _, parameters = value.partition(";")
    boundary = None
    for parameter in parameters.split(";"):
        key, _, raw = parameter.strip().partition("=")
        if key.strip().lower() == "boundary":
            raw = raw.strip()
            if len(raw) >= 2 and raw[0] == raw[-1] == '"':
                raw = raw[1:-1]
            boundary = raw
    return kind.strip().lower(), boundary


class HttpServerCodec:
    """One server-side HTTP connection (module rules)."""

    def __init__(
        self,
        *,
        max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
        max_headers: int = DEFAULT_MAX_HEADERS,
    ) -> None:
        self.max_header_bytes = max_header_bytes
        self.max_headers = max_headers
        self._pending = bytearray()  # bytes of the next head (and what came after it)
        self._scanned = 0
        self._eof = False
        self._h11: h11.Connection | None = None
        #: The llhttp path (rule 7): the head was parsed by llhttp and the body is framed
        #: here by its Content-Length; body bytes then stay in ``_pending``.
        self._fast = False
        self._remaining = 0  # body bytes of a fast-path request still to come
        self._done = False  # the fast-path request was read to its end
        self._head: RequestHead | None = None
        self._body_limit: int | None = None
        self._body_code = ErrorCode.EVIDENCE_BYTES_EXCEEDED
        self._body_message = ""
        self._body_bytes = 0
        self._closed = False
        self._answered = False
        self._keep_alive = True
        #: Requests whose head arrived on this connection (keep-alive counts them).
        self.requests = 0
        #: The session the last parsed head's path names (a submit path, whatever its
        #: method or framing), so a refusal of that head can be audited with it; else None.
        self.named_session: str | None = None

    # -- state

    @property
    def head(self) -> RequestHead | None:
        """The current request's head, once it arrived."""
        return self._head

    @property
    def body_bytes(self) -> int:
        """Body bytes of the current request received so far."""
        return self._body_bytes

    def idle(self) -> bool:
        """No request in progress and no byte of the next one received."""
        return self._head is None and not self._pending

    # -- bytes in

    def receive_data(self, data: bytes) -> None:
        """Bytes from the peer; ``b""`` is the end of its stream."""
        if not data:
            self._eof = True
        if self._h11 is None:
            self._pending += data
        else:
            self._h11.receive_data(data)

    def next_event(self) -> RequestHead | bytes | _Sentinel:
        """The next :class:`RequestHead`, body chunk (``bytes``), :data:`END_OF_BODY`,
        :data:`NEED_DATA` or :data:`CLOSED` (module rules)."""
        if self._closed:
            return CLOSED
        if self._h11 is None and not self._fast:
            return self._next_head()
        if self._body_limit is None:
            return NEED_DATA  # the host has not accepted the body yet
        if self._fast:
            return self._next_fast_body()
        return self._next_body()

    def _next_head(self) -> RequestHead | _Sentinel:
        pending = self._pending
        match = _HEAD_END.search(pending, max(0, self._scanned - 3))
        if match is None:
            if len(pending) > self.max_header_bytes:
                raise HttpRefusal(
                    ErrorCode.HEADER_TOO_LARGE,
                    f"request head over {self.max_header_bytes} bytes",
                )
            self._scanned = len(pending)
            if self._eof:
                if pending.strip():
                    raise HttpRefusal(
                        ErrorCode.TRUNCATED_FRAME, "the stream ended inside a request head"
                    )
                self._closed = True
                return CLOSED
            return NEED_DATA
        end = match.end()
        if end > self.max_header_bytes:
            raise HttpRefusal(
                ErrorCode.HEADER_TOO_LARGE, f"request head over {self.max_header_bytes} bytes"
            )
        lines = pending.count(b"\n", 0, end)
        if lines - 2 > self.max_headers:
            raise HttpRefusal(
                ErrorCode.HEADER_TOO_LARGE, f"more than {self.max_headers} header fields"
            )
        head = bytes(pending[:end])
        fast = _parse_fast(head)
        if fast is not None:
            method, target, version, fields, names = fast
            del pending[:end]
            self._scanned = 0
            self._fast = True
            self.requests += 1
            try:
                checked = self._checked(method, target, version, fields, head, names)
            except HttpRefusal:
                self.named_session = _named_session(target)
                raise
            # a head that passed names its session exactly as _named_session reads it
            self.named_session = checked.session
            self._head = checked
            self._remaining = checked.content_length or 0
            return checked
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=self.max_header_bytes)
        connection.receive_data(bytes(pending))
        if self._eof:
            connection.receive_data(b"")
        del pending[:]
        self._scanned = 0
        self._h11 = connection
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as error:
            raise HttpRefusal(ErrorCode.HEADER_INVALID, f"malformed request: {error}") from None
        if not isinstance(event, h11.Request):  # a complete head always parses to one
            raise HttpRefusal(ErrorCode.HEADER_INVALID, "malformed request head")
        self.requests += 1
        self.named_session = _named_session(bytes(event.target))
        self._head = self._checked(
            bytes(event.method),
            bytes(event.target),
            event.http_version,
            event.headers.raw_items(),
            head,
        )
        return self._head

    def _checked(
        self,
        method_bytes: bytes,
        target: bytes,
        http_version: bytes,
        fields: Sequence[tuple[bytes, bytes]],
        head: bytes,
        names: frozenset[bytes] | None = None,
    ) -> RequestHead:
        """Rules 2-3 on a parsed head (``head``: its raw bytes, for what a parser merges;
        ``names``: the lower-case field names when the llhttp path found none repeated)."""
        seen: set[bytes] | frozenset[bytes]
        if names is not None:
            seen = _SINGLE & names
        else:
            lowered = head.lower()
            counted: set[bytes] = set()
            for name in _SINGLE:
                count = lowered.count(b"\n" + name + b":")
                if count > 1:
                    raise HttpRefusal(
                        ErrorCode.HEADER_INVALID, f"header {name.decode()} given more than once"
                    )
                if count:
                    counted.add(name)
            seen = counted
        authorization = forwarded_for = None
        content_type = ""
        expects_continue = False
        length = None
        for name, value in fields:
            lower = name.lower()
            if lower == b"content-length":
                length = value
            elif lower == b"authorization":
                authorization = value.decode("latin-1")
            elif lower == b"x-forwarded-for":
                hops = value.decode("latin-1")
                forwarded_for = hops if forwarded_for is None else f"{forwarded_for},{hops}"
            elif lower == b"content-type":
                content_type = value.decode("latin-1")
            elif lower == b"expect" and value.lower() == b"100-continue":
                expects_continue = True
            elif lower == b"connection" and b"close" in value.lower():
                self._keep_alive = False
        if http_version != b"1.1":
            self._keep_alive = False
        if b"content-length" in seen and b"transfer-encoding" in seen:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID, "both Content-Length and Transfer-Encoding given"
            )
        if not target.startswith(b"/"):
            raise HttpRefusal(ErrorCode.HEADER_INVALID, "the request target must be a path")
        method = method_bytes.decode("ascii", "replace")
        path = target.split(b"?", 1)[0].decode("ascii", "replace")
        kind, session = route(method, path)
        media, boundary = _media_type(content_type)
        return RequestHead(
            method=method,
            target=target.decode("ascii", "replace"),
            route=kind,
            session=session,
            content_length=None if length is None else int(length),
            chunked=b"transfer-encoding" in seen,
            content_type=media,
            boundary=boundary,
            authorization=authorization,
            expects_continue=expects_continue,
            head_bytes=len(head),
            forwarded_for=forwarded_for,
        )

    def accept_body(
        self, limit: int, code: ErrorCode = ErrorCode.EVIDENCE_BYTES_EXCEEDED, message: str = ""
    ) -> None:
        """Let the body be read, at most ``limit`` bytes (rule 4); over it: ``code`` with
        ``message`` (413 unless the code says otherwise). Raises at once when the declared
        ``Content-Length`` is already over it."""
        head = self._head
        assert head is not None and self._body_limit is None
        self._body_limit = limit
        self._body_code = code
        self._body_message = message or f"request body over {limit} bytes"
        if head.content_length is not None and head.content_length > limit:
            raise self._over_limit(head.content_length)

    def whole_body(self) -> bytes | None:
        """The current request's body when its head took the llhttp path (rule 7), the body
        is not accepted yet and every byte of it is already received; else None. Nothing is
        consumed (:meth:`take_body` does)."""
        if not self._fast or self._body_limit is not None or self._head is None:
            return None
        size = self._remaining
        pending = self._pending
        if len(pending) < size:
            return None
        return bytes(pending[:size])

    def take_body(self, limit: int) -> None:
        """After :meth:`whole_body`: accept the body (``limit``, rule 4) and consume it, as
        reading its events to :data:`END_OF_BODY` would."""
        assert self._fast and self._body_limit is None
        size = self._remaining
        if size > limit:  # the caller checked: never taken over its limit
            raise AssertionError("take_body over the limit")
        del self._pending[:size]
        self._body_limit = limit
        self._body_bytes = size
        self._remaining = 0
        self._done = True

    def _over_limit(self, size: int) -> HttpRefusal:
        if self._body_limit == 0:
            return HttpRefusal(ErrorCode.HEADER_INVALID, "this request takes no body")
        return HttpRefusal(self._body_code, f"{self._body_message} ({size} bytes sent)")

    def continue_bytes(self) -> bytes:
        """``100 Continue`` when the client waits for it (after :meth:`accept_body`), else
        ``b""``."""
        if self._fast:  # the llhttp path takes no Expect header (rule 7)
            return b""
        connection = self._h11
        assert connection is not None and self._body_limit is not None
        if not connection.they_are_waiting_for_100_continue:
            return b""
        data = connection.send(h11.InformationalResponse(status_code=100, headers=[]))
        return data or b""

    def _next_fast_body(self) -> bytes | _Sentinel:
        """The body of an llhttp-path request: its declared ``Content-Length`` bytes, as they
        arrive (rule 7); what follows them stays buffered for the next request."""
        assert self._body_limit is not None
        remaining = self._remaining
        if remaining == 0:
            if self._done:
                return NEED_DATA
            self._done = True
            return END_OF_BODY
        pending = self._pending
        if not pending:
            if self._eof:
                raise HttpRefusal(
                    ErrorCode.TRUNCATED_FRAME, "the stream ended inside a request body"
                )
            return NEED_DATA
        chunk = bytes(pending[:remaining])
        del pending[: len(chunk)]
        self._remaining = remaining - len(chunk)
        self._body_bytes += len(chunk)
        if self._body_bytes > self._body_limit:
            raise self._over_limit(self._body_bytes)
        return chunk

    def _next_body(self) -> bytes | _Sentinel:
        connection = self._h11
        assert connection is not None and self._body_limit is not None
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as error:
            if connection.their_state is h11.ERROR and self._eof:
                raise HttpRefusal(
                    ErrorCode.TRUNCATED_FRAME, "the stream ended inside a request body"
                ) from None
            raise HttpRefusal(ErrorCode.HEADER_INVALID, f"malformed body: {error}") from None
        if event is h11.NEED_DATA:
            return NEED_DATA
        if isinstance(event, h11.Data):
            self._body_bytes += len(event.data)
            if self._body_bytes > self._body_limit:
                raise self._over_limit(self._body_bytes)
            return bytes(event.data)
        if isinstance(event, h11.EndOfMessage):
            return END_OF_BODY
        if isinstance(event, h11.ConnectionClosed):
            raise HttpRefusal(ErrorCode.TRUNCATED_FRAME, "the stream ended inside a request body")
        raise HttpRefusal(ErrorCode.HEADER_INVALID, f"unexpected {type(event).__name__}")

    # -- bytes out

    def respond(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str = "application/json",
        headers: Sequence[tuple[str, str]] = (),
        close: bool = False,
    ) -> bytes:
        """A complete answer to the current request (rule 5): our own fixed fields and
        ``Content-Length``, ``Connection: close`` when the connection will not go on (or
        ``close``: the server ends it after this answer)."""
        if self._answered or (self._h11 is None and not self._fast):
            raise RuntimeError("respond() needs a request that has no answer yet")
        self._answered = True
        if self._fast:
            finished = self._done
        else:
            assert self._h11 is not None
            finished = self._h11.their_state is h11.DONE
        if close:
            self._keep_alive = False
        return _frame(
            status, body, content_type, headers, close=not (self._keep_alive and finished)
        )

    def refuse(self, refusal: HttpRefusal, decision_id: str | None, message: str) -> bytes:
        """A refusal's answer (rule 5), framed here rather than by h11 (there may be no
        parsed request to answer, or one h11 would answer without a body): our own fixed
        fields, ``Connection: close``; the codec is closed afterwards."""
        self._closed = True
        body = error_document(refusal.code.name, message, decision_id)
        return _frame(refusal.status, body, "application/json", refusal.headers, close=True)

    def next_cycle(self) -> bool:
        """After an answer: prepare for the next request on this connection (rule 5); False
        when the connection must close."""
        connection = self._h11
        if self._closed or (connection is None and not self._fast):
            return False
        finished = self._done if connection is None else connection.their_state is h11.DONE
        if not (self._answered and self._keep_alive and finished):
            self._closed = True
            return False
        if connection is not None:
            trailing, closed = connection.trailing_data
            self._pending = bytearray(trailing)
            self._eof = closed
        self._h11 = None
        self._fast = False
        self._remaining = 0
        self._done = False
        self._head = None
        self.named_session = None
        self._body_limit = None
        self._body_bytes = 0
        self._answered = False
        self._keep_alive = True
        return True

    def close(self) -> None:
        self._closed = True


def _frame(
    status: int,
    body: bytes,
    content_type: str,
    headers: Sequence[tuple[str, str]],
    *,
    close: bool,
) -> bytes:
    """An HTTP/1.1 answer: status line, our fields, ``Content-Length``, the body."""
    lines = [
        f"HTTP/1.1 {status} {_reason(status)}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        f"Server: {SERVER_HEADER}",
    ]
    lines.extend(f"{name}: {value}" for name, value in headers)
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
