"""What the ``sessions`` answer (and ``daemon_start``) says about each hosted session.

Rules (the contract):

1. Sessions are described in name order: ``name``, the effective ``bounds`` (what the server
   enforces), the ``declared_bounds`` (before the clamp to the mechanisms; :mod:`daemon.
   _hosting`) and its ``mechanisms`` in the session's registration order.
2. Each mechanism: ``mechanism_id``, ``mechanism_digest``, ``accepted_bounds`` (what it
   states it accepts, or null) and ``catalog_entry``: the catalog's description of the
   mechanism, or null when no catalog is installed, it has no entry, or the entry cannot be
   encoded as a header (a description never breaks the answer).
3. Computed once, when the server is built: the answer does not change while it runs.
"""

from __future__ import annotations

from typing import Any

from daemon.config._hosting import HostedSession
from daemon.wire._protocol import encode_header
from session import EvidenceStore, VerificationMechanism, VerificationSession, accepted_bounds

__all__ = ["describe_sessions"]


def catalog_entry(mechanism_id: str) -> dict[str, Any] | None:
    """The catalog's description of the mechanism, or None (rule 2)."""
    try:
        from catalog import entry_for_mechanism
    except ImportError:
        return None
    try:
        entry = entry_for_mechanism(mechanism_id)
        if entry is None:
            return None
        encode_header({"entry": entry})
        return dict(entry)
    except Exception:
        return None


def announced(mechanism: VerificationMechanism) -> dict[str, str]:
    """What the mechanism's provider says a client must pin (``MechanismProvider.announce``):
    ``{}`` when no single installed provider makes this mechanism id, or it says nothing
    usable (a provider's bug never keeps the daemon from starting)."""
    from session import providers_for_mechanism

    try:
        found = providers_for_mechanism(mechanism.mechanism_id)
        if len(found) != 1:
            return {}
        pinned = dict(found[0][1].announce(mechanism))
        encode_header({"pinned": pinned})
    except Exception:
        return {}
    if not all(type(key) is str and type(value) is str for key, value in pinned.items()):
        return {}
    return pinned


def describe_sessions(sessions: dict[str, HostedSession]) -> list[dict[str, Any]]:
    """The ``sessions`` answer's list (rule 1)."""
    described = []
    for name in sorted(sessions):
        session = sessions[name]
        probe = VerificationSession(EvidenceStore())
        for mechanism in session.mechanisms:
            probe.register(mechanism)
        mechanisms = []
        for mechanism in probe.registered_mechanisms():
            accepted = accepted_bounds(mechanism)
            mechanisms.append(
                {
                    "mechanism_id": mechanism.mechanism_id,
                    "mechanism_digest": mechanism.mechanism_digest,
                    "accepted_bounds": None if accepted is None else accepted.to_dict(),
                    "catalog_entry": catalog_entry(mechanism.mechanism_id),
                    "pinned": announced(mechanism),
                }
            )
        described.append(
            {
                "name": name,
                "bounds": session.bounds(),
                "declared_bounds": session.declared_bounds(),
                "mechanisms": mechanisms,
            }
        )
    return described
