"""``evidenced audit report`` rendered by a real headless Chromium: no errors, the right points."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from headless import Chromium

from daemon.audit._synthetic import write_synthetic_log
from daemon.report._report import aggregate
from daemon.report._report_html import render_report_html


def _report(log: Path, out: Path) -> dict[str, Any]:
    """The aggregates and the page, exactly as ``audit report`` builds them."""
    result = aggregate(log)
    out.write_text(render_report_html(result), encoding="utf-8")
    return result


def test_report_page_loads_cleanly_and_plots_one_point_per_bin(
    browser: Chromium, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 2500, restart_every=1000)
    result = _report(log, tmp_path / "report.html")
    page = browser.new_page()
    try:
        page.open((tmp_path / "report.html").as_uri())
        assert page.console_errors() == []
        assert page.requests() == [(tmp_path / "report.html").as_uri()]
        bins = result["series"]

        def points(gid: str) -> int:
            return int(page.evaluate(f"document.querySelectorAll('#{gid} use').length"))

        for outcome in ("PASS", "FAIL", "UNKNOWN"):
            assert points(f"decisions-{outcome}") == len(bins) > 20
        with_latency = sum(1 for item in bins if item["total_ns"]["count"])
        for gid in ("latency-total-p50", "latency-total-p99", "latency-evaluate-p99"):
            assert points(gid) == with_latency
        assert points("busy") == sum(1 for item in bins if item["busy"])
        assert points("overflow") == sum(1 for item in bins if item["overflow_dropped"])
        restarts = len(result["restarts"])
        assert restarts == 2 and result["totals"]["starts"] == 3  # the first start is none
        # Each time axis carries every restart.
        assert page.evaluate("document.querySelectorAll('line.restart').length") == 3 * restarts
        bars = page.evaluate("document.querySelectorAll('[id^=refusal-code-]').length")
        assert bars == len(result["refusals_by_code"])
        rows = page.evaluate("document.querySelectorAll('#recent-failures tr').length")
        assert rows == 1 + len(result["recent_failures"])
        assert "Hash chain INTACT" in page.evaluate("document.querySelector('#chain').textContent")
        assert page.evaluate("document.querySelector('#transparency') !== null")
        assert page.evaluate("document.querySelector('#config-reloads') !== null")
        assert points("noise") == sum(1 for item in bins if item["noise"])
        # The plots are really drawn: each figure has a visible size.
        sizes = page.evaluate(
            "[...document.querySelectorAll('figure svg')]"
            ".map(s => s.getBoundingClientRect().height)"
        )
        assert len(sizes) == 4 and all(height > 80 for height in sizes)
    finally:
        page.close()


def test_the_charts_read_as_an_operator_reads_them(browser: Chromium, tmp_path: Path) -> None:
    """With matplotlib 3.11 the latency ticks showed ``$\\mathdefault{10^{1}}$`` and the
    charts' left edges did not line up. Read back from the rendered page: latency ticks named
    in units, time ticks as clock times, count ticks as integers from 0, every plot area's
    left and right edges the same, every label inside its chart."""
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 2500, restart_every=1000)
    _report(log, tmp_path / "report.html")
    page = browser.new_page()
    try:
        page.open((tmp_path / "report.html").as_uri())

        def texts(selector: str) -> list[str]:
            return list(
                page.evaluate(
                    f"[...document.querySelectorAll({selector!r})].map(t => t.textContent)"
                )
            )

        latency = texts("#chart-latency .tick.y text")
        assert len(latency) >= 2 and all(
            re.fullmatch(r"\d+(\.\d+)? (µs|ms|s)", text) for text in latency
        ), latency
        assert "1 ms" in latency
        clock = texts("#chart-decisions .tick.x text")
        assert len(clock) >= 4 and all(re.fullmatch(r"\d\d:\d\d", t) for t in clock), clock
        for chart in ("decisions", "pressure"):
            numbers = texts(f"#chart-{chart} .tick.y text")
            assert numbers[0] == "0" and all(re.fullmatch(r"\d+", t) for t in numbers), numbers
        assert not [t for t in texts("svg text") if "$" in t or "mathdefault" in t]
        edges = page.evaluate(
            "[...document.querySelectorAll('rect.plot-area')]"
            ".map(r => { const b = r.getBoundingClientRect(); return [b.left, b.right]; })"
        )
        assert len(edges) == 4
        lefts, rights = [e[0] for e in edges], [e[1] for e in edges]
        assert max(lefts) - min(lefts) < 0.5 and max(rights) - min(rights) < 0.5, edges
        outside = page.evaluate(
            """[...document.querySelectorAll('svg.chart')].flatMap(svg => {
                 const box = svg.getBoundingClientRect();
                 return [...svg.querySelectorAll('text')].map(t => [t.textContent,
                   t.getBoundingClientRect()]).filter(([_, b]) => b.left < box.left - 0.5
                   || b.right > box.right + 0.5 || b.top < box.top - 0.5
                   || b.bottom > box.bottom + 0.5).map(([text]) => text); })"""
        )
        assert outside == []
    finally:
        page.close()


def test_hostile_text_in_the_log_stays_text_in_the_browser(
    browser: Chromium, tmp_path: Path
) -> None:
    """A doctored log's refusal codes and sessions (markup, math text, control characters)
    are drawn and listed as the characters they are: no element, no script, no error."""
    hostile = ["$\\frac{1}{$", "<script>document.title='owned'</script>", '"><img src=x>']
    log = tmp_path / "audit.jsonl"
    log.write_text(
        "".join(
            f'{{"seq":{n + 1},"event":"refusal","timestamp":"2026-11-29T08:00:0{n}Z",'
            f'"code":{json.dumps(code)},"session":{json.dumps(code)}}}\n'
            for n, code in enumerate(hostile)
        )
    )
    _report(log, tmp_path / "report.html")
    page = browser.new_page()
    try:
        page.open((tmp_path / "report.html").as_uri())
        assert page.console_errors() == []
        assert page.requests() == [(tmp_path / "report.html").as_uri()]
        assert page.evaluate("document.querySelectorAll('script, img').length") == 0
        assert not str(page.evaluate("document.title")).endswith("owned")
        text = str(page.evaluate("document.querySelector('#plot-refusals').textContent"))
        assert "$\\frac{1}{$" in text
    finally:
        page.close()
