"""The metrics registry: exposition, bounded labels, one registry per server (daemon/_metrics)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import testdata
from prometheus_client.parser import text_string_to_metric_families

from daemon import HostedSession, open_server
from daemon.server._metrics import LISTENERS, OUTCOMES, STAGES, ServerMetrics, latency_buckets
from daemon.wire._protocol import ErrorCode
from session import BytesDigestMechanism

DOC = (testdata.REPO / "docs" / "metrics.md").read_text("utf-8")


def samples(metrics: ServerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode("utf-8")):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def decide(metrics: ServerMetrics, session: str, outcome: str = "PASS") -> None:
    metrics.observe_decision(
        session,
        outcome,
        receive_ns=10_000,
        evaluate_ns=300_000,
        audit_ns=2_000_000,
        total_ns=2_400_000,
    )


def test_every_series_exists_at_zero_from_the_start() -> None:
    found = samples(ServerMetrics(["formation", "descriptor"], process=False))
    for session in ("formation", "descriptor"):
        for outcome in OUTCOMES:
            key = ("evidenced_decisions_total", (("outcome", outcome), ("session", session)))
            assert found[key] == 0
        for stage in STAGES:
            key = (
                "evidenced_request_stage_seconds_count",
                (("session", session), ("stage", stage)),
            )
            assert found[key] == 0
    for code in ErrorCode:
        assert found[("evidenced_refusals_total", (("code", code.name),))] == 0
    for listener in LISTENERS:
        assert found[("evidenced_connections", (("listener", listener),))] == 0


def test_decisions_refusals_and_stages_are_counted() -> None:
    counters = Counter({"refusal:BUSY": 1, "refusal:EVIDENCE_BYTES_EXCEEDED": 1})
    metrics = ServerMetrics(["formation"], counters=counters, process=False)
    decide(metrics, "formation")
    decide(metrics, "formation", "FAIL")
    metrics.count_received("formation", 1234)
    metrics.observe_audit_batch(3, 0.002)
    found = samples(metrics)
    for outcome in ("PASS", "FAIL"):
        key = ("evidenced_decisions_total", (("outcome", outcome), ("session", "formation")))
        assert found[key] == 1
    assert found[("evidenced_refusals_total", (("code", "BUSY"),))] == 1
    assert found[("evidenced_busy_total", ())] == 1
    assert found[("evidenced_evidence_received_bytes_total", (("session", "formation"),))] == 1234
    stage = (("le", "0.0025"), ("session", "formation"), ("stage", "audit"))
    assert found[("evidenced_request_stage_seconds_bucket", stage)] == 2
    below = (("le", "0.001"), ("session", "formation"), ("stage", "audit"))
    assert found[("evidenced_request_stage_seconds_bucket", below)] == 0
    assert found[("evidenced_audit_batch_lines_sum", ())] == 3
    assert found[("evidenced_audit_write_seconds_count", ())] == 1


def test_an_unhosted_session_name_never_becomes_a_series() -> None:
    metrics = ServerMetrics(["formation"], process=False)
    before = metrics.exposition()
    for name in ("attacker-1", "attacker-2", 'x"}\n'):
        decide(metrics, name)
        metrics.count_received(name, 10)
    after = metrics.exposition()
    assert before.count(b"\n") == after.count(b"\n")
    assert b"attacker" not in after


def test_two_servers_never_mix_their_counts() -> None:
    first, second = ServerMetrics(["s"], process=False), ServerMetrics(["s"], process=False)
    decide(first, "s")
    key = ("evidenced_decisions_total", (("outcome", "PASS"), ("session", "s")))
    assert samples(first)[key] == 1 and samples(second)[key] == 0


def test_gauges_are_read_when_scraped() -> None:
    state = {"in_flight": 0}
    metrics = ServerMetrics(
        ["s"],
        in_flight=lambda: state["in_flight"],
        connections={"http": lambda: 7},
        process=False,
    )
    state["in_flight"] = 5
    found = samples(metrics)
    assert found[("evidenced_requests_in_flight", ())] == 5
    assert found[("evidenced_connections", (("listener", "http"),))] == 7
    assert found[("evidenced_connections", (("listener", "binary"),))] == 0


def test_snapshot_holds_the_exposition_samples_but_buckets() -> None:
    metrics = ServerMetrics(["s"], process=False)
    decide(metrics, "s")
    exposed = {
        (name, labels): value
        for (name, labels), value in samples(metrics).items()
        if not name.endswith("_bucket")
    }
    snapshot = {
        (item["name"], tuple(sorted(item["labels"].items()))): item["value"]
        for item in metrics.snapshot()
    }
    assert snapshot == exposed


def test_every_exposed_metric_is_documented_and_every_documented_one_exposed() -> None:
    from daemon.retention._publish import PublishStatus

    metrics = ServerMetrics(["s"])
    # as a server that publishes its transparency log sets it (daemon.server._publishing)
    metrics.publish_status = lambda: PublishStatus("fs:/p", 3, 5, 0, None, None)
    exposed = {
        family.name if family.type != "counter" else family.name + "_total"
        for family in text_string_to_metric_families(metrics.exposition().decode("utf-8"))
    }
    exposed = {name + "_info" if name == "evidenced_build" else name for name in exposed}
    documented = set(re.findall(r"^\| `((?:evidenced|process)_[a-z_]+)` \|", DOC, re.MULTILINE))
    assert exposed == documented


def test_the_grafana_dashboard_queries_only_metrics_that_exist() -> None:
    dashboard = json.loads(
        (testdata.REPO / "packaging" / "grafana" / "evidenced.json").read_text("utf-8")
    )
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {
        name for expr in exprs for name in re.findall(r"\b((?:evidenced|process)_[a-z_]+)", expr)
    }
    exposed: set[str] = set()
    for family in text_string_to_metric_families(ServerMetrics(["s"]).exposition().decode()):
        exposed.update(sample.name for sample in family.samples)
    assert used and used <= exposed, used - exposed
    for name in ("evidenced_decisions_total", "evidenced_refusals_total", "evidenced_busy_total"):
        assert name in used


def test_process_metrics_have_the_standard_names() -> None:
    """They were ``evidenced_process_*``: a dashboard or alert written for every other
    exporter's ``process_cpu_seconds_total`` found nothing."""
    names = {family.name for family in text_string_to_metric_families(
        ServerMetrics(["s"]).exposition().decode())}  # fmt: skip
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "process_open_fds"} <= names
    assert not {name for name in names if name.startswith("evidenced_process")}


def test_the_stage_buckets_reach_the_request_deadline() -> None:
    """The stage histogram stopped at 2.5 s while ``request_deadline`` is 30 s: every
    request slower than 2.5 s, up to the deadline, was one ``+Inf``."""
    metrics = ServerMetrics(["s"], process=False)  # the default deadline, 30 s
    metrics.observe_decision(
        "s", "UNKNOWN", receive_ns=0, evaluate_ns=29 * 10**9, audit_ns=0, total_ns=29 * 10**9
    )
    found = samples(metrics)
    total = (("le", "30.0"), ("session", "s"), ("stage", "total"))
    below = (("le", "10.0"), ("session", "s"), ("stage", "total"))
    assert found[("evidenced_request_stage_seconds_bucket", total)] == 1
    assert found[("evidenced_request_stage_seconds_bucket", below)] == 0
    assert latency_buckets(30.0)[-1] == 30.0 and latency_buckets(30.0)[0] == 0.001
    assert latency_buckets(0.5) == (0.001, 0.0025, 0.01, 0.025, 0.1, 0.5)
    assert latency_buckets(120.0)[-3:] == (10.0, 60.0, 120.0)


async def test_a_server_s_stage_buckets_end_at_its_own_deadline(short_dir: Path) -> None:
    async with open_server(
        [HostedSession("bytes", (BytesDigestMechanism(),))],
        tcp=None,
        unix=str(short_dir / "s"),
        audit_path=str(short_dir / "audit.jsonl"),
        request_deadline=7.5,
    ) as server:
        bounds = server.metrics.latency_buckets
    assert bounds[-1] == 7.5 and bounds[-2] == 2.5
