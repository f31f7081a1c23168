"""The daemon's errors: one root, two branches by whose fault it is.

::

    EvidencedError
    ├── PeerError              the other side's fault: the bytes, request, file, key, log or
    │   │                      configuration it gave us is malformed, forged, refused or over
    │   │                      a bound (a stable ``code`` where the protocol has one)
    │   └── RemoteProtocolError   the bytes received violate a protocol (EVD1, a note, …)
    └── ServiceError           ours, or our environment's: the audit log, a store, a worker,
        │                      a disk, the network
        ├── LocalProtocolError    this side was about to send what the protocol forbids (a bug)
        ├── Unavailable           the other end cannot be reached
        └── Busy                  the other end is busy or draining, or an answer took too long

Every exception a public API of ``daemon`` raises is an :class:`EvidencedError` (a test walks
the package). Some refusals carry the wire's own ``fault`` (``"peer"`` or ``"service"``,
``daemon.protocol.ErrorCode.fault``); where present it decides the branch for the exit code.

:func:`exit_code` is the one place the command line maps the tree to its exit table
(``docs/cli.md``): 69 :class:`Unavailable`, 75 :class:`Busy`, 65 the peer's fault, 70 ours.

This module imports nothing: it lives on the floor of the rooms (the wire room), so every room,
the codec's state table included, may import it; users import its classes from ``daemon``
(``daemon.EvidencedError``, …).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "Busy",
    "EvidencedError",
    "LocalProtocolError",
    "PeerError",
    "RemoteProtocolError",
    "ServiceError",
    "Unavailable",
    "exit_code",
]

EXIT_REJECTED: Final = 65
EXIT_UNREACHABLE: Final = 69
EXIT_INTERNAL: Final = 70
EXIT_BUSY: Final = 75


class EvidencedError(Exception):
    """The root of every error the daemon package raises."""


class PeerError(EvidencedError):
    """The other side's fault (module docstring)."""


class RemoteProtocolError(PeerError):
    """The bytes received violate a protocol."""


class ServiceError(EvidencedError):
    """This side's fault, or its environment's (module docstring)."""


class LocalProtocolError(ServiceError):
    """This side was about to send what the protocol forbids: a bug in this process."""


class Unavailable(ServiceError):
    """The other end cannot be reached."""


class Busy(ServiceError):
    """The other end is busy or draining, or an answer took longer than allowed."""


def exit_code(error: BaseException) -> int | None:
    """The CLI exit code of ``error`` (``None``: not an :class:`EvidencedError`)."""
    if not isinstance(error, EvidencedError):
        return None
    if isinstance(error, Busy):  # before Unavailable: a timeout is both
        return EXIT_BUSY
    if isinstance(error, Unavailable):
        return EXIT_UNREACHABLE
    fault = getattr(error, "fault", None)
    fault = getattr(fault, "value", fault)  # an enum member or its text
    if fault in ("peer", "service"):
        return EXIT_REJECTED if fault == "peer" else EXIT_INTERNAL
    return EXIT_REJECTED if isinstance(error, PeerError) else EXIT_INTERNAL
