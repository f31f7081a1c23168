"""What the project's SVG pictures share: text measured as it is drawn, and escaped.

``formation explain`` draws its graph and ``evidenced audit report`` its charts as SVG of their
own (docs/adr/0004); both size boxes, margins and captions by the text they hold. This module
is their common ground (the mechanism package's shared room, so the daemon's commands and the
formation mechanism's tools may both import it; it imports nothing of the project).

Rules (the contract):

1. :data:`FONT_FAMILY` is the one font stack both pictures name (DejaVu Sans first: the font
   ``make browser`` installs and the widths below are measured from).
2. :func:`text_width` is the advance width, in px, of a text at a font size in DejaVu Sans
   (regular or bold): the font's own advance widths for printable ASCII (DejaVu Sans 2.37,
   2048 units per em, read from its ``hmtx`` table), one em and a tenth for any other character
   (wider than every glyph of the font but a few, so what is sized by it is not clipped).
   Kerning is ignored (it only narrows).
3. :func:`wrap` breaks a text at spaces into lines no wider than a width (a word wider than it
   is a line of its own, never cut).
4. :func:`escape` makes any text safe as SVG character data or an attribute value (``&``,
   ``<``, ``>``, ``"``, ``'``): text is always text, never markup.
"""

from __future__ import annotations

import html
from typing import Final

__all__ = ["FONT_FAMILY", "escape", "text_width", "wrap"]

FONT_FAMILY: Final = "DejaVu Sans, Verdana, sans-serif"

_EM: Final = 2048
#: Advance widths of U+0020 … U+007E, in font units, DejaVu Sans then DejaVu Sans Bold.
_REGULAR: Final = (
    651, 821, 942, 1716, 1303, 1946, 1597, 563, 799, 799, 1024, 1716, 651, 739, 651, 690,
    1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 690, 690, 1716, 1716, 1716,
    1087, 2048, 1401, 1405, 1430, 1577, 1294, 1178, 1587, 1540, 604, 604, 1343, 1141, 1767,
    1532, 1612, 1235, 1612, 1423, 1300, 1251, 1499, 1401, 2025, 1403, 1251, 1403, 799, 690,
    799, 1716, 1024, 1024, 1255, 1300, 1126, 1300, 1260, 721, 1300, 1298, 569, 569, 1186,
    569, 1995, 1298, 1253, 1300, 1300, 842, 1067, 803, 1298, 1212, 1675, 1212, 1212, 1075,
    1303, 690, 1303, 1716,
)  # fmt: skip
_BOLD: Final = (
    713, 934, 1067, 1716, 1425, 2052, 1786, 627, 936, 936, 1071, 1716, 778, 850, 778, 748,
    1425, 1425, 1425, 1425, 1425, 1425, 1425, 1425, 1425, 1425, 819, 819, 1716, 1716, 1716,
    1188, 2048, 1585, 1561, 1503, 1700, 1399, 1399, 1681, 1714, 762, 762, 1587, 1305, 2038,
    1714, 1741, 1501, 1741, 1577, 1475, 1397, 1663, 1585, 2259, 1579, 1483, 1485, 936, 748,
    936, 1716, 1024, 1024, 1382, 1466, 1214, 1466, 1389, 891, 1466, 1458, 702, 702, 1362,
    702, 2134, 1458, 1407, 1466, 1466, 1010, 1219, 979, 1458, 1335, 1892, 1321, 1335, 1192,
    1458, 748, 1458, 1716,
)  # fmt: skip
_OTHER: Final = _EM * 11 // 10


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """The advance width of ``text`` at ``size`` px (rule 2)."""
    table = _BOLD if bold else _REGULAR
    units = sum(table[ord(c) - 32] if " " <= c <= "~" else _OTHER for c in text)
    return units * size / _EM


def wrap(text: str, width: float, size: float, *, bold: bool = False) -> list[str]:
    """``text`` in lines no wider than ``width`` px, broken at spaces (rule 3)."""
    lines: list[str] = []
    for word in text.split(" "):
        joined = f"{lines[-1]} {word}" if lines else word
        if lines and text_width(joined, size, bold=bold) <= width:
            lines[-1] = joined
        else:
            lines.append(word)
    return lines or [""]


def escape(text: object) -> str:
    """``text`` as SVG character data or an attribute value (rule 4)."""
    return html.escape(str(text), quote=True)
