"""Running a replay over an audit log: verify, stream, evaluate in a process pool, summarise
(``docs/retention.md`` §5).

Rules (the contract):

1. The log files (oldest first) are verified whole first (:func:`daemon.audit._audit_verify.
   verify_log`); a log that does not verify is refused (:class:`ReplayRefused`, naming the
   first bad line) and nothing is replayed.
2. Then they are streamed once, in bounded chunks: each ``daemon_start`` line sets the
   session recipes in force (:func:`~daemon.replay._replay.recipes_from_start`), each
   selected ``decision`` line becomes a job with them (the worker picks the line's session).
   With no selection the decision lines go to the workers unparsed, so parsing runs in
   parallel too. One target (a ``seq`` or a ``decision_id``) stops the stream when found; a
   target that is not a decision line of the log is refused.
3. ``--all`` jobs go, in chunks of :data:`CHUNK` decisions, to a pool of ``workers``
   processes (at most ``2 × workers`` chunks in flight, so memory stays bounded whatever the
   log's size); each worker opens the store once and builds each recipe's mechanisms once.
   Reports come back in log order. One worker (or a single target) runs in this process.
   Workers are forked when this process runs no other thread, else started by a fork server.
4. The summary counts every status of :data:`~daemon.replay._replay.STATUSES`, lists the
   first :data:`MAX_PROBLEMS` reports that are neither ``REPRODUCED`` nor ``NOT_RETAINED``
   (``problems_omitted`` counts the rest), and is ``REPRODUCED`` only when at least one
   decision was selected and every one the retention policy kept was reproduced: a
   ``NOT_RETAINED`` decision is counted, never a failure.
"""

from __future__ import annotations

import collections
import concurrent.futures
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from daemon.audit._audit_verify import iter_lines, verify_log
from daemon.replay._logread import epoch_of, total_bytes
from daemon.replay._replay import (
    BY_POLICY,
    STATUSES,
    Prepared,
    Recipe,
    prepare,
    recipes_from_start,
    replay_decision,
)
from daemon.retention._open import open_store
from daemon.retention._store import RetentionStore, StoreError
from daemon.wire._errors import PeerError

__all__ = ["CHUNK", "MAX_PROBLEMS", "ReplayRefused", "ReplayRequest", "run_replay"]

CHUNK: Final = 200
MAX_PROBLEMS: Final = 100


class ReplayRefused(PeerError):
    """Nothing can be replayed: the log does not verify, a target is absent, a store cannot
    be opened. ``document`` is printed; ``reason`` is the stable code."""

    def __init__(self, reason: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.reason = reason
        self.document = {"status": "REFUSED", "reason": reason, "message": message, **fields}


@attrs.frozen
class ReplayRequest:
    """What to replay. ``target``: a seq (digits) or a decision id; else every decision,
    optionally of one ``session`` and not before ``since`` (Unix seconds)."""

    logs: tuple[Path, ...]
    store: str | None
    target: str | None = None
    session: str | None = None
    since: float | None = None
    allow_change: bool = False
    workers: int = 1


#: A decision line (parsed, or its bytes for the worker to parse) and the session recipes in
#: force for it (the worker picks the line's session).
Job = tuple[dict[str, Any] | bytes, Mapping[str, Recipe]]


class _Replayer:
    """One process's replay state: its store and the mechanisms built per recipe."""

    def __init__(self, store_spec: str | None, allow_change: bool) -> None:
        self.allow_change = allow_change
        self.store: RetentionStore | None = None
        self.store_error: str | None = None
        if store_spec is not None:
            try:
                self.store = open_store(store_spec, create=False)
            except (StoreError, ValueError) as error:
                self.store_error = str(error)
        self._prepared: dict[str, Prepared] = {}

    def replay(self, job: Job) -> dict[str, Any] | None:
        """The report of the job's decision; None when the line is not a decision."""
        line, recipes = job
        if isinstance(line, bytes):
            line = _parsed(line)
            if line.get("event") != "decision":
                return None
        recipe = recipes.get(str(line.get("session")))
        prepared = None
        if recipe is not None:
            prepared = self._prepared.get(recipe.key)
            if prepared is None:
                prepared = self._prepared[recipe.key] = prepare(recipe)
        return replay_decision(line, prepared, self.store, allow_change=self.allow_change)


_WORKER: _Replayer | None = None


def _init_worker(store_spec: str | None, allow_change: bool) -> None:
    global _WORKER
    _WORKER = _Replayer(store_spec, allow_change)


def _run_chunk(chunk: list[Job]) -> list[dict[str, Any] | None]:
    assert _WORKER is not None
    return [_WORKER.replay(job) for job in chunk]


def _verify(logs: Sequence[Path]) -> dict[str, Any]:
    report = verify_log(*logs)
    if not report.intact:
        raise ReplayRefused(
            "LOG_BROKEN",
            f"refusing to replay: {report.describe_failure()}",
            verify=report.to_dict(),
        )
    return {"lines": report.lines, "last_seq": report.last_seq, "head": report.head}


def _matches(target: str, line: dict[str, Any]) -> bool:
    if target.isdigit():
        return line.get("seq") == int(target)
    return line.get("decision_id") == target


def _selected(request: ReplayRequest, fields: dict[str, Any]) -> bool:
    """``--session`` and ``--since`` (a line without a usable timestamp is not selected by
    ``--since``)."""
    if request.session is not None and fields.get("session") != request.session:
        return False
    if request.since is not None:
        stamp = epoch_of(fields.get("timestamp"))
        return stamp is not None and stamp >= request.since
    return True


_DECISION_MARK: Final = b'"event":"decision"'
_START_MARK: Final = b'"event":"daemon_start"'


def _jobs(request: ReplayRequest) -> Iterator[tuple[Job, int]]:
    """Rule 2: (job, bytes read so far) for each selected decision. Without a selection
    (``--all`` alone) a line that may be a decision is handed on unparsed — the worker parses
    it, in parallel, and skips it if it is not one; a line without ``"event":"decision"`` in
    its bytes cannot be one (a canonical line escapes quotes inside strings)."""
    recipes: dict[str, Recipe] = {}
    select = request.target is not None or request.session is not None
    select = select or request.since is not None
    done = 0
    for path in request.logs:
        with path.open("rb") as handle:
            for raw, had_newline in iter_lines(handle):
                done += len(raw) + 1
                if not had_newline:
                    continue
                fields: dict[str, Any] | None = None
                if _START_MARK in raw:
                    fields = _parsed(raw)
                    if fields.get("event") == "daemon_start":
                        recipes = recipes_from_start(fields)
                if not select:
                    job = _unparsed(raw, fields)
                    if job is not None:
                        yield (job, recipes), done
                    continue
                if fields is None:
                    fields = _parsed(raw)
                if not _wanted(request, fields):
                    continue
                yield (fields, recipes), done
                if request.target is not None:
                    return
    if request.target is not None:
        raise ReplayRefused("NOT_FOUND", f"no line {request.target} in the log")


def _unparsed(raw: bytes, fields: dict[str, Any] | None) -> dict[str, Any] | bytes | None:
    """Without a selection: the decision a line may be, parsed when it already was (a line
    read for its start mark), else its bytes when they can be one; ``None`` when not."""
    if fields is not None:
        return fields if fields.get("event") == "decision" else None
    return raw if _DECISION_MARK in raw else None


def _wanted(request: ReplayRequest, fields: dict[str, Any]) -> bool:
    """Whether a parsed line is a selected decision; the target line that is not a decision
    refuses the replay (``NOT_A_DECISION``)."""
    target = request.target
    event = fields.get("event")
    if target is None:
        return event == "decision" and _selected(request, fields)
    if not _matches(target, fields):
        return False
    if event != "decision":
        raise ReplayRefused(
            "NOT_A_DECISION",
            f"{target} is a {event!r} line, not a decision: nothing was evaluated",
        )
    return True


def _parsed(raw: bytes) -> dict[str, Any]:
    try:
        fields = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return fields if isinstance(fields, dict) else {}


def _chunks(jobs: Iterator[tuple[Job, int]]) -> Iterator[tuple[list[Job], int]]:
    chunk: list[Job] = []
    done = 0
    for job, done in jobs:
        chunk.append(job)
        if len(chunk) >= CHUNK:
            yield chunk, done
            chunk = []
    if chunk:
        yield chunk, done


def _context() -> Any:
    method = "fork" if threading.active_count() == 1 and hasattr(os, "fork") else "forkserver"
    if method not in multiprocessing.get_all_start_methods():
        method = "spawn"
    return multiprocessing.get_context(method)


def _pooled(
    request: ReplayRequest, chunks: Iterator[tuple[list[Job], int]]
) -> Iterator[tuple[list[dict[str, Any] | None], int]]:
    """Rule 3: the chunks' reports in order, ``2 × workers`` chunks in flight at most."""
    pending: collections.deque[tuple[concurrent.futures.Future[list[dict[str, Any] | None]], int]]
    pending = collections.deque()
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=request.workers,
        mp_context=_context(),
        initializer=_init_worker,
        initargs=(request.store, request.allow_change),
    ) as pool:
        try:
            for chunk, done in chunks:
                pending.append((pool.submit(_run_chunk, chunk), done))
                while len(pending) >= 2 * request.workers:
                    future, position = pending.popleft()
                    yield future.result(), position
            while pending:
                future, position = pending.popleft()
                yield future.result(), position
        finally:
            for future, _ in pending:
                future.cancel()


def _in_process(
    request: ReplayRequest, chunks: Iterator[tuple[list[Job], int]]
) -> Iterator[tuple[list[dict[str, Any] | None], int]]:
    replayer = _Replayer(request.store, request.allow_change)
    try:
        for chunk, done in chunks:
            yield [replayer.replay(job) for job in chunk], done
    finally:
        if replayer.store is not None:
            replayer.store.close()


def _check_store(spec: str | None) -> str | None:
    """The store's id, after opening it once here (a bad spec or root is refused at once)."""
    if spec is None:
        return None
    try:
        store = open_store(spec, create=False)
    except (StoreError, ValueError) as error:
        raise ReplayRefused("STORE_UNAVAILABLE", str(error)) from None
    try:
        return store.id
    finally:
        store.close()


Progress = Callable[[int, int, collections.Counter[str]], None]


def _replay_target(request: ReplayRequest) -> dict[str, Any]:
    """The report of the one decision ``request.target`` names (rule 2 refuses otherwise)."""
    job, _ = next(_jobs(request))
    replayer = _Replayer(request.store, request.allow_change)
    try:
        report = replayer.replay(job)
    finally:
        if replayer.store is not None:
            replayer.store.close()
    assert report is not None  # a targeted line is a parsed decision
    return report


def _tally(
    reports: Iterable[dict[str, Any] | None],
    counts: collections.Counter[str],
    problems: list[dict[str, Any]],
) -> int:
    """Count a chunk's reports by status and keep the first problems (neither reproduced nor
    by policy); returns how many problems were left out."""
    omitted = 0
    for report in reports:
        if report is None:
            continue
        status = report["status"]
        counts[status] += 1
        if status != "REPRODUCED" and status not in BY_POLICY:
            if len(problems) < MAX_PROBLEMS:
                problems.append(report)
            else:
                omitted += 1
    return omitted


def run_replay(request: ReplayRequest, *, progress: Progress | None = None) -> dict[str, Any]:
    """Replay what ``request`` selects and return the document to print (module rules).
    ``progress(bytes_read, total_bytes, counts)`` is called after every chunk."""
    verified = _verify(request.logs)
    store_id = _check_store(request.store)
    began = time.perf_counter()
    if request.target is not None:
        return {**_replay_target(request), "store": store_id, "log": verified}
    total = total_bytes(request.logs)
    counts: collections.Counter[str] = collections.Counter()
    problems: list[dict[str, Any]] = []
    omitted = 0
    chunks = _chunks(_jobs(request))
    runner = _pooled if request.workers > 1 else _in_process
    for reports, done in runner(request, chunks):
        omitted += _tally(reports, counts, problems)
        if progress is not None:
            progress(done, total, counts)
    elapsed = time.perf_counter() - began
    decisions = sum(counts.values())
    replayed = decisions - sum(counts[key] for key in BY_POLICY)
    status = "REPRODUCED" if decisions and counts["REPRODUCED"] == replayed else "NOT_REPRODUCED"
    if not decisions:
        status = "NO_DECISIONS"
    return {
        "status": status,
        "decisions": decisions,
        "counts": {key: counts[key] for key in STATUSES},
        "elapsed_seconds": round(elapsed, 3),
        "decisions_per_second": round(decisions / elapsed, 1) if elapsed > 0 else None,
        "workers": request.workers,
        "store": store_id,
        "log": verified,
        "selection": {
            "session": request.session,
            "since": None
            if request.since is None
            else datetime.fromtimestamp(request.since, UTC).isoformat().replace("+00:00", "Z"),
        },
        "problems": problems,
        "problems_omitted": omitted,
    }
