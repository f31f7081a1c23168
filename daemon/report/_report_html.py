"""``evidenced audit report --format html``: the aggregates as one self-contained page.

Rules (the contract):

1. The page is built only from the :func:`daemon.report._report.aggregate` dict (so it says
   exactly what ``--format json`` says) and is one file: inline CSS, charts as inline SVG drawn
   by :mod:`daemon.report._report_charts` (no plotting library, docs/adr/0019), no script,
   no font or image fetched from anywhere.
2. Order: integrity at the top (the chain status from ``verify_log``; ``#transparency``: the
   latest signed checkpoint checked against the lines, with the key that was used and what was
   not checked, or "not configured"), totals, then the charts — decisions per bin by outcome,
   latency p50/p99 of ``total_ns`` and ``evaluate_ns`` (milliseconds, log scale), refusals by
   code, BUSY refusals, noise and overflow drops per bin — with every restart (a
   ``daemon_start`` after the first) drawn as a dashed vertical line on each time axis; then
   configuration reloads, top sessions, requesters and noise peers, and the most recent
   FAIL/UNKNOWN decisions with their reason codes.
3. Each plotted series is an SVG group with a stable id (``decisions-PASS``, ``latency-total-p50``,
   ``refusal-code-<CODE>``, ``busy``, ``noise``, ``overflow``; restarts
   ``<chart>-restart-<n>``) holding one marker per bin with data, so a test can count points;
   the same page bytes for the same aggregates.
4. Read as an operator reads it: every chart has the same plot-area edges (one frame for the
   page); a count axis has integer ticks only and starts at 0 (an all-zero plot runs 0…1,
   never −0.04…0.04); latency ticks are named in units (``100 µs``, ``10 ms``); legends sit
   above the plot, outside the data.
5. No text is ever interpreted: HTML and SVG text is escaped (a refusal code ``$\\frac{1}{$``
   is drawn as those characters); a text drawn in a chart is printable ASCII, the rest
   escaped (the tables show it as it is, HTML-escaped, but for the terminal-hostile code
   points of ``daemon.audit._audit_format`` rule 5, shown as their ``\\u`` escapes: a
   right-to-left override in a session name must not reorder the page).
6. The decision-id column shows each id cut where the rows' ids differ: the dash-separated
   groups every row shares (a replica's log tag, the first group, docs/adr/0018) are left out,
   then the shortest run of at least 8 characters that tells the rows apart; the whole id is
   the cell's tooltip.
"""

from __future__ import annotations

import functools
import html
from datetime import datetime
from typing import Any, Final

from daemon.audit._audit_format import escape_hostile_text
from daemon.report._report_charts import (
    COLOURS,
    Series,
    bar_chart,
    counts,
    frame_for,
    label,
    latency_axis,
    time_chart,
)

__all__ = ["render_report_html"]

_STYLE: Final = """
body { font-family: "DejaVu Sans", Verdana, sans-serif; margin: 24px; color: #212121;
  max-width: 1200px; }
h1 { font-size: 22px; margin: 0 0 12px 0; }
h2 { font-size: 17px; margin-top: 30px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.status { padding: 10px 16px; border-left: 8px solid; margin: 6px 0; }
.status.INTACT { border-color: #2e7d32; background: #f1f8f1; }
.status.BROKEN { border-color: #c62828; background: #fff3f3; }
.status.NONE { border-color: #9e9e9e; background: #f7f7f7; color: #555; }
.status.VERIFIED { border-color: #2e7d32; background: #f1f8f1; }
.status.ROOT_MATCHES { border-color: #f9a825; background: #fffbea; }
.status.INVALID { border-color: #c62828; background: #fff3f3; }
.totals { display: flex; flex-wrap: wrap; gap: 12px; }
.total { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 110px; }
.total b { display: block; font-size: 20px; }
.total.PASS b { color: #2e7d32; }
.total.FAIL b { color: #c62828; }
.total.UNKNOWN b { color: #b8860b; }
figure { margin: 8px 0; }
figure svg { display: block; max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border-bottom: 1px solid #e0e0e0; padding: 3px 10px; text-align: left;
  vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.nowrap { white-space: nowrap; }
.cols { display: flex; flex-wrap: wrap; gap: 40px; }
code { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
.muted { color: #666; }
"""


def _e(value: object) -> str:
    return html.escape(escape_hostile_text(str(value)), quote=True)


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


_LATENCY: Final = {
    ("total", "p50"): ("#1565c0", "solid"),
    ("total", "p99"): ("#1565c0", "dotted"),
    ("evaluate", "p50"): ("#ef6c00", "solid"),
    ("evaluate", "p99"): ("#ef6c00", "dotted"),
}


def _span(moments: list[float], bin_seconds: int) -> tuple[float, float]:
    """The range of every time chart, so that restart marks line up (an hour when empty)."""
    if not moments:
        return (0.0, 3600.0)
    return (min(moments) - bin_seconds, max(moments) + bin_seconds)


def _refusal_bars(codes: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    """One bar per refusal code (BUSY in its own colour)."""
    return [
        (item["name"], item["count"], "#455a64" if item["name"] != "BUSY" else "#d84315")
        for item in codes
    ]


def _decided(times: list[float], series: list[dict[str, Any]]) -> list[Series]:
    """One series of decisions per outcome, per bin."""
    return [
        Series(
            f"decisions-{outcome}",
            outcome,
            colour,
            "circle",
            tuple((t, s["decisions"][outcome]) for t, s in zip(times, series, strict=True)),
        )
        for outcome, colour in COLOURS.items()
    ]


def _latency(times: list[float], series: list[dict[str, Any]]) -> list[Series]:
    """One series per timer and quantile, in milliseconds."""
    return [  # a log axis: a 0 ns timer (only a doctored line has one) is not drawn
        Series(
            f"latency-{metric}-{quantile}",
            f"{metric}_ns {quantile}",
            colour,
            "circle",
            tuple(
                (t, s[f"{metric}_ns"][quantile] / 1e6)
                for t, s in zip(times, series, strict=True)
                if (s[f"{metric}_ns"][quantile] or 0) > 0
            ),
            line,
        )
        for (metric, quantile), (colour, line) in _LATENCY.items()
    ]


def _pressure(times: list[float], series: list[dict[str, Any]]) -> list[Series]:
    """BUSY refusals, noise and dropped lines, per bin (bins without any are not drawn)."""
    return [
        Series(gid, name, colour, marker, tuple(
            (t, s.get(key, 0)) for t, s in zip(times, series, strict=True) if s.get(key, 0)
        ), None)
        for gid, name, colour, marker, key in (
            ("busy", "BUSY refusals", "#d84315", "circle", "busy"),
            ("noise", "noise (not the protocol)", "#546e7a", "triangle", "noise"),
            ("overflow", "lines dropped (overflow)", "#6d4c41", "square", "overflow_dropped"),
        )
    ]  # fmt: skip


def _plots(result: dict[str, Any]) -> dict[str, str]:
    """Every chart of the page, in one frame (rules 2–4)."""
    series = result["series"]
    times = [_epoch(item["start"]) for item in series]
    restarts = [_epoch(stamp) for stamp in result["restarts"]]
    bin_seconds = result["bin_seconds"]
    span = _span(times or restarts, bin_seconds)
    per_bin = f"per {_width(bin_seconds)}"

    decided = _decided(times, series)
    latency = _latency(times, series)
    pressure = _pressure(times, series)
    decided_axis = counts([v for item in decided for _, v in item.points])
    latency_values = latency_axis([v for item in latency for _, v in item.points])
    pressure_axis = counts([v for item in pressure for _, v in item.points])
    bars = _refusal_bars(result["refusals_by_code"][:15])
    frame = frame_for(
        [text for axis in (decided_axis, latency_values, pressure_axis) for _, text in axis.ticks],
        [label(name) for name, _, _ in bars],
    )  # rule 4: one geometry, the widest left label's
    timed = functools.partial(time_chart, frame=frame, span=span, restarts=restarts)
    return {
        "decisions": timed("decisions", decided, values=decided_axis, title=f"decisions {per_bin}"),
        "latency": timed(
            "latency",
            latency,
            values=latency_values,
            title="latency (ms, log scale)",
            empty="no latency recorded",
        ),
        "refusals": bar_chart("refusals", bars, frame=frame, title="refusals", empty="no refusals"),
        "pressure": timed("pressure", pressure, values=pressure_axis, title=per_bin, height=220.0),
    }


def _width(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h" if seconds != 3600 else "hour"
    if seconds % 60 == 0:
        return "minute" if seconds == 60 else f"{seconds // 60} min"
    return f"{seconds} s"


def _integrity(result: dict[str, Any]) -> str:
    chain = result["integrity"]["chain"]
    if chain["status"] == "INTACT":
        text = (
            f"<b>Hash chain INTACT</b>: {chain['lines']} lines, last seq {chain['last_seq']}, "
            f"head <code>{_e(chain['head'])}</code>"
        )
    else:
        text = (
            f"<b>Hash chain BROKEN</b> at line {_e(chain['first_bad_line'])}: {_e(chain['reason'])}"
            f" ({chain['lines']} good lines before it; the aggregates below still read every "
            "line, unverified past that point)"
        )
    return f'<div class="status {chain["status"]}" id="chain">{text}</div>{_transparency(result)}'


def _transparency(result: dict[str, Any]) -> str:
    found = result["integrity"]["transparency"]
    if found is None:
        return (
            '<div class="status NONE" id="transparency"><b>Transparency log</b>: not configured '
            "(no checkpoint beside the log to compare its lines with)</div>"
        )
    status = str(found.get("status"))
    signers = ", ".join(
        f"{signer['name']} (key id {signer['key_id']})" for signer in found.get("signed_by", [])
    )
    key = found.get("key")
    checked = (
        f"signature checked under <code>{_e(key)}</code>"
        if key
        else "signature <b>not checked</b> (no --key given)"
    )
    size = found.get("checkpoint_size")
    detail = f": {_e(found['code'])}" if found.get("code") else ""
    return (
        f'<div class="status {_e(status)}" id="transparency"><b>Transparency log'
        f" {_e(status)}</b>{detail} — <code>{_e(found['directory'])}</code>"
        + (
            f", checkpoint of {_e(size)} lines, origin <code>{_e(found.get('origin'))}</code>"
            if size is not None
            else ""
        )
        + (f", signed by {_e(signers)}" if signers else "")
        + f"; {checked}. {_e(found.get('message') or '')}</div>"
    )


def _reloads(result: dict[str, Any]) -> str:
    rows = result.get("config_reloads", [])
    if not rows:
        return '<p class="muted" id="config-reloads">No configuration reload in range.</p>'
    body = "".join(
        f'<tr><td class="nowrap">{_e(row["timestamp"])}</td><td>{_e(row["status"])}</td>'
        f"<td><code>{_e(row['source'])}</code></td><td>{_e(row['reason'] or '')}</td></tr>"
        for row in rows
    )
    return (
        '<table id="config-reloads"><tr><th>timestamp</th><th>status</th><th>source</th>'
        f"<th>reason</th></tr>{body}</table>"
    )


def _totals(result: dict[str, Any]) -> str:
    totals = result["totals"]
    latency = result["latency_ns"]["total"]
    cells = [(outcome, totals["decisions"][outcome]) for outcome in ("PASS", "FAIL", "UNKNOWN")]
    cells += [
        ("refusals", totals["refusals"]),
        ("BUSY", totals["busy"]),
        ("overflow events", totals["overflow_events"]),
        ("lines dropped", totals["dropped"]),
        ("restarts", totals["restarts"]),
        ("config reloads", totals.get("config_reloads", 0)),
        ("noise", totals.get("noise", 0)),
        ("p50 total", _ms(latency["p50"])),
        ("p99 total", _ms(latency["p99"])),
    ]
    return (
        '<div class="totals">'
        + "".join(
            f'<div class="total {_e(name)}"><b>{_e(value)}</b>{_e(name)}</div>'
            for name, value in cells
        )
        + "</div>"
    )


def _ms(value: int | None) -> str:
    return "–" if value is None else f"{value / 1e6:.2f} ms"


def _table(rows: list[dict[str, Any]], title: str) -> str:
    body = "".join(
        f'<tr><td>{_e(row["name"])}</td><td class="num">{row["count"]}</td></tr>' for row in rows
    )
    return (
        f"<div><h3>{_e(title)}</h3><table><tr><th>name</th><th>count</th></tr>{body}</table></div>"
    )


def _recent(result: dict[str, Any]) -> str:
    rows = result["recent_failures"]
    if not rows:
        return '<p class="muted">No FAIL or UNKNOWN decision in range.</p>'
    shown = short_ids([str(row["decision_id"]) for row in rows])
    body = "".join(
        f'<tr><td class="nowrap">{_e(row["timestamp"])}</td><td class="num">{_e(row["seq"])}</td>'
        f"<td>{_e(row['session'])}</td>"
        f'<td style="color:{COLOURS.get(str(row["outcome"]), "#000")}">'
        f"{_e(row['outcome'])}</td><td><code>{_e(', '.join(row['reason_codes'] or []))}</code></td>"
        f"<td><code>{_e(row['details'])}</code></td>"
        f'<td title="{_e(row["decision_id"])}">'
        f"<code>{_e(shown[str(row['decision_id'])])}</code></td></tr>"
        for row in rows
    )
    return (
        '<table id="recent-failures"><tr><th>timestamp</th><th>seq</th><th>session</th>'
        "<th>outcome</th><th>reason codes</th><th>details</th><th>decision id</th></tr>"
        f"{body}</table>"
    )


def short_ids(ids: list[str], least: int = 8) -> dict[str, str]:
    """Each id as the decision-id column shows it (rule 6): without the dash-separated groups
    every id shares, then the shortest run (``least`` characters or more) that tells them
    apart; ``…`` marks what was cut."""
    distinct = sorted(set(ids))
    shared = 0  # characters of the whole groups every id begins with
    if len(distinct) > 1:
        groups = [name.split("-") for name in distinct]
        for parts in zip(*groups, strict=False):
            if len(set(parts)) != 1:
                break
            shared += len(parts[0]) + 1
    rest = {name: name[shared:] for name in distinct}
    length = least
    while length < max((len(r) for r in rest.values()), default=0) and len(
        {r[:length] for r in rest.values()}
    ) < len(rest):
        length += 1
    return {
        name: ("…" if shared else "") + tail[:length] + ("…" if len(tail) > length else "")
        for name, tail in rest.items()
    }


def render_report_html(result: dict[str, Any]) -> str:
    """The page for one :func:`daemon.report._report.aggregate` result (rules 1–3)."""
    plots = _plots(result)
    paths = result["source"].get("paths", [result["source"]["path"]])
    span = result["range"]
    lines = result["lines"]
    window = (
        f"{_e(span['first'] or '–')} → {_e(span['last'] or '–')}"
        + (f" (since {_e(span['since'])})" if span["since"] else "")
        + (f" (until {_e(span['until'])})" if span["until"] else "")
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>evidenced audit report: {_e(result['source']['path'])}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Audit report <code>{_e(' + '.join(paths))}</code></h1>",
        _integrity(result),
        f'<p class="muted">{window}; {lines["in_range"]} of {lines["read"]} lines in range'
        f" ({lines['unparseable']} unparseable, {lines['untimed']} without a timestamp); "
        f"one point per {_width(result['bin_seconds'])}.</p>",
        _totals(result),
        f"<h2>Decisions per {_width(result['bin_seconds'])} by outcome</h2>",
        f'<figure id="plot-decisions">{plots["decisions"]}</figure>',
        "<h2>Latency percentiles (p50, p99) of total_ns and evaluate_ns</h2>",
        f'<figure id="plot-latency">{plots["latency"]}</figure>',
        "<h2>Refusals by code</h2>",
        f'<figure id="plot-refusals">{plots["refusals"]}</figure>',
        "<h2>BUSY refusals, noise and audit overflow</h2>",
        f'<figure id="plot-pressure">{plots["pressure"]}</figure>',
        "<h2>Top sessions and requesters</h2>",
        '<div class="cols">',
        _table(result["top_sessions"], "sessions"),
        _table(result["top_requesters"], "requesters"),
        _table(result.get("noise_peers", []), "noise peers"),
        "</div>",
        "<h2>Configuration reloads</h2>",
        _reloads(result),
        "<h2>Most recent FAIL and UNKNOWN decisions</h2>",
        _recent(result),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
