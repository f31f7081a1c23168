"""``evidenced audit report`` rendered by a real headless Chromium: no errors, the right points."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headless import Chromium

from daemon.audit._synthetic import write_synthetic_log
from daemon.commands._report import aggregate
from daemon.commands._report_html import render_report_html


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
        assert page.evaluate("document.querySelectorAll('[id^=restart-]').length") == 3 * restarts
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
