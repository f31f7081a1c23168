"""The charts of ``evidenced audit report --format html``, drawn as SVG here (docs/adr/0019).

Rules (the contract):

1. One plot-area geometry for every chart of a page (:class:`Frame`): the same width, the
   same left and right edges of the plot area (the widest left label of any chart decides the
   left margin for all), so the time axes line up and a restart is at the same x everywhere.
   Each chart's plot area is ``<rect class="plot-area">``.
2. Axes an operator reads: time ticks at round times (``08:00``, ``08:15``; with seconds under
   a minute's step, dates over a day's), the day (UTC) under the axis; count axes with integer
   ticks from 0 and headroom above the largest count (an all-zero chart runs 0…1);
   latency on a log scale in milliseconds with ticks at powers of ten named in units
   (``100 µs``, ``1 ms``, ``10 ms``, ``1 s``; within one decade also its 2 and 5 multiples).
   Tick labels are ``<g class="tick x|y"><text>``.
3. Each series is a ``<g>`` with its stable id (``decisions-PASS``, ``latency-total-p50``,
   ``busy``, ``noise``, ``overflow``, ``refusal-code-<CODE>`` for a bar) holding one
   ``<use>`` marker per bin with data; each restart is a dashed vertical line
   ``<line class="restart" id="<chart>-restart-<n>">``. Legends sit above the plot area,
   outside the data.
4. Text is never interpreted: every text is escaped (:func:`mechanism._svg.escape`), and a
   text from the log is drawn as printable ASCII (others ``\\u``-escaped, at most 40
   characters), so no glyph is missing and nothing is markup.
5. Deterministic: the same aggregates give the same bytes (no random ids, fixed number
   formatting).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

import attrs

from mechanism._svg import FONT_FAMILY, escape, text_width

__all__ = [
    "COLOURS",
    "Axis",
    "Frame",
    "Series",
    "bar_chart",
    "counts",
    "frame_for",
    "label",
    "latency_axis",
    "milliseconds",
    "time_axis",
    "time_chart",
]

COLOURS: Final = {"PASS": "#2e7d32", "FAIL": "#c62828", "UNKNOWN": "#f9a825"}
WIDTH: Final = 1100.0
FONT: Final = 11.0  # tick labels, legends
TITLE_BAND: Final = 18.0  # the rotated y-axis title
TICK: Final = 5.0
GAP: Final = 4.0
RIGHT: Final = 28.0
TOP: Final = 30.0  # the legend row above the plot area
BOTTOM: Final = 40.0  # tick labels and the date under the time axis
RESTART_COLOUR: Final = "#6a1b9a"
GRID: Final = "#e6e6e6"
_MARKERS: Final = {
    "circle": '<circle cx="0" cy="0" r="{r}"/>',
    "triangle": '<path d="M0,-{r} L{t},{h} L-{t},{h} Z"/>',
    "square": '<rect x="-{r}" y="-{r}" width="{d}" height="{d}"/>',
}
#: Candidate steps of a time axis, seconds.
_TIME_STEPS: Final = (
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
    86400, 172800, 604800, 2592000, 7776000, 31536000,
)  # fmt: skip


def label(text: str, limit: int = 40) -> str:
    """Rule 4: a text from the log as printable ASCII, at most ``limit`` characters."""
    shown = "".join(
        c if " " <= c <= "~" else c.encode("unicode_escape", "backslashreplace").decode("ascii")
        for c in text
    )
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _num(value: float) -> str:
    """A coordinate, fixed-format (rule 5)."""
    return f"{value:.1f}"


# --------------------------------------------------------------------------- axes


@attrs.frozen
class Axis:
    """A mapping of data values onto a pixel range, with its labelled ticks."""

    low: float
    high: float
    ticks: tuple[tuple[float, str], ...]
    log: bool = False

    def position(self, value: float, start: float, end: float) -> float:
        """``value`` on the range ``start`` (at ``low``) … ``end`` (at ``high``)."""
        low, high = self.low, self.high
        if self.log:
            value, low, high = math.log10(value), math.log10(low), math.log10(high)
        share = (value - low) / (high - low) if high != low else 0.0
        return start + share * (end - start)


def _nice_step(top: float) -> int:
    step = 1
    while True:
        for factor in (1, 2, 5):
            if top / (step * factor) <= 6:
                return step * factor
        step *= 10


def counts(values: Sequence[float]) -> Axis:
    """Rule 2: integer ticks from 0 (at most 7), headroom above the largest count."""
    top = max([1.0, *values]) * 1.12
    step = _nice_step(top)
    return Axis(0.0, top, tuple((float(n), str(n)) for n in range(0, int(top) + 1, step)))


def milliseconds(value: float) -> str:
    """A latency tick's label: ``100 µs``, ``1 ms``, ``2.5 s`` (rule 2)."""
    if value >= 1000:
        return f"{round(value / 1000, 9):g} s"
    if value >= 1:
        return f"{round(value, 9):g} ms"
    return f"{round(value * 1000, 9):g} µs"


def latency_axis(values: Sequence[float]) -> Axis:
    """Rule 2: a log axis over whole decades of milliseconds holding ``values`` (> 0)."""
    if not values:
        return Axis(0.1, 10.0, tuple((v, milliseconds(v)) for v in (0.1, 1.0, 10.0)), log=True)
    low = 10.0 ** math.floor(math.log10(min(values)))
    high = 10.0 ** math.ceil(math.log10(max(values)))
    if high <= low:
        high = low * 10
    decades = round(math.log10(high / low))
    marks = [low * 10**n for n in range(decades + 1)]
    if decades == 1:
        marks = sorted([*marks, low * 2, low * 5])
    return Axis(low, high, tuple((v, milliseconds(v)) for v in marks), log=True)


def _time_label(seconds: float, step: int) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    if step >= 86400:
        return moment.strftime("%b %d")
    if step < 60:
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%H:%M")


def time_axis(low: float, high: float) -> Axis:
    """Rule 2: ticks at round UTC times, the finest round step giving at most 10."""
    span = max(high - low, 1.0)
    step = next((s for s in _TIME_STEPS if span / s <= 10), _TIME_STEPS[-1])
    first = math.ceil(low / step) * step
    ticks = []
    moment = first
    while moment <= high:
        ticks.append((float(moment), _time_label(moment, step)))
        moment += step
    return Axis(low, high, tuple(ticks))


def _day_range(low: float, high: float) -> str:
    first = datetime.fromtimestamp(low, UTC).strftime("%Y-%m-%d")
    last = datetime.fromtimestamp(high, UTC).strftime("%Y-%m-%d")
    return f"{first} (UTC)" if first == last else f"{first} – {last} (UTC)"


# --------------------------------------------------------------------------- the frame


@attrs.frozen
class Frame:
    """The plot-area geometry every chart of a page shares (rule 1)."""

    left: float
    right: float = WIDTH - RIGHT
    width: float = WIDTH


def frame_for(left_labels: Sequence[str], side_labels: Sequence[str]) -> Frame:
    """The frame whose left margin fits every y tick label (``left_labels``, beside a y-axis
    title) and every category label (``side_labels``, of a bar chart) of the page."""
    ticks = max((text_width(t, FONT) for t in left_labels), default=0.0)
    sides = max((text_width(t, FONT) for t in side_labels), default=0.0)
    return Frame(left=math.ceil(max(TITLE_BAND + GAP + ticks, sides) + TICK + 2 * GAP))


@attrs.frozen
class Series:
    """One plotted series: its id, legend text, colour, marker, line style and points."""

    gid: str
    name: str
    colour: str
    marker: str
    points: tuple[tuple[float, float], ...]  # (epoch seconds, value)
    line: str | None = "solid"  # None: markers only; "dotted"


def _open(chart: str, height: float, frame: Frame) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-{chart}" '
        f'width="{frame.width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {frame.width:.0f} {height:.0f}" font-family="{FONT_FAMILY}" '
        f'font-size="{FONT:.0f}">'
    ]


def _markers(chart: str, size: float) -> str:
    r = f"{size:.1f}"
    t, h, d = f"{size * 0.95:.1f}", f"{size * 0.8:.1f}", f"{size * 2:.1f}"
    shapes = "".join(
        f'<g id="{chart}-m-{name}">{shape.format(r=r, t=t, h=h, d=d)}</g>'
        for name, shape in _MARKERS.items()
    )
    return f"<defs>{shapes}</defs>"


def _plot_area(frame: Frame, top: float, bottom: float) -> str:
    return (
        f'<rect class="plot-area" x="{_num(frame.left)}" y="{_num(top)}" '
        f'width="{_num(frame.right - frame.left)}" height="{_num(bottom - top)}" '
        'fill="none" stroke="none"/>'
    )


def _y_axis(axis: Axis, frame: Frame, top: float, bottom: float, title: str) -> list[str]:
    out = ['<g class="axis y">']
    for value, text in axis.ticks:
        y = axis.position(value, bottom, top)
        out.append(
            f'<g class="tick y"><line x1="{_num(frame.left)}" x2="{_num(frame.right)}" '
            f'y1="{_num(y)}" y2="{_num(y)}" stroke="{GRID}" stroke-width="0.8"/>'
            f'<line x1="{_num(frame.left - TICK)}" x2="{_num(frame.left)}" y1="{_num(y)}" '
            f'y2="{_num(y)}" stroke="#424242"/>'
            f'<text x="{_num(frame.left - TICK - GAP)}" y="{_num(y + FONT * 0.35)}" '
            f'text-anchor="end" fill="#212121">{escape(text)}</text></g>'
        )
    middle = (top + bottom) / 2
    widest = max((text_width(text, FONT) for _, text in axis.ticks), default=0.0)
    x = max(TITLE_BAND - 4, frame.left - TICK - 2 * GAP - widest - 6)  # beside its labels
    out.append(
        f'<text class="axis-title" x="{_num(x)}" y="{_num(middle)}" '
        f'transform="rotate(-90 {_num(x)} {_num(middle)})" text-anchor="middle" '
        f'fill="#424242">{escape(title)}</text>'
    )
    out.append(
        f'<line x1="{_num(frame.left)}" x2="{_num(frame.left)}" y1="{_num(top)}" '
        f'y2="{_num(bottom)}" stroke="#424242"/></g>'
    )
    return out


def _x_axis(axis: Axis, frame: Frame, bottom: float, under: str) -> list[str]:
    out = ['<g class="axis x">']
    for value, text in axis.ticks:
        x = axis.position(value, frame.left, frame.right)
        out.append(
            f'<g class="tick x"><line x1="{_num(x)}" x2="{_num(x)}" y1="{_num(bottom)}" '
            f'y2="{_num(bottom + TICK)}" stroke="#424242"/>'
            f'<text x="{_num(x)}" y="{_num(bottom + TICK + FONT + 1)}" text-anchor="middle" '
            f'fill="#212121">{escape(text)}</text></g>'
        )
    out.append(
        f'<line x1="{_num(frame.left)}" x2="{_num(frame.right)}" y1="{_num(bottom)}" '
        f'y2="{_num(bottom)}" stroke="#424242"/>'
    )
    if under:
        out.append(
            f'<text class="axis-title" x="{_num(frame.right)}" '
            f'y="{_num(bottom + TICK + 2 * FONT + 5)}" text-anchor="end" fill="#424242">'
            f"{escape(under)}</text>"
        )
    out.append("</g>")
    return out


def _legend(chart: str, entries: Sequence[tuple[str, str, str | None, str | None]],
            frame: Frame) -> list[str]:  # fmt: skip
    """Rule 3: one row above the plot area: (text, colour, marker, line style) each."""
    out = ['<g class="legend">']
    x, y = frame.left, TOP / 2 + 2
    for text, colour, marker, line in entries:
        dash = ' stroke-dasharray="2 2"' if line == "dotted" else ""
        dash = ' stroke-dasharray="5 3"' if line == "dashed" else dash
        if line is not None:
            out.append(
                f'<line x1="{_num(x)}" x2="{_num(x + 22)}" y1="{_num(y)}" y2="{_num(y)}" '
                f'stroke="{colour}" stroke-width="1.4"{dash}/>'
            )
        if marker is not None:
            out.append(
                f'<use href="#{chart}-m-{marker}" x="{_num(x + 11)}" y="{_num(y)}" '
                f'fill="{colour}"/>'
            )
        out.append(
            f'<text x="{_num(x + 28)}" y="{_num(y + FONT * 0.35)}" fill="#212121">'
            f"{escape(text)}</text>"
        )
        x += 28 + text_width(text, FONT) + 18
    out.append("</g>")
    return out


def time_chart(
    chart: str,
    series: Sequence[Series],
    *,
    frame: Frame,
    span: tuple[float, float],
    restarts: Sequence[float],
    values: Axis,
    title: str,
    height: float = 260.0,
    empty: str = "",
) -> str:
    """A time-series chart (rules 1–3): ``series`` over the time range ``span`` (epoch
    seconds), ``values`` the y axis, ``restarts`` dashed lines."""
    top, bottom = TOP, height - BOTTOM
    times = time_axis(*span)
    out = _open(chart, height, frame)
    out.append(_markers(chart, 2.6))
    out.append(_plot_area(frame, top, bottom))
    out += _y_axis(values, frame, top, bottom, title)
    out += _x_axis(times, frame, bottom, _day_range(*span))

    def x_of(moment: float) -> float:
        return times.position(moment, frame.left, frame.right)

    def y_of(value: float) -> float:
        return values.position(value, bottom, top)

    for item in series:
        out.append(f'<g id="{escape(item.gid)}" class="series" fill="{item.colour}">')
        if item.line is not None and len(item.points) > 1:
            dash = ' stroke-dasharray="2 2"' if item.line == "dotted" else ""
            path = " L".join(f"{_num(x_of(t))},{_num(y_of(v))}" for t, v in item.points)
            out.append(
                f'<path d="M{path}" fill="none" stroke="{item.colour}" stroke-width="1.2"{dash}/>'
            )
        for moment, value in item.points:
            out.append(
                f'<use href="#{chart}-m-{item.marker}" x="{_num(x_of(moment))}" '
                f'y="{_num(y_of(value))}"/>'
            )
        out.append("</g>")
    for number, moment in enumerate(restarts):
        x = x_of(moment)
        out.append(
            f'<line class="restart" id="{chart}-restart-{number}" x1="{_num(x)}" '
            f'x2="{_num(x)}" y1="{_num(top)}" y2="{_num(bottom)}" stroke="{RESTART_COLOUR}" '
            'stroke-width="1" stroke-dasharray="5 3"/>'
        )
    if empty and not any(item.points for item in series):
        out.append(
            f'<text class="empty" x="{_num((frame.left + frame.right) / 2)}" '
            f'y="{_num((top + bottom) / 2)}" text-anchor="middle" fill="#757575">'
            f"{escape(empty)}</text>"
        )
    entries: list[tuple[str, str, str | None, str | None]] = [
        (item.name, item.colour, item.marker, item.line) for item in series
    ]
    if restarts:
        entries.append(("restart", RESTART_COLOUR, None, "dashed"))
    out += _legend(chart, entries, frame)
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(
    chart: str,
    bars: Sequence[tuple[str, int, str]],
    *,
    frame: Frame,
    title: str,
    empty: str,
) -> str:
    """Horizontal bars, top to bottom in the order given: (name, count, colour) each, the
    name at the left edge of the plot area (rule 1), the count at the bar's end; the count
    axis below (rules 2–3)."""
    row = 24.0
    top = 12.0
    bottom = top + max(1, len(bars)) * row + 6
    height = bottom + BOTTOM
    axis = counts([count for _, count, _ in bars])
    out = _open(chart, height, frame)
    out.append(_plot_area(frame, top, bottom))
    out.append('<g class="axis x">')
    for value, text in axis.ticks:
        x = axis.position(value, frame.left, frame.right)
        out.append(
            f'<g class="tick x"><line x1="{_num(x)}" x2="{_num(x)}" y1="{_num(top)}" '
            f'y2="{_num(bottom)}" stroke="{GRID}" stroke-width="0.8"/>'
            f'<line x1="{_num(x)}" x2="{_num(x)}" y1="{_num(bottom)}" '
            f'y2="{_num(bottom + TICK)}" stroke="#424242"/>'
            f'<text x="{_num(x)}" y="{_num(bottom + TICK + FONT + 1)}" text-anchor="middle" '
            f'fill="#212121">{escape(text)}</text></g>'
        )
    out.append(
        f'<line x1="{_num(frame.left)}" x2="{_num(frame.right)}" y1="{_num(bottom)}" '
        f'y2="{_num(bottom)}" stroke="#424242"/>'
        f'<text class="axis-title" x="{_num((frame.left + frame.right) / 2)}" '
        f'y="{_num(bottom + TICK + 2 * FONT + 5)}" text-anchor="middle" fill="#424242">'
        f"{escape(title)}</text></g>"
    )
    for index, (name, count, colour) in enumerate(bars):
        y = top + 3 + index * row
        x = axis.position(count, frame.left, frame.right)
        shown = label(name)
        out.append(
            f'<g id="refusal-code-{escape(name)}" class="bar">'
            f'<rect x="{_num(frame.left)}" y="{_num(y)}" width="{_num(x - frame.left)}" '
            f'height="{_num(row - 6)}" fill="{colour}"/>'
            f'<text class="category" x="{_num(frame.left - GAP)}" '
            f'y="{_num(y + (row - 6) / 2 + FONT * 0.35)}" text-anchor="end" '
            f'fill="#212121">{escape(shown)}</text>'
            f'<text class="count" x="{_num(x + 3)}" y="{_num(y + (row - 6) / 2 + FONT * 0.35)}" '
            f'fill="#212121">{count}</text></g>'
        )
    if not bars:
        out.append(
            f'<text class="empty" x="{_num((frame.left + frame.right) / 2)}" '
            f'y="{_num((top + bottom) / 2 + FONT * 0.35)}" text-anchor="middle" '
            f'fill="#757575">{escape(empty)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)
