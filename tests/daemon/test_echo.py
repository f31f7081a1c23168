"""Bounded echo: any value a client chose is echoed within a fixed size, and short printable
values read as themselves."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from daemon.wire._echo import ECHO_LIMIT, MESSAGE_LIMIT, bounded_message, echo


@given(st.text(max_size=3000) | st.binary(max_size=300))
def test_any_value_is_echoed_within_its_bound(value: str | bytes) -> None:
    shown = echo(value)
    assert len(shown) <= ECHO_LIMIT + 100
    assert len(json.dumps(shown, ensure_ascii=False).encode()) <= 2 * ECHO_LIMIT + 100
    assert len(json.dumps(bounded_message(str(value)), ensure_ascii=False).encode()) <= (
        2 * MESSAGE_LIMIT + 100
    )


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Cf"))))
def test_short_printable_values_are_verbatim(value: str) -> None:
    if value.isprintable() and len(value.encode()) <= ECHO_LIMIT:
        assert echo(value) == value


def test_cut_value_keeps_its_length_and_digest_and_an_ascii_prefix() -> None:
    value = "\x7f" * 65_536
    shown = echo(value)
    digest = hashlib.sha256(value.encode()).hexdigest()
    assert shown == "\\x7f" * 32 + f"… (65536 chars, sha256:{digest})"
    assert echo("a\u202eb" * 100).isascii() is False  # the marker's ellipsis only
    assert echo("a\u202eb" * 100).split("…")[0].isascii()
