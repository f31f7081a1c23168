"""Decision receipts through their cattrs converter: the same refusals, in the same words and
the same order, as the hand-written reader they replaced, and the same bytes written.

``receipt_cases.jsonl`` was recorded from the hand-written ``_parse`` before the converter
replaced it: one case per line, ``[document text, answer]`` where the answer is the refusal's
words or the receipt read. It covers every key with every JSON type and boundary, missing and
extra keys, and two, three and six faults at once (which one is reported is the contract).
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import testdata
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.tlog import encode_receipt, make_receipt
from daemon.tlog._receipt import MAX_RECEIPT_BYTES, RECEIPTS, Receipt, _parse, read_receipt

CASES = [
    json.loads(line)
    for line in testdata.repo("tests/daemon/receipt_cases.jsonl").read_text("utf-8").splitlines()
]


def _answer(data: bytes) -> Any:
    parsed = _parse(data)
    return parsed if isinstance(parsed, str) else RECEIPTS.unstructure(parsed)


def test_every_recorded_receipt_gets_the_recorded_answer() -> None:
    assert len(CASES) > 200
    wrong = [(text, want, got) for text, want in CASES if (got := _answer(text.encode())) != want]
    assert wrong == []


def test_oversized_and_undecodable_receipts_are_refused_before_json() -> None:
    assert _parse(b" " * (MAX_RECEIPT_BYTES + 1)) == (
        f"a receipt is at most {MAX_RECEIPT_BYTES} bytes"
    )
    assert _parse(b'{"format": "\xff"}') == "not a JSON document"


def test_a_written_receipt_keeps_its_bytes_and_reads_back_unchanged() -> None:
    receipt = make_receipt(b'{"seq":1}', 0, 1, [b"\x00" * 32], b"origin\n1\nroot\n")
    assert list(receipt) == ["format", "log_index", "tree_size", "line", "inclusion_proof",
                             "checkpoint"]  # fmt: skip
    data = encode_receipt(receipt)
    assert data == (json.dumps(receipt, ensure_ascii=False, indent=2) + "\n").encode()
    assert RECEIPTS.unstructure(_parse(data)) == receipt


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
_KEYS = [field.name for field in attrs.fields(Receipt)]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_KEYS), _json)
def test_any_json_value_in_any_field_is_read_exactly_or_refused_in_words(
    key: str, value: Any
) -> None:
    fields = make_receipt(b"{}", 0, 1, [], b"note")
    fields[key] = value
    got = read_receipt(fields)
    if isinstance(got, Receipt):
        assert RECEIPTS.unstructure(got) == fields
        assert type(got.log_index) is int and type(got.tree_size) is int
    else:
        assert isinstance(got, str) and got
