"""The audit line rendered in one function is byte for byte what the former structlog
processor pipeline rendered (docs/audit-log.md §1: the format is unchanged), with the
terminal-hostile code points escaped (``daemon/audit/_audit_format.py`` rule 5, the one change
since: ``tests/daemon/test_audit_escaping.py``).

The pipeline is rebuilt here as it ran before (``TimeStamper(fmt="iso", utc=True)``, the chain
fields, ``JSONRenderer(serializer=orjson.dumps, option=OPT_SORT_KEYS)``, the seal) and given
each line's own timestamp, so any other difference in the bytes shows.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.audit._audit import AuditLog, iso_utc, timestamp
from daemon.audit._audit_format import escape_hostile, seal

ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z\Z")


def _pipeline(fields: dict[str, Any], event: str, seq: int, head: str, stamp: str) -> bytes:
    """The former processor chain, with its timestamp fixed to ``stamp``."""
    line: Any = dict(fields)
    line["event"] = event
    line["timestamp"] = stamp
    line["seq"] = seq + 1
    line["prev"] = head
    renderer = structlog.processors.JSONRenderer(
        serializer=orjson.dumps, option=orjson.OPT_SORT_KEYS
    )
    body = renderer(None, "info", line)
    assert isinstance(body, bytes)
    return seal(escape_hostile(body))[0] + b"\n"


def _open(tmp_path: Path) -> AuditLog:
    return AuditLog.open(tmp_path / "audit.jsonl", durability="none")


DECISION: dict[str, Any] = {
    "decision_id": "0b7f4a8e-4c1e-4d0a-9a55-5a1a2f8e9c01",
    "request_id": 7,
    "session": "bytes",
    "mechanism_id": "bytes-sha256",
    "binding_digest": "ab" * 32,
    "evidence": [{"digest": "sha256:" + "cd" * 32, "size": 64}],
    "outcome": "PASS",
    "details": 'naïve ☃ \u2028 "quoted" \\ back',
    "reason_codes": [],
    "metrics": {"receive_ns": 1, "evaluate_ns": 2, "total_ns": 3},
    "requester": {"transport": "http", "peer": "127.0.0.1:1"},
}


def test_a_rendered_line_is_the_pipelines_bytes(tmp_path: Path) -> None:
    log = _open(tmp_path)
    try:
        for _ in range(3):
            seq, head = log.last_seq, log.head
            line = log._render("decision", DECISION)
            stamp = orjson.loads(line)["timestamp"]
            assert line == _pipeline(DECISION, "decision", seq, head, stamp)
            assert (log.last_seq, log.head) == (seq + 1, orjson.loads(line)["line_digest"])
    finally:
        log.close_sync()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(fields=st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=6))
def test_any_fields_render_as_the_pipeline_would(
    tmp_path_factory: Any, fields: dict[str, Any]
) -> None:
    fields = {
        k: v
        for k, v in fields.items()
        if k not in {"event", "seq", "prev", "line_digest", "timestamp"}
    }
    log = _open(tmp_path_factory.mktemp("render"))
    try:
        seq, head = log.last_seq, log.head
        line = log._render("refusal", fields)
        stamp = orjson.loads(line)["timestamp"]
        assert line == _pipeline(fields, "refusal", seq, head, stamp)
    finally:
        log.close_sync()


def test_an_unrenderable_field_leaves_no_gap_in_the_chain(tmp_path: Path) -> None:
    log = _open(tmp_path)
    try:
        before = (log.last_seq, log.head)
        with pytest.raises(TypeError):
            log._render("decision", {"bad": object()})
        assert (log.last_seq, log.head) == before
    finally:
        log.close_sync()


def test_the_timestamp_is_structlogs_iso_utc_form() -> None:
    stamper = structlog.processors.TimeStamper(fmt="iso", utc=True, key="t")
    theirs = stamper(None, "info", {})["t"]
    ours = timestamp()
    assert ISO_UTC.match(theirs) and ISO_UTC.match(ours), (theirs, ours)
    assert ours[:16] == theirs[:16] or ours >= theirs  # same clock, taken just after


@given(st.integers(min_value=0, max_value=253402300799999999))
def test_a_cached_second_never_renders_another_instant_than_datetime(micros: int) -> None:
    """The per-second cache of the audit timestamp renders any instant (a whole second
    without a fraction, years up to 9999) exactly as ``datetime.isoformat`` does."""
    expected = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)).isoformat()
    assert iso_utc(micros) == expected.replace("+00:00", "Z")
    assert iso_utc(micros - micros % 1_000_000) == iso_utc(micros)[:19] + "Z"
