"""The daemon's face of the product's error tree, and the one map from it to the CLI's exits.

The tree itself is :mod:`canon._errors` (on the floor of the lowest package, so every package's
errors share its root); its names are re-exported here for the rooms and from ``daemon``
(``daemon.EvidencedError``, …). Every exception a public API of ``daemon`` raises is an
:class:`EvidencedError` (a test walks every package). Some refusals carry the wire's own
``fault`` (``"peer"`` or ``"service"``, ``daemon.protocol.ErrorCode.fault``); where present it
decides the branch for the exit code.

:func:`exit_code` is the one place the command line maps the tree to its exit table
(``docs/cli.md``): 69 :class:`Unavailable`, 75 :class:`Busy`, 65 the peer's fault or the
caller's input (:class:`CallerError`), 70 ours.

This module imports only the tree: it lives on the floor of the rooms (the wire room), so every
room, the codec's state table included, may import it.
"""

from __future__ import annotations

from typing import Final

from session.canon._errors import (
    Busy,
    CallerError,
    EnvironmentFault,
    EvidencedError,
    LocalProtocolError,
    PeerError,
    RemoteProtocolError,
    ServiceError,
    Unavailable,
)

__all__ = [
    "Busy",
    "CallerError",
    "EnvironmentFault",
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
    return EXIT_REJECTED if isinstance(error, (PeerError, CallerError)) else EXIT_INTERNAL
