"""What the audit log records so a decision can be replayed (``docs/audit-log.md`` §1).

Rules (the contract between the daemon that writes these fields and ``evidenced replay``):

1. Every ``decision`` line carries ``binding``: the bound proposition exactly as the session
   evaluated it (:meth:`session.BoundProposition.to_dict`; evidence *references*, never
   evidence bytes), and ``result_digest``: :func:`result_digest` of the decision's ``result``
   object as answered. ``binding_digest`` stays the session's digest of ``binding``, so a
   reader can check one against the other.
2. A decision of a session with retention on also carries ``retained`` (true when every
   evidence item was stored before the answer) and ``store`` (the store's id,
   :attr:`daemon.retention.RetentionStore.id`). A session without retention writes neither.
3. ``daemon_start`` carries ``session_config``: for each session built from named mechanisms
   (the configuration file, or the embedded default), ``{"mechanisms": [names], "options":
   {name: {…}}, "providers": {name: {"value", "distribution", "version"}}, "retain",
   "store"}`` — what is needed to build the same mechanisms again, and which installed
   provider built each (so a replay can say which package changed). A session built by a
   host from mechanism objects has no entry (it cannot be rebuilt from the log).
4. :func:`result_digest` is ``sha256:`` + SHA-256 of the canonical encoding of the result
   (keys sorted, no whitespace, UTF-8: the encoding of the wire protocol's headers), so it
   covers the observations too, which the line does not copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from daemon.schema._tables import SessionTable, choices_of, default_of
from session import BoundProposition
from session.canon import digest_bytes, network_json_float_free

__all__ = ["RETAIN_MODES", "decision_fields", "result_digest", "session_config_entry"]

#: ``retain`` values: nothing, every decision's evidence, or only decisions not PASS-ed (the
#: schema's choices of ``[sessions.<name>] retain``).
RETAIN_MODES: Final = choices_of(SessionTable, "retain")
_RETAIN_DEFAULT: Final[str] = default_of(SessionTable, "retain")


def result_digest(result: Mapping[str, Any]) -> str:
    """Rule 4."""
    return digest_bytes(network_json_float_free(result))


def decision_fields(binding: BoundProposition, result: Mapping[str, Any]) -> dict[str, Any]:
    """The fields rule 1 adds to a decision line."""
    return {"binding": binding.to_dict(), "result_digest": result_digest(result)}


def session_config_entry(
    mechanisms: tuple[str, ...],
    options: Mapping[str, Mapping[str, Any]],
    retain: str = _RETAIN_DEFAULT,
    store: str | None = None,
) -> dict[str, Any]:
    """One ``session_config`` entry of ``daemon_start`` (rule 3)."""
    return {
        "mechanisms": list(mechanisms),
        "options": {name: dict(options.get(name, {})) for name in mechanisms},
        "providers": installed_providers(mechanisms),
        "retain": retain,
        "store": store,
    }


def installed_providers(names: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``{name: {"value", "distribution", "version"}}`` of the installed providers of
    ``names`` (a name with no installed provider is absent)."""
    from session import provider_entries

    return {
        entry.name: {
            "value": entry.value,
            "distribution": entry.distribution,
            "version": entry.version,
        }
        for entry in provider_entries()
        if entry.name in names
    }
