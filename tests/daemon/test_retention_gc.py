"""``evidenced store gc``: the window rules of daemon/replay/_gc.py — never an object
referenced by a line newer than the cut-off, never one younger than the grace, nothing at all
in a dry run or for a log that does not verify — on both backends."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import clirun
import pytest
from daemon_testkit import bytes_binding
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from retention_kit import LogWriter, moto_server, use_s3

from daemon.replay._gc import GcRefused, Limits, collect
from daemon.retention import FilesystemStore, name_of, open_store
from daemon.retention._units import parse_age, parse_size

DAY = 86400.0


def _age(store: FilesystemStore, name: str, seconds: float) -> None:
    """Make an object look ``seconds`` old (as if written then)."""
    hexdigest = name.removeprefix("sha256:")
    path = store.root / hexdigest[:2] / hexdigest[2:4] / hexdigest
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def _names(store: Any) -> set[str]:
    return {item.name for item in store.objects()}


class History:
    """A log whose decisions happened ``days`` ago, over a filesystem store."""

    def __init__(self, tmp_path: Path, store: Any = None) -> None:
        self.store = store if store is not None else FilesystemStore(tmp_path / "store")
        self.writer = LogWriter(tmp_path / "audit.jsonl", self.store, {"b": ("bytes-sha256",)})
        self.writer.clock = datetime.now(UTC) - timedelta(days=30)
        self.writer.start()

    def decide(self, days_ago: float, *items: bytes) -> int:
        self.writer.clock = datetime.now(UTC) - timedelta(days=days_ago)
        line = self.writer.decide("b", bytes_binding(items[0]), list(items))
        for item in items:
            if isinstance(self.store, FilesystemStore):
                _age(self.store, name_of(item), days_ago * DAY)
        return int(line["seq"])

    def orphan(self, item: bytes, days_ago: float) -> str:
        name = self.store.put(item).name
        if isinstance(self.store, FilesystemStore):
            _age(self.store, name, days_ago * DAY)
        return name

    def log(self) -> Path:
        return self.writer.flush()


def test_dry_run_deletes_nothing(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.decide(10, b"old")
    orphan = history.orphan(b"orphan", 10)
    before = _names(history.store)
    plan = collect(history.store, [history.log()], Limits(max_age=5 * DAY))
    assert plan["status"] == "DRY_RUN"
    assert set(plan["delete"]["names"]) == {name_of(b"old"), orphan}
    assert _names(history.store) == before
    assert "deleted" not in plan


def test_max_age_keeps_every_object_referenced_after_the_cutoff(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.decide(10, b"only old")
    history.decide(10, b"old and recent")
    history.decide(1, b"old and recent")
    history.decide(1, b"recent")
    orphan = history.orphan(b"orphan", 10)
    plan = collect(history.store, [history.log()], Limits(max_age=5 * DAY, grace=0), apply=True)
    assert set(plan["delete"]["names"]) == {name_of(b"only old"), orphan}
    assert plan["delete"]["unreferenced"] == 1 and plan["deleted"] == 2
    assert _names(history.store) == {name_of(b"old and recent"), name_of(b"recent")}


def test_max_bytes_keeps_the_newest_references_that_fit(tmp_path: Path) -> None:
    history = History(tmp_path)
    a, b, c = (bytes([n]) * 100 for n in (1, 2, 3))
    history.decide(3, a)
    pair_seq = history.decide(2, b, c)  # two items of one decision: kept or dropped together
    history.decide(1, a)  # a's newest reference is now the newest line
    plan = collect(history.store, [history.log()], Limits(max_bytes=250, grace=0), apply=True)
    assert plan["cutoff"]["size_seq"] == pair_seq
    assert _names(history.store) == {name_of(a)}
    plan = collect(history.store, [history.log()], Limits(max_bytes=99, grace=0), apply=True)
    assert _names(history.store) == set()


def test_both_limits_apply_and_the_stricter_decides(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.decide(10, b"x" * 10)
    history.decide(2, b"y" * 1000)
    history.decide(1, b"z" * 10)
    plan = collect(history.store, [history.log()], Limits(max_age=5 * DAY, max_bytes=500, grace=0))
    assert set(plan["delete"]["names"]) == {name_of(b"x" * 10), name_of(b"y" * 1000)}


def test_object_younger_than_the_grace_is_never_deleted(tmp_path: Path) -> None:
    """Evidence is stored before its decision line is written: an object no line names yet may
    belong to a decision in flight."""
    history = History(tmp_path)
    history.decide(10, b"old")
    history.store.put(b"in flight")  # written just now, no line yet
    plan = collect(history.store, [history.log()], Limits(max_age=5 * DAY), apply=True)
    assert plan["protected_by_grace"] == 1
    assert _names(history.store) == {name_of(b"in flight")}


def test_log_given_from_a_rotated_middle_keeps_unreferenced_objects_within_the_age(
    tmp_path: Path,
) -> None:
    """Files that do not start the chain may not hold every reference: an object no given
    line names is deleted only when it is older than the age cut-off."""
    history = History(tmp_path)
    history.decide(10, b"seen")
    history.orphan(b"named earlier?", 2)
    log = history.log()
    assert clirun.in_process(["audit", "rotate", log]).returncode == 0
    (archive,) = sorted(tmp_path.glob("audit.jsonl.0*"))
    plan = collect(history.store, [log], Limits(max_age=5 * DAY, grace=0))
    assert plan["log"]["first_seq"] == 3
    assert set(plan["delete"]["names"]) == {name_of(b"seen")}
    whole = collect(history.store, [archive, log], Limits(grace=0))
    assert whole["delete"]["names"] == [name_of(b"named earlier?")]


def test_log_that_does_not_verify_deletes_nothing(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.decide(10, b"old")
    log = history.log()
    log.write_bytes(log.read_bytes().replace(b'"PASS"', b'"FAIL"', 1))
    before = _names(history.store)
    with pytest.raises(GcRefused, match="line 2"):
        collect(history.store, [log], Limits(max_age=DAY, grace=0), apply=True)
    command = ["store", "gc", "--store", history.store.id, "--log", log, "--max-age", "1d"]
    done = clirun.in_process([*command, "--grace", "0", "--apply"])
    assert done.returncode == 65 and "line 2" in done.err
    assert clirun.error_of(done)["code"] == "GC_REFUSED"
    assert _names(history.store) == before


def test_cli_dry_run_then_apply(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.decide(10, b"old")
    history.decide(1, b"new")
    log = history.log()
    hexdigest = name_of(b"old")[7:]
    leftover = history.store.root / hexdigest[:2] / hexdigest[2:4] / ".tmp-00000000deadbeef"
    leftover.write_bytes(b"partial")
    command = ["store", "gc", "--store", history.store.id, "--log", log, "--max-age", "5d"]
    dry = clirun.in_process([*command, "--grace", "0"])
    assert dry.returncode == 0 and dry.document()["delete"]["count"] == 1
    assert "dry run: 1 objects" in dry.err and leftover.exists()
    applied = clirun.in_process([*command, "--grace", "0", "--apply"])
    assert applied.returncode == 0
    document = applied.document()
    assert document["status"] == "APPLIED" and document["deleted"] == 1
    assert document["temporaries_removed"] == 1 and not leftover.exists()
    assert _names(history.store) == {name_of(b"new")}


@pytest.mark.parametrize(
    "args",
    [["--max-age", "5 weeks"], ["--max-bytes", "ten"], ["--max-age", "0"], ["--grace", "-1"]],
)
def test_malformed_limits_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    history = History(tmp_path)
    log = history.log()
    done = clirun.in_process(["store", "gc", "--store", history.store.id, "--log", log, *args])
    assert done.returncode == 2 and clirun.error_of(done)["code"] == "USAGE"


def test_limit_parsers() -> None:
    assert parse_age("30d") == 30 * DAY and parse_age("12h") == 43200 and parse_age("90") == 90
    assert parse_size("10GiB") == 10 * 1024**3 and parse_size("5MB") == 5_000_000
    assert parse_size("1048576") == 1 << 20
    with pytest.raises(ValueError):
        Limits(max_age=-1)


@pytest.fixture(scope="module")
def moto() -> Iterator[Any]:
    with moto_server() as server:
        yield server


def test_gc_of_the_s3_store(tmp_path: Path, moto: Any, monkeypatch: Any) -> None:
    store = open_store(use_s3(monkeypatch, moto, f"ev-{uuid.uuid4().hex[:16]}"))
    history = History(tmp_path, store)
    history.decide(10, b"old")
    history.decide(1, b"new")
    store.put(b"orphan")
    log = history.log()
    plan = collect(store, [log], Limits(max_age=5 * DAY, grace=0), apply=True)
    assert set(plan["delete"]["names"]) == {name_of(b"old"), name_of(b"orphan")}
    assert _names(store) == {name_of(b"new")}
    young = collect(store, [log], Limits(max_age=5 * DAY))
    assert young["delete"]["count"] == 0
    store.close()


def test_gc_from_the_daemon_configuration(tmp_path: Path) -> None:
    """``--config``: every store of the configuration, its ``[stores]`` limits, the configured
    audit log."""
    history = History(tmp_path)
    history.decide(10, b"old")
    history.decide(1, b"new")
    history.log()
    config = tmp_path / "evidenced.toml"
    config.write_text(
        '[audit]\npath = "audit.jsonl"\n'
        '[sessions.b]\nmechanisms = ["bytes-sha256"]\nretain = "all"\nstore = "fs:store"\n'
        '[stores."fs:store"]\nmax_age = "5d"\n'
    )
    dry = clirun.in_process(["store", "gc", "--config", config, "--grace", "0"])
    assert dry.returncode == 0, dry.err
    (document,) = dry.document()["stores"]
    assert document["store"] == history.store.id
    assert document["limits"]["max_age_seconds"] == 5 * DAY
    assert document["delete"]["names"] == [name_of(b"old")]
    mixed = clirun.in_process(["store", "gc", "--config", config, "--store", history.store.id])
    assert mixed.returncode == 2 and clirun.error_of(mixed)["code"] == "USAGE"
    applied = clirun.in_process(["store", "gc", "--config", config, "--grace", "0", "--apply"])
    assert applied.returncode == 0
    assert _names(history.store) == {name_of(b"new")}


# --------------------------------------------------------------------------- clock steps
# Rule 3: the age window is a position in the log. The lines below are written by a clock that
# steps back (History.decide stamps each line ``days_ago``), as a daemon's wall clock can.


def test_a_clock_stepped_back_100_days_never_makes_minutes_old_evidence_collectable(
    tmp_path: Path,
) -> None:
    history = History(tmp_path)
    history.decide(20, b"old")  # History's daemon_start is 30 days old: in order
    mark = history.decide(0.01, b"before the step")  # minutes ago, on a right clock
    stepped = [history.decide(100 - n / 1000, bytes([n])) for n in range(5)]  # clock 100 d back
    plan = collect(history.store, [history.log()], Limits(max_age=10 * DAY, grace=0), apply=True)
    assert plan["delete"]["names"] == [name_of(b"old")]  # the only line before the mark
    assert plan["cutoff"]["age_seq"] == mark
    assert _names(history.store) == {name_of(b"before the step")} | {
        name_of(bytes([n])) for n in range(5)
    }
    clock = plan["timestamps"]
    assert clock["out_of_order"] == 1 and clock["first_seq"] == stepped[0]
    assert clock["largest_step_back_s"] > 99 * DAY


def test_timestamps_in_order_report_no_step(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.decide(10, b"a")
    history.decide(1, b"b")
    plan = collect(history.store, [history.log()], Limits(max_age=5 * DAY, grace=0))
    assert plan["timestamps"] == {"out_of_order": 0, "first_seq": None, "largest_step_back_s": 0}
    assert plan["cutoff"]["age_seq"] == 3


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    days=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=12),
    ages=st.lists(st.integers(min_value=1, max_value=60), min_size=2, max_size=2),
)
def test_the_age_window_is_monotone_and_never_outruns_a_newer_line(
    tmp_path_factory: Any, days: list[int], ages: list[int]
) -> None:
    """Whatever the timestamps (in order or not): what a longer window deletes a shorter one
    deletes too (*now* advancing only moves the mark forward), and no object referenced at or
    after a line stamped inside the window is deleted."""
    history = History(tmp_path_factory.mktemp("steps"))
    seqs = [history.decide(day, b"item %d" % n) for n, day in enumerate(days)]
    log = history.log()
    longer, shorter = sorted(ages, reverse=True)
    plans = [collect(history.store, [log], Limits(max_age=age * DAY, grace=0)) for age in ages]
    deleted = {age: set(plan["delete"]["names"]) for age, plan in zip(ages, plans, strict=True)}
    assert deleted[longer] <= deleted[shorter]
    for age in ages:
        inside = [seq for seq, day in zip(seqs, days, strict=True) if day < age]
        first_inside = min(inside, default=None)
        for n, seq in enumerate(seqs):
            if first_inside is not None and seq >= first_inside:
                assert name_of(b"item %d" % n) not in deleted[age]
