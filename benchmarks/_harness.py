"""The one timing harness every script in ``benchmarks/`` uses (see docs/benchmarks.md).

Rules (what a figure printed through this module means):

1. **Interleaved rounds.** An operation is only ever compared with a floor measured in the same
   rounds: every round takes one sample of the floor and one of each operation, in an order that
   rotates from round to round, so load that drifts during a run hits all of them alike. Never
   all floor samples first and the operation afterwards.
2. **Calibrated samples.** A sample repeats its callable ``loops`` times, calibrated once per
   callable so that a sample lasts at least ``min_sample`` seconds (timer resolution and call
   overhead vanish). Rounds are capped so a measurement takes about ``max_seconds``. Samples
   are wall-clock time, or with ``--clock cpu`` this thread's CPU time (steadier when other
   processes load the machine; only for operations that run in the calling thread). The
   garbage collector is off while timed samples run, as in ``timeit`` (not for ``sampled``
   costs, which may be measured in another process).
3. **Median of per-round ratios.** The figure is the median of the per-round ratios
   ``operation / floor``; the spread printed beside it is the min-max of those ratios.
4. **Impossible figures are refused.** Against a *true floor* (work the operation provably
   does too, e.g. ``sha256`` of bytes it must hash), a median ratio below 1.0 cannot be real:
   the harness prints ``noisy run, rerun`` instead of a figure and records no ratio. Pass
   ``true_floor=False`` when the reference is a *baseline* the operation may legitimately beat.
5. **Load is recorded.** The 1-minute load average at the start and end of every measurement is
   kept with its result, and printed.
6. **Goals are reported, never asserted** (``met``, ``MISSED`` or ``-`` when noisy).

A script builds a :class:`Report`, adds figures with :meth:`Report.compare`,
:meth:`Report.compare_many`, :meth:`Report.time` or :meth:`Report.value`, and hands its
``run(report, args)`` function to :func:`main`, which parses ``--json PATH``, ``--quick`` and
``--clock``,
prints the table of all figures and their goals at the end and writes the JSON document.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

JSON_SCHEMA = "evidenced-bench-v1"
NOISY = "noisy run, rerun"
REPO = Path(__file__).resolve().parents[1]


@attrs.frozen
class Goal:
    """A bound a figure should meet: ``relation`` is ``"<="``, ``"<"``, ``">="`` or ``">"``."""

    relation: str
    bound: float

    def met(self, value: float) -> bool:
        return {
            "<=": value <= self.bound,
            "<": value < self.bound,
            ">=": value >= self.bound,
            ">": value > self.bound,
        }[self.relation]

    def render(self, unit: str) -> str:
        sign = {"<=": "≤", ">=": "≥", "<": "<", ">": ">"}[self.relation]
        bound = f"{_number(self.bound)}×" if unit == "x" else _render(self.bound, unit)
        return f"{sign} {bound}"


def at_most(bound: float) -> Goal:
    return Goal("<=", bound)


def at_least(bound: float) -> Goal:
    return Goal(">=", bound)


def below(bound: float) -> Goal:
    return Goal("<", bound)


@attrs.frozen
class Op:
    """One operation of :meth:`Report.compare_many`."""

    name: str
    call: Callable[[], object]
    goal: Goal | None = None
    true_floor: bool = True


@attrs.frozen
class Result:
    """One figure. ``value`` is ``None`` only for a noisy ratio (rule 4).

    ``unit`` is ``"x"`` for a ratio (then ``floor`` names the floor), else a unit such as
    ``"s"``, ``"/s"``, ``"MiB"`` or ``"%"``. ``low``/``high`` are the spread (min-max of the
    per-round figures), ``None`` when the script measured a single value.
    """

    name: str
    value: float | None
    unit: str
    low: float | None = None
    high: float | None = None
    goal: Goal | None = None
    floor: str | None = None
    true_floor: bool = False
    noisy: bool = False
    op_seconds: float | None = None
    floor_seconds: float | None = None
    rounds: int | None = None
    load: tuple[float, float] | None = None
    script: str = ""

    @property
    def met(self) -> bool | None:
        if self.goal is None or self.value is None:
            return None
        return self.goal.met(self.value)

    def status(self) -> str:
        if self.noisy:
            return NOISY
        met = self.met
        return "" if met is None else ("met" if met else "MISSED")

    def figure(self) -> str:
        """The median with its spread, as printed (rule 4: noisy ratios are refused)."""
        if self.noisy or self.value is None:
            return NOISY
        text = _render(self.value, self.unit)
        if self.low is not None and self.high is not None:
            low = _render(self.low, self.unit, bare=self.unit != "s")
            text += f" ({low}–{_render(self.high, self.unit)})"
        return text

    def line(self) -> str:
        parts = [f"{self.name}: {self.figure()}"]
        if self.floor is not None:
            kind = "floor" if self.true_floor else "baseline"
            parts.append(f"vs {kind} {self.floor}")
            if self.op_seconds is not None and self.floor_seconds is not None:
                parts.append(
                    f"[{_render(self.op_seconds, 's')} vs {_render(self.floor_seconds, 's')}]"
                )
        if self.goal is not None:
            parts.append(f"goal {self.goal.render(self.unit)} {self.status()}".rstrip())
        if self.load is not None:
            start, end = self.load
            parts.append(f"load {start:.2f}" + ("" if start == end else f"→{end:.2f}"))
        return "  ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "script": self.script,
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "low": self.low,
            "high": self.high,
            "goal": None
            if self.goal is None
            else {"relation": self.goal.relation, "bound": self.goal.bound},
            "met": self.met,
            "noisy": self.noisy,
            "floor": self.floor,
            "true_floor": self.true_floor,
            "op_seconds": self.op_seconds,
            "floor_seconds": self.floor_seconds,
            "rounds": self.rounds,
            "load": None if self.load is None else list(self.load),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        goal = data.get("goal")
        load = data.get("load")
        return cls(
            name=data["name"],
            value=data["value"],
            unit=data["unit"],
            low=data.get("low"),
            high=data.get("high"),
            goal=None if goal is None else Goal(goal["relation"], goal["bound"]),
            floor=data.get("floor"),
            true_floor=bool(data.get("true_floor")),
            noisy=bool(data.get("noisy")),
            op_seconds=data.get("op_seconds"),
            floor_seconds=data.get("floor_seconds"),
            rounds=data.get("rounds"),
            load=None if load is None else (load[0], load[1]),
            script=data.get("script", ""),
        )


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover - platforms without getloadavg
        return math.nan


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def _timed(call: Callable[[], object], loops: int, clock: Callable[[], float]) -> float:
    start = clock()
    for _ in range(loops):
        call()
    return (clock() - start) / loops


def _calibrate(
    call: Callable[[], object], min_sample: float, clock: Callable[[], float]
) -> tuple[int, float]:
    """Loops per sample so that one sample lasts at least ``min_sample``; and one call's cost."""
    single = min(_timed(call, 1, clock) for _ in range(2))  # the first call also warms caches
    loops = 1
    while loops * single < min_sample and loops < 1 << 20:
        loops *= 2
        single = _timed(call, loops, clock)
    return loops, single


def interleave(
    samplers: Sequence[Callable[[], float]],
    *,
    rounds: int,
    max_seconds: float,
    gc_off: bool = True,
) -> list[list[float]]:
    """Rounds of one sample from each sampler, order rotating per round (rule 1).

    Each sampler returns its own cost (seconds per unit, or any cost measure). The round count
    is cut after the first round so the whole measurement takes about ``max_seconds``, but never
    below 5 rounds (or ``rounds`` if smaller). With ``gc_off`` the garbage collector is off
    meanwhile (as in ``timeit``): a full collection walks every live object of the process,
    set-up data included, and would land in whichever sample happened to trigger it.
    """
    if not gc_off:
        return _rounds(samplers, rounds=rounds, max_seconds=max_seconds)
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        return _rounds(samplers, rounds=rounds, max_seconds=max_seconds)
    finally:
        if enabled:
            gc.enable()


def _rounds(
    samplers: Sequence[Callable[[], float]], *, rounds: int, max_seconds: float
) -> list[list[float]]:
    samples: list[list[float]] = [[] for _ in samplers]
    count = len(samplers)
    began = time.perf_counter()
    planned = rounds
    index = 0
    while index < planned:
        order = [(index + shift) % count for shift in range(count)]
        if index % 2:
            order.reverse()
        for position in order:
            samples[position].append(samplers[position]())
        if index == 0:
            per_round = time.perf_counter() - began
            affordable = int(max_seconds / per_round) if per_round > 0 else rounds
            planned = max(min(rounds, 5), min(rounds, affordable))
        index += 1
    return samples


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


class Report:
    """Collects the figures of one script (or of a whole ``make bench`` run)."""

    def __init__(
        self, script: str = "", *, quick: bool = False, echo: bool = True, clock: str = "wall"
    ) -> None:
        self.script = script
        self.quick = quick
        self.echo = echo
        self.clock = clock
        self._clock = CLOCKS[clock]
        self.results: list[Result] = []

    def add(self, result: Result) -> Result:
        result = attrs.evolve(result, script=result.script or self.script)
        self.results.append(result)
        if self.echo:
            print(result.line(), flush=True)
        return result

    def compare_many(
        self,
        floor: Callable[[], object],
        ops: Sequence[Op],
        *,
        floor_name: str,
        rounds: int = 21,
        max_seconds: float = 20.0,
        min_sample: float = 0.005,
        sampled: bool = False,
    ) -> list[Result]:
        """Time ``floor`` and every operation in interleaved rounds; one ratio figure per op.

        With ``sampled=True`` the callables are not timed: each returns its own cost per unit
        (CPU seconds per decision read from ``/proc``, say), and the ratios are of those costs.
        """
        if self.quick:
            rounds, max_seconds = min(rounds, 5), min(max_seconds, 2.0)
        gc.collect()
        load_start = load_average()
        calls = [floor, *(op.call for op in ops)]
        samplers: list[Callable[[], float]]
        if sampled:
            samplers = [_as_cost(call) for call in calls]
        else:
            samplers = []
            for call in calls:
                loops, _ = _calibrate(call, min_sample, self._clock)
                samplers.append(_sampler(call, loops, self._clock))
        # A sampled cost may come from another process (which collects as it always does):
        # then this process's side is measured as it always runs too.
        samples = interleave(samplers, rounds=rounds, max_seconds=max_seconds, gc_off=not sampled)
        load = (load_start, load_average())
        floor_samples = samples[0]
        results = []
        for op, op_samples in zip(ops, samples[1:], strict=True):
            ratios = [cost / base for cost, base in zip(op_samples, floor_samples, strict=True)]
            median, low, high = _spread(ratios)
            noisy = op.true_floor and median < 1.0
            results.append(
                self.add(
                    Result(
                        name=op.name,
                        value=None if noisy else median,
                        unit="x",
                        low=low,
                        high=high,
                        goal=op.goal,
                        floor=floor_name,
                        true_floor=op.true_floor,
                        noisy=noisy,
                        op_seconds=statistics.median(op_samples),
                        floor_seconds=statistics.median(floor_samples),
                        rounds=len(ratios),
                        load=load,
                    )
                )
            )
        return results

    def compare(
        self,
        name: str,
        op: Callable[[], object],
        floor: Callable[[], object],
        *,
        floor_name: str,
        goal: Goal | None = None,
        true_floor: bool = True,
        rounds: int = 21,
        max_seconds: float = 20.0,
        min_sample: float = 0.005,
        sampled: bool = False,
    ) -> Result:
        """:meth:`compare_many` with one operation."""
        return self.compare_many(
            floor,
            [Op(name, op, goal=goal, true_floor=true_floor)],
            floor_name=floor_name,
            rounds=rounds,
            max_seconds=max_seconds,
            min_sample=min_sample,
            sampled=sampled,
        )[0]

    def time(
        self,
        name: str,
        op: Callable[[], object],
        *,
        goal: Goal | None = None,
        rounds: int = 21,
        max_seconds: float = 10.0,
        min_sample: float = 0.005,
    ) -> Result:
        """Seconds per call of ``op`` alone: median and spread of calibrated samples."""
        if self.quick:
            rounds, max_seconds = min(rounds, 5), min(max_seconds, 2.0)
        gc.collect()
        load_start = load_average()
        loops, _ = _calibrate(op, min_sample, self._clock)
        sampler = _sampler(op, loops, self._clock)
        (samples,) = interleave([sampler], rounds=rounds, max_seconds=max_seconds)
        median, low, high = _spread(samples)
        return self.add(
            Result(
                name=name,
                value=median,
                unit="s",
                low=low,
                high=high,
                goal=goal,
                op_seconds=median,
                rounds=len(samples),
                load=(load_start, load_average()),
            )
        )

    def value(
        self,
        name: str,
        value: float,
        unit: str,
        *,
        goal: Goal | None = None,
        spread: Sequence[float] | None = None,
    ) -> Result:
        """A figure the script measured itself (throughput, p99, RSS, a share in %).

        ``spread`` is the per-run values the figure is the median of (printed as min-max)."""
        several = spread is not None and len(spread) > 1
        low = min(spread) if spread and several else None
        high = max(spread) if spread and several else None
        load = load_average()
        return self.add(
            Result(
                name=name,
                value=value,
                unit=unit,
                low=low,
                high=high,
                goal=goal,
                rounds=len(spread) if spread and several else None,
                load=(load, load),
            )
        )

    def paired_ratio(
        self,
        name: str,
        numerators: Sequence[float],
        denominators: Sequence[float],
        *,
        goal: Goal | None = None,
    ) -> Result:
        """The median of the per-round ratios ``numerators[i] / denominators[i]`` (figures of
        the same interleaved round), with their spread: a ratio of two figures measured by
        the script itself, as :meth:`value` reports it."""
        ratios = [a / b for a, b in zip(numerators, denominators, strict=True)]
        return self.value(name, statistics.median(ratios), "x", goal=goal, spread=ratios)

    # ------------------------------------------------------------------ output

    def table(self, baseline: Sequence[Result] = ()) -> str:
        """All figures and their goals, one line each (with a ``before`` column if given)."""
        before = {(r.script, r.name): r for r in baseline}
        head = ["figure", "median (min–max)", "goal", "status"]
        if before:
            head.insert(2, "before")
        rows = [head]
        for result in self.results:
            script = result.script.removeprefix("bench_")
            label = f"{script}: {result.name}" if script else result.name
            if result.floor is not None:
                label += f" / {result.floor}"
            row = [
                label,
                result.figure(),
                "" if result.goal is None else result.goal.render(result.unit),
                result.status(),
            ]
            if before:
                old = before.get((result.script, result.name))
                row.insert(2, "" if old is None else old.figure())
            rows.append(row)
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                 for row in rows]  # fmt: skip
        lines.insert(1, "  ".join("-" * w for w in widths))
        missed = sum(1 for r in self.results if r.met is False)
        noisy = sum(1 for r in self.results if r.noisy)
        lines.append(
            f"{len(self.results)} figures, {missed} goal(s) missed, {noisy} noisy"
            + (" (rerun on a quiet machine)" if noisy else "")
        )
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": JSON_SCHEMA,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": _commit(),
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "quick": self.quick,
            "clock": self.clock,
            "results": [result.to_json() for result in self.results],
        }

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")


def read_results(path: Path) -> list[Result]:
    """The results of a JSON document written by :meth:`Report.write_json`."""
    document = json.loads(path.read_text(encoding="utf-8"))
    if document.get("schema") != JSON_SCHEMA:
        raise ValueError(f"{path}: not a {JSON_SCHEMA} document")
    return [Result.from_json(item) for item in document["results"]]


def main(
    run: Callable[[Report, argparse.Namespace], None],
    description: str | None,
    *,
    configure: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Command line of one bench script: ``[--quick] [--json PATH]`` (+ its own options)."""
    parser = argparse.ArgumentParser(description=(description or "").strip().splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few rounds (smoke run)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the figures as JSON")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time samples by wall clock (default) or by this thread's CPU time (steadier on "
        "a busy machine; for operations that run in this thread only)",
    )
    if configure is not None:
        configure(parser)
    args = parser.parse_args()
    script = Path(sys.argv[0]).stem
    report = Report(script, quick=args.quick, clock=args.clock)
    print(header(script) + f", clock {args.clock}")
    run(report, args)
    print()
    print(report.table())
    if args.json is not None:
        report.write_json(args.json)
    return 0


def header(title: str) -> str:
    return f"== {title}: {os.cpu_count()} CPUs, load {load_average():.2f}"


def _commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def _sampler(
    call: Callable[[], object], loops: int, clock: Callable[[], float]
) -> Callable[[], float]:
    return lambda: _timed(call, loops, clock)


def _as_cost(call: Callable[[], object]) -> Callable[[], float]:
    def cost() -> float:
        value = call()
        if not isinstance(value, int | float) or value <= 0:
            raise TypeError(f"a sampled callable must return a positive cost, got {value!r}")
        return float(value)

    return cost


def _number(value: float) -> str:
    if value == 0 or 0.01 <= abs(value) < 1e6:
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{value:.3g}"


def _suffix(unit: str) -> str:
    if unit == "x":
        return "×"
    return unit if unit in ("%", "/s") else f" {unit}"


def _render(value: float, unit: str, *, bare: bool = False) -> str:
    """A value in its unit; seconds are scaled to ns/µs/ms. ``bare`` omits the unit."""
    if unit == "s":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if abs(value) >= scale or name == "ns":
                return f"{value / scale:.3g}" + ("" if bare else f" {name}")
    if unit == "x":
        digits = 2 if abs(value) < 10 else (1 if abs(value) < 100 else 0)
        return f"{value:.{digits}f}" + ("" if bare else "×")
    return _number(value) + ("" if bare else _suffix(unit))
