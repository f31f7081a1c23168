"""The product's errors: one root for everything evidenced raises, four branches by whose fault.

::

    EvidencedError
    ├── CallerError            the caller's input: a value, document, file or argument handed
    │                          to a library call is malformed, over a bound or refused (a
    │                          strict JSON read, a certificate, a policy, a catalog entry, an
    │                          options table: most are also ``ValueError``)
    ├── PeerError              the other side's fault: the bytes, request, file, key, log or
    │   │                      configuration it gave us is malformed, forged, refused or over
    │   │                      a bound (a stable ``code`` where the protocol has one)
    │   └── RemoteProtocolError   the bytes received violate a protocol (EVD1, a note, …)
    └── ServiceError           ours: the audit log, a store, a worker, a bug in this process
        ├── LocalProtocolError    this side was about to send what the protocol forbids (a bug)
        └── EnvironmentFault      the environment's: what must be installed, reached or waited
            │                     for is not there
            ├── Unavailable       the other end cannot be reached
            └── Busy              the other end is busy or draining, or an answer took too long

Rules (the contract):

1. Every exception class the product defines — every package: ``canon``, ``session``,
   ``mechanism``, ``catalog``, ``daemon``, ``holdout``, ``cli`` — derives from
   :class:`EvidencedError` (a test walks them all): a host's ``except EvidencedError`` catches
   anything evidenced raised on purpose. A class keeps the builtin base callers already catch
   (``ValueError``, ``TypeError``, ``OSError``, ``LookupError``, ``RuntimeError``) beside its
   branch.
2. A class sits on the branch of whose fault it is; a refusal that carries the wire's own
   ``fault`` (``"peer"`` or ``"service"``) lets that decide its exit code
   (``daemon.wire._errors.exit_code``). Error codes on the wire are the classes' ``code``
   attributes, unchanged by where the class sits.
3. This module imports nothing: it is on the floor of the lowest package, so every package may
   import it. Users import the names from ``canon`` or ``daemon`` (``daemon.EvidencedError``).
"""

from __future__ import annotations

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
]


class EvidencedError(Exception):
    """The root of every error the product raises (module docstring)."""


class CallerError(EvidencedError):
    """The caller's input is malformed, over a bound or refused (module docstring)."""


class PeerError(EvidencedError):
    """The other side's fault (module docstring)."""


class RemoteProtocolError(PeerError):
    """The bytes received violate a protocol."""


class ServiceError(EvidencedError):
    """This side's fault, or its environment's (module docstring)."""


class LocalProtocolError(ServiceError):
    """This side was about to send what the protocol forbids: a bug in this process."""


class EnvironmentFault(ServiceError):
    """What must be installed, reached or waited for is not there."""


class Unavailable(EnvironmentFault):
    """The other end cannot be reached."""


class Busy(EnvironmentFault):
    """The other end is busy or draining, or an answer took longer than allowed."""
