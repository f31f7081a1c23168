"""Retention limits: which objects ``evidenced store gc`` deletes (``docs/retention.md`` §4).

Rules (the contract), in this order:

1. The log files (every file of the log, oldest first) are verified whole; a log that does not
   verify is refused and nothing is deleted (its references cannot be trusted).
2. The store is listed once, first (name, size, modification time); objects written after the
   listing are not considered. Then the log is streamed once, in its order (the files oldest
   first, each in ``seq`` order), and, for each listed object, the newest ``decision`` line
   naming it in ``evidence`` is kept (its ``seq``: the last one met); memory is one entry per
   listed object, whatever the log's length.
3. The age window is a position in the log, never a time a clock step can move. With
   ``max_age``, the *age mark* is the ``seq`` of the first line met, in log order, whose
   ``timestamp`` is at or after the age cut-off *now − max_age*, or that has no readable
   timestamp (it might be new); with no such line, it is the last ``seq`` + 1. A line is
   older than ``max_age`` exactly when it comes before the mark. Hence: a line after a line
   stamped inside the window is inside it whatever its own timestamp says (a wall clock
   stepped back makes no line look old); and as *now* advances the mark only moves forward
   (lines leave the window in log order, never out of it).
4. The size window. ``max_bytes``: referenced objects are ranked by their newest reference,
   newest first; the window keeps the longest run of newest references whose objects total at
   most ``max_bytes``, and its cut-off is the ``seq`` of the first reference that does not
   fit. With both limits, an object must be inside both: a referenced object is outside when
   its newest reference comes before the age mark, or is at or before the size cut-off. So an
   object referenced by a line at or after the age mark, or after the size cut-off, is never
   outside.
5. Unreferenced objects (no decision line names them: e.g. a request refused ``AUDIT_FAILED``
   after its evidence was stored) are outside the window when the files start the chain (first
   ``seq`` 1) — else an earlier file may name them, and they are outside only when their
   modification time is older than the age cut-off (the store's clock: no line orders them).
6. Grace: an object modified less than ``grace`` ago (or later than now) is never deleted,
   whatever the rules above (evidence is stored before its decision line is written; the
   filesystem store also refreshes an object's time when a new decision re-uses it).
7. Timestamps out of order are reported, never trusted: each line whose timestamp is earlier
   than the previous timestamped line's (the writer's wall clock stepped back) is counted in
   ``timestamps`` (``out_of_order``, the ``first_seq`` of one, the ``largest_step_back_s``).
   Rule 3 already keeps them from moving the window.
8. Dry run by default: the plan is returned and nothing is deleted. With ``apply``, each
   object outside the window is deleted, and the filesystem store's temporary files older than
   the grace are removed; a deletion that fails is reported, and the others go on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs

from daemon.audit._audit_verify import verify_log
from daemon.replay._logread import epoch_of, records
from daemon.retention._fs import FilesystemStore
from daemon.retention._store import RetentionStore, StoreError
from daemon.wire._errors import PeerError

__all__ = ["DEFAULT_GRACE", "GcRefused", "Limits", "collect"]

#: An object younger than this is never deleted (rule 6).
DEFAULT_GRACE: Final = 3600.0
MAX_LISTED: Final = 100


class GcRefused(PeerError):
    """The log does not verify (rule 1)."""


@attrs.frozen
class Limits:
    """A store's retention limits (None: no limit of that kind) and the grace period."""

    max_age: float | None = None
    max_bytes: int | None = None
    grace: float = DEFAULT_GRACE

    def __attrs_post_init__(self) -> None:
        if self.max_age is not None and self.max_age <= 0:
            raise ValueError("max_age must be positive")
        if self.max_bytes is not None and self.max_bytes < 0:
            raise ValueError("max_bytes must be non-negative")
        if self.grace < 0:
            raise ValueError("grace must be non-negative")


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def collect(
    store: RetentionStore,
    logs: Sequence[Path],
    limits: Limits,
    *,
    apply: bool = False,
    now: float | None = None,
) -> dict[str, Any]:
    """Plan (and with ``apply`` carry out) the collection; the document ``store gc`` prints."""
    report = verify_log(*logs)
    if not report.intact:
        raise GcRefused(f"refusing to collect: {report.describe_failure()}")
    now = time.time() if now is None else now
    listed = {item.name: item for item in store.objects()}
    age_cutoff = None if limits.max_age is None else now - limits.max_age
    newest, clock, age_mark = _scan(logs, listed, age_cutoff)
    size_cutoff = _size_cutoff(listed, newest, limits.max_bytes)
    grace_limit = now - limits.grace
    window = _Window(age_cutoff, age_mark, size_cutoff, report.first_seq in (None, 1))
    outside: list[str] = []
    protected = 0
    unreferenced = 0
    for name, item in listed.items():
        seq = newest.get(name)
        if not window.outside(seq, item.modified):
            continue
        if item.modified >= grace_limit:
            protected += 1
            continue
        unreferenced += seq is None
        outside.append(name)
    outside.sort(key=lambda name: newest.get(name, 0))
    total = sum(item.size for item in listed.values())
    freed = sum(listed[name].size for name in outside)
    document: dict[str, Any] = {
        "status": "APPLIED" if apply else "DRY_RUN",
        "store": store.id,
        "log": {"lines": report.lines, "first_seq": report.first_seq, "last_seq": report.last_seq},
        "limits": {
            "max_age_seconds": limits.max_age,
            "max_bytes": limits.max_bytes,
            "grace_seconds": limits.grace,
        },
        "cutoff": {
            "age": None if age_cutoff is None else _iso(age_cutoff),
            "age_seq": age_mark,
            "size_seq": size_cutoff,
        },
        "timestamps": clock.report(),
        "objects": {"count": len(listed), "bytes": total},
        "kept": {"count": len(listed) - len(outside), "bytes": total - freed},
        "delete": {
            "count": len(outside),
            "bytes": freed,
            "unreferenced": unreferenced,
            "names": outside[:MAX_LISTED],
        },
        "protected_by_grace": protected,
    }
    if apply:
        _delete(store, outside, grace_limit, document)
    return document


def _scan(
    logs: Sequence[Path], listed: dict[str, Any], age_cutoff: float | None
) -> tuple[dict[str, int], _Clock, int | None]:
    """Rules 2, 3 and 7 in one stream of the log: each listed object's newest referencing
    ``seq``, the out-of-order timestamps, and the age mark (``None`` without ``max_age``)."""
    newest: dict[str, int] = {}
    clock = _Clock()
    mark: int | None = None
    last = 0
    for fields, _ in records(logs):
        seq = fields.get("seq")
        seq = last = seq if type(seq) is int else last
        stamp = epoch_of(fields.get("timestamp"))
        clock.see(seq, stamp)
        if mark is None and age_cutoff is not None and (stamp is None or stamp >= age_cutoff):
            mark = seq  # rule 3
        if fields.get("event") != "decision":
            continue
        evidence = fields.get("evidence")
        if not isinstance(evidence, list):
            continue
        for item in evidence:
            name = item.get("digest") if isinstance(item, dict) else None
            if name in listed:
                newest[name] = seq  # the log is read in order: the last one met is newest
    age_mark = None if age_cutoff is None else (last + 1 if mark is None else mark)
    return newest, clock, age_mark


@attrs.frozen
class _Window:
    """Rules 3–5: the window an object must be inside to be kept."""

    age_cutoff: float | None
    age_mark: int | None
    size_cutoff: int | None
    from_genesis: bool  # the files start the chain (first seq 1)

    def outside(self, seq: int | None, modified: float) -> bool:
        """Whether an object whose newest reference is ``seq`` (``None``: unreferenced) and
        modified at ``modified`` is outside the window (rule 6's grace not yet applied)."""
        if seq is None:
            return self.from_genesis or (self.age_cutoff is not None and modified < self.age_cutoff)
        return (self.age_mark is not None and seq < self.age_mark) or (
            self.size_cutoff is not None and seq <= self.size_cutoff
        )


def _delete(
    store: RetentionStore, outside: list[str], grace_limit: float, document: dict[str, Any]
) -> None:
    """Rule 8 with ``apply``: delete each object outside, then the store's old temporaries."""
    deleted, failed = 0, []
    for name in outside:
        try:
            deleted += store.delete(name)
        except StoreError as error:
            failed.append({"name": name, "reason": str(error)})
    document["deleted"] = deleted
    document["failed"] = failed
    if isinstance(store, FilesystemStore):
        removed = 0
        for path, modified in list(store.temporaries()):
            if modified < grace_limit:
                store.remove_temporary(path)
                removed += 1
        document["temporaries_removed"] = removed


class _Clock:
    """Rule 7: the timestamps met out of order."""

    def __init__(self) -> None:
        self.previous: float | None = None
        self.out_of_order = 0
        self.first_seq: int | None = None
        self.largest = 0.0

    def see(self, seq: int, stamp: float | None) -> None:
        if stamp is None:
            return
        previous, self.previous = self.previous, stamp
        if previous is not None and stamp < previous:
            self.out_of_order += 1
            self.largest = max(self.largest, previous - stamp)
            if self.first_seq is None:
                self.first_seq = seq

    def report(self) -> dict[str, Any]:
        return {
            "out_of_order": self.out_of_order,
            "first_seq": self.first_seq,
            "largest_step_back_s": round(self.largest, 6),
        }


def _size_cutoff(
    listed: dict[str, Any], newest: dict[str, int], max_bytes: int | None
) -> int | None:
    """Rule 4's size cut-off seq (None: every referenced object fits)."""
    if max_bytes is None:
        return None
    by_seq: dict[int, int] = {}
    for name, seq in newest.items():
        by_seq[seq] = by_seq.get(seq, 0) + listed[name].size
    kept = 0
    for seq in sorted(by_seq, reverse=True):
        kept += by_seq[seq]
        if kept > max_bytes:
            return seq
    return None
