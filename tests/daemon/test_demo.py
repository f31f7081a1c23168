"""``make demo`` (``python -m daemon.demo``) runs end to end and says so."""

from __future__ import annotations

import subprocess
import sys

from daemon_testkit import ROOT


def test_demo_submits_every_case_verifies_the_chain_and_stops_cleanly() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "daemon.demo"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "EVIDENCE_BYTES_EXCEEDED" in out and "FORMATION_CHECK_INVALID" in out
    assert "daemon stopped with SIGTERM: exit 0" in out
    assert '"status": "INTACT"' in out
    assert "demo OK" in out
