"""The honest binding of evidence files for a hosted session, built on the client's side.

What ``evidenced submit`` without ``--binding`` and the clients' ``submit_files`` share: the
session's one mechanism, as the daemon's ``sessions`` answer announces it, and the installed
provider of that mechanism id building the binding.

Rules (the contract):

1. :func:`session_mechanism` finds the session in a ``sessions`` answer and its one mechanism
   entry: no such session is :class:`HonestBindingError` ``UNKNOWN_SESSION``; a session of
   several mechanisms is ``SEVERAL_MECHANISMS`` (pass a binding).
2. :func:`honest_binding` builds the binding with the one installed provider of the announced
   mechanism id (``MechanismProvider.client_binding`` over a :class:`session.Announcement`:
   the digest, the ``pinned`` parameters of a host's non-default policy, and the
   ``accepted_bounds`` a host that lowered a limit accepts). No provider is ``NO_PROVIDER``,
   several ``SEVERAL_PROVIDERS``, the wrong number of files ``EVIDENCE_COUNT``; files the
   provider cannot bind raise its own :class:`ValueError` (the CLI's ``BINDING_UNBUILDABLE``).
   Nothing is sent: these are the caller's errors, found before a request.
3. The provider registry loads when a binding is built, not with this module (a client that
   passes its own bindings never loads it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from daemon.client._outcomes import ClientError
from daemon.wire._errors import PeerError
from session import BoundProposition

__all__ = ["HonestBindingError", "honest_binding", "session_mechanism"]


class HonestBindingError(ClientError, PeerError):
    """No honest binding can be built for these files in this session (``reason`` says why:
    ``UNKNOWN_SESSION``, ``SEVERAL_MECHANISMS``, ``NO_PROVIDER``, ``SEVERAL_PROVIDERS``,
    ``EVIDENCE_COUNT``). All but the last are answered by passing the binding itself."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def session_mechanism(sessions: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    """The announced mechanism entry of session ``name`` (rule 1)."""
    hosted = {item["name"]: item for item in sessions}
    session = hosted.get(name)
    if session is None:
        raise HonestBindingError(
            "UNKNOWN_SESSION", f"the server hosts no session {name!r} (it hosts {sorted(hosted)})"
        )
    mechanisms = session["mechanisms"]
    if len(mechanisms) != 1:
        raise HonestBindingError("SEVERAL_MECHANISMS", f"session {name!r} hosts several mechanisms")
    mechanism: dict[str, Any] = mechanisms[0]
    return mechanism


def honest_binding(mechanism: Mapping[str, Any], files: Sequence[bytes]) -> BoundProposition:
    """The honest binding of ``files`` for the announced ``mechanism`` (rule 2)."""
    # The provider contract and registry load only to build a binding (rule 3).
    from session import Announcement, EvidenceCountError, providers_for_mechanism

    mechanism_id = mechanism["mechanism_id"]
    found = providers_for_mechanism(mechanism_id)
    if not found:
        raise HonestBindingError(
            "NO_PROVIDER", f"no installed provider for mechanism {mechanism_id!r}"
        )
    if len(found) > 1:
        names = sorted(f"{entry.name} ({entry.distribution})" for entry, _ in found)
        raise HonestBindingError(
            "SEVERAL_PROVIDERS",
            f"mechanism {mechanism_id!r} has several providers {names}",
        )
    ((_, provider),) = found
    announcement = Announcement.from_wire(mechanism)
    try:
        return provider.client_binding(list(files), announcement)
    except EvidenceCountError as error:
        raise HonestBindingError("EVIDENCE_COUNT", str(error)) from None
