"""``evidenced audit report``: stream an audit log (docs/audit-log.md) into bounded aggregates.

Rules (the contract):

1. One pass, bounded memory, whatever the log's size: lines are read in 1 MiB chunks (a line
   longer than :data:`MAX_LINE_BYTES` is counted as unparseable and skipped); nothing grows
   with the number of lines except counters. Time series are kept in bins of ``bin_seconds``
   (60 to start); when there would be more than :data:`MAX_BINS` bins, the width doubles and
   neighbours merge, so a year of log costs the same as a day. Distinct sessions, requesters
   and refusal codes are counted up to :data:`MAX_KEYS` each, the rest under ``"(other)"``;
   restarts, overflow events and recent FAIL/UNKNOWN decisions keep the last
   :data:`MAX_EVENTS`/:data:`RECENT` only (their totals are exact).
2. Latency percentiles (p50/p99 of ``metrics.total_ns`` and ``metrics.evaluate_ns``, per bin and
   overall) come from log-scale histograms with 16 buckets per doubling: a reported value is
   the bucket's geometric midpoint, within ±2.2 % of the true order statistic.
3. ``since``/``until`` (RFC 3339, UTC or with an offset; a bare date means its midnight UTC)
   keep lines with ``since <= timestamp < until``. Lines without a usable ``timestamp`` are
   counted (``unparseable_lines`` if not a JSON object, ``untimed_lines`` otherwise), never
   guessed.
4. What each line contributes, by ``event``: ``decision`` → outcome counts, latency, session,
   requester, and (FAIL/UNKNOWN) the recent list; ``refusal`` → refusals by ``code`` (``BUSY``
   is also its own series), session, requester; ``daemon_start`` → a start, and from the
   second start of the files on (the first start of a log is no restart) a restart mark;
   ``config_reload`` → a reload (``status``, ``source``, ``reason``: the last
   :data:`MAX_EVENTS` kept); ``noise`` → its ``count`` per bin and per peer;
   ``audit_overflow`` → an overflow event with its ``dropped`` count. Other events are counted
   by name only.
5. Several files are one log in order, oldest first (a rotated series, as ``audit verify``
   takes them). The chain status is :func:`daemon.verify_log` over all of them (a second
   streaming pass, independent of the time range). ``integrity.transparency`` is ``null``
   when no transparency directory holds a checkpoint (``--tlog DIR``, else ``LOG.tlog`` beside
   the newest file); else :func:`transparency_check` of its latest signed checkpoint against
   the lines.
6. The result is a JSON-ready dict (:func:`aggregate` → :meth:`Aggregator.result`); the same
   dict feeds the HTML page, so ``--format json`` and ``--format html`` always agree. Every
   text in it is data: the page escapes it and never lets a plot interpret it (no markup, no
   math text).
"""

from __future__ import annotations

import collections
import math
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from daemon.audit._audit import verify_log
from daemon.tlog import (
    CHECKPOINT_FILE,
    CheckpointError,
    NoteError,
    VerifierKey,
    parse_note,
    peek_checkpoint,
    verify_directory,
)
from daemon.tlog._note import b64encode
from daemon.tlog._tiles import TileEdge
from daemon.tlog._verify import iter_lines
from daemon.wire._errors import PeerError

__all__ = ["Aggregator", "aggregate", "parse_instant", "transparency_check"]

SCHEMA: Final = "evidenced-audit-report-1"
MAX_LINE_BYTES: Final = 1 << 20
MAX_BINS: Final = 2048
MAX_KEYS: Final = 1000
MAX_EVENTS: Final = 500
RECENT: Final = 25
TOP: Final = 10
OUTCOMES: Final = ("PASS", "FAIL", "UNKNOWN")
_BUCKETS_PER_DOUBLING: Final = 16
_OTHER: Final = "(other)"


class ReportError(PeerError, ValueError):
    """A usage error (a bad ``--since``/``--until``)."""


def parse_instant(text: str) -> datetime:
    """An RFC 3339 instant (or a bare date = its midnight UTC), as an aware UTC datetime."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ReportError(f"not an RFC 3339 timestamp or date: {text!r}") from None
    if value.tzinfo is None:
        if "T" in text or " " in text:
            raise ReportError(f"a timestamp needs a UTC offset or Z: {text!r}")
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _epoch(timestamp: object) -> float | None:
    if not isinstance(timestamp, str):
        return None
    try:
        value = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    if value.tzinfo is None:
        return None
    return value.timestamp()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Histogram:
    """Log-scale histogram of positive integers (rule 2)."""

    __slots__ = ("buckets", "count")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0

    def add(self, value: int) -> None:
        bucket = -1 if value <= 0 else int(math.log2(value) * _BUCKETS_PER_DOUBLING)
        self.buckets[bucket] = self.buckets.get(bucket, 0) + 1
        self.count += 1

    def merge(self, other: Histogram) -> None:
        for bucket, count in other.buckets.items():
            self.buckets[bucket] = self.buckets.get(bucket, 0) + count
        self.count += other.count

    def quantile(self, q: float) -> int | None:
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for bucket in sorted(self.buckets):
            seen += self.buckets[bucket]
            if seen >= rank:
                if bucket < 0:
                    return 0
                return round(2 ** ((bucket + 0.5) / _BUCKETS_PER_DOUBLING))
        raise AssertionError("unreachable")

    def summary(self) -> dict[str, int | None]:
        return {"count": self.count, "p50": self.quantile(0.5), "p99": self.quantile(0.99)}


class _Bin:
    __slots__ = ("busy", "decisions", "evaluate", "noise", "overflow_dropped", "refusals", "total")

    def __init__(self) -> None:
        self.decisions = dict.fromkeys(OUTCOMES, 0)
        self.refusals = 0
        self.busy = 0
        self.noise = 0
        self.overflow_dropped = 0
        self.total = Histogram()
        self.evaluate = Histogram()

    def merge(self, other: _Bin) -> None:
        for outcome in OUTCOMES:
            self.decisions[outcome] += other.decisions[outcome]
        self.refusals += other.refusals
        self.busy += other.busy
        self.noise += other.noise
        self.overflow_dropped += other.overflow_dropped
        self.total.merge(other.total)
        self.evaluate.merge(other.evaluate)


class _Capped:
    """A counter of at most :data:`MAX_KEYS` distinct keys; later new keys count as other."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.other_keys = 0

    def add(self, key: str, amount: int = 1) -> None:
        if key in self.counts:
            self.counts[key] += amount
        elif len(self.counts) < MAX_KEYS:
            self.counts[key] = amount
        else:
            self.counts[_OTHER] = self.counts.get(_OTHER, 0) + amount
            self.other_keys += 1

    def top(self, count: int = TOP) -> list[dict[str, Any]]:
        ranked = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
        return [{"name": name, "count": number} for name, number in ranked[:count]]


def _requester(value: object) -> str:
    """A stable requester name: the TCP peer's host (ports are per connection), the Unix uid."""
    if not isinstance(value, dict):
        return "(unknown)"
    if value.get("transport") == "tcp":
        peer = str(value.get("peer", "?"))
        host = peer.rsplit(":", 1)[0] if ":" in peer else peer
        return f"tcp {host}"
    if value.get("transport") == "unix":
        return f"unix uid {value.get('uid', '?')}"
    return str(value.get("transport", "(unknown)"))


class Aggregator:
    """Feed decoded lines (:meth:`add`); read the aggregates (:meth:`result`)."""

    def __init__(self, since: datetime | None = None, until: datetime | None = None) -> None:
        self.since = None if since is None else since.timestamp()
        self.until = None if until is None else until.timestamp()
        self.since_text = None if since is None else _iso(since.timestamp())
        self.until_text = None if until is None else _iso(until.timestamp())
        self.bin_seconds = 60
        self.bins: dict[int, _Bin] = {}
        self.lines = 0
        self.unparseable = 0
        self.untimed = 0
        self.in_range = 0
        self.first: float | None = None
        self.last: float | None = None
        self.events: collections.Counter[str] = collections.Counter()
        self.outcomes = dict.fromkeys(OUTCOMES, 0)
        self.total = Histogram()
        self.evaluate = Histogram()
        self.refusal_codes = _Capped()
        self.sessions = _Capped()
        self.requesters = _Capped()
        self.restarts: collections.deque[str] = collections.deque(maxlen=MAX_EVENTS)
        self.restart_count = 0
        self.starts = 0
        self._started = False  # a daemon_start seen anywhere before (in range or not)
        self.reloads: collections.deque[dict[str, Any]] = collections.deque(maxlen=MAX_EVENTS)
        self.reload_count = 0
        self.reload_refused = 0
        self.noise = 0
        self.noise_peers = _Capped()
        self.overflows: collections.deque[dict[str, Any]] = collections.deque(maxlen=MAX_EVENTS)
        self.overflow_count = 0
        self.dropped = 0
        self.busy = 0
        self.refusals = 0
        self.recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=RECENT)

    # -- feeding

    def add_unparseable(self) -> None:
        self.lines += 1
        self.unparseable += 1

    def add(self, line: object) -> None:
        self.lines += 1
        if not isinstance(line, dict):
            self.unparseable += 1
            return
        restart = line.get("event") == "daemon_start" and self._started
        self._started = self._started or line.get("event") == "daemon_start"
        when = _epoch(line.get("timestamp"))
        if when is None:
            self.untimed += 1
            return
        if (self.since is not None and when < self.since) or (
            self.until is not None and when >= self.until
        ):
            return
        self.in_range += 1
        self.first = when if self.first is None else min(self.first, when)
        self.last = when if self.last is None else max(self.last, when)
        event = str(line.get("event"))
        self.events[event] += 1
        slot = self._bin(when)
        if event == "daemon_start":
            self._start(line, restart)
        else:
            tally = _TALLIES.get(event)
            if tally is not None:
                tally(self, line, slot)

    def _start(self, line: dict[str, Any], restart: bool) -> None:
        self.starts += 1
        if restart:
            self.restart_count += 1
            self.restarts.append(str(line["timestamp"]))

    def _reload(self, line: dict[str, Any], slot: _Bin) -> None:
        self.reload_count += 1
        self.reload_refused += line.get("status") == "REFUSED"
        self.reloads.append(
            {key: line.get(key) for key in ("timestamp", "status", "source", "reason")}
        )

    def _overflow(self, line: dict[str, Any], slot: _Bin) -> None:
        dropped = line.get("dropped")
        count = dropped if type(dropped) is int else 0
        self.overflow_count += 1
        self.dropped += count
        slot.overflow_dropped += count
        self.overflows.append({"timestamp": line["timestamp"], "dropped": count})

    def _decision(self, line: dict[str, Any], slot: _Bin) -> None:
        outcome = line.get("outcome")
        if outcome in self.outcomes:
            self.outcomes[outcome] += 1
            slot.decisions[outcome] += 1
        metrics = line.get("metrics")
        if isinstance(metrics, dict):
            for key, overall, per_bin in (
                ("total_ns", self.total, slot.total),
                ("evaluate_ns", self.evaluate, slot.evaluate),
            ):
                value = metrics.get(key)
                if type(value) is int:
                    overall.add(value)
                    per_bin.add(value)
        self.sessions.add(str(line.get("session")))
        self.requesters.add(_requester(line.get("requester")))
        if outcome in ("FAIL", "UNKNOWN"):
            self.recent.append(
                {
                    "timestamp": line.get("timestamp"),
                    "seq": line.get("seq"),
                    "decision_id": line.get("decision_id"),
                    "session": line.get("session"),
                    "mechanism_id": line.get("mechanism_id"),
                    "outcome": outcome,
                    "details": line.get("details"),
                    "reason_codes": line.get("reason_codes"),
                }
            )

    def _noise(self, line: dict[str, Any], slot: _Bin) -> None:
        count = line.get("count")
        count = count if type(count) is int and count > 0 else 0
        self.noise += count
        slot.noise += count
        peers = line.get("peers")
        if isinstance(peers, dict):
            for peer, number in peers.items():
                if type(number) is int and number > 0:
                    self.noise_peers.add(str(peer), number)

    def _refusal(self, line: dict[str, Any], slot: _Bin) -> None:
        code = str(line.get("code"))
        self.refusals += 1
        slot.refusals += 1
        self.refusal_codes.add(code)
        if code == "BUSY":
            self.busy += 1
            slot.busy += 1
        if line.get("session") is not None:
            self.sessions.add(str(line.get("session")))
        self.requesters.add(_requester(line.get("requester")))

    def _bin(self, when: float) -> _Bin:
        key = int(when // self.bin_seconds)
        slot = self.bins.get(key)
        if slot is None:
            slot = self.bins[key] = _Bin()
            if len(self.bins) > MAX_BINS:
                self._coarsen()
                return self._bin(when)
        return slot

    def _coarsen(self) -> None:
        while len(self.bins) > MAX_BINS:
            self.bin_seconds *= 2
            merged: dict[int, _Bin] = {}
            for key, slot in self.bins.items():
                target = merged.get(key // 2)
                if target is None:
                    merged[key // 2] = slot
                else:
                    target.merge(slot)
            self.bins = merged

    # -- reading

    def result(self) -> dict[str, Any]:
        series = [
            {
                "start": _iso(key * self.bin_seconds),
                "decisions": dict(slot.decisions),
                "refusals": slot.refusals,
                "busy": slot.busy,
                "noise": slot.noise,
                "overflow_dropped": slot.overflow_dropped,
                "total_ns": slot.total.summary(),
                "evaluate_ns": slot.evaluate.summary(),
            }
            for key, slot in sorted(self.bins.items())
        ]
        return {
            "schema": SCHEMA,
            "range": {
                "since": self.since_text,
                "until": self.until_text,
                "first": None if self.first is None else _iso(self.first),
                "last": None if self.last is None else _iso(self.last),
            },
            "lines": {
                "read": self.lines,
                "in_range": self.in_range,
                "unparseable": self.unparseable,
                "untimed": self.untimed,
            },
            "events": dict(sorted(self.events.items())),
            "totals": {
                "decisions": dict(self.outcomes),
                "refusals": self.refusals,
                "busy": self.busy,
                "overflow_events": self.overflow_count,
                "dropped": self.dropped,
                "starts": self.starts,
                "restarts": self.restart_count,
                "config_reloads": self.reload_count,
                "config_reloads_refused": self.reload_refused,
                "noise": self.noise,
            },
            "latency_ns": {"total": self.total.summary(), "evaluate": self.evaluate.summary()},
            "bin_seconds": self.bin_seconds,
            "series": series,
            "refusals_by_code": self.refusal_codes.top(MAX_KEYS),
            "top_sessions": self.sessions.top(),
            "top_requesters": self.requesters.top(),
            "restarts": list(self.restarts),
            "config_reloads": list(reversed(self.reloads)),
            "noise_peers": self.noise_peers.top(),
            "overflows": list(self.overflows),
            "recent_failures": list(reversed(self.recent)),
        }


def _lines(path: Path, progress: Callable[[int], None]) -> Iterator[bytes | None]:
    """Yield each line (without its newline), or ``None`` for an over-long line (skipped)."""
    with path.open("rb") as handle:
        pending = b""
        skipping = False
        while chunk := handle.read(1 << 20):
            progress(len(chunk))
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                if skipping:
                    skipping = False
                    yield None
                elif len(line) > MAX_LINE_BYTES:
                    yield None
                else:
                    yield line
            if len(pending) > MAX_LINE_BYTES:
                pending, skipping = b"", True
        if skipping or len(pending) > MAX_LINE_BYTES:
            yield None
        elif pending:
            yield pending


# What each event (but daemon_start) adds to the tallies of its line's bin.
_TALLIES: Final[dict[str, Callable[[Aggregator, dict[str, Any], _Bin], None]]] = {
    "decision": Aggregator._decision,
    "refusal": Aggregator._refusal,
    "config_reload": Aggregator._reload,
    "noise": Aggregator._noise,
    "audit_overflow": Aggregator._overflow,
}


def aggregate(
    path: str | os.PathLike[str],
    *more: str | os.PathLike[str],
    since: datetime | None = None,
    until: datetime | None = None,
    progress: Callable[[int], None] | None = None,
    tlog: str | os.PathLike[str] | None = None,
    key: VerifierKey | None = None,
) -> dict[str, Any]:
    """Aggregate the log at ``path`` (and its newer rotated files ``more``, in order; rules
    1–6). Raises ``OSError`` if a file cannot be read."""
    targets = [Path(item) for item in (path, *more)]
    report = verify_log(*targets)
    aggregator = Aggregator(since, until)
    for target in targets:
        for raw in _lines(target, progress or (lambda _: None)):
            if raw is None:
                aggregator.add_unparseable()
                continue
            try:
                aggregator.add(orjson.loads(raw))
            except orjson.JSONDecodeError:
                aggregator.add_unparseable()
    result = aggregator.result()
    result["source"] = {
        "path": str(targets[-1]),
        "paths": [str(target) for target in targets],
        "bytes": sum(target.stat().st_size for target in targets),
    }
    directory = (
        Path(tlog) if tlog is not None else targets[-1].with_name(targets[-1].name + ".tlog")
    )
    result["integrity"] = {
        "chain": report.to_dict(),
        "transparency": transparency_check(directory, targets, key),
    }
    return result


def transparency_check(
    directory: Path, files: list[Path], key: VerifierKey | None
) -> dict[str, Any] | None:
    """The latest signed checkpoint of ``directory`` against the audit lines of ``files``
    (oldest first, from seq 1), or ``None`` when ``directory`` holds no checkpoint.

    With ``key``: :func:`daemon.tlog.verify_directory` (signature, root, every tile):
    ``VERIFIED`` or ``INVALID`` with its ``code``. Without: the root of the first
    ``checkpoint_size`` lines is recomputed and compared, and the signature is *not* checked
    (``ROOT_MATCHES`` or ``INVALID``); ``signed_by`` names the key(s) the note claims either
    way, and ``key`` is the verifier key that was used (or ``None``)."""
    note_path = directory / CHECKPOINT_FILE
    if not note_path.is_file():
        return None
    found: dict[str, Any] = {
        "directory": str(directory),
        "key": None if key is None else key.encode(),
        "signature_checked": key is not None,
    }
    try:
        data = note_path.read_bytes()
        checkpoint = peek_checkpoint(data)
        signers = parse_note(data).signatures
    except (OSError, CheckpointError, NoteError) as error:
        code = getattr(error, "code", "CHECKPOINT_UNREADABLE")
        return {**found, "status": "INVALID", "code": code, "message": str(error)}
    found.update(
        origin=checkpoint.origin,
        checkpoint_size=checkpoint.size,
        root=b64encode(checkpoint.root),
        signed_by=[{"name": s.name, "key_id": f"{s.key_id:08x}"} for s in signers],
    )
    if key is not None:
        verified = verify_directory(directory, files, key)
        return {
            **found,
            "status": "VERIFIED" if verified.verified else "INVALID",
            "code": verified.code,
            "message": verified.message,
            "lines": verified.lines,
            "tiles_checked": verified.tiles_checked,
        }
    return {**found, **_root_of_lines(files, checkpoint.size, checkpoint.root)}


def _root_of_lines(files: list[Path], size: int, root: bytes) -> dict[str, Any]:
    """Recompute the Merkle root of the first ``size`` lines (O(log n) memory)."""
    from daemon.tlog import leaf_hash

    edge = TileEdge()
    torn = [False]
    first = True
    try:
        for line in iter_lines(files, torn):
            if first:
                first = False
                if not line.startswith(b"{") or orjson.loads(line).get("seq") != 1:
                    return {
                        "status": "INVALID",
                        "code": "LOG_UNAVAILABLE",
                        "message": "the first line is not seq 1: give the rotated files too",
                    }
            if edge.size == size:
                break
            edge.append(leaf_hash(line))
    except Exception as error:  # an unreadable or over-long line: the check cannot be made
        return {"status": "INVALID", "code": "LOG_UNAVAILABLE", "message": str(error)}
    if edge.size < size:
        message = f"the checkpoint signs {size} lines and the files hold {edge.size}"
        return {"status": "INVALID", "code": "LOG_SHORT", "message": message, "lines": edge.size}
    if edge.root() != root:
        message = f"the first {size} lines do not hash to the checkpoint's root"
        return {"status": "INVALID", "code": "LOG_EDITED", "message": message, "lines": size}
    message = (
        f"the first {size} lines hash to the checkpoint's root; pass --key to check the signature"
    )
    return {"status": "ROOT_MATCHES", "code": None, "message": message, "lines": size}
