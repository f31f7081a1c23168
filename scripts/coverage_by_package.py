"""Print line coverage per package from the ``.coverage`` data ``make coverage`` just wrote.

Rules: every source file coverage knows (imported or not, ``[tool.coverage.run] source``) counts
towards its package: the first two path parts for ``mechanism/`` (``mechanism/formation``,
``mechanism/descriptor``; ``mechanism/canonical.py`` is ``mechanism``), the first part
otherwise. Prints ``package statements missed cover`` rows and a total, sorted by package.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from pathlib import Path, PurePosixPath

import coverage


def _package(path: str) -> str:
    parts = PurePosixPath(path).parts
    if parts[0] == "mechanism" and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def main() -> int:
    report = coverage.Coverage()
    report.load()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "coverage.json"
        report.json_report(outfile=str(out))
        files = json.loads(out.read_bytes())["files"]
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path, entry in files.items():
        for name in (_package(path), "TOTAL"):
            totals[name][0] += entry["summary"]["num_statements"]
            totals[name][1] += entry["summary"]["missing_lines"]
    print(f"{'package':<24}{'statements':>12}{'missed':>9}{'cover':>8}")
    for name in [*sorted(set(totals) - {"TOTAL"}), "TOTAL"]:
        statements, missed = totals[name]
        percent = 100.0 * (statements - missed) / statements if statements else 100.0
        print(f"{name:<24}{statements:>12}{missed:>9}{percent:>7.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
