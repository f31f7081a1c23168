"""What installing evidenced costs: the wheel in fresh venvs, its size, its start-up times.

Builds the wheel of a checkout (this one, and with ``--base DIR`` another one, e.g.
``git archive main | tar -x -C DIR``, for a before/after), installs it from the package index
pip is configured with into fresh venvs (``python -m venv --without-pip``, pip run from
outside: the venv holds only what the wheel pulls in) — once without extras (the core) and once
with every extra the checkout declares but ``test`` (``[all]``; a checkout without ``all``
gets its extras listed one by one) — and prints:

1. **Installed size**: the disk use of the venv's ``site-packages`` (``du -s``, in MiB), the
   number of distributions (``*.dist-info``) and how long ``pip install`` took (pip's cache
   warm after the first run). Goal: the core ≤ 40 MiB (the issue's "≤ 40 MB", whose figures
   are du's).
2. **Start-up** (median of ``--runs`` runs, interleaved across the venvs so load that drifts
   hits all alike; min–max in the table): ``python -c pass`` (the floor), the clients'
   import (``from daemon import SyncClient``, ``from daemon import open_client``),
   ``evidenced --help``, ``evidenced mechanisms`` and the time from starting ``evidenced
   serve`` (the embedded default configuration, on a Unix socket) to its ``serving`` line.

Never asserts on time or size. Usage: ``python benchmarks/bench_install.py [--quick]
[--json PATH] [--base DIR] [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import attrs
from _harness import Report, at_most, main

ROOT = Path(__file__).resolve().parents[1]
PIP = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input")
MIB = 1024 * 1024
CORE_GOAL_MIB = 40  # the "≤ 40 MB", in du's units as its own figures are (MiB)


@attrs.frozen
class Venv:
    label: str
    path: Path
    site_packages: Path

    @property
    def python(self) -> str:
        return str(self.path / "bin" / "python")

    @property
    def evidenced(self) -> str:
        return str(self.path / "bin" / "evidenced")


def _run(*command: str | Path, cwd: Path | None = None) -> None:
    subprocess.run([str(part) for part in command], cwd=cwd, check=True, capture_output=True)


def build_wheel(checkout: Path, work: Path) -> tuple[Path, dict[str, list[str]]]:
    """The checkout's wheel (built from a copy of what the wheel is made of) and its extras."""
    pyproject = tomllib.loads((checkout / "pyproject.toml").read_text(encoding="utf-8"))
    settings = pyproject["tool"]["setuptools"]
    source, dist = work / "src", work / "dist"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(checkout / name, source / name)
    mapped = settings.get("package-dir", {})
    folders = {mapped.get(name, name.split(".")[0]) for name in settings["packages"]}
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in sorted(folders):
        shutil.copytree(checkout / folder, source / folder, ignore=ignore)
    build = ("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", dist)
    _run(*PIP, *build, source)
    [wheel] = dist.glob("evidenced-*.whl")
    extras = dict(pyproject["project"].get("optional-dependencies", {}))
    return wheel, extras


def install(label: str, requirement: str, where: Path, report: Report) -> Venv:
    """A fresh venv holding ``requirement`` and what it pulls in (figures: size, count, time)."""
    _run(sys.executable, "-m", "venv", "--without-pip", where)
    started = time.perf_counter()
    _run(*PIP, "--python", where / "bin" / "python", "install", "--quiet", requirement)
    took = time.perf_counter() - started
    [site_packages] = (where / "lib").glob("python3.*/site-packages")
    venv = Venv(label, where, site_packages)
    goal = at_most(CORE_GOAL_MIB) if label.endswith("core") else None
    report.value(f"{label}: site-packages (du -s)", disk_use(site_packages) / MIB, "MiB", goal=goal)
    count = len(list(site_packages.glob("*.dist-info")))
    report.value(f"{label}: distributions installed", count, "")
    report.value(f"{label}: pip install (index, warm cache)", took, "s")
    return venv


def disk_use(folder: Path) -> int:
    """Bytes of disk ``du -s`` counts: allocated blocks, each hard-linked file once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for directory, _, names in os.walk(folder):
        for name in [".", *names]:
            status = os.lstat(os.path.join(directory, name))
            if (status.st_dev, status.st_ino) not in seen:
                seen.add((status.st_dev, status.st_ino))
                total += status.st_blocks * 512
    return total


def wall(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - started


def to_serving(venv: Venv, cwd: Path) -> float:
    """Seconds from starting ``evidenced serve`` to its ``serving`` document on stdout."""
    folder = Path(tempfile.mkdtemp(prefix="evbi", dir="/tmp"))  # a short socket path
    try:
        started = time.perf_counter()
        process = subprocess.Popen(
            [venv.evidenced, "serve", "--socket", "s", "--audit-log", "a.jsonl"],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert process.stdout is not None
        line = process.stdout.readline()
        took = time.perf_counter() - started
        process.terminate()
        process.wait(30)
        process.stdout.close()
        if '"serving"' not in line:
            raise RuntimeError(f"{venv.label}: serve did not start: {line!r}")
        return took
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def start_up(report: Report, venvs: list[Venv], runs: int, cwd: Path) -> None:
    probes: dict[str, Callable[[Venv], float]] = {
        "python -c pass (floor)": lambda v: wall([v.python, "-c", "pass"], cwd),
        "from daemon import SyncClient": lambda v: wall(
            [v.python, "-c", "from daemon import SyncClient"], cwd
        ),
        "from daemon import open_client": lambda v: wall(
            [v.python, "-c", "from daemon import open_client"], cwd
        ),
        "evidenced --help": lambda v: wall([v.evidenced, "--help"], cwd),
        "evidenced mechanisms": lambda v: wall([v.evidenced, "mechanisms"], cwd),
        "evidenced serve to its serving line": lambda v: to_serving(v, cwd),
    }
    for name, probe in probes.items():
        samples: dict[str, list[float]] = {venv.label: [] for venv in venvs}
        for index in range(runs):
            order = venvs if index % 2 == 0 else venvs[::-1]
            for venv in order:
                samples[venv.label].append(probe(venv))
        for venv in venvs:
            values = samples[venv.label]
            report.value(f"{venv.label}: {name}", statistics.median(values), "s", spread=values)


def variants(label: str, wheel: Path, extras: dict[str, list[str]]) -> list[tuple[str, str]]:
    named = [name for name in extras if name not in ("test", "all")]
    every = "all" if "all" in extras else ",".join(named)
    found = [(f"{label} core", str(wheel))]
    if every:
        found.append((f"{label} [{every}]", f"{wheel}[{every}]"))
    return found


def run(report: Report, args: argparse.Namespace) -> None:
    runs = 3 if report.quick else args.runs
    checkouts = [("after", ROOT)]
    if args.base:
        checkouts.insert(0, ("before", Path(args.base).resolve()))
    with tempfile.TemporaryDirectory(prefix="evidenced-install-") as directory:
        work = Path(directory)
        venvs: list[Venv] = []
        for label, checkout in checkouts:
            wheel, extras = build_wheel(checkout, work / label)
            for index, (name, requirement) in enumerate(variants(label, wheel, extras)):
                venvs.append(install(name, requirement, work / label / f"venv{index}", report))
        outside = work / "cwd"  # never the checkout: the venv's own files are what runs
        outside.mkdir()
        start_up(report, venvs, runs, outside)


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", help="another checkout to install and time (before/after)")
    parser.add_argument("--runs", type=int, default=11, help="runs per start-up figure")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=options))
