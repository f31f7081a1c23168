"""``evidenced audit report``: exact aggregates, bounded memory, and the real daemon's log."""

from __future__ import annotations

import json
import math
import tracemalloc
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import clirun
import pytest
from daemon_testkit import bytes_binding, sha

from daemon import HostedSession, open_client, open_server, verify_log
from daemon.audit._synthetic import synthetic_lines, write_synthetic_log
from daemon.report._report import (
    MAX_BINS,
    MAX_KEYS,
    Aggregator,
    ReportError,
    aggregate,
    parse_instant,
)
from daemon.report._report_html import render_report_html
from session import BytesDigestMechanism


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _exact_quantile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def test_synthetic_log_is_an_intact_chain(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 3000)
    assert verify_log(log).intact and verify_log(log).lines == 3000
    assert b"".join(synthetic_lines(50)) == log.read_bytes()[: len(b"".join(synthetic_lines(50)))]


def test_aggregates_equal_a_naive_recount_of_every_line(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 6000, restart_every=2500)
    result = aggregate(log)
    records = _records(log)
    decisions = [r for r in records if r["event"] == "decision"]
    refusals = [r for r in records if r["event"] == "refusal"]
    assert result["totals"]["decisions"] == dict(Counter(r["outcome"] for r in decisions)) | {
        o: 0 for o in ("PASS", "FAIL", "UNKNOWN") if o not in {r["outcome"] for r in decisions}
    }
    assert result["totals"]["refusals"] == len(refusals)
    assert result["totals"]["busy"] == sum(r["code"] == "BUSY" for r in refusals)
    starts = [r["timestamp"] for r in records if r["event"] == "daemon_start"]
    assert result["totals"]["starts"] == 3 and result["totals"]["restarts"] == 2
    assert result["restarts"] == starts[1:]  # the first start of a log is no restart
    assert {c["name"]: c["count"] for c in result["refusals_by_code"]} == dict(
        Counter(r["code"] for r in refusals)
    )
    per_minute: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in decisions:
        per_minute[record["timestamp"][:16] + ":00Z"].append(record)
    series = {item["start"]: item for item in result["series"]}
    for minute, items in per_minute.items():
        assert series[minute]["decisions"] == {
            o: sum(r["outcome"] == o for r in items) for o in ("PASS", "FAIL", "UNKNOWN")
        }
        for metric in ("total_ns", "evaluate_ns"):
            values = [r["metrics"][metric] for r in items]
            for q, key in ((0.5, "p50"), (0.99, "p99")):
                exact = _exact_quantile(values, q)
                assert abs(series[minute][metric][key] - exact) <= 0.022 * exact + 1
    failures = [r for r in decisions if r["outcome"] != "PASS"][::-1][:25]
    assert [f["decision_id"] for f in result["recent_failures"]] == [
        f["decision_id"] for f in failures
    ]
    assert result["integrity"] == {"chain": verify_log(log).to_dict(), "transparency": None}


def test_since_until_keep_exactly_the_half_open_window(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 3000)
    since, until = "2026-11-29T08:20:00Z", "2026-11-29T08:40:00+00:00"
    result = aggregate(log, since=parse_instant(since), until=parse_instant(until))
    inside = [r for r in _records(log) if since <= r["timestamp"] < "2026-11-29T08:40:00"]
    assert result["lines"]["in_range"] == len(inside) > 0
    assert result["lines"]["read"] == 3000
    assert result["series"][0]["start"] >= since
    assert parse_instant("2026-11-29") == datetime(2026, 11, 29, tzinfo=UTC)


@pytest.mark.parametrize("text", ["yesterday", "2026-11-29T08:00:00", "2026-13-01"])
def test_an_unusable_instant_is_refused(text: str) -> None:
    with pytest.raises(ReportError):
        parse_instant(text)


def test_an_unusable_instant_is_a_usage_error_before_the_log_is_read(tmp_path: Path) -> None:
    completed = _cli("report", str(tmp_path / "none.jsonl"), "--until", "2026-11-29T08:00:00")
    assert completed.returncode == 2
    assert json.loads(completed.stdout)["error"]["code"] == "USAGE"
    assert b"needs a UTC offset" in completed.stderr


def test_a_long_span_coarsens_bins_instead_of_growing(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 4000, spacing=900.0)  # ~6 weeks of minutes
    result = aggregate(log)
    assert len(result["series"]) <= MAX_BINS
    assert result["bin_seconds"] > 60 and result["bin_seconds"] % 60 == 0
    total = sum(sum(item["decisions"].values()) for item in result["series"])
    assert total == sum(result["totals"]["decisions"].values())


def test_distinct_keys_beyond_the_cap_are_counted_as_other() -> None:
    aggregator = Aggregator()
    for number in range(MAX_KEYS + 200):
        aggregator.add(
            {
                "event": "decision",
                "timestamp": "2026-11-29T08:00:00.000000Z",
                "session": f"s{number}",
                "outcome": "PASS",
                "requester": {"transport": "tcp", "peer": f"10.0.{number // 250}.{number % 250}:1"},
            }
        )
    result = aggregator.result()
    assert len(aggregator.sessions.counts) == MAX_KEYS + 1
    assert aggregator.sessions.counts["(other)"] == 200
    assert sum(aggregator.sessions.counts.values()) == MAX_KEYS + 200
    assert len(result["top_sessions"]) == 10


def test_memory_does_not_grow_with_the_number_of_lines(tmp_path: Path) -> None:
    small = tmp_path / "small.jsonl"
    write_synthetic_log(small, 1200, spacing=0.05, restart_every=10**9)
    large = tmp_path / "large.jsonl"
    large.write_bytes(small.read_bytes() * 6)  # 6x the lines (the chain breaks: still one pass)
    peaks = []
    for log in (small, large):
        tracemalloc.start()
        aggregate(log)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    # Both read in 1 MiB chunks: keeping anything per line would grow by megabytes here.
    assert peaks[1] < 1.6 * peaks[0], peaks


def test_a_broken_chain_is_reported_and_every_line_still_counted(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 500)
    lines = log.read_bytes().splitlines(keepends=True)
    lines[99] = lines[99].replace(b'"outcome":"PASS"', b'"outcome":"FAIL"', 1)
    lines[200] = b"not json\n"
    log.write_bytes(b"".join(lines))
    result = aggregate(log)
    assert result["integrity"]["chain"]["status"] == "BROKEN"
    assert result["integrity"]["chain"]["first_bad_line"] in (100, 201)
    assert result["lines"]["read"] == 500 and result["lines"]["unparseable"] == 1


def _cli(*args: str) -> clirun.CliResult:
    """``evidenced audit ARGS`` in-process (``tests/test_cli_contract.py`` runs the real
    process)."""
    return clirun.in_process(["audit", *args])


async def test_report_of_the_real_daemons_log_counts_what_it_answered(short_dir: Path) -> None:
    audit_path = short_dir / "audit.jsonl"
    sessions = [HostedSession("bytes", (BytesDigestMechanism(),))]
    async with open_server(sessions, tcp=("127.0.0.1", 0), audit_path=str(audit_path)) as server:
        assert server.tcp_address is not None
        async with open_client(tcp=server.tcp_address) as client:
            outcomes = [
                (await client.submit("bytes", bytes_binding(b"a"), [b"a"])).outcome,
                (
                    await client.submit("bytes", bytes_binding(b"b", expected=sha(b"c")), [b"b"])
                ).outcome,
            ]
    assert outcomes == ["PASS", "FAIL"]
    completed = _cli("report", str(audit_path), "--format", "json")
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["totals"]["decisions"] == {"PASS": 1, "FAIL": 1, "UNKNOWN": 0}
    assert result["totals"]["starts"] == 1 and result["totals"]["restarts"] == 0
    assert result["integrity"]["chain"]["status"] == "INTACT"
    assert result["top_requesters"] == [{"name": "tcp 127.0.0.1", "count": 2}]
    assert [f["outcome"] for f in result["recent_failures"]] == ["FAIL"]
    html = render_report_html(aggregate(audit_path))
    assert "Hash chain INTACT" in html and 'id="transparency"' in html
    assert "<script" not in html and "https://" not in html


def test_a_missing_log_is_exit_66_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    completed = _cli("report", str(tmp_path / "missing.jsonl"), "--out", str(out))
    assert completed.returncode == 66 and not out.exists()
    assert json.loads(completed.stdout)["error"]["code"] == "INPUT_UNREADABLE"
    assert b"Traceback" not in completed.stderr
