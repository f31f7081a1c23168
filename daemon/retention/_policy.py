"""Retention settings of the daemon's configuration (``docs/retention.md`` §6).

Rules (the contract):

1. ``[sessions.<name>]`` ``retain``: ``"none"`` (the default: evidence can be sensitive),
   ``"all"`` (every decision's evidence) or ``"refused"`` (the evidence of decisions that are
   not ``PASS``: ``FAIL`` or ``UNKNOWN``). ``store``: ``"fs:PATH"`` (relative to the
   configuration file's directory) or ``"s3://BUCKET/PREFIX"``. A session that retains needs
   a store; a store on a session that retains nothing is refused too (it would look retained).
2. ``[stores."<store as written in a session>"]``: the keys of the schema's
   :class:`~daemon.schema._tables.StoreTable` (``max_bytes``: an integer or a size such as
   ``"10GiB"``; ``max_age``: seconds or a duration such as ``"30d"``), their range rules the
   schema's: the limits ``evidenced store gc --config`` applies to that store. A key that
   names no session's store is refused.
3. Every refusal is ``ValueError`` naming the key; the configuration loader reports it as a
   configuration error.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from daemon.audit._fields import RETAIN_MODES
from daemon.retention._store import StoreSpec, parse_spec
from daemon.retention._units import parse_age, parse_size
from daemon.schema._tables import SessionTable, StoreTable, default_of, rule_of

__all__ = [
    "RETENTION_KEYS",
    "RetentionPolicy",
    "StoreLimits",
    "parse_retention",
    "parse_store_limits",
]

#: The keys a ``[sessions.<name>]`` table may carry for retention.
RETENTION_KEYS: Final = frozenset({"retain", "store"})
#: The ``retain`` values that keep evidence: every choice but the default (nothing).
_KEPT: Final = tuple(mode for mode in RETAIN_MODES if mode != default_of(SessionTable, "retain"))
#: The keys of a ``[stores."<store>"]`` table (the schema's).
_STORE_KEYS: Final = frozenset(attrs.fields_dict(StoreTable))


@attrs.frozen
class RetentionPolicy:
    """What one session retains (``"all"`` or ``"refused"``) and where; ``written`` is the
    store as the configuration spells it (the key of its limits)."""

    retain: str
    store: StoreSpec
    written: str = ""

    def __attrs_post_init__(self) -> None:
        if self.retain not in _KEPT:
            raise ValueError(f"retain must be {' or '.join(map(repr, _KEPT))}, not {self.retain!r}")


@attrs.frozen
class StoreLimits:
    """``evidenced store gc`` limits of one store (None: no limit of that kind)."""

    store: StoreSpec
    max_bytes: int | None = None
    max_age: float | None = None


def parse_retention(
    table: Mapping[str, Any], where: str, base: Path
) -> tuple[RetentionPolicy | None, str]:
    """Rule 1 for one session table: (policy or None, the ``retain`` value)."""
    retain = table.get("retain", default_of(SessionTable, "retain"))
    if type(retain) is not str or retain not in RETAIN_MODES:
        raise ValueError(f"{where} retain must be one of {list(RETAIN_MODES)}")
    store = table.get("store")
    if store is not None and type(store) is not str:
        raise ValueError(f"{where} store must be a string: fs:PATH or s3://BUCKET/PREFIX")
    if retain == "none":
        if store is not None:
            raise ValueError(f"{where} store is set but retain is 'none' (nothing is retained)")
        return None, retain
    if store is None:
        raise ValueError(f"{where} retain = {retain!r} needs a store (fs:PATH or s3://…)")
    try:
        spec = parse_spec(store, base=base)
    except ValueError as error:
        raise ValueError(f"{where} {error}") from None
    return RetentionPolicy(retain, spec, store), retain


def _check(key: str, value: object) -> None:
    """A limit given as a number, within the schema's rule of ``key``."""
    rule = rule_of(StoreTable, key)
    assert rule is not None
    rule.check(key, value)


def parse_store_limits(
    table: Mapping[str, Any], policies: Mapping[str, RetentionPolicy], where: str
) -> dict[str, StoreLimits]:
    """Rule 2: ``{store as written: limits}``."""
    written = {policy.written: policy.store for policy in policies.values()}
    limits: dict[str, StoreLimits] = {}
    for key, value in table.items():
        place = f'{where} [stores."{key}"]'
        if key not in written:
            raise ValueError(f"{place}: no session stores its evidence in {key!r}")
        if not isinstance(value, dict):
            raise ValueError(f"{place} must be a table")
        unknown = sorted(set(value) - _STORE_KEYS)
        if unknown:
            raise ValueError(f"{place}: unknown keys {unknown}")
        max_bytes = value.get("max_bytes", default_of(StoreTable, "max_bytes"))
        max_age = value.get("max_age", default_of(StoreTable, "max_age"))
        try:
            if type(max_bytes) is str:
                max_bytes = parse_size(max_bytes)
            elif max_bytes is not None:
                _check("max_bytes", max_bytes)
            if type(max_age) is str:
                max_age = parse_age(max_age)
            elif max_age is not None:
                _check("max_age", max_age)
            max_age = None if max_age is None else float(max_age)
        except ValueError as error:
            raise ValueError(f"{place}: {error}") from None
        limits[key] = StoreLimits(written[key], max_bytes, max_age)
    return limits
