"""The benchmark harness cannot report the impossible (docs/benchmarks.md).

Timing is never asserted here: the operations are chosen so the inequality holds on any
machine (a no-op against a loop of 20,000 additions), or the costs are given (``sampled``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _harness import NOISY, Op, Report, at_least, at_most, interleave, read_results

REPO = Path(__file__).resolve().parents[2]


def _busy() -> int:
    return sum(range(20_000))


def _costs(values: list[float]) -> Callable[[], float]:
    iterator: Iterator[float] = iter(values)
    return lambda: next(iterator)


def test_operation_faster_than_its_true_floor_is_refused_as_noisy() -> None:
    report = Report("t", echo=False)
    result = report.compare(
        "impossible", lambda: None, _busy, floor_name="busy", rounds=5, min_sample=0.0005
    )
    assert result.noisy and result.value is None
    assert result.figure() == NOISY and result.status() == NOISY
    assert NOISY in report.table() and "1 noisy" in report.table()
    assert report.to_json()["results"][0]["value"] is None


def test_operation_faster_than_a_baseline_is_printed() -> None:
    report = Report("t", echo=False)
    result = report.compare(
        "beats baseline",
        lambda: None,
        _busy,
        floor_name="busy",
        true_floor=False,
        rounds=5,
        min_sample=0.0005,
    )
    assert not result.noisy and result.value is not None and result.value < 1.0
    assert "baseline busy" in result.line()


def test_rounds_interleave_floor_and_operations_in_rotating_order() -> None:
    calls: list[str] = []

    def sampler(name: str) -> Callable[[], float]:
        def sample() -> float:
            calls.append(name)
            return 1.0

        return sample

    samples = interleave([sampler("floor"), sampler("a"), sampler("b")], rounds=6, max_seconds=60)
    assert [len(s) for s in samples] == [6, 6, 6]
    rounds = [calls[i : i + 3] for i in range(0, len(calls), 3)]
    assert all(sorted(r) == ["a", "b", "floor"] for r in rounds)
    assert {r[0] for r in rounds} == {"floor", "a", "b"}  # the floor is not always first
    assert not all(r.index("floor") < r.index("a") for r in rounds)  # nor always before an op


def test_figure_is_median_of_per_round_ratios_with_min_max_spread() -> None:
    report = Report("t", echo=False)
    (result,) = report.compare_many(
        _costs([1.0, 2.0, 1.0, 4.0, 1.0]),
        [Op("op", _costs([2.0, 2.0, 10.0, 8.0, 3.0]), goal=at_most(2.5))],
        floor_name="given",
        rounds=5,
        sampled=True,
    )
    # per-round ratios 2, 1, 10, 2, 3: median 2, spread 1-10 (not median(op)/median(floor) = 3)
    assert (result.value, result.low, result.high) == (2.0, 1.0, 10.0)
    assert result.met is True and result.status() == "met"
    assert "2.00× (1.00–10.0×)" in result.figure()


def test_missed_goal_is_reported_not_raised() -> None:
    report = Report("t", echo=False)
    result = report.value("throughput", 900.0, "/s", goal=at_least(1500), spread=[850, 900, 990])
    assert result.met is False and result.status() == "MISSED"
    assert "1 goal(s) missed" in report.table()


def test_sampled_callable_returning_no_cost_is_refused() -> None:
    report = Report("t", echo=False)
    with pytest.raises(TypeError):
        report.compare("bad", lambda: None, lambda: 1.0, floor_name="f", sampled=True)


def test_json_round_trips_and_baseline_adds_a_before_column(tmp_path: Path) -> None:
    report = Report("t", echo=False)
    report.compare_many(
        _costs([1.0] * 5),
        [Op("op", _costs([2.0] * 5))],
        floor_name="given",
        rounds=5,
        sampled=True,
    )
    path = tmp_path / "figures.json"
    report.write_json(path)
    assert read_results(path) == report.results
    later = Report("t", echo=False)
    later.compare_many(
        _costs([1.0] * 5),
        [Op("op", _costs([1.5] * 5))],
        floor_name="given",
        rounds=5,
        sampled=True,
    )
    table = later.table(read_results(path))
    assert "before" in table.splitlines()[0]
    assert "1.50×" in table and "2.00×" in table


def test_foreign_json_is_refused_as_a_baseline(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"schema": "something-else", "results": []}))
    with pytest.raises(ValueError, match="not a evidenced-bench-v1"):
        read_results(path)


def test_make_bench_runner_ends_with_the_table_and_writes_json(tmp_path: Path) -> None:
    output = tmp_path / "all.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/run_all.py", "--quick", "--json", str(output), "canonical"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    tail = done.stdout.split("== all figures")[1]
    assert "canonical: canonical admission" in tail and "figures," in tail
    (result,) = read_results(output)
    assert result.script == "bench_canonical" and result.unit == "x"


def test_collector_is_off_while_timed_samples_run_and_on_for_sampled_costs() -> None:
    import gc

    seen: list[bool] = []

    def probe() -> float:
        seen.append(gc.isenabled())
        return 1.0

    report = Report("t", echo=False)
    report.compare("timed", probe, probe, floor_name="f", rounds=5, min_sample=0.0)
    assert len(seen) == 4 + 10  # calibration (2 calls each), then 5 rounds of both
    assert not any(seen[4:]) and gc.isenabled()
    seen.clear()
    report.compare("sampled", probe, probe, floor_name="f", rounds=5, sampled=True)
    assert seen and all(seen)
