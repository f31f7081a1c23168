"""Raw-socket fast paths: what the socket already holds or takes is moved without a wait.

trio's stream methods always yield to the scheduler and, to read, always wait for readiness
first; a request whose bytes are already here (the common case: the whole frame arrived in one
segment) or an answer the socket buffer takes at once does not need either. These helpers go
to the descriptor directly and fall back to trio only when they would block.

Rules (the contract):

1. :func:`stream_fd` is the stream's descriptor, or -1 when it has none (then every helper
   takes trio's path). A descriptor is used only while its stream is open.
2. Reads never exceed what the codec wants (:meth:`~daemon.wire._protocol.ServerConnection.
   bytes_wanted`, at most :data:`RECEIVE_CHUNK`), so the server never holds more than the unit
   it accepted. :func:`receive_ready` reads only bytes already on the socket and returns
   :data:`~daemon.wire._protocol.NEED_DATA` when the next event would need a wait;
   :func:`next_event` waits (readability, or trio's ``receive_some`` without a descriptor)
   and returns the next event. Socket errors surface as trio reports them:
   ``BrokenResourceError`` (a reset), ``ClosedResourceError`` (the descriptor was closed).
3. :func:`send` writes what the socket takes at once, then the rest through trio within
   :data:`SEND_TIMEOUT` seconds; False means the peer is gone or too slow (never raises for
   the peer's behaviour).
4. :func:`refuse_at_once` answers a connection that has sent nothing with one frame and closes
   it synchronously: no task, no wait (an idle connection flood costs an accept, a write and a
   close each). :func:`has_unread` says whether the peer already sent bytes (then the caller
   must drain before closing, so the peer reads the answer rather than a reset).
5. :func:`half_close_and_drain` is that drain after a refusal was sent: half-close when the
   stream can (TLS cannot), then read and discard at most :data:`LINGER_BYTES` within
   :data:`LINGER_SECONDS`, never buffering them; it never raises for the peer's behaviour.
6. :func:`refuse_drained` answers a connection that may have sent bytes without a task or a
   wait: it discards what the socket already holds (at most :data:`CUT_OFF_BYTES`, never
   buffering it), writes the frame if the socket takes it now, and closes — the peer reads
   the answer, not a reset, unless it sends more afterwards. It returns False, having closed
   nothing, when more than :data:`CUT_OFF_BYTES` were waiting or the stream has no
   descriptor (the caller then refuses through a drain).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket as stdlib_socket
from typing import Any, Final

import trio

from daemon.wire._protocol import NEED_DATA, ServerConnection

#: The most bytes read from a socket in one call.
RECEIVE_CHUNK: Final = 256 * 1024
#: How long an answer may take to leave once the socket buffer is full.
SEND_TIMEOUT: Final = 5.0
#: After a refusal: how long, and how many bytes, the peer's unread bytes are drained.
LINGER_SECONDS: Final = 1.0
LINGER_BYTES: Final = 8 * 1024 * 1024
#: What a connection refused without a task may have sent (rule 6); more takes the drain.
CUT_OFF_BYTES: Final = 64 * 1024


def stream_fd(stream: trio.abc.Stream) -> int:
    """The stream's socket descriptor for the synchronous fast paths (-1: none)."""
    if not isinstance(stream, trio.SocketStream):  # e.g. TLS: no raw socket to use
        return -1
    try:
        return int(stream.socket.fileno())
    except (OSError, ValueError):
        return -1


def has_unread(stream: trio.SocketStream) -> bool:
    """Whether the peer sent bytes not read yet (a refusal then drains them before closing,
    so the peer reads the answer rather than a reset)."""
    fd = stream_fd(stream)
    if fd < 0:
        return True
    probe = stdlib_socket.socket(fileno=fd)
    try:
        return bool(probe.recv(1, stdlib_socket.MSG_PEEK | stdlib_socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False
    except OSError:
        return False
    finally:
        probe.detach()


def receive_ready(conn: ServerConnection, fd: int) -> Any:
    """The codec's next event, reading (never more than it wants) only bytes that are already
    on the socket: :data:`NEED_DATA` when it would have to wait. Errors as trio's stream
    reports them (``BrokenResourceError`` / ``ClosedResourceError``)."""
    while True:
        event = conn.next_event()
        if event is not NEED_DATA or fd < 0:
            return event
        try:
            data = os.read(fd, max(1, min(conn.bytes_wanted(), RECEIVE_CHUNK)))
        except BlockingIOError:
            return NEED_DATA
        except OSError as error:
            if error.errno in (errno.EBADF, errno.ENOTSOCK):
                raise trio.ClosedResourceError("this socket was already closed") from None
            raise trio.BrokenResourceError(f"socket connection broken: {error}") from error
        conn.receive_data(data)


async def receive_some(stream: trio.abc.Stream, conn: ServerConnection, fd: int) -> None:
    """Wait until bytes can be read: with a descriptor, for readability (the bytes are then
    read by :func:`receive_ready`); without one, read at most what the codec wants."""
    if fd >= 0:
        await trio.lowlevel.wait_readable(fd)
    else:
        conn.receive_data(
            bytes(await stream.receive_some(max(1, min(conn.bytes_wanted(), RECEIVE_CHUNK))))
        )


async def next_event(stream: trio.abc.Stream, conn: ServerConnection, fd: int) -> Any:
    """The next event, receiving at most what the codec wants (never more). Called when the
    codec needs bytes the socket does not have yet: waits first."""
    while True:
        await receive_some(stream, conn, fd)
        event = receive_ready(conn, fd)
        if event is not NEED_DATA:
            return event


async def send(stream: trio.abc.Stream, data: bytes, fd: int = -1) -> bool:
    """Send ``data``: what the socket takes at once without a wait, the rest through trio
    within :data:`SEND_TIMEOUT` seconds. False when the peer is gone or too slow."""
    if fd >= 0:  # what the socket takes at once needs no scope and no wait
        try:
            sent = os.write(fd, data)
        except BlockingIOError:
            sent = 0
        except OSError:
            return False
        if sent == len(data):
            return True
        data = data[sent:]
    with trio.move_on_after(SEND_TIMEOUT):
        try:
            await stream.send_all(data)
            return True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
    return False


async def half_close_and_drain(stream: trio.abc.Stream) -> None:
    """Half-close (when possible) and drain the peer's bytes briefly (rule 5)."""
    fd = stream_fd(stream)
    if fd >= 0:
        await _drain_fd(fd)
        return
    with trio.move_on_after(LINGER_SECONDS):
        try:
            if isinstance(stream, trio.abc.HalfCloseableStream):  # TLS has no half-close
                await stream.send_eof()
            drained = 0
            while drained < LINGER_BYTES:
                data = await stream.receive_some(RECEIVE_CHUNK)
                if not data:
                    break
                drained += len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
            pass


async def _drain_fd(fd: int) -> None:
    """:func:`half_close_and_drain` on a plain socket's descriptor: the same half-close and
    bounded drain, read straight from the descriptor (a refusal flood pays it per
    connection, and trio's stream wrappers cost more than the reads)."""
    probe = stdlib_socket.socket(fileno=fd)
    try:
        probe.shutdown(stdlib_socket.SHUT_WR)
    except OSError:
        return
    finally:
        probe.detach()
    drained = 0
    with trio.move_on_after(LINGER_SECONDS):
        while drained < LINGER_BYTES:
            try:
                data = os.read(fd, RECEIVE_CHUNK)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
                continue
            except OSError:
                return
            if not data:
                return
            drained += len(data)


def refuse_at_once(stream: trio.SocketStream, frame: bytes | None) -> None:
    """Write ``frame`` if the socket takes it now, then close the socket (rule 4)."""
    fd = stream_fd(stream)
    with contextlib.suppress(OSError):
        if fd >= 0 and frame:
            os.write(fd, frame)
    stream.socket.close()


def refuse_drained(stream: trio.SocketStream, frame: bytes | None) -> bool:
    """Discard what the peer sent so far, write ``frame``, close (rule 6); False (nothing
    done beyond the bytes discarded) when the caller must refuse through a drain."""
    fd = stream_fd(stream)
    if fd < 0:
        return False
    discarded = 0
    try:
        while True:
            data = os.read(fd, CUT_OFF_BYTES)
            if not data:
                break
            discarded += len(data)
            if discarded > CUT_OFF_BYTES:
                return False
    except BlockingIOError:
        pass
    except OSError:  # a reset: nothing to answer
        frame = None
    with contextlib.suppress(OSError):
        if frame:
            os.write(fd, frame)
    stream.socket.close()
    return True
