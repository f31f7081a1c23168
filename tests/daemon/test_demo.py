"""``make demo`` (``evidenced demo``) runs end to end and says so.

In-process through ``daemon.cli.main`` (the demo still starts a real daemon process and talks to
it over a real Unix socket); ``tests/test_wheel.py`` runs the installed ``evidenced demo``.
"""

from __future__ import annotations

import json

import pytest

from daemon.cli import main


def test_demo_submits_every_case_verifies_the_chain_and_stops_cleanly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["demo"])
    captured = capsys.readouterr()
    out, report = captured.out, captured.err
    assert code == 0, report
    # stdout: the one JSON document; the human report is on stderr.
    summary = json.loads(out)
    assert summary["status"] == "OK" and summary["daemon_exit"] == 0
    assert summary["chain_while_serving"] == summary["chain_after_shutdown"] == "INTACT"
    assert {case["why"] for case in summary["cases"]} >= {
        "EVIDENCE_BYTES_EXCEEDED",
        "FORMATION_CHECK_INVALID",
    }
    assert "EVIDENCE_BYTES_EXCEEDED" in report and "FORMATION_CHECK_INVALID" in report
    assert "daemon stopped with SIGTERM: exit 0" in report
    assert '"status":"INTACT"' in report
    assert "demo OK" in report


def test_demo_with_retention_replays_every_decision_it_made(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["demo", "--retain"])
    captured = capsys.readouterr()
    out, report = captured.out, captured.err
    assert code == 0, report
    assert json.loads(out)["replayed"] is True
    assert 'retain = "all"' in report
    assert "REPRODUCED: 6 decisions replayed" in report and "DIFFERENT 0" in report
    assert "demo OK: every answer is the expected one, every decision reproduced" in report
