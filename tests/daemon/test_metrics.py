"""The metrics registry: exposition, bounded labels, one registry per server (daemon/_metrics)."""

from __future__ import annotations

import json
import re
from collections import Counter

import testdata
from prometheus_client.parser import text_string_to_metric_families

from daemon.server._metrics import LISTENERS, OUTCOMES, STAGES, ServerMetrics
from daemon.wire._protocol import ErrorCode

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
    documented = set(re.findall(r"^\| `(evidenced_[a-z_]+)` \|", DOC, re.MULTILINE))
    assert exposed == documented


def test_the_grafana_dashboard_queries_only_metrics_that_exist() -> None:
    dashboard = json.loads(
        (testdata.REPO / "packaging" / "grafana" / "evidenced.json").read_text("utf-8")
    )
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    used = {name for expr in exprs for name in re.findall(r"\b(evidenced_[a-z_]+)", expr)}
    exposed: set[str] = set()
    for family in text_string_to_metric_families(ServerMetrics(["s"]).exposition().decode()):
        exposed.update(sample.name for sample in family.samples)
    assert used and used <= exposed, used - exposed
    for name in ("evidenced_decisions_total", "evidenced_refusals_total", "evidenced_busy_total"):
        assert name in used
