"""TISC base81 symbolic text: render and strict decode.

Rules (``docs/spec/descriptor.md`` §1.2–§1.5, the public ``base81_view::render``):

* An instruction is ``(opcode: uint8, a: int32, b: int64, c: int32, literal_kind: uint8)``.
* Each field becomes balanced ternary, least-significant trit first, in 8 / 21 / 41 / 21 / 5
  trits (96 in all); a negative value negates every trit.
* The 96-trit stream is packed four trits to a base-81 digit, first trit least significant:
  ``digit = sum((t_j + 1) * 3**j)``; digits map through :data:`ALPHABET` (``0-9 A-Z a-z`` then
  ``- − × ÷ = < > ≤ ≥ ≠ ≈ ∞ λ μ π σ τ ω Γ``). An all-zero group is ``e``.
* A program renders as the line ``@code`` followed by one 24-glyph word per instruction, every line
  ended by LF, UTF-8 encoded. The fixture program has no pool sections, so none are rendered.
* ``render_program`` raises :class:`TiscError` (``TISC_FIELD_OUT_OF_RANGE``) for a field outside
  its C++ type range.

Decoding is deliberately stricter than the public (whitespace-lenient) parser: it accepts exactly
the canonical rendering of a pool-free program, so ``render_program(decode_program(t)) == t`` for
every accepted ``t``. First failure wins, each with its own stable code:

1. ``TISC_NOT_BYTES`` — input is not exact ``bytes``;
2. ``TISC_TOO_LARGE`` — longer than ``max_bytes``;
3. ``TISC_UTF8_INVALID`` — not strict UTF-8;
4. ``TISC_LINE_END_INVALID`` — empty input, missing final LF, a CR anywhere, or a blank line;
5. ``TISC_CODE_SECTION_MISSING`` — the first line is not ``@code``;
6. ``TISC_SECTION_UNSUPPORTED`` — any later ``@`` line (pool sections are not supported);
7. ``TISC_WHITESPACE`` — whitespace inside a code line;
8. ``TISC_GLYPH_UNKNOWN`` — a character outside the alphabet;
9. ``TISC_WORD_MALFORMED`` — a word that is not exactly 24 glyphs;
10. ``TISC_FIELD_OUT_OF_RANGE`` — a decoded field outside its C++ type range;
11. ``TISC_TOO_MANY_INSTRUCTIONS`` — more than ``max_instructions`` words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import Final

import attrs

from session.canon import CallerError

__all__ = [
    "ALPHABET",
    "MAX_TISC_BYTES",
    "MAX_TISC_INSTRUCTIONS",
    "TRITS_PER_WORD",
    "WORD_GLYPHS",
    "Instruction",
    "LiteralKind",
    "Opcode",
    "TiscError",
    "decode_program",
    "render_program",
    "render_word",
]

ALPHABET: Final = (
    "0123456789"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    "abcdefghijklmnopqrstuvwxyz"
    "-\u2212\u00d7\u00f7=<>\u2264\u2265\u2260\u2248\u221e\u03bb\u03bc\u03c0\u03c3\u03c4\u03c9\u0393"
)
assert len(ALPHABET) == 81 and len(set(ALPHABET)) == 81
_GLYPH_INDEX: Final = {glyph: index for index, glyph in enumerate(ALPHABET)}

FIELD_TRITS: Final = (8, 21, 41, 21, 5)  # opcode, a, b, c, literal_kind
TRITS_PER_WORD: Final = sum(FIELD_TRITS)
WORD_GLYPHS: Final = TRITS_PER_WORD // 4
assert TRITS_PER_WORD == 96 and WORD_GLYPHS == 24

_INT32: Final = (-(2**31), 2**31 - 1)
_INT64: Final = (-(2**63), 2**63 - 1)
_UINT8: Final = (0, 255)
_FIELD_RANGES: Final = (_UINT8, _INT32, _INT64, _INT32, _UINT8)
_FIELD_NAMES: Final = ("opcode", "a", "b", "c", "literal_kind")

MAX_TISC_BYTES: Final = 65_536
MAX_TISC_INSTRUCTIONS: Final = 1_024
CODE_HEADER: Final = "@code"


class Opcode(IntEnum):
    """Public TISC opcode numbers (stable across versions); only the first ten are named here."""

    NOP = 0
    HALT = 1
    LOAD_IMM = 2
    LOAD = 3
    STORE = 4
    ADD = 5
    SUB = 6
    MUL = 7
    DIV = 8
    MOD = 9


class LiteralKind(IntEnum):
    INT = 0
    BOOL = 1
    FLOAT_HANDLE = 2
    FRACTION_HANDLE = 3
    SYMBOL_HANDLE = 4
    TENSOR_HANDLE = 5
    SHAPE_HANDLE = 6
    COMPLEX_HANDLE = 7
    BIGINT_HANDLE = 8


class TiscError(CallerError, ValueError):
    """A TISC text or instruction was refused; ``code`` is the stable reason code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _exact_int(value: object) -> int:
    if type(value) is not int:
        raise TypeError("instruction fields are exact ints (bool is not an int)")
    return value


@attrs.frozen
class Instruction:
    """One TISC instruction; fields as in the public ``Insn`` struct."""

    opcode: int = attrs.field(converter=_exact_int)
    a: int = attrs.field(default=0, converter=_exact_int)
    b: int = attrs.field(default=0, converter=_exact_int)
    c: int = attrs.field(default=0, converter=_exact_int)
    literal_kind: int = attrs.field(default=0, converter=_exact_int)

    def fields(self) -> tuple[int, int, int, int, int]:
        return (self.opcode, self.a, self.b, self.c, self.literal_kind)

    def to_dict(self) -> dict[str, int]:
        return dict(zip(_FIELD_NAMES, self.fields(), strict=True))


def _to_trits(value: int, width: int) -> list[int]:
    """Balanced ternary, least-significant trit first, exactly ``width`` trits."""
    negative = value < 0
    magnitude = -value if negative else value
    trits: list[int] = []
    while magnitude:
        remainder = magnitude % 3
        magnitude //= 3
        if remainder == 2:
            trits.append(-1)
            magnitude += 1
        else:
            trits.append(remainder)
    if len(trits) > width:
        raise TiscError("TISC_FIELD_OUT_OF_RANGE", f"{value} does not fit in {width} trits")
    trits.extend([0] * (width - len(trits)))
    return [-t for t in trits] if negative else trits


def _from_trits(trits: Sequence[int]) -> int:
    value = 0
    for trit in reversed(trits):
        value = value * 3 + trit
    return value


def render_word(instruction: Instruction) -> str:
    """Render one instruction as its 24-glyph base-81 word."""
    stream: list[int] = []
    for value, width, (low, high), name in zip(
        instruction.fields(), FIELD_TRITS, _FIELD_RANGES, _FIELD_NAMES, strict=True
    ):
        if not low <= value <= high:
            raise TiscError("TISC_FIELD_OUT_OF_RANGE", f"{name}={value} outside [{low}, {high}]")
        stream.extend(_to_trits(value, width))
    glyphs = []
    for start in range(0, TRITS_PER_WORD, 4):
        group = stream[start : start + 4]
        digit = sum((trit + 1) * 3**j for j, trit in enumerate(group))
        glyphs.append(ALPHABET[digit])
    return "".join(glyphs)


def render_program(program: Iterable[Instruction]) -> bytes:
    """Render a pool-free program as canonical base81 symbolic text (UTF-8 bytes)."""
    lines = [CODE_HEADER, *(render_word(instruction) for instruction in program)]
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _decode_word(word: str) -> Instruction:
    for glyph in word:
        if glyph not in _GLYPH_INDEX:
            raise TiscError("TISC_GLYPH_UNKNOWN", f"unknown glyph U+{ord(glyph):04X}")
    if len(word) != WORD_GLYPHS:
        raise TiscError(
            "TISC_WORD_MALFORMED", f"a word has {WORD_GLYPHS} glyphs, this one has {len(word)}"
        )
    stream: list[int] = []
    for glyph in word:
        digit = _GLYPH_INDEX[glyph]
        for _ in range(4):
            stream.append(digit % 3 - 1)
            digit //= 3
    values: list[int] = []
    offset = 0
    for width, (low, high), name in zip(FIELD_TRITS, _FIELD_RANGES, _FIELD_NAMES, strict=True):
        value = _from_trits(stream[offset : offset + width])
        offset += width
        if not low <= value <= high:
            raise TiscError("TISC_FIELD_OUT_OF_RANGE", f"{name}={value} outside [{low}, {high}]")
        values.append(value)
    return Instruction(*values)


def decode_program(
    data: bytes,
    *,
    max_bytes: int = MAX_TISC_BYTES,
    max_instructions: int = MAX_TISC_INSTRUCTIONS,
) -> tuple[Instruction, ...]:
    """Strictly decode canonical base81 symbolic text; raise :class:`TiscError` otherwise."""
    if type(data) is not bytes:
        raise TiscError("TISC_NOT_BYTES", "TISC text must be exact bytes")
    if len(data) > max_bytes:
        raise TiscError("TISC_TOO_LARGE", f"{len(data)} bytes exceed the {max_bytes}-byte limit")
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as error:
        raise TiscError("TISC_UTF8_INVALID", f"invalid UTF-8 at byte {error.start}") from None
    if not text or not text.endswith("\n"):
        raise TiscError("TISC_LINE_END_INVALID", "the text must end with LF")
    if "\r" in text:
        raise TiscError("TISC_LINE_END_INVALID", "CR is not a line end")
    lines = text[:-1].split("\n")
    if any(line == "" for line in lines):
        raise TiscError("TISC_LINE_END_INVALID", "blank lines are not accepted")
    if lines[0] != CODE_HEADER:
        raise TiscError("TISC_CODE_SECTION_MISSING", "the first line must be @code")
    words = lines[1:]
    program: list[Instruction] = []
    for number, word in enumerate(words, start=2):
        if word.startswith("@"):
            raise TiscError("TISC_SECTION_UNSUPPORTED", f"line {number}: sections are unsupported")
        if any(character.isspace() for character in word):
            raise TiscError("TISC_WHITESPACE", f"line {number}: whitespace inside a code line")
        if len(program) >= max_instructions:
            raise TiscError(
                "TISC_TOO_MANY_INSTRUCTIONS", f"more than {max_instructions} instructions"
            )
        try:
            program.append(_decode_word(word))
        except TiscError as error:
            raise TiscError(error.code, f"line {number}: {error.message}") from None
    return tuple(program)
