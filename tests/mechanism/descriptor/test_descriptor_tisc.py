"""TISC base81 text: exact rendering, strict decoding, and refusal of malformed text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism.descriptor import (
    ALPHABET,
    FIXTURE_PROGRAM,
    Instruction,
    TiscError,
    decode_program,
    render_program,
    render_word,
)

from ._support import SPEC_ALPHABET, fixture, pack_word

FIXTURE_TEXT = fixture("tisc-fixture.bin")
HALT_WORD = "f" + "e" * 23


def test_alphabet_is_the_specified_81_glyphs_in_order() -> None:
    assert list(ALPHABET) == SPEC_ALPHABET
    assert ALPHABET[40] == "e"


def test_independent_packer_agrees_with_the_renderer_on_the_fixture() -> None:
    words = [pack_word(instruction.fields()) for instruction in FIXTURE_PROGRAM]
    assert ("@code\n" + "".join(word + "\n" for word in words)).encode() == FIXTURE_TEXT


def test_fixture_decodes_to_the_four_instructions() -> None:
    assert decode_program(FIXTURE_TEXT) == FIXTURE_PROGRAM


def test_fixture_payload_is_not_pure_ascii() -> None:
    assert "Γ".encode() in FIXTURE_TEXT and "ω".encode() in FIXTURE_TEXT


def test_halt_word_is_f_then_all_zero_groups() -> None:
    assert render_word(Instruction(1)) == HALT_WORD


def test_empty_program_renders_only_the_code_header() -> None:
    assert render_program(()) == b"@code\n"
    assert decode_program(b"@code\n") == ()


_fields = st.tuples(
    st.integers(0, 255),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 121),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_fields, max_size=6))
def test_render_then_decode_round_trips_and_matches_the_independent_packer(
    programs: list[tuple[int, int, int, int, int]],
) -> None:
    program = tuple(Instruction(*fields) for fields in programs)
    text = render_program(program)
    assert decode_program(text) == program
    assert text == ("@code\n" + "".join(pack_word(f) + "\n" for f in programs)).encode()


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ((256, 0, 0, 0, 0), "opcode above uint8"),
        ((-1, 0, 0, 0, 0), "negative opcode"),
        ((2, 2**31, 0, 0, 0), "a above int32"),
        ((2, 0, 2**63, 0, 0), "b above int64"),
        ((2, 0, 0, -(2**31) - 1, 0), "c below int32"),
        ((2, 0, 0, 0, 256), "literal kind above uint8"),
    ],
)
def test_render_refuses_fields_outside_their_type(
    fields: tuple[int, int, int, int, int], why: str
) -> None:
    with pytest.raises(TiscError) as caught:
        render_program([Instruction(*fields)])
    assert caught.value.code == "TISC_FIELD_OUT_OF_RANGE", why


def test_instruction_fields_refuse_bool() -> None:
    with pytest.raises(TypeError):
        Instruction(True)


def _text(*words: str) -> bytes:
    return ("@code\n" + "".join(word + "\n" for word in words)).encode("utf-8")


DECODE_REFUSALS = [
    ("unknown_glyph_question_mark", _text("?" + HALT_WORD[1:]), "TISC_GLYPH_UNKNOWN"),
    ("unknown_glyph_unicode_alpha", _text("α" + HALT_WORD[1:]), "TISC_GLYPH_UNKNOWN"),
    (
        "bad_utf8_lone_continuation",
        b"@code\n\x93" + HALT_WORD[1:].encode() + b"\n",
        "TISC_UTF8_INVALID",
    ),
    (
        "bad_utf8_truncated_gamma",
        b"@code\n\xce" + HALT_WORD[1:].encode() + b"\n",
        "TISC_UTF8_INVALID",
    ),
    ("word_23_glyphs", _text(HALT_WORD[:-1]), "TISC_WORD_MALFORMED"),
    ("word_25_glyphs", _text(HALT_WORD + "e"), "TISC_WORD_MALFORMED"),
    ("two_words_on_one_line", _text(HALT_WORD + " " + HALT_WORD), "TISC_WHITESPACE"),
    ("trailing_space", _text(HALT_WORD + " "), "TISC_WHITESPACE"),
    ("crlf_line_end", FIXTURE_TEXT.replace(b"\n", b"\r\n"), "TISC_LINE_END_INVALID"),
    ("missing_final_lf", FIXTURE_TEXT[:-1], "TISC_LINE_END_INVALID"),
    ("blank_line", FIXTURE_TEXT + b"\n", "TISC_LINE_END_INVALID"),
    ("empty_text", b"", "TISC_LINE_END_INVALID"),
    ("missing_code_header", HALT_WORD.encode() + b"\n", "TISC_CODE_SECTION_MISSING"),
    ("old_space_joined_layout", b"eeee eeee\n", "TISC_CODE_SECTION_MISSING"),
    (
        "pool_section",
        b"@symbols\n@code\n" + HALT_WORD.encode() + b"\n",
        "TISC_CODE_SECTION_MISSING",
    ),
    ("policy_section_after_code", _text(HALT_WORD, "@policy"), "TISC_SECTION_UNSUPPORTED"),
    ("negative_opcode_word", _text(pack_word((-1, 0, 0, 0, 0))), "TISC_FIELD_OUT_OF_RANGE"),
    ("a_above_int32_word", _text(pack_word((2, 2**31, 0, 0, 0))), "TISC_FIELD_OUT_OF_RANGE"),
    ("negative_literal_kind_word", _text(pack_word((2, 0, 0, 0, -1))), "TISC_FIELD_OUT_OF_RANGE"),
]


@pytest.mark.parametrize(
    ("data", "code"),
    [(d, c) for _, d, c in DECODE_REFUSALS],
    ids=[n for n, _, _ in DECODE_REFUSALS],
)
def test_decoder_refuses_malformed_text(data: bytes, code: str) -> None:
    with pytest.raises(TiscError) as caught:
        decode_program(data)
    assert caught.value.code == code


def test_decoder_refuses_non_bytes_oversize_and_too_many_words() -> None:
    with pytest.raises(TiscError, match="TISC_NOT_BYTES"):
        decode_program(FIXTURE_TEXT.decode())  # type: ignore[arg-type]
    with pytest.raises(TiscError, match="TISC_TOO_LARGE"):
        decode_program(FIXTURE_TEXT, max_bytes=107)
    with pytest.raises(TiscError, match="TISC_TOO_MANY_INSTRUCTIONS"):
        decode_program(FIXTURE_TEXT, max_instructions=3)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_only_ever_raise_tisc_error(data: bytes) -> None:
    try:
        program = decode_program(b"@code\n" + data)
    except TiscError:
        return
    assert render_program(program) == b"@code\n" + data
