"""Header events and the binding through their cattrs converters: the same bytes, the same
refusals, in the same words, as the hand-written parsers they replaced.

``header_cases.jsonl`` and ``binding_cases.jsonl`` were recorded from the hand-written
``from_header``/``binding_from_wire`` before the converters replaced them: one case per line,
``[event, header, code, message, to_header]`` and ``[binding, message, to_dict]``. They cover
every field with every JSON type and boundary, missing and extra keys, several faults at once
(which one is reported is part of the contract), and the decision's chain-key pairs.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import testdata
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.wire import _protocol as protocol
from daemon.wire._binding import (
    BindingWireError,
    binding_from_wire,
    binding_from_wire_structured,
)
from daemon.wire._header_fields import HEADERS, MAX_REQUEST_ID, MAX_SIZE
from daemon.wire._protocol import (
    ERROR_CODES,
    CheckpointNote,
    CheckpointRequest,
    ConsistencyProof,
    ConsistencyProofRequest,
    Decision,
    ErrorCode,
    ErrorResponse,
    HealthReport,
    HealthRequest,
    Hello,
    HelloAccepted,
    InclusionProof,
    InclusionProofRequest,
    ListSessions,
    ProtocolError,
    SessionList,
    Submit,
    encode_header,
)


def _cases(name: str) -> list[list[Any]]:
    text = testdata.repo(f"tests/daemon/{name}").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines()]


HEADER_CASES = _cases("header_cases.jsonl")
BINDING_CASES = _cases("binding_cases.jsonl")


def _answer(cls: Any, header: dict[str, Any]) -> list[Any]:
    try:
        event = cls.from_header(header)
    except ProtocolError as error:
        return [error.code.name, error.message, None]
    return [None, None, event.to_header()]


def test_every_recorded_header_gets_the_recorded_answer() -> None:
    assert len(HEADER_CASES) > 1000
    wrong = [
        (name, header, [code, message, to_header], got)
        for name, header, code, message, to_header in HEADER_CASES
        if (got := _answer(getattr(protocol, name), header)) != [code, message, to_header]
    ]
    assert wrong == []


def _binding_answer(parse: Any, data: Any) -> list[Any]:
    try:
        return [None, parse(data).to_dict()]
    except BindingWireError as error:
        return [str(error), None]


@pytest.mark.parametrize(
    "parse", [binding_from_wire, binding_from_wire_structured], ids=["hot-path", "cattrs"]
)
def test_every_recorded_binding_gets_the_recorded_answer(parse: Any) -> None:
    """The submit path's hand-applied rules and the cattrs converter: the same answers."""
    assert len(BINDING_CASES) > 200
    wrong: list[Any] = []
    for data, message, wire in BINDING_CASES:
        got = _binding_answer(parse, data)
        if got != [message, wire]:
            wrong.append((data, [message, wire], got))
    assert wrong == []


_BINDING_VALUES = st.sampled_from([case[0] for case in BINDING_CASES if type(case[0]) is dict])


@settings(max_examples=300, deadline=None)
@given(
    base=_BINDING_VALUES,
    changes=st.dictionaries(
        st.sampled_from(
            ["bounds", "parameters", "subject_id", "predicate", "mechanism_id",
             "mechanism_digest", "evidence_refs", "trust_roots", "expected", "extra"]
        ),
        st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=5)
        | st.lists(st.text(max_size=3) | st.integers(), max_size=3)
        | st.dictionaries(
            st.text(max_size=20), st.integers(-1, 9) | st.text(max_size=3) | st.booleans(),
            max_size=3,
        ),
        max_size=3,
    ),
)  # fmt: skip
def test_a_mutated_binding_is_refused_in_the_same_words_by_both(
    base: dict[str, Any], changes: dict[str, Any]
) -> None:
    """Several faults at once: the hot path reports the one the converter reports."""
    data = {**base, **changes}
    assert _binding_answer(binding_from_wire, data) == _binding_answer(
        binding_from_wire_structured, data
    )


# --------------------------------------------------------------------------- properties

_request_ids = st.integers(0, MAX_REQUEST_ID)
_sizes = st.integers(0, MAX_SIZE)
_text = st.text(max_size=12)
_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | _text
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)
_objects = st.dictionaries(_text, _json, max_size=4)
_proofs = st.lists(_text, max_size=4).map(tuple)
_digests = st.binary(min_size=32, max_size=32).map(lambda raw: "sha256:" + raw.hex())


@st.composite
def _decisions(draw: st.DrawFn) -> Decision:
    base = (draw(_request_ids), draw(_text), draw(_text), draw(_objects))
    chain = draw(st.sampled_from(("none", "chain", "tree")))
    if chain == "none":
        return Decision(*base)
    seq = draw(st.integers(1, 2**63 - 1))
    if chain == "chain":
        return Decision(*base, seq, draw(_digests))
    return Decision(*base, seq, draw(_digests), seq - 1, draw(_text))


EVENTS = st.one_of(
    st.builds(
        Hello,
        st.lists(st.integers(0, 65535), min_size=1, max_size=16).map(tuple),
        _text,
        st.none() | st.text(min_size=1, max_size=40),
    ),
    st.builds(HelloAccepted, st.integers(0, 65535), _text, _objects),
    st.builds(ListSessions, _request_ids),
    st.builds(SessionList, _request_ids, st.lists(_objects, max_size=3)),
    st.builds(HealthRequest, _request_ids),
    st.builds(HealthReport, _request_ids, _objects),
    st.builds(Submit, _request_ids, _text, _objects, st.lists(st.integers(0, 2**40)).map(tuple)),
    _decisions(),
    st.builds(
        ErrorResponse,
        st.none() | _request_ids,
        st.sampled_from(sorted(ERROR_CODES)),
        _text,
        st.none() | _text,
    ),
    st.builds(CheckpointRequest, _request_ids),
    st.builds(CheckpointNote, _request_ids, _text),
    st.builds(InclusionProofRequest, _request_ids, _sizes, _sizes),
    st.builds(InclusionProof, _request_ids, _sizes, _sizes, _proofs),
    st.builds(ConsistencyProofRequest, _request_ids, _sizes, _sizes),
    st.builds(ConsistencyProof, _request_ids, _sizes, _sizes, _proofs),
)


def _documented_header(event: Any) -> dict[str, Any]:
    """docs/protocol.md's header of ``event``, built without the converter: ``kind``, then
    every field under its wire name (``items`` for the item sizes), tuples as arrays."""
    header: dict[str, Any] = {"kind": event.KIND}
    for field in attrs.fields(type(event)):
        value = getattr(event, field.name)
        if isinstance(event, Hello) and field.name == "token" and value is None:
            continue  # sent only when there is one
        header["items" if field.name == "item_sizes" else field.name] = (
            list(value) if isinstance(value, tuple) else value
        )
    return header


@settings(max_examples=300, deadline=None)
@given(EVENTS)
def test_every_event_is_sent_as_its_documented_header_and_read_back_equal(event: Any) -> None:
    header = event.to_header()
    assert header == _documented_header(event)
    data = encode_header(header)
    assert data == json.dumps(
        _documented_header(event), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    ).encode("utf-8")
    assert type(event).from_header(json.loads(data)) == event


@settings(max_examples=300, deadline=None)
@given(EVENTS, st.data())
def test_any_value_in_any_field_is_read_exactly_or_refused_as_header_invalid(
    event: Any, data: st.DataObject
) -> None:
    header = event.to_header()
    key = data.draw(st.sampled_from(sorted(set(header) - {"kind"})))
    header[key] = data.draw(_json)
    before = json.dumps(header, sort_keys=True)
    try:
        parsed = type(event).from_header(header)
    except ProtocolError as error:
        assert error.code is ErrorCode.HEADER_INVALID
    else:
        assert parsed.to_header() == header  # what is accepted is kept exactly
    assert json.dumps(header, sort_keys=True) == before  # the header itself is untouched


@pytest.mark.parametrize(
    ("cls", "header"),
    [
        (ListSessions, {"kind": "list", "request_id": True}),
        (
            InclusionProofRequest,
            {"kind": "inclusion_proof", "request_id": 1, "index": False, "tree_size": 1},
        ),
        (Hello, {"kind": "hello", "versions": [True], "client": "c"}),
    ],
)
def test_a_boolean_where_an_integer_belongs_is_refused(cls: Any, header: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as refused:
        cls.from_header(header)
    assert refused.value.code is ErrorCode.HEADER_INVALID


def test_bytes_never_travel_in_a_header() -> None:
    with pytest.raises(TypeError, match="bytes never travel"):
        HEADERS.unstructure(b"evidence")
    with pytest.raises(ProtocolError) as refused:
        CheckpointNote.from_header({"kind": "checkpoint", "request_id": 1, "note": b"n"})
    assert refused.value.message == "note must be a string"


def test_a_refused_binding_keeps_the_value_it_was_given() -> None:
    wire = {key: value for key, value in BINDING_CASES[0][0].items()}
    wire["bounds"] = {"max_evidence_items": True, "max_evidence_bytes": 1}
    before = json.dumps(wire, sort_keys=True)
    with pytest.raises(BindingWireError, match=r"bounds\.max_evidence_items"):
        binding_from_wire(wire)
    assert json.dumps(wire, sort_keys=True) == before
