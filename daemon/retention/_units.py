"""Durations and sizes as operators write them (``30d``, ``10GiB``).

Rules: :func:`parse_age` takes seconds or a number followed by ``s``, ``m``, ``h`` or ``d``
and must be positive; :func:`parse_size` takes bytes or a whole number followed by ``B``,
``KiB``/``MiB``/``GiB``/``TiB`` (powers of 1,024) or ``KB``/``MB``/``GB``/``TB`` (powers of
1,000). Anything else is ``ValueError`` quoting the text.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["parse_age", "parse_size"]

_AGE_RE: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)\Z")
_AGE_UNITS: Final[dict[str, int]] = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SIZE_RE: Final = re.compile(r"(\d+)\s*([KMGT]i?B|B)?\Z")
_SIZE_UNITS: Final[dict[str | None, int]] = {
    None: 1,
    "B": 1,
    **{f"{p}iB": 1024 ** (i + 1) for i, p in enumerate("KMGT")},
    **{f"{p}B": 1000 ** (i + 1) for i, p in enumerate("KMGT")},
}


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s`` or plain seconds (positive)."""
    match = _AGE_RE.match(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"not a duration (e.g. 30d, 12h, 3600): {text!r}")
    return float(match.group(1)) * float(_AGE_UNITS[match.group(2)])


def parse_size(text: str) -> int:
    """``10GiB``, ``500MB`` or plain bytes."""
    match = _SIZE_RE.match(text.strip())
    if match is None:
        raise ValueError(f"not a size (e.g. 10GiB, 500MB, 1048576): {text!r}")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2)]
