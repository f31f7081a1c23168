"""``evidenced audit report`` as an operator reads it: rotated files, the
transparency checkpoint checked against the log, reloads and noise, restarts, count axes,
legends, and no text ever interpreted as markup or math (fuzzed with hostile lines)."""

from __future__ import annotations

import html
import html.parser
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import clirun
import pytest
from daemon_testkit import ROOT, bytes_binding
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon import HostedSession, open_client, open_server
from daemon.audit._synthetic import write_synthetic_log
from daemon.audit._transparency import TransparencyConfig
from daemon.report._report import aggregate
from daemon.report._report_charts import latency_axis
from daemon.report._report_html import render_report_html, short_ids
from daemon.tlog import SignerKey, write_key_file
from session import BytesDigestMechanism

ORIGIN = "test.example/evidenced/report"
MATH = "$\\frac{1}{$"


def _report(*args: str) -> clirun.CliResult:
    return clirun.in_process(["audit", "report", *args])


def _line(seq: int, event: str, **fields: Any) -> bytes:
    minute, second = divmod(seq, 60)
    stamp = f"2026-11-29T08:{minute % 60:02d}:{second:02d}.000000Z"
    return json.dumps({"seq": seq, "event": event, "timestamp": stamp, **fields}).encode() + b"\n"


def _plot(page: str, name: str) -> str:
    start = page.index(f'id="plot-{name}"')
    return page[start : page.index("</figure>", start)]


def _tick_labels(svg: str, axis: str) -> list[str]:
    """The text of every tick label on ``axis`` (``x`` or ``y``) of one chart."""
    found = re.findall(rf'<g class="tick {axis}">.*?<text [^>]*>([^<]*)</text></g>', svg, re.S)
    return [html.unescape(text) for text in found]


def test_the_first_start_is_not_a_restart(tmp_path: Path) -> None:
    """The first start of a log counted as "1 restarts"."""
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 40)
    result = aggregate(log)
    assert result["totals"]["starts"] == 1 and result["totals"]["restarts"] == 0
    assert result["restarts"] == []
    assert 'id="restart-0"' not in render_report_html(result)


def test_rotated_files_are_one_report_like_audit_verify(tmp_path: Path) -> None:
    """``audit report A B`` over rotated files was a usage error."""
    whole = tmp_path / "whole.jsonl"
    write_synthetic_log(whole, 600, restart_every=250)
    lines = whole.read_bytes().splitlines(keepends=True)
    older, newer = tmp_path / "audit.jsonl.1", tmp_path / "audit.jsonl"
    older.write_bytes(b"".join(lines[:300]))
    newer.write_bytes(b"".join(lines[300:]))
    done = _report(str(older), str(newer), "--format", "json")
    assert done.returncode == 0, done.stderr
    both = json.loads(done.stdout)
    assert both["integrity"]["chain"]["status"] == "INTACT"
    assert both["integrity"]["chain"]["files"] == 2
    assert both["source"]["paths"] == [str(older), str(newer)]
    single = aggregate(whole)
    for key in ("totals", "series", "restarts", "lines", "refusals_by_code"):
        assert both[key] == single[key], key
    assert _report(str(newer), "--format", "json").document()["integrity"]["chain"]["status"] == (
        "BROKEN"
    )  # the newer file alone does not start the chain


def test_config_reload_and_noise_are_shown(tmp_path: Path) -> None:
    """``config_reload`` events were missing from the report; noise too."""
    log = tmp_path / "audit.jsonl"
    log.write_bytes(
        _line(1, "daemon_start")
        + _line(2, "config_reload", status="APPLIED", source="/etc/e.toml")
        + _line(3, "config_reload", status="REFUSED", source="/etc/e.toml", reason="bad <b>")
        + _line(4, "noise", count=7, peers={"10.0.0.9": 5, "10.0.0.8": 2}, other_peers=0)
        + _line(70, "noise", count=3, peers={"10.0.0.9": 3}, other_peers=0)
    )
    result = aggregate(log)
    assert result["totals"]["config_reloads"] == 2
    assert result["totals"]["config_reloads_refused"] == 1
    assert result["totals"]["noise"] == 10
    assert result["noise_peers"][0] == {"name": "10.0.0.9", "count": 8}
    assert [s["noise"] for s in result["series"]] == [7, 3]
    assert [r["status"] for r in result["config_reloads"]] == ["REFUSED", "APPLIED"]
    page = render_report_html(result)
    assert 'id="config-reloads"' in page and "bad &lt;b&gt;" in page
    assert page.count('id="noise"') == 1 and "10.0.0.9" in page


def test_count_axes_have_integer_ticks_from_zero(tmp_path: Path) -> None:
    """An all-zero chart's axis ran −0.04…0.04; a count of 1 had ticks at 0.2,
    0.4…"""
    log = tmp_path / "audit.jsonl"
    log.write_bytes(
        _line(1, "daemon_start")
        + _line(2, "decision", outcome="PASS", session="s", metrics={"total_ns": 1000})
    )
    page = render_report_html(aggregate(log))
    decisions = _tick_labels(_plot(page, "decisions"), "y")
    pressure = _tick_labels(_plot(page, "pressure"), "y")  # nothing at all: every series is 0
    refusals = _tick_labels(_plot(page, "refusals"), "x")
    for labels in (decisions, pressure, refusals):
        assert labels and all(re.fullmatch(r"\d+", label) for label in labels), labels
    assert decisions[0] == "0" and "1" in decisions


def test_legends_sit_above_the_data(tmp_path: Path) -> None:
    """Legends covered the p99 line."""
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 300, restart_every=100)
    page = render_report_html(aggregate(log))
    for name in ("decisions", "latency", "pressure"):
        svg = _plot(page, name)
        (area,) = re.findall(r'<rect class="plot-area" [^>]*\by="([\d.]+)"', svg)
        top = float(area)
        legend = svg[svg.index('<g class="legend">') :]
        texts = [float(y) for y in re.findall(r'<text [^>]*\by="([\d.]+)"', legend)]
        assert len(texts) >= 4 and max(texts) < top, (name, texts, top)  # y grows downwards


def test_latency_ticks_are_named_in_units_not_math_text(tmp_path: Path) -> None:
    """With matplotlib 3.11 the latency axis printed ``$\\mathdefault{10^{1}}$``. The ticks
    are now powers of ten named in units: ``100 µs``, ``1 ms``, ``10 ms``."""
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 600)
    page = render_report_html(aggregate(log))
    labels = _tick_labels(_plot(page, "latency"), "y")
    assert len(labels) >= 2, labels
    assert all(re.fullmatch(r"\d+(\.\d+)? (µs|ms|s)", text) for text in labels), labels
    assert "1 ms" in labels and "$" not in page and "mathdefault" not in page
    times = _tick_labels(_plot(page, "latency"), "x")
    assert times and all(re.fullmatch(r"\d\d:\d\d", text) for text in times), times


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0.15, 0.9], ["100 µs", "200 µs", "500 µs", "1 ms"]),  # one decade: 2 and 5 too
        ([0.05, 40.0], ["10 µs", "100 µs", "1 ms", "10 ms", "100 ms"]),
        ([1500.0, 29000.0], ["1 s", "10 s", "100 s"]),
    ],
)
def test_a_latency_axis_spans_whole_decades_with_unit_names(
    values: list[float], expected: list[str]
) -> None:
    assert [text for _, text in latency_axis(values).ticks] == expected


def test_every_chart_shares_one_plot_area_geometry(tmp_path: Path) -> None:
    """The charts' left edges did not line up (each chart's own margin); one frame now: the
    widest left label of any chart (here a refusal code) decides it for all."""
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 600, restart_every=200)
    page = render_report_html(aggregate(log))
    areas = re.findall(r'<rect class="plot-area" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', page)
    assert len(areas) == 4 and len(set(areas)) == 1, areas
    widths = set(re.findall(r'<svg [^>]*class="chart" [^>]*width="(\d+)"', page))
    assert len(widths) == 1, widths


def test_decision_ids_are_cut_where_they_differ() -> None:
    """Every row of the decision-id column showed ``9992925a…``: ids begin with the replica's
    log tag (ADR 0018). The groups every row shares are left out, then as much as tells the
    rows apart."""
    tagged = [
        "9992925a-1c4e-8f21-9d3b-5e7a11c0ffee",
        "9992925a-1c4e-8a00-8e44-0123456789ab",
        "9992925a-77aa-8b11-a2c3-aaaaaaaaaaaa",
    ]
    shown = short_ids(tagged)
    assert len(set(shown.values())) == 3
    assert not any("9992925a" in text for text in shown.values()), shown
    assert shown[tagged[0]] == "…1c4e-8f2…" and shown[tagged[2]] == "…77aa-8b1…"
    plain = ["4f383151-7202-4144-8c6c-8f80cde30911", "0b8e9a2c-1111-4222-8333-444455556666"]
    assert short_ids(plain) == {plain[0]: "4f383151…", plain[1]: "0b8e9a2c…"}
    alike = ["aaaaaaaa-bbbb-8ccc-8ddd-000000000001", "aaaaaaaa-bbbb-8ccc-8ddd-000000000002"]
    assert short_ids(alike) == {alike[0]: "…000000000001", alike[1]: "…000000000002"}


def test_the_report_page_of_tagged_ids_shows_them_apart(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    ids = ["9992925a-1c4e-8f21-9d3b-5e7a11c0ffee", "9992925a-2d5f-8a00-8e44-0123456789ab"]
    log.write_bytes(
        _line(1, "daemon_start")
        + b"".join(
            _line(n + 2, "decision", outcome="FAIL", session="s", decision_id=decision,
                  details="x", reason_codes=["R"], metrics={"total_ns": 1000})
            for n, decision in enumerate(ids)
        )
    )  # fmt: skip
    table = render_report_html(aggregate(log)).split('id="recent-failures"')[1]
    cells = re.findall(r'<td title="([^"]+)"><code>([^<]+)</code>', table)
    assert sorted(cells) == sorted([(ids[0], "…1c4e-8f2…"), (ids[1], "…2d5f-8a0…")])


def test_the_report_is_drawn_without_a_plotting_library(tmp_path: Path) -> None:
    """matplotlib is no dependency any more (ADR 0019): the charts are our own SVG. In a
    fresh interpreter whose import of matplotlib would fail, the page is complete."""
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 200, restart_every=100)
    probe = (
        "import sys\n"
        "sys.modules['matplotlib'] = None\n"  # any import of it raises ImportError
        "from daemon.report._report import aggregate\n"
        "from daemon.report._report_html import render_report_html\n"
        f"page = render_report_html(aggregate({str(log)!r}))\n"
        "assert page.count('class=\"plot-area\"') == 4, page[:300]\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr


def test_a_math_text_refusal_code_does_not_crash_the_report(tmp_path: Path) -> None:
    """A refusal code ``$\\frac{1}{$`` in a doctored log crashed the report (exit
    70, a matplotlib math-text parse error); it is drawn as the characters it is."""
    log = tmp_path / "audit.jsonl"
    log.write_bytes(_line(1, "daemon_start") + _line(2, "refusal", code=MATH, session=MATH))
    out = tmp_path / "report.html"
    done = _report(str(log), "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert MATH in _plot(page, "refusals")  # drawn as the characters it is


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.handlers += [name for name, _ in attrs if name.lower().startswith("on")]


HOSTILE = st.sampled_from(
    [
        MATH,
        "$x$",
        "$$",
        "\\",
        "_underscore",
        "<script>alert(1)</script>",
        '"><img src=x onerror=alert(1)>',
        "</svg><iframe src=//x>",
        "&amp;&#0;",
        "\x00\x1b[31m\u2028",
        "\ud800",
        "",
        "a" * 300,
    ]
) | st.text(max_size=40)
FIELDS = st.fixed_dictionaries(
    {
        "event": st.sampled_from(
            ["decision", "refusal", "daemon_start", "config_reload", "noise", "audit_overflow"]
        )
        | HOSTILE,
        "code": HOSTILE,
        "session": HOSTILE,
        "outcome": st.sampled_from(["PASS", "FAIL", "UNKNOWN"]) | HOSTILE,
        "details": HOSTILE,
        "reason_codes": st.lists(HOSTILE, max_size=3) | HOSTILE,
        "status": HOSTILE,
        "source": HOSTILE,
        "reason": HOSTILE,
        "peers": st.dictionaries(HOSTILE, st.integers(-5, 10**12), max_size=3) | HOSTILE,
        "count": st.integers(-5, 10**12) | HOSTILE,
        "dropped": st.integers(-5, 10**12) | HOSTILE,
        "requester": st.fixed_dictionaries({"transport": HOSTILE, "peer": HOSTILE}) | HOSTILE,
        "metrics": st.fixed_dictionaries({"total_ns": st.integers(-5, 10**15)}) | HOSTILE,
    }
)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(lines=st.lists(st.tuples(st.integers(0, 7200), FIELDS), min_size=1, max_size=12))
def test_hostile_lines_never_crash_the_report_nor_become_markup(
    tmp_path: Path, lines: list[tuple[int, dict[str, Any]]]
) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(
        b"".join(
            _line(seq, str(fields.pop("event")), **fields).replace(b"\\ud800", b"\xed\xa0\x80")
            for seq, fields in lines
        )
        + b"not json\n"
    )
    page = render_report_html(aggregate(log))
    parser = _Tags()
    parser.feed(page)
    assert not parser.tags & {"script", "iframe", "img", "a", "foreignobject", "object"}
    assert parser.handlers == []


async def test_the_transparency_panel_checks_the_checkpoint_against_the_log(
    short_dir: Path,
) -> None:
    """With a transparency directory beside the log, the panel said "not
    configured". Now: the root of the lines against the latest checkpoint (signature only
    under ``--key``), naming the key; an edited line is caught."""
    signer = SignerKey.generate(ORIGIN)
    write_key_file(short_dir / "log.key", signer)
    audit = short_dir / "audit.jsonl"
    async with (
        open_server(
            [HostedSession("bytes", (BytesDigestMechanism(),))],
            tcp=None,
            unix=str(short_dir / "sock"),
            audit_path=str(audit),
            transparency=TransparencyConfig(
                key_file=str(short_dir / "log.key"), origin=ORIGIN, checkpoint_interval=0.05
            ),
        ),
        open_client(unix=str(short_dir / "sock")) as client,
    ):
        for payload in (b"a", b"b", b"c"):
            await client.submit("bytes", bytes_binding(payload), [payload])
    vkey = signer.verifier().encode()
    plain = _report(str(audit), "--format", "json").document()["integrity"]["transparency"]
    assert plain["status"] == "ROOT_MATCHES" and plain["signature_checked"] is False
    assert plain["directory"] == str(short_dir / "audit.jsonl.tlog")
    assert [s["name"] for s in plain["signed_by"]] == [ORIGIN] and plain["key"] is None
    assert plain["checkpoint_size"] >= 4  # daemon_start and three decisions
    keyed = _report(str(audit), "--key", vkey, "--format", "json").document()
    found = keyed["integrity"]["transparency"]
    assert found["status"] == "VERIFIED" and found["key"] == vkey, found
    page = render_report_html(aggregate(audit))
    assert 'class="status ROOT_MATCHES" id="transparency"' in page and ORIGIN in page
    lines = audit.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"PASS"', b'"FAIL"')
    audit.write_bytes(b"".join(lines))
    edited = aggregate(audit)["integrity"]["transparency"]
    assert edited["status"] == "INVALID" and edited["code"] == "LOG_EDITED"
    refused = _report(str(audit), "--key", vkey, "--format", "json").document()
    assert refused["integrity"]["transparency"]["status"] == "INVALID"


@pytest.mark.parametrize(("key", "exit_code"), [("no-such-key-file", 66), ("x+y+z", 65)])
def test_a_bad_key_is_refused_before_the_log_is_read(
    tmp_path: Path, key: str, exit_code: int
) -> None:
    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 5)
    done = _report(str(log), "--key", key)
    assert done.returncode == exit_code, done.stderr
