"""Run every ``benchmarks/bench_*.py`` (``make bench``) and end with one table of all figures.

Each script runs in its own process with ``--json`` into a temporary file (so one script's
memory or threads never weigh on the next); its own output streams through. At the end the
figures of all scripts are printed as one table with their goals, and ``--json PATH`` writes
them as one document for comparison across commits; ``--baseline PATH`` (a document written
earlier) adds a ``before`` column. Exit status: 1 if a script failed, else 0 (goals are
reported, never asserted).

Usage: ``python benchmarks/run_all.py [--quick] [--clock cpu] [--json PATH] [--baseline PATH]
[NAME ...]``
where NAME selects scripts by substring (``holdout``, ``formation``...).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import Report, header, read_results

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only scripts whose name contains one")
    parser.add_argument("--quick", action="store_true", help="few rounds (smoke run)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write all figures as JSON")
    parser.add_argument("--baseline", type=Path, metavar="PATH", help="an earlier --json file")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="see _harness")
    args = parser.parse_args()
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.names:
        scripts = [s for s in scripts if any(name in s.stem for name in args.names)]
    report = Report("make bench", quick=args.quick, echo=False, clock=args.clock)
    failed: list[str] = []
    print(header("make bench"), flush=True)
    with tempfile.TemporaryDirectory(prefix="evbench-") as folder:
        for script in scripts:
            output = Path(folder) / f"{script.stem}.json"
            command = [sys.executable, str(script), "--json", str(output), "--clock", args.clock]
            if args.quick:
                command.append("--quick")
            print(f"\n$ {script.name}", flush=True)
            if subprocess.run(command, cwd=HERE.parent).returncode != 0 or not output.exists():
                failed.append(script.name)
                continue
            for result in read_results(output):
                report.add(result)
    baseline = read_results(args.baseline) if args.baseline is not None else []
    print("\n== all figures")
    print(report.table(baseline))
    if args.json is not None:
        report.write_json(args.json)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
