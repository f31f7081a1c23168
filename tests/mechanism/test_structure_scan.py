"""The structure scan's C-level shortcut never changes its verdict.

``scan_structure`` first asks whether the brackets outside strings balance within the bounds
(passes that peel one level each); only otherwise does it run the exact, ordered loop. The
reference here is that loop alone, over the brackets outside strings, on generated texts
mixing both bracket kinds, strings holding brackets and quotes, and unbalanced sequences.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism.canonical import CanonicalError, _check_brackets, scan_structure

PIECES = ["[", "]", "{", "}", '"a"', '"[{"', '"]}"', ",", "1"]


def _outside(data: bytes) -> bytes:
    """Brackets outside strings (no backslashes here: each quote toggles)."""
    out = bytearray()
    inside = False
    for byte in data:
        if byte == 0x22:
            inside = not inside
        elif not inside and byte in b"[]{}":
            out.append(byte)
    return bytes(out)


def _verdict(call: object) -> str:
    assert callable(call)
    try:
        call()
    except CanonicalError as error:
        return error.kind
    return "ok"


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(PIECES), max_size=60),
    st.integers(1, 6),
    st.integers(1, 20),
)
def test_shortcut_and_exact_loop_agree(pieces: list[str], depth: int, containers: int) -> None:
    data = "".join(pieces).encode()
    expected = _verdict(lambda: _check_brackets(_outside(data), depth, containers))
    got = _verdict(lambda: scan_structure(data, max_depth=depth, max_containers=containers))
    assert got == expected


def test_alternating_kinds_are_peeled_one_level_per_pass() -> None:
    deep = b"[{" * 4 + b"}]" * 4  # depth 8
    assert _verdict(lambda: scan_structure(deep, max_depth=8, max_containers=99)) == "ok"
    assert _verdict(lambda: scan_structure(deep, max_depth=7, max_containers=99)) == "limit"
