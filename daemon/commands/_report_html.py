"""``evidenced audit report --format html``: the aggregates as one self-contained page.

Rules (the contract):

1. The page is built only from the :func:`daemon.commands._report.aggregate` dict (so it says
   exactly
   what ``--format json`` says) and is one file: inline CSS, plots as inline SVG drawn by
   matplotlib (docs/adr/0004), no script, no font or image fetched from anywhere.
2. Order: integrity at the top (the chain status from ``verify_log``; ``#transparency``: the
   latest signed checkpoint checked against the lines, with the key that was used and what was
   not checked, or "not configured"), totals, then the plots — decisions per bin by outcome,
   latency p50/p99 of ``total_ns`` and ``evaluate_ns`` (milliseconds, log scale), refusals by
   code, BUSY refusals, noise and overflow drops per bin — with every restart (a
   ``daemon_start`` after the first) drawn as a dashed vertical line on each time axis; then
   configuration reloads, top sessions, requesters and noise peers, and the most recent
   FAIL/UNKNOWN decisions with their reason codes.
3. Each plotted series is an SVG group with a stable id (``decisions-PASS``, ``latency-total-p50``,
   ``refusal-code-<CODE>``, ``busy``, ``noise``, ``overflow``, ``restart-<n>``…) holding one
   marker per bin with data, so a test can count points; the same page bytes for the same
   aggregates.
4. Read as an operator reads it: a count axis has integer ticks only and starts at 0 (an
   all-zero plot runs 0…1, never −0.04…0.04); legends sit above the plot, outside the data.
5. No text is ever interpreted: HTML is escaped, and matplotlib's math text and TeX are off
   (a refusal code ``$\\frac{1}{$`` is drawn as those characters); a text drawn in a plot is
   printable ASCII, the rest escaped (the tables show it as it is, HTML-escaped, but for the
   terminal-hostile code points of ``daemon.audit._audit_format`` rule 5, shown as their
   ``\\u`` escapes: a right-to-left override in a session name must not reorder the page).
"""

from __future__ import annotations

import html
import io
from datetime import datetime, timedelta
from typing import Any, Final

from daemon.audit._audit_format import escape_hostile_text

__all__ = ["render_report_html"]

_COLOURS: Final = {"PASS": "#2e7d32", "FAIL": "#c62828", "UNKNOWN": "#f9a825"}

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
figure svg { max-width: 100%; height: auto; }
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


def _times(series: list[dict[str, Any]]) -> list[datetime]:
    return [datetime.fromisoformat(item["start"]) for item in series]


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _figure(height: float = 2.6) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(11, height), layout="constrained")
    axes.grid(True, color="#e6e6e6", linewidth=0.6)
    axes.set_axisbelow(True)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    return figure, axes


def _restarts(axes: Any, restarts: list[str]) -> None:
    for number, stamp in enumerate(restarts):
        axes.axvline(
            datetime.fromisoformat(stamp),
            color="#6a1b9a",
            linestyle="--",
            linewidth=1,
            gid=f"restart-{number}",
            label="restart" if number == 0 else None,
        )


def _label(text: str, limit: int = 40) -> str:
    """Rule 5: a text drawn in a plot is printable ASCII (anything else ``\\u``-escaped, so no
    glyph is ever missing from the font), at most ``limit`` characters."""
    shown = "".join(
        c if " " <= c <= "~" else c.encode("unicode_escape", "backslashreplace").decode("ascii")
        for c in text
    )
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _legend(axes: Any, columns: int) -> None:
    """Rule 4: above the plot, never over the data."""
    if axes.get_legend_handles_labels()[0]:
        axes.legend(
            loc="lower left",
            bbox_to_anchor=(0.0, 1.0),
            ncols=columns,
            fontsize=8,
            frameon=False,
            borderaxespad=0.2,
        )


def _count_axis(axes: Any, values: list[int], axis: str = "y") -> None:
    """Rule 4: integer ticks from 0, a little headroom above the largest count."""
    from matplotlib.ticker import MaxNLocator

    top = max([1, *values]) * 1.12
    if axis == "y":
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylim(0, top)
    else:
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_xlim(0, top)


def _time_axis(axes: Any, times: list[datetime], bin_seconds: int) -> None:
    """The same time range on every time plot, so restart marks line up across plots."""
    import matplotlib.dates as mdates

    if times:
        margin = timedelta(seconds=bin_seconds)
        axes.set_xlim(min(times) - margin, max(times) + margin)

    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(
        mdates.ConciseDateFormatter(locator)  # type: ignore[no-untyped-call]
    )


def _plots(result: dict[str, Any]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plots: dict[str, str] = {}
    series = result["series"]
    times = _times(series)
    restarts = result["restarts"]
    with matplotlib.rc_context(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "evidenced-audit-report",
            "font.family": "DejaVu Sans",
            "font.size": 9,
            "text.parse_math": False,
            "text.usetex": False,
        }
    ):
        figure, axes = _figure()
        for outcome, colour in _COLOURS.items():
            points = [(t, s["decisions"][outcome]) for t, s in zip(times, series, strict=True)]
            axes.plot(
                [t for t, _ in points],
                [v for _, v in points],
                marker="o",
                markersize=2.5,
                linewidth=1.1,
                color=colour,
                label=outcome,
                gid=f"decisions-{outcome}",
            )
        _restarts(axes, restarts)
        axes.set_ylabel(f"decisions per {_width(result['bin_seconds'])}")
        _time_axis(axes, times, result["bin_seconds"])
        _count_axis(axes, [s["decisions"][o] for s in series for o in _COLOURS])
        _legend(axes, 4)
        plots["decisions"] = _svg(figure)
        plt.close(figure)

        figure, axes = _figure()
        styles = {
            ("total", "p50"): ("#1565c0", "-"),
            ("total", "p99"): ("#1565c0", ":"),
            ("evaluate", "p50"): ("#ef6c00", "-"),
            ("evaluate", "p99"): ("#ef6c00", ":"),
        }
        positive = False
        for (metric, quantile), (colour, line) in styles.items():
            points = [  # a log axis: a 0 ns timer (only a doctored line has one) is not drawn
                (t, s[f"{metric}_ns"][quantile] / 1e6)
                for t, s in zip(times, series, strict=True)
                if (s[f"{metric}_ns"][quantile] or 0) > 0
            ]
            positive = positive or bool(points)
            axes.plot(
                [t for t, _ in points],
                [v for _, v in points],
                marker="o",
                markersize=2,
                linewidth=1.1,
                linestyle=line,
                color=colour,
                label=f"{metric}_ns {quantile}",
                gid=f"latency-{metric}-{quantile}",
            )
        if positive:
            axes.set_yscale("log")
        _restarts(axes, restarts)
        axes.set_ylabel("latency (ms)")
        _time_axis(axes, times, result["bin_seconds"])
        _legend(axes, 5)
        plots["latency"] = _svg(figure)
        plt.close(figure)

        codes = result["refusals_by_code"][:15]
        figure, axes = _figure(max(1.2, 0.32 * len(codes) + 0.7))
        for position, item in enumerate(reversed(codes)):
            axes.barh(
                position,
                item["count"],
                color="#455a64" if item["name"] != "BUSY" else "#d84315",
                gid=f"refusal-code-{item['name']}",
            )
            axes.text(item["count"], position, f" {item['count']}", va="center", fontsize=8)
        axes.set_yticks(range(len(codes)), [_label(item["name"]) for item in reversed(codes)])
        axes.set_xlabel("refusals")
        _count_axis(axes, [item["count"] for item in codes], axis="x")
        if not codes:
            axes.text(0.5, 0.5, "no refusals", ha="center", va="center", transform=axes.transAxes)
        plots["refusals"] = _svg(figure)
        plt.close(figure)

        figure, axes = _figure(2.2)
        busy = [(t, s["busy"]) for t, s in zip(times, series, strict=True) if s["busy"]]
        drops = [
            (t, s["overflow_dropped"])
            for t, s in zip(times, series, strict=True)
            if s["overflow_dropped"]
        ]
        axes.plot(
            [t for t, _ in busy],
            [v for _, v in busy],
            "o",
            markersize=3.5,
            color="#d84315",
            label="BUSY refusals",
            gid="busy",
        )
        noise = [(t, s.get("noise", 0)) for t, s in zip(times, series, strict=True)]
        noise = [(t, v) for t, v in noise if v]
        axes.plot(
            [t for t, _ in noise],
            [v for _, v in noise],
            "^",
            markersize=3.5,
            color="#546e7a",
            label="noise (not the protocol)",
            gid="noise",
        )
        axes.plot(
            [t for t, _ in drops],
            [v for _, v in drops],
            "s",
            markersize=3.5,
            color="#6d4c41",
            label="lines dropped (overflow)",
            gid="overflow",
        )
        _restarts(axes, restarts)
        axes.set_ylabel(f"per {_width(result['bin_seconds'])}")
        _time_axis(axes, times, result["bin_seconds"])
        _count_axis(axes, [v for _, v in (*busy, *noise, *drops)])
        _legend(axes, 3)
        plots["pressure"] = _svg(figure)
        plt.close(figure)
    return plots


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
    body = "".join(
        f'<tr><td class="nowrap">{_e(row["timestamp"])}</td><td class="num">{_e(row["seq"])}</td>'
        f"<td>{_e(row['session'])}</td>"
        f'<td style="color:{_COLOURS.get(str(row["outcome"]), "#000")}">'
        f"{_e(row['outcome'])}</td><td><code>{_e(', '.join(row['reason_codes'] or []))}</code></td>"
        f"<td><code>{_e(row['details'])}</code></td>"
        f'<td title="{_e(row["decision_id"])}">'
        f"<code>{_e(str(row['decision_id'])[:8])}…</code></td></tr>"
        for row in rows
    )
    return (
        '<table id="recent-failures"><tr><th>timestamp</th><th>seq</th><th>session</th>'
        "<th>outcome</th><th>reason codes</th><th>details</th><th>decision id</th></tr>"
        f"{body}</table>"
    )


def render_report_html(result: dict[str, Any]) -> str:
    """The page for one :func:`daemon.commands._report.aggregate` result (rules 1–3)."""
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
