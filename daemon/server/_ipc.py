"""Frames between the sequencer and its serving workers (``--workers N``, docs/adr/0015).

Rules (the contract):

1. A frame is a 4-byte big-endian length, then that many bytes of one JSON value (orjson).
   Both ends are processes of the same daemon, forked from one parent over a
   ``socketpair``: nothing here is exposed to a client.
2. :func:`frame` encodes one value; a value orjson cannot encode raises ``TypeError``
   (``orjson.JSONEncodeError``) and nothing is sent.
3. :class:`FrameReader` yields decoded values in order; the peer closing the stream (or
   breaking it) ends the iteration with ``None``. A length above :data:`MAX_FRAME` or a body
   that is not JSON is a broken peer: :class:`FrameError`.
4. :class:`FrameWriter` sends whole frames, one writer at a time (a lock): several tasks may
   send on one stream.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import orjson
import trio

from daemon.wire._errors import ServiceError

__all__ = ["MAX_FRAME", "FrameError", "FrameReader", "FrameWriter", "frame"]

_LENGTH: Final = struct.Struct(">I")
#: The largest frame either end accepts (a batch of audit lines is far below it).
MAX_FRAME: Final = 256 * 1024 * 1024
_CHUNK: Final = 1 << 18


class FrameError(ServiceError):
    """The peer sent something that is not a frame."""


def frame(value: Any) -> bytes:
    """One frame carrying ``value`` (rule 2)."""
    body = orjson.dumps(value)
    return _LENGTH.pack(len(body)) + body


class FrameReader:
    """Decoded frames from ``stream`` (rule 3)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()

    async def receive(self) -> Any | None:
        """The next value, or ``None`` once the peer is gone."""
        buffer = self._buffer
        while True:
            if len(buffer) >= _LENGTH.size:
                (size,) = _LENGTH.unpack_from(buffer)
                if size > MAX_FRAME:
                    raise FrameError(f"a frame of {size} bytes")
                end = _LENGTH.size + size
                if len(buffer) >= end:
                    body = bytes(buffer[_LENGTH.size : end])
                    del buffer[:end]
                    try:
                        return orjson.loads(body)
                    except orjson.JSONDecodeError as error:
                        raise FrameError(f"a frame that is not JSON: {error}") from None
            try:
                data = await self._stream.receive_some(_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            if not data:
                return None
            buffer += data


class FrameWriter:
    """Sends frames on ``stream``, one at a time (rule 4)."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self._stream = stream
        self._lock = trio.Lock()

    async def send(self, value: Any) -> bool:
        """Send one frame; False when the peer is gone."""
        data = frame(value)
        async with self._lock:
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return False
        return True
