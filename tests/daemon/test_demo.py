"""``make demo`` (``evidenced demo``) runs end to end and says so.

In-process through ``daemon.cli.main`` (the demo still starts a real daemon process and talks to
it over a real Unix socket); ``tests/test_wheel.py`` runs the installed ``evidenced demo``.
"""

from __future__ import annotations

import pytest

from daemon.cli import main


def test_demo_submits_every_case_verifies_the_chain_and_stops_cleanly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["demo"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "EVIDENCE_BYTES_EXCEEDED" in out and "FORMATION_CHECK_INVALID" in out
    assert "daemon stopped with SIGTERM: exit 0" in out
    assert '"status": "INTACT"' in out
    assert "demo OK" in out


def test_demo_with_retention_replays_every_decision_it_made(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["demo", "--retain"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert 'retain = "all"' in out
    assert "REPRODUCED: 6 decisions replayed" in out and "DIFFERENT 0" in out
    assert "demo OK: every answer is the expected one, every decision reproduced" in out
