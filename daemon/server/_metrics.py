"""The server's Prometheus metrics: one ``prometheus_client`` registry per server.

Rules (the contract):

1. One :class:`~prometheus_client.CollectorRegistry` per :class:`ServerMetrics` (so per
   server): two servers in one process never mix their counts, and nothing is registered in
   the library's global registry. ``/metrics`` is that registry's text exposition
   (:meth:`ServerMetrics.exposition`, ``prometheus_client``'s own), never a hand-written one.
2. Labels have bounded values: ``session`` only takes the names of hosted sessions (set at
   start, and by each applied reload: :meth:`ServerMetrics.set_sessions`), ``outcome``
   ``PASS``/``FAIL``/``UNKNOWN``, ``code`` the protocol's closed vocabulary of error codes,
   ``stage`` :data:`STAGES`, ``listener`` :data:`LISTENERS`. A request naming a session that
   is not hosted is counted by its refusal code, never by its name, so no client can grow the
   exposition.
3. Every labelled series exists from the start at zero (a counter that has never moved is
   exported as 0, not missing), so rates and alerts work from the first scrape. A session a
   reload adds gets its series at zero when the reload is applied; a session it removes
   loses them (its counts are gone with it); a session it keeps keeps its counts.
4. Gauges of the server's state (requests in flight, open connections, audit lines pending)
   and the refusal counts (the server's own ``refusal:<CODE>`` counters, which every
   refusal on either listener increments) are read when scraped; decisions and histograms
   are plain integers updated on the request path by the ``observe_*``/``count_*`` methods
   (no lock, no I/O: each metric has one writer, the event loop or the audit writer
   thread) and turned into metric families by one collector when scraped. The exposition
   has no ``_created`` series (they would double the lines of every histogram for a value
   Prometheus does not read from the text format).
5. :meth:`ServerMetrics.snapshot` is the same registry as JSON for ``evidenced health``:
   every sample except histogram buckets (so ``_count`` and ``_sum`` of each histogram), each
   as ``{"name", "labels", "value"}``, in exposition order. The two views cannot disagree.
6. The metric names and meanings are documented in ``docs/metrics.md``; a test holds the two
   to each other.
7. The stage histograms reach the request deadline: their bounds are the ladder's below
   ``request_deadline``, then the deadline (:func:`latency_buckets`; 1 ms … 30 s by default).
8. The process's own metrics are ``prometheus_client``'s :class:`ProcessCollector` under the
   standard names every exporter uses (``process_cpu_seconds_total``,
   ``process_resident_memory_bytes``, …), so dashboards and alerts written for them work.
"""

from __future__ import annotations

import platform
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from daemon import __version__
from daemon.wire._protocol import PROTOCOL_VERSION, ErrorCode

__all__ = ["CONTENT_TYPE", "LISTENERS", "OUTCOMES", "STAGES", "ServerMetrics", "latency_buckets"]

CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
OUTCOMES: Final = ("PASS", "FAIL", "UNKNOWN")
#: The stages of a decision timed per session: reading the evidence, the mechanism's
#: evaluation, writing the audit line (durably, per the policy), and the whole request.
STAGES: Final = ("receive", "evaluate", "audit", "total")
LISTENERS: Final = ("binary", "http")
#: The ladder of stage latency bounds, seconds, from an inline minimal pair (under a
#: millisecond) up: a server's buckets are its bounds below ``request_deadline``, then the
#: deadline itself (:func:`latency_buckets`), so an evaluation cut at the deadline is still
#: in a bucket of its own and only what overran it is above the last.
LATENCY_LADDER: Final = (0.001, 0.0025, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0, 60.0, 300.0, 1800.0)
DEFAULT_DEADLINE: Final = 30.0  # [server] request_deadline's default (ServerMetrics made alone)
#: One group commit's write and fsync, seconds.
AUDIT_WRITE_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1)
#: Lines per group commit.
BATCH_BUCKETS: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)


def latency_buckets(deadline: float) -> tuple[float, ...]:
    """The stage histograms' bounds for a server whose ``request_deadline`` is ``deadline``:
    the ladder below it, then it (rule 7)."""
    return (*(bound for bound in LATENCY_LADDER if bound < deadline), float(deadline))


class _Histogram:
    """Per-bucket counts (the last one: over every bound) and the sum of observations."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # le: value <= bound
        self.total += value

    def buckets(self, names: list[str]) -> list[tuple[str, float]]:
        cumulative, running = [], 0
        for name, count in zip(names, self.counts, strict=True):
            running += count
            cumulative.append((name, float(running)))
        return cumulative


def _bucket_names(bounds: tuple[float, ...]) -> list[str]:
    # repr(float) is the exposition's own spelling for these magnitudes ("0.0005", "10.0").
    return [repr(float(bound)) for bound in bounds] + ["+Inf"]


class ServerMetrics:
    """The metrics of one server (module rules). ``sessions``: the hosted session names.
    ``in_flight``, ``connections`` (per listener) and ``audit_pending`` are read at scrape
    time."""

    def __init__(
        self,
        sessions: Iterable[str],
        *,
        in_flight: Callable[[], float] = lambda: 0,
        connections: Mapping[str, Callable[[], float]] | None = None,
        audit_pending: Callable[[], float] = lambda: 0,
        counters: Mapping[str, int] | None = None,
        process: bool = True,
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        self.sessions = tuple(sorted(sessions))
        self.latency_buckets = latency_buckets(deadline)
        self._counters: Mapping[str, int] = counters if counters is not None else {}
        self._in_flight = in_flight
        self._connections = dict(connections or {})
        self._audit_pending = audit_pending
        #: The transparency log's publisher, when this process runs one (``health`` says
        #: the same): read at scrape time; None means no publish series.
        self.publish_status: Callable[[], Any] | None = None
        # Rule 3: every series exists from the start.
        self._decisions = {(s, o): 0 for s in self.sessions for o in OUTCOMES}
        self._codes = tuple(code.name for code in ErrorCode)
        self._received = dict.fromkeys(self.sessions, 0)
        self._stages = {session: self._new_stages() for session in self.sessions}
        self._audit_write = _Histogram(AUDIT_WRITE_BUCKETS)
        self._audit_batch = _Histogram(BATCH_BUCKETS)
        self._build = {
            "version": __version__,
            "protocol_version": str(PROTOCOL_VERSION),
            "python": platform.python_version(),
        }
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        if process:  # the standard process_* names (rule 8)
            ProcessCollector(namespace="", registry=self.registry)

    def set_sessions(self, sessions: Iterable[str]) -> None:
        """The hosted sessions are now ``sessions`` (a reload; rules 2-3)."""
        names = tuple(sorted(sessions))
        self._decisions = {(s, o): self._decisions.get((s, o), 0) for s in names for o in OUTCOMES}
        self._received = {s: self._received.get(s, 0) for s in names}
        self._stages = {s: self._stages.get(s) or self._new_stages() for s in names}
        self.sessions = names

    def _new_stages(self) -> tuple[_Histogram, ...]:
        return tuple(_Histogram(self.latency_buckets) for _ in STAGES)

    # -- the request path (rule 4)

    def observe_decision(
        self,
        session: str,
        outcome: str,
        *,
        receive_ns: int,
        evaluate_ns: int,
        audit_ns: int,
        total_ns: int,
    ) -> None:
        """One decision answered in ``session``: its outcome and its stages' times."""
        key = (session, outcome)
        if key not in self._decisions:  # not a hosted session or outcome: no new series
            return
        self._decisions[key] += 1
        receive, evaluate, audit, total = self._stages[session]
        receive.observe(receive_ns / 1e9)
        evaluate.observe(evaluate_ns / 1e9)
        audit.observe(audit_ns / 1e9)
        total.observe(total_ns / 1e9)

    def on_decision(
        self,
        session: str,
        outcome: str,
        receive_ns: int,
        evaluate_ns: int,
        audit_ns: int,
        total_ns: int,
        evidence_bytes: int,
    ) -> None:
        """The pipeline's hook (``Pipeline.on_decision``): one decision answered."""
        self.observe_decision(
            session,
            outcome,
            receive_ns=receive_ns,
            evaluate_ns=evaluate_ns,
            audit_ns=audit_ns,
            total_ns=total_ns,
        )
        self.count_received(session, evidence_bytes)

    def count_received(self, session: str, size: int) -> None:
        """``size`` evidence bytes received for ``session`` (hosted sessions only)."""
        if session in self._received:
            self._received[session] += size

    def observe_audit_batch(self, lines: int, seconds: float) -> None:
        """One audit group commit of ``lines`` lines that took ``seconds`` (the audit
        writer's thread: the only writer of these two)."""
        self._audit_batch.observe(lines)
        self._audit_write.observe(seconds)

    # -- the collector

    def collect(self) -> Iterator[Metric]:
        """The metric families, in the order ``docs/metrics.md`` lists them."""
        info = InfoMetricFamily("evidenced_build", "The running daemon's version.")
        info.add_metric([], self._build)
        yield info
        decisions = CounterMetricFamily(
            "evidenced_decisions",
            "Decisions answered (audited), by session and outcome.",
            labels=["session", "outcome"],
        )
        for (session, outcome), value in self._decisions.items():
            decisions.add_metric([session, outcome], value)
        yield decisions
        refusals = CounterMetricFamily(
            "evidenced_refusals",
            "Requests refused, by error code (audited unless the connection made no request).",
            labels=["code"],
        )
        counts = self._counters
        for code in self._codes:
            refusals.add_metric([code], counts.get(f"refusal:{code}", 0))
        yield refusals
        yield CounterMetricFamily(
            "evidenced_busy",
            "Requests and connections answered BUSY (server or peer at capacity).",
            value=counts.get("refusal:BUSY", 0),
        )
        received = CounterMetricFamily(
            "evidenced_evidence_received_bytes",
            "Evidence bytes received for evaluation, by session.",
            labels=["session"],
        )
        for session, value in self._received.items():
            received.add_metric([session], value)
        yield received
        stages = HistogramMetricFamily(
            "evidenced_request_stage_seconds",
            "Time of each stage of a decided request, by session: receive (evidence), "
            "evaluate, audit (line durable), total.",
            labels=["session", "stage"],
        )
        names = _bucket_names(self.latency_buckets)
        for session, histograms in self._stages.items():
            for stage, histogram in zip(STAGES, histograms, strict=True):
                stages.add_metric([session, stage], histogram.buckets(names), histogram.total)
        yield stages
        for name, documentation, histogram in (
            (
                "evidenced_audit_write_seconds",
                "Time of one group commit of the audit log: write(2), plus fsync(2) when durable.",
                self._audit_write,
            ),
            (
                "evidenced_audit_batch_lines",
                "Audit lines written per group commit.",
                self._audit_batch,
            ),
        ):
            family = HistogramMetricFamily(name, documentation)
            names = _bucket_names(histogram.bounds)
            family.add_metric([], histogram.buckets(names), histogram.total)
            yield family
        yield GaugeMetricFamily(
            "evidenced_requests_in_flight",
            "Submits holding a capacity slot now.",
            value=self._in_flight(),
        )
        yield GaugeMetricFamily(
            "evidenced_audit_pending_lines",
            "Audit lines rendered and not yet durable.",
            value=self._audit_pending(),
        )
        connections = GaugeMetricFamily(
            "evidenced_connections", "Open connections, by listener.", labels=["listener"]
        )
        for listener in LISTENERS:
            count = self._connections.get(listener)
            connections.add_metric([listener], count() if count is not None else 0)
        yield connections
        published = self.publish_status() if self.publish_status is not None else None
        if published is not None:
            yield GaugeMetricFamily(
                "evidenced_publish_lag_leaves",
                "Leaves of the local transparency log not yet in a published checkpoint.",
                value=published.lag or 0,
            )
            yield CounterMetricFamily(
                "evidenced_publish_failures",
                "Publishing passes that failed (each is retried with backoff).",
                value=published.failures,
            )

    # -- views

    def exposition(self) -> bytes:
        """The Prometheus text exposition of this server's registry (rule 1)."""
        return generate_latest(self.registry)

    def snapshot(self) -> list[dict[str, Any]]:
        """Every sample but histogram buckets, as JSON-ready dicts (rule 5)."""
        samples: list[dict[str, Any]] = []
        for family in self.registry.collect():
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    continue
                value = sample.value
                samples.append(
                    {
                        "name": sample.name,
                        "labels": dict(sample.labels),
                        "value": int(value) if float(value).is_integer() else value,
                    }
                )
        return samples
