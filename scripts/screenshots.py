"""Regenerate the README's pictures (``make screenshots``): real commands, real browser.

1. ``docs/img/formation-explain.png``: ``evidenced formation explain --format html`` of the
   shipped ``compose`` fixture with node 4 tampered to ``APPLY_STEP(source=1, target=1)`` and its
   certificate re-issued step for step (so only the typing rule fails, at node 4).
2. ``docs/img/audit-report.png``: ``evidenced audit report`` of a demo-style log (the daemon's
   line format, written by ``daemon.audit._synthetic``: 12,000 lines, three restarts, BUSY bursts).

Both pages are rendered by headless Chromium (tests/browser/driver/headless.py). The inputs are kept
next to the pictures' commands in the README, so anyone can rerun them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "browser" / "driver"))

from headless import Chromium  # noqa: E402

from daemon.audit._synthetic import write_synthetic_log  # noqa: E402
from mechanism.canonical import canonical_bytes  # noqa: E402

IMAGES = ROOT / "docs" / "img"
FIXTURES = ROOT / "fixtures" / "formation"
FIELDS = {
    "ATOM": (),
    "APPLY": ("argument",),
    "ID": ("at",),
    "APPLY_STEP": ("source", "target"),
    "COMPOSE": ("left", "right"),
    "QUOTE": ("value",),
    "READ": ("code",),
}


def _evidenced(*args: str, out: Path, cwd: Path = ROOT) -> int:
    with out.open("wb") as handle:
        completed = subprocess.run(
            [sys.executable, "-m", "daemon.cli", *args],
            stdout=handle,
            stderr=subprocess.DEVNULL,
            timeout=300,
            check=False,
            cwd=cwd,
        )
    return completed.returncode


def tampered_pair(folder: Path) -> tuple[Path, Path]:
    """The compose subject with node 4 tampered, and the step-for-step certificate of it."""
    import hashlib

    subject = json.loads((FIXTURES / "compose.subject.json").read_bytes())
    subject["nodes"][4] = {"source": 1, "tag": "APPLY_STEP", "target": 1}
    subject_bytes = canonical_bytes(subject)
    certificate = json.loads((FIXTURES / "compose.certificate.json").read_bytes())
    certificate["subject_digest"] = "sha256:" + hashlib.sha256(subject_bytes).hexdigest()
    certificate["steps"] = [
        {"node": i, "rule": n["tag"], "premises": [n[f] for f in FIELDS[n["tag"]]]}
        for i, n in enumerate(subject["nodes"])
    ]
    subject_path, certificate_path = folder / "subject.json", folder / "certificate.json"
    subject_path.write_bytes(subject_bytes)
    certificate_path.write_bytes(canonical_bytes(certificate))
    return subject_path, certificate_path


def main() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch, Chromium() as browser:
        folder = Path(scratch)
        subject, certificate = tampered_pair(folder)
        explain = folder / "explain.html"
        code = _evidenced(
            "formation", "explain", str(subject), str(certificate), "--format", "html", out=explain
        )
        assert code == 1, f"explain exited {code}"
        log = folder / "audit.jsonl"
        write_synthetic_log(log, 12000, restart_every=4500)
        report = folder / "report.html"
        assert (
            _evidenced("audit", "report", log.name, "--format", "html", out=report, cwd=folder) == 0
        )
        for page_path, image, height in (
            (explain, IMAGES / "formation-explain.png", 1000),
            (report, IMAGES / "audit-report.png", 1700),
        ):
            page = browser.new_page()
            page.open(page_path.as_uri())
            errors = page.console_errors()
            assert not errors, errors
            page.screenshot(image, width=1200, max_height=height)
            page.close()
            print(f"wrote {image.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
