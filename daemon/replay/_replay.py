"""Replaying one decision line: rebuild, fetch, evaluate, compare (``docs/retention.md`` §5).

Rules (the contract), for one ``decision`` line and the session *recipe* in force for it
(the last ``daemon_start`` before it: that session's ``session_config`` entry and the
mechanism ids and digests it announced):

1. Recipe. No ``daemon_start`` before the line in the files given, no ``session_config``
   entry for the session (a host-built session), or mechanisms that cannot be built now (a
   provider not installed, options refused): ``NOT_REPLAYABLE`` with the reason.
2. Binding. The line's ``binding`` is rebuilt with the daemon's own wire rules
   (:func:`daemon.wire._binding.binding_from_wire`); a line without one (written before replay
   support) or with one that does not rebuild is ``NOT_REPLAYABLE``.
3. Mechanism change. For the mechanism the binding names: when the digest of the mechanism
   built now differs from the digest ``daemon_start`` announced for it, the decision is
   ``MECHANISM_CHANGED`` and, unless changes are allowed, it is not evaluated (the report says
   what changed: both digests, the catalog fields that differ, and the provider that built it
   then and now — entry point, distribution and version). When allowed, a binding
   that pinned the announced digest is re-pinned to the running one and evaluated; the report
   has both decisions and whether they agree (the binding digest necessarily differs).
4. Evidence. Every item the line lists is fetched by name with its logged size; the store
   re-hashes it. Missing (or a store that cannot be reached): ``EVIDENCE_UNAVAILABLE``;
   bytes that do not hash to their name: ``EVIDENCE_CORRUPT`` (never evaluated). The report
   names each item that failed.
5. Evaluation exactly as the daemon's: a fresh :class:`session.EvidenceStore` holding the
   items in the logged order, a fresh :class:`session.VerificationSession` holding the
   session's mechanisms, ``evaluate(binding)``.
6. Comparison. ``REPRODUCED`` when ``outcome``, ``details``, ``reason_codes``,
   ``observed_evidence_bytes``, ``binding_digest`` and — when the line has one —
   ``result_digest`` (the whole result, observations included) all equal the line's; else
   ``DIFFERENT``, with both decisions and the names of the fields that differ.
7. Nothing raises for a bad line or a misbehaving mechanism: every decision gets a report.
8. Not retained. A line whose ``retained`` is ``false`` (a ``retain = "refused"`` session's
   passed decision: the policy kept no evidence, by design) is ``NOT_RETAINED`` before
   anything else is tried: counted, never a fault. ``EVIDENCE_UNAVAILABLE`` stays what a kept
   item that is missing (or a store that cannot be reached) is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

import attrs
import orjson

from daemon.audit._fields import installed_providers, result_digest
from daemon.retention._store import ObjectCorrupt, ObjectMissing, RetentionStore, StoreError
from daemon.wire._binding import BindingWireError, binding_from_wire
from session import (
    BoundProposition,
    EvidenceStore,
    VerificationMechanism,
    VerificationSession,
    normalise_digest,
)

__all__ = [
    "BY_POLICY",
    "STATUSES",
    "Prepared",
    "Recipe",
    "prepare",
    "replay_decision",
]

STATUSES: Final = (
    "REPRODUCED",
    "DIFFERENT",
    "EVIDENCE_UNAVAILABLE",
    "EVIDENCE_CORRUPT",
    "MECHANISM_CHANGED",
    "NOT_REPLAYABLE",
    "NOT_RETAINED",
)
#: The statuses that are no fault of the log, the store or the mechanism (rule 8).
BY_POLICY: Final = frozenset({"NOT_RETAINED"})
#: The decision fields compared (rule 6), in report order.
COMPARED: Final = (
    "outcome",
    "details",
    "reason_codes",
    "observed_evidence_bytes",
    "binding_digest",
    "result_digest",
)


@attrs.frozen
class Recipe:
    """How a session was built at a ``daemon_start`` (seq ``start_seq``): its
    ``session_config`` entry (None when the line has none) and the announced mechanisms
    (``mechanism_id`` → ``{"mechanism_digest", "catalog_entry"}``)."""

    session: str
    start_seq: int
    config: Mapping[str, Any] | None
    announced: Mapping[str, Mapping[str, Any]]
    #: A digest naming what is built (workers cache built mechanisms under it).
    key: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        body = orjson.dumps(
            [self.session, self.config, self.announced], option=orjson.OPT_SORT_KEYS
        )
        object.__setattr__(self, "key", hashlib.sha256(body).hexdigest())


def recipes_from_start(fields: Mapping[str, Any]) -> dict[str, Recipe]:
    """Every session's recipe from one ``daemon_start`` line's fields."""
    seq = fields.get("seq")
    start_seq = seq if isinstance(seq, int) else 0
    configs = fields.get("session_config")
    configs = configs if isinstance(configs, dict) else {}
    recipes: dict[str, Recipe] = {}
    sessions = fields.get("sessions")
    for entry in sessions if isinstance(sessions, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        announced: dict[str, Mapping[str, Any]] = {}
        mechanisms = entry.get("mechanisms")
        for mechanism in mechanisms if isinstance(mechanisms, list) else []:
            if isinstance(mechanism, dict) and isinstance(mechanism.get("mechanism_id"), str):
                announced[mechanism["mechanism_id"]] = {
                    "mechanism_digest": mechanism.get("mechanism_digest"),
                    "catalog_entry": mechanism.get("catalog_entry"),
                }
        config = configs.get(entry["name"])
        recipes[entry["name"]] = Recipe(
            entry["name"], start_seq, config if isinstance(config, dict) else None, announced
        )
    return recipes


@attrs.frozen
class Prepared:
    """Mechanisms built from a recipe, or why they cannot be; and what changed per
    mechanism id since the log was written (rule 3)."""

    mechanisms: tuple[VerificationMechanism, ...] = ()
    error: str | None = None
    changes: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)


def _create(session: str, name: str, options: Mapping[str, Any]) -> VerificationMechanism:
    """The mechanism the daemon's configuration would build under ``name`` (the installed
    provider of that name, its options structured as the configuration's are)."""
    from daemon.config._config import create_mechanism

    return create_mechanism(session, name, dict(options))


def _catalog_entry(mechanism_id: str) -> Any:
    from daemon.config._describe import catalog_entry as entry

    return entry(mechanism_id)


def _change(
    mechanism: VerificationMechanism,
    announced: Mapping[str, Any] | None,
    provider: tuple[str, Any, Any] | None = None,
) -> Any:
    """What changed for ``mechanism`` (None: nothing). ``provider``: (its name, the logged
    provider entry, the installed one)."""
    running = normalise_digest(mechanism.mechanism_digest)
    if announced is None:
        return {
            "mechanism_id": mechanism.mechanism_id,
            "logged_digest": None,
            "running_digest": running,
            "what": "the log's daemon_start did not announce this mechanism",
        }
    logged = announced.get("mechanism_digest")
    try:
        if normalise_digest(logged) == running:
            return None
    except ValueError:
        pass
    before = announced.get("catalog_entry")
    now = _catalog_entry(mechanism.mechanism_id)
    changed: list[str] = []
    if isinstance(before, dict) and isinstance(now, dict):
        changed = sorted(key for key in set(before) | set(now) if before.get(key) != now.get(key))
    change = {
        "mechanism_id": mechanism.mechanism_id,
        "logged_digest": logged,
        "running_digest": running,
        "catalog_fields_changed": changed,
        "what": (
            "the mechanism's implementation digest changed (its code or compiled data differ "
            "from the logged run's)"
        ),
    }
    if provider is not None:
        name, before_provider, now_provider = provider
        change["provider"] = {"name": name, "logged": before_provider, "running": now_provider}
    return change


def prepare(recipe: Recipe) -> Prepared:
    """Build the recipe's mechanisms now (rules 1 and 3)."""
    if recipe.config is None:
        return Prepared(
            error=(
                f"daemon_start (seq {recipe.start_seq}) records no configuration for session "
                f"{recipe.session!r} (a session built from mechanism objects, not named "
                "mechanisms)"
            )
        )
    names = recipe.config.get("mechanisms")
    options = recipe.config.get("options")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return Prepared(error=f"session {recipe.session!r}: its logged configuration is malformed")
    options = options if isinstance(options, dict) else {}
    built: list[VerificationMechanism] = []
    for name in names:
        try:
            built.append(_create(recipe.session, name, options.get(name) or {}))
        except Exception as error:
            return Prepared(
                error=(
                    f"session {recipe.session!r}: mechanism {name!r} cannot be built now "
                    f"({type(error).__name__}: {error})"
                )
            )
    logged_providers = recipe.config.get("providers")
    logged_providers = logged_providers if isinstance(logged_providers, dict) else {}
    running_providers = installed_providers(names)
    changes = {}
    for name, mechanism in zip(names, built, strict=True):
        provider = (name, logged_providers.get(name), running_providers.get(name))
        change = _change(mechanism, recipe.announced.get(mechanism.mechanism_id), provider)
        if change is not None:
            changes[mechanism.mechanism_id] = change
    return Prepared(tuple(built), None, changes)


def _logged(line: Mapping[str, Any]) -> dict[str, Any]:
    return {key: line.get(key) for key in COMPARED}


def _summary(result: Mapping[str, Any]) -> dict[str, Any]:
    observations = result.get("observations")
    codes = observations.get("reason_codes") if isinstance(observations, dict) else None
    if not isinstance(codes, list) or any(type(c) is not str for c in codes):
        codes = []
    return {
        "outcome": result.get("outcome"),
        "details": result.get("details"),
        "reason_codes": codes,
        "observed_evidence_bytes": result.get("observed_evidence_bytes"),
        "binding_digest": result.get("binding_digest"),
        "result_digest": result_digest(result),
    }


def _fetch(
    line: Mapping[str, Any], store: RetentionStore | None
) -> tuple[list[bytes] | None, list[dict[str, Any]]]:
    """(items in order, or None; the items that failed, rule 4)."""
    evidence = line.get("evidence")
    if not isinstance(evidence, list):
        return None, [{"digest": None, "problem": "malformed", "reason": "no evidence list"}]
    items: list[bytes] = []
    failed: list[dict[str, Any]] = []
    for item in evidence:
        digest = item.get("digest") if isinstance(item, dict) else None
        size = item.get("size") if isinstance(item, dict) else None
        entry: dict[str, Any] = {"digest": digest, "size": size}
        if store is None:
            failed.append({**entry, "problem": "missing", "reason": "no store given"})
            continue
        try:
            items.append(store.get(str(digest), size if type(size) is int else None))
        except ObjectCorrupt as error:
            failed.append({**entry, "problem": "corrupt", "reason": str(error)})
        except ObjectMissing as error:
            failed.append({**entry, "problem": "missing", "reason": str(error)})
        except StoreError as error:
            failed.append({**entry, "problem": "unreachable", "reason": str(error)})
        except ValueError as error:
            failed.append({**entry, "problem": "missing", "reason": str(error)})
    return (None if failed else items), failed


def replay_decision(
    line: Mapping[str, Any],
    prepared: Prepared | None,
    store: RetentionStore | None,
    *,
    allow_change: bool = False,
    missing_recipe: str = "no daemon_start line precedes it in the files given",
) -> dict[str, Any]:
    """The replay report of one decision line (module rules)."""
    report: dict[str, Any] = {
        "seq": line.get("seq"),
        "decision_id": line.get("decision_id"),
        "session": line.get("session"),
        "timestamp": line.get("timestamp"),
        "mechanism_id": line.get("mechanism_id"),
    }
    if "retained" in line:
        report["retained"] = line.get("retained")
    try:
        status, fields = _replay(line, prepared, store, allow_change, missing_recipe)
    except _Done as done:
        status, fields = done.status, done.fields
    report["status"] = status
    report.update(fields)
    return report


class _Done(Exception):
    """A stage of :func:`_replay` decided the report: its status and fields, in their order."""

    def __init__(self, status: str, **fields: Any) -> None:
        super().__init__(status)
        self.status = status
        self.fields = fields


def _replay(
    line: Mapping[str, Any],
    prepared: Prepared | None,
    store: RetentionStore | None,
    allow_change: bool,
    missing_recipe: str,
) -> tuple[str, dict[str, Any]]:
    """Rules 8, 1–6 in order: the report's status and fields (a stage may raise :class:`_Done`)."""
    if line.get("retained") is False:
        return "NOT_RETAINED", {"reason": "the retention policy kept no evidence for it"}
    if prepared is None:
        return "NOT_REPLAYABLE", {"reason": missing_recipe}
    if prepared.error is not None:
        return "NOT_REPLAYABLE", {"reason": prepared.error}
    binding = _binding(line)
    change = prepared.changes.get(binding.mechanism_id)
    if change is not None and not allow_change:
        return "MECHANISM_CHANGED", {
            "evaluated": False,
            "change": dict(change),
            "reason": "not evaluated: pass --allow-mechanism-change to evaluate it anyway",
        }
    items, failed = _fetch(line, store)
    if items is None:
        corrupt = any(item["problem"] == "corrupt" for item in failed)
        return ("EVIDENCE_CORRUPT" if corrupt else "EVIDENCE_UNAVAILABLE"), {"evidence": failed}
    if change is not None:
        binding = _repinned(binding, change)
    return _compared(line, _replayed(prepared, items, binding), change)


def _binding(line: Mapping[str, Any]) -> BoundProposition:
    """Rule 2: the line's binding, rebuilt with the daemon's wire rules."""
    wire = line.get("binding")
    if wire is None:
        raise _Done(
            "NOT_REPLAYABLE",
            reason="the line records no binding (written by a daemon without replay support)",
        )
    try:
        return binding_from_wire(wire)
    except BindingWireError as error:
        raise _Done(
            "NOT_REPLAYABLE", reason=f"the logged binding does not rebuild: {error}"
        ) from None


def _repinned(binding: BoundProposition, change: Mapping[str, Any]) -> BoundProposition:
    """Rule 3 when changes are allowed: a binding that pinned the announced digest, re-pinned
    to the running one (any other binding unchanged)."""
    logged_digest = change.get("logged_digest")
    try:
        pinned = normalise_digest(binding.mechanism_digest) == normalise_digest(logged_digest)
    except ValueError:
        pinned = False
    if pinned:
        return attrs.evolve(binding, mechanism_digest=change["running_digest"])
    return binding


def _replayed(prepared: Prepared, items: list[bytes], binding: BoundProposition) -> dict[str, Any]:
    """Rule 5: the summary of a fresh session's decision (rule 7: a raise is NOT_REPLAYABLE)."""
    try:
        store_now = EvidenceStore()
        for item in items:
            store_now.add(item)
        verification = VerificationSession(store_now)
        for mechanism in prepared.mechanisms:
            verification.register(mechanism)
        result = verification.evaluate(binding).to_dict()
        return _summary(result)
    except Exception as error:
        raise _Done(
            "NOT_REPLAYABLE",
            reason=f"the evaluation raised {type(error).__name__}: {error}",
        ) from None


def _compared(
    line: Mapping[str, Any], replayed: dict[str, Any], change: Mapping[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """Rule 6 (and rule 3's evaluated change): the replayed decision against the line's."""
    logged = _logged(line)
    compared = [key for key in COMPARED if not (key == "result_digest" and logged[key] is None)]
    if change is not None:
        compared = [key for key in compared if key not in ("binding_digest", "result_digest")]
    differences = [key for key in compared if logged[key] != replayed[key]]
    if change is not None:
        return "MECHANISM_CHANGED", {
            "evaluated": True,
            "change": dict(change),
            "same_decision": not differences,
            "differences": differences,
            "logged": logged,
            "replayed": replayed,
        }
    if differences:
        return "DIFFERENT", {"differences": differences, "logged": logged, "replayed": replayed}
    return "REPRODUCED", {}
