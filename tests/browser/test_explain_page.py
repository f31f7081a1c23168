"""``formation explain --format html`` rendered by a real headless Chromium."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import testdata
from headless import Chromium

from mechanism._svg import text_width
from mechanism.canonical import canonical_bytes

ROOT = testdata.REPO
FIXTURES = testdata.fixture("formation", directory=True)
FAILING_FILL = "rgb(255, 205, 210)"  # #ffcdd2, the failing node's fill


def _explain(subject: Path, certificate: Path, out: Path, *layout: str) -> int:
    with out.open("wb") as handle:
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "daemon.cli",
                "formation",
                "explain",
                str(subject),
                str(certificate),
                "--format",
                "html",
                *layout,
            ],
            stdout=handle,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
            cwd=ROOT,
        )
    return completed.returncode


def _tampered_step(tmp_path: Path, step: int) -> tuple[Path, Path]:
    """The compose fixture with step ``step``'s premises reversed (a certificate tampered at
    one step, everything else honest)."""
    certificate = json.loads((FIXTURES / "compose.certificate.json").read_bytes())
    certificate["steps"][step]["premises"].reverse()
    path = tmp_path / "tampered.certificate.json"
    path.write_bytes(canonical_bytes(certificate))
    return FIXTURES / "compose.subject.json", path


@pytest.mark.parametrize("layout", ["dot", "grandalf"])
def test_the_failing_node_of_a_tampered_certificate_is_the_one_highlighted(
    browser: Chromium, tmp_path: Path, layout: str
) -> None:
    subject, certificate = _tampered_step(tmp_path, 3)
    page_path = tmp_path / "explain.html"
    assert _explain(subject, certificate, page_path, "--layout", layout) == 1
    page = browser.new_page()
    try:
        page.open(page_path.as_uri())
        assert page.console_errors() == []
        assert page.requests() == [page_path.as_uri()]  # nothing fetched but the page itself
        highlighted = page.evaluate(
            """[...document.querySelectorAll('g.node')].filter(g => g.querySelector('rect')
                 && getComputedStyle(g.querySelector('rect')).fill === FILL)
               .map(g => g.dataset.index)""".replace("FILL", repr(FAILING_FILL))
        )
        assert highlighted == ["3"]
        assert page.evaluate("document.querySelector('g.node.failing').id") == "node-3"
        assert page.evaluate("document.querySelectorAll('g.node[data-index]').length") == 6
        assert page.evaluate("document.querySelector('tr.failed').id") == "step-3"
        # The failing path root (5) → 3 is drawn in the path colour.
        assert (
            page.evaluate("getComputedStyle(document.querySelector('g.edge.on-path path')).stroke")
            == "rgb(198, 40, 40)"
        )
        assert page.evaluate("document.querySelector('g.edge.on-path').dataset.head") == "3"
        # The tooltip carries the node's full record.
        tooltip = json.loads(page.evaluate("document.querySelector('#node-3 > title').textContent"))
        assert tooltip["record"] == {"source": 0, "tag": "APPLY_STEP", "target": 1}
        assert tooltip["certificate_step"]["premises"] == [1, 0]
        # The SVG really laid the graph out: every box has a size and sits inside the page.
        boxes = page.evaluate(
            "[...document.querySelectorAll('g.node rect')].map(r => r.getBoundingClientRect())"
            ".map(b => [b.width, b.height])"
        )
        assert all(width > 20 and height > 10 for width, height in boxes)
    finally:
        page.close()


def test_a_binding_failure_highlights_no_node_and_says_why(
    browser: Chromium, tmp_path: Path
) -> None:
    page_path = tmp_path / "explain.html"
    code = _explain(
        FIXTURES / "tampered.subject.json", FIXTURES / "tampered.certificate.json", page_path
    )
    assert code == 1
    page = browser.new_page()
    try:
        page.open(page_path.as_uri())
        assert page.console_errors() == []
        assert page.evaluate("document.querySelectorAll('g.node.failing').length") == 0
        verdict = page.evaluate("document.querySelector('#verdict').textContent")
        assert verdict == "INVALID FORMATION_CERTIFICATE_BINDING_INVALID"
        assert "binds another subject" in page.evaluate(
            "document.querySelector('.why').textContent"
        )
    finally:
        page.close()


#: Every text of the drawing, with its box: the element's, the SVG's, and the node box (rect)
#: around it when it is a node's label.
_TEXTS = """[...document.querySelectorAll('#formation-dag text')].map(t => {
  const own = t.getBoundingClientRect();
  const svg = document.querySelector('#formation-dag').getBoundingClientRect();
  const rect = t.parentElement.querySelector(':scope > rect');
  const box = rect ? rect.getBoundingClientRect() : null;
  return {text: t.textContent, own: [own.left, own.top, own.right, own.bottom],
          svg: [svg.left, svg.top, svg.right, svg.bottom],
          box: box && [box.left, box.top, box.right, box.bottom]};
})"""


def _inside(inner: list[float], outer: list[float]) -> bool:
    return (
        inner[0] >= outer[0] - 0.5
        and inner[1] >= outer[1] - 0.5
        and inner[2] <= outer[2] + 0.5
        and inner[3] <= outer[3] + 0.5
    )


@pytest.mark.parametrize("layout", ["dot", "grandalf"])
def test_a_tampered_pair_s_graph_is_not_clipped_and_fills_its_box(
    browser: Chromium, tmp_path: Path, layout: str
) -> None:
    """``formation explain`` of the tampered pair: its title was clipped
    (``(BINDING_SUBJECT_DIGE``) and the graph used a quarter of its box. At the default size
    every text is inside the drawing (node labels inside their boxes), and the graph takes a
    sensible share of the figure that holds it."""
    page_path = tmp_path / "explain.html"
    code = _explain(
        FIXTURES / "tampered.subject.json",
        FIXTURES / "tampered.certificate.json",
        page_path,
        "--layout",
        layout,
    )
    assert code == 1
    page = browser.new_page()
    try:
        page.open(page_path.as_uri())
        texts = page.evaluate(_TEXTS)
        assert len(texts) >= 8
        clipped = [t["text"] for t in texts if not _inside(t["own"], t["svg"])]
        assert clipped == []
        overflowing = [t["text"] for t in texts if t["box"] and not _inside(t["own"], t["box"])]
        assert overflowing == []
        caption = page.evaluate("document.querySelector('text.verdict').textContent")
        assert "(BINDING_SUBJECT_DIGEST)" in caption
        share = page.evaluate(
            """(() => { const g = document.querySelector('#formation-dag g.graph')
                   .getBoundingClientRect();
                 const f = document.querySelector('figure').getBoundingClientRect();
                 return (g.width * g.height) / (f.width * f.height); })()"""
        )
        assert share > 0.35, share  # it was about 0.15: a small graph in a page-wide box
    finally:
        page.close()


def test_text_is_measured_as_the_browser_draws_it(browser: Chromium, tmp_path: Path) -> None:
    """The pictures size boxes and margins by ``mechanism._svg.text_width`` (DejaVu Sans's
    advance widths, kerning left out): each text of a drawing, regular or bold, is never
    narrower than the browser draws it (so nothing sized by it clips) and at most 5 % wider
    (kerning only narrows)."""
    page_path = tmp_path / "explain.html"
    subject, certificate = _tampered_step(tmp_path, 3)
    _explain(subject, certificate, page_path, "--layout", "grandalf")
    page = browser.new_page()
    try:
        page.open(page_path.as_uri())
        drawn = page.evaluate(
            """[...document.querySelectorAll('#formation-dag text')].flatMap(t =>
                 (t.children.length ? [...t.children] : [t]).map(e => [e.textContent,
                   e.getComputedTextLength(),
                   parseInt(getComputedStyle(e).fontWeight) >= 600,
                   parseFloat(getComputedStyle(e).fontSize)]))"""
        )
        assert any(bold for _, _, bold, _ in drawn) and not all(bold for _, _, bold, _ in drawn)
        for text, length, bold, size in drawn:
            measured = text_width(text, size, bold=bold)
            assert length - 0.5 <= measured <= 1.05 * length + 0.5, (text, measured, length)
    finally:
        page.close()
