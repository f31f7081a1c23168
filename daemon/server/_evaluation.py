"""Where and under what deadline a submitted pair is evaluated (docs/adr/0009).

Rules (the contract):

1. One evaluation = a fresh :class:`~session.EvidenceStore` holding the items, a fresh
   :class:`~session.VerificationSession` holding the session's mechanisms, and
   ``evaluate(binding)`` (:func:`evaluate_pair`); requests share no state.
2. Placement. A pair of at most ``inline_max_bytes`` is evaluated on the event loop (a worker
   round trip would cost more than the check) unless its session is *demoted*; every other
   pair goes to a forked worker process (:class:`~daemon.server._workers.WorkerPool`), so a slow or
   GIL-holding mechanism never stalls the loop.
3. Every evaluation is under the request deadline. A worker evaluation is cancelled at the
   deadline and its worker killed. An inline evaluation cannot be interrupted, so it is
   measured: one that overran the deadline (wall clock) is answered as an overrun all the
   same, and one that used more than :data:`INLINE_BUDGET_NS` of CPU (the thread's CPU time,
   so a busy machine preempting the loop demotes nothing; read again only when more wall time
   than that passed, since CPU time cannot exceed it) demotes its session to workers for
   :data:`DEMOTION_SECONDS` (an input that is slow in a small pair stalls the loop once, not
   again). Either way the bound on a stall is the budget, not the input.
4. An overrun is the ``UNKNOWN`` decision :data:`DEADLINE_DETAILS`; a worker that died (killed
   by the OS, crashed in native code) is the ``UNKNOWN`` decision :data:`WORKER_FAILED_DETAILS`.
   Both carry the binding snapshot's digest and identity fields, observe the evidence size, and
   are audited like any decision. An exception raised by the evaluation itself propagates (the
   server answers ``INTERNAL``), as it would inline.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

import trio

from daemon.config._hosting import HostedSession
from daemon.server._workers import WorkerDied, WorkerJobError, WorkerPool
from session import (
    BoundProposition,
    EvaluatedProposition,
    EvidenceStore,
    MechanismOutcome,
    VerificationSession,
)
from session.canon import digest_bytes

DEADLINE_DETAILS: Final = "DAEMON_REQUEST_DEADLINE_EXCEEDED"
WORKER_FAILED_DETAILS: Final = "DAEMON_EVALUATION_WORKER_FAILED"
#: An inline evaluation using more CPU than this demotes its session to worker processes.
INLINE_BUDGET_NS: Final = 20_000_000
DEMOTION_SECONDS: Final = 60.0

Evaluated = tuple[EvaluatedProposition, int, list[str]]


def evaluate_pair(
    session: HostedSession, binding: BoundProposition, items: tuple[bytes, ...]
) -> Evaluated:
    """(result, evaluation ns, the items' ``sha256:`` references as the store computed them:
    each item is hashed once here, not again for the audit line)."""
    begin = time.perf_counter_ns()
    store = EvidenceStore()
    refs = [store.add(item) for item in items]
    verification = VerificationSession(store)
    for mechanism in session.mechanisms:
        verification.register(mechanism)
    result = verification.evaluate(binding)
    return result, time.perf_counter_ns() - begin, refs


def worker_job_handler(sessions: Mapping[str, HostedSession]) -> Any:
    """The function each worker runs: job ``(session name, binding)`` with the evidence items
    as blobs → :data:`Evaluated`."""

    def handle(job: tuple[str, BoundProposition], items: tuple[bytes, ...]) -> Evaluated:
        name, binding = job
        return evaluate_pair(sessions[name], binding, items)

    return handle


def _references(items: tuple[bytes, ...]) -> list[str]:
    return [digest_bytes(item) for item in items]


def undecided(binding: BoundProposition, items: tuple[bytes, ...], details: str) -> Evaluated:
    """The ``UNKNOWN`` decision for an evaluation that produced none (rule 4)."""
    snapshot = binding.to_dict()
    result = EvaluatedProposition(
        binding_digest=binding.digest(),
        outcome=MechanismOutcome.UNKNOWN,
        mechanism_id=binding.mechanism_id,
        mechanism_digest=snapshot["mechanism_digest"],
        evidence_refs=binding.evidence_refs,
        trust_roots=binding.trust_roots,
        observed_evidence_bytes=sum(len(item) for item in items),
        details=details,
        observations={},
    )
    return result, 0, _references(items)


class Evaluator:
    """Places evaluations (rule 2) and keeps them under the deadline (rule 3)."""

    def __init__(self, pool: WorkerPool, *, inline_max_bytes: int, deadline: float) -> None:
        self.pool = pool
        self.inline_max_bytes = inline_max_bytes
        self.deadline = deadline
        self._demoted_until: dict[str, float] = {}
        self.inline = 0
        self.in_workers = 0
        self.overruns = 0
        self.demotions = 0

    def _inline_allowed(self, session: HostedSession, size: int) -> bool:
        if size > self.inline_max_bytes:
            return False
        until = self._demoted_until.get(session.name)
        if until is None:
            return True
        if time.monotonic() >= until:
            del self._demoted_until[session.name]
            return True
        return False

    async def evaluate(
        self, session: HostedSession, binding: BoundProposition, items: tuple[bytes, ...]
    ) -> Evaluated:
        started = time.perf_counter_ns()
        size = sum(len(item) for item in items)
        if self._inline_allowed(session, size):
            self.inline += 1
            cpu_begin = time.thread_time_ns()
            evaluated = evaluate_pair(session, binding, items)
            elapsed = evaluated[1]
            # A thread never uses more CPU than the wall time that passed (since ``started``,
            # read before ``cpu_begin``): the CPU clock, a system call, is read again only
            # for an evaluation that took longer than the budget.
            if (
                time.perf_counter_ns() - started > INLINE_BUDGET_NS
                and time.thread_time_ns() - cpu_begin > INLINE_BUDGET_NS
            ):
                self.demotions += 1
                self._demoted_until[session.name] = time.monotonic() + DEMOTION_SECONDS
            if elapsed > self.deadline * 1e9:
                self.overruns += 1
                result, _, refs = undecided(binding, items, DEADLINE_DETAILS)
                return result, elapsed, refs
            return evaluated
        self.in_workers += 1
        with trio.move_on_after(self.deadline):
            try:
                evaluated = await self.pool.run((session.name, binding), items)
            except WorkerDied:
                result, _, refs = undecided(binding, items, WORKER_FAILED_DETAILS)
                return result, time.perf_counter_ns() - started, refs
            except WorkerJobError as error:
                raise RuntimeError(f"evaluation failed in a worker: {error}") from None
            return evaluated  # type: ignore[no-any-return]
        self.overruns += 1
        result, _, refs = undecided(binding, items, DEADLINE_DETAILS)
        return result, time.perf_counter_ns() - started, refs

    def status(self) -> dict[str, Any]:
        return {
            "worker_processes": self.pool.size,
            "worker_pids": self.pool.pids,
            "workers_busy": self.pool.busy,
            "workers_replaced": self.pool.replaced,
            "inline": self.inline,
            "in_workers": self.in_workers,
            "overruns": self.overruns,
            "demoted_sessions": sorted(self._demoted_until),
        }
