"""Wire admission order, lower-only ceilings, and the checker's fast paths equal the slow ones."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mechanism.formation._checker as checker
from mechanism.canonical import canonical_bytes, canonical_digest, is_digest
from mechanism.formation import (
    PROFILE_DIGEST,
    FormationError,
    FormationLimitError,
    UnsupportedFormation,
    admit_certificate,
    admit_subject,
    check_formation,
)
from mechanism.formation._wire import _all_digests

from ._builders import (
    apply,
    atom,
    certificate_record,
    digest,
    h_apply,
    h_atom,
    h_code,
    h_formation,
    h_path,
    pair,
    subject_record,
)
from ._corpus import b64url, pure_cases
from .test_formation_properties import valid_pairs

SETTINGS = settings(max_examples=150, deadline=None)
HEX = "0123456789abcdef"
digests = st.text(HEX, min_size=64, max_size=64).map(lambda h: "sha256:" + h)
near_misses = st.one_of(
    digests.map(str.upper),
    digests.map(lambda d: d[:-1]),
    digests.map(lambda d: d + "0"),
    digests.map(lambda d: d.replace("sha256:", "sha257:")),
    digests.map(lambda d: d[:10] + "g" + d[11:]),
    digests.map(lambda d: d[:20] + "é" + d[21:]),
    digests.map(lambda d: d[:7] + d[8:] + "s"),
    st.text(max_size=80),
    st.integers(),
    st.none(),
    st.lists(digests, max_size=2),
)


@SETTINGS
@given(st.lists(st.one_of(digests, digests, near_misses), max_size=12))
def test_batched_digest_check_equals_per_item_check(values: list[Any]) -> None:
    assert _all_digests(values) is all(map(is_digest, values))


@SETTINGS
@given(digests, digests, st.lists(st.tuples(digests, digests), max_size=5))
def test_fixed_shape_encoders_equal_the_canonical_codec(a: str, b: str, steps: Any) -> None:
    assert checker._atom_denotation(a) == h_atom(a)
    assert checker._apply_denotation(a) == h_apply(a)
    assert checker._path_denotation(a, b, steps) == h_path(a, b, steps)


@SETTINGS
@given(digests, st.integers(0, 1023), st.lists(st.integers(0, 1023), unique=True).map(sorted))
def test_code_and_formation_encoders_equal_the_canonical_codec(
    subject_digest: str, node: int, closure: list[int]
) -> None:
    assert checker._code_denotation(subject_digest, node, closure) == h_code(
        subject_digest, node, closure
    )
    assert checker._formation_digest(subject_digest, node) == h_formation(subject_digest, node)


@SETTINGS
@given(st.integers(0, 2**1024 - 1))
def test_bit_set_members_are_sorted_indices(bits: int) -> None:
    assert checker._members(bits) == [i for i in range(bits.bit_length()) if bits >> i & 1]


@SETTINGS
@given(valid_pairs())
def test_expected_certificate_is_the_canonical_naive_certificate(
    pair_: tuple[bytes, bytes],
) -> None:
    subject_bytes, naive = pair_
    record = admit_subject(subject_bytes)
    expected = checker._expected_certificate(record["nodes"], record["root"], digest(subject_bytes))
    assert expected == naive == canonical_bytes(certificate_record(subject_bytes, record))


def _slow(
    monkeypatch: pytest.MonkeyPatch, subject: bytes, certificate: bytes, **ceilings: int
) -> dict[str, Any]:
    """The ordered path alone: neither the exact-bytes nor the one-pass fast path."""
    with monkeypatch.context() as patch:
        patch.setattr(checker, "_expected_certificate", lambda *args: b"")
        patch.setattr(checker, "_checked_pair", lambda *args: None)
        return check_formation(subject, certificate, **ceilings)


@SETTINGS
@given(valid_pairs(), st.integers(0), st.integers(0, 255))
def test_exact_certificate_fast_path_answers_like_the_ordered_path(
    pair_: tuple[bytes, bytes], position: int, byte: int
) -> None:
    subject_bytes, certificate_bytes = pair_
    index = position % len(certificate_bytes)
    mutated = certificate_bytes[:index] + bytes([byte]) + certificate_bytes[index + 1 :]
    with pytest.MonkeyPatch.context() as patch:
        for certificate in (certificate_bytes, mutated):
            fast = check_formation(subject_bytes, certificate)
            assert fast == _slow(patch, subject_bytes, certificate)


@SETTINGS
@given(
    valid_pairs(),
    st.integers(0),
    st.sampled_from([b"", b"0", b"1", b"9", b",", b'"', b"}", b"-", b"\\", b"\xc3\xa9"]),
    st.integers(0, 2),
    st.sampled_from([{}, {"max_nodes": 2}, {"max_depth": 2}, {"max_path_steps": 1}]),
)
def test_one_pass_path_answers_like_the_ordered_path_on_mutated_subjects(
    pair_: tuple[bytes, bytes],
    position: int,
    inserted: bytes,
    removed: int,
    ceilings: dict[str, int],
) -> None:
    subject_bytes, certificate_bytes = pair_
    at = position % (len(subject_bytes) + 1)
    mutated = subject_bytes[:at] + inserted + subject_bytes[at + removed :]
    with pytest.MonkeyPatch.context() as patch:
        for subject in (subject_bytes, mutated):
            fast = check_formation(subject, certificate_bytes, **ceilings)
            assert fast == _slow(patch, subject, certificate_bytes, **ceilings)


@pytest.mark.parametrize(
    "nodes",
    [
        [atom(), apply(0), {"tag": "APPLY", "argument": 1, "at": 0}],  # extra key
        [atom(), apply(0), {"tag": "APPLY", "argument": 2}],  # reference to itself
        [atom(), apply(0), {"tag": "APPLY", "argument": True}],  # a bool is not an index
        [atom(), apply(0), {"tag": "ID", "at": 1}, {"tag": "READ", "code": 1}],  # rule
        [atom(), {"tag": "ATOM", "payload_digest": "sha256:" + "A" * 64}],  # not a digest
        [atom(), apply(0), {"tag": "apply", "argument": 1}],  # unknown tag
        [atom(), apply(0), {"tag": 1, "argument": 1}],  # tag not a string
    ],
)
def test_forged_certificate_for_a_refused_subject_is_refused_in_order(
    monkeypatch: pytest.MonkeyPatch, nodes: list[dict[str, Any]]
) -> None:
    """A certificate written for exactly these (refused) nodes does not let the one-pass path
    answer CHECKED: the ordered path's refusal is the one reported."""
    subject_bytes = canonical_bytes(subject_record(nodes, 1))
    forged = canonical_bytes(
        {
            "schema_version": "VSTD-TYPED-FORMATION-CERTIFICATE-0.1",
            "subject_digest": digest(subject_bytes),
            "profile_digest": PROFILE_DIGEST,
            "root": 1,
            "steps": [
                {
                    "node": index,
                    "rule": node["tag"],
                    "premises": [v for k, v in sorted(node.items()) if k not in ("tag",)][:1]
                    if node["tag"] != "ATOM"
                    else [],
                }
                for index, node in enumerate(nodes)
            ],
        }
    )
    report = check_formation(subject_bytes, forged)
    assert report["status"] in ("INVALID", "UNKNOWN")
    assert report == _slow(monkeypatch, subject_bytes, forged)


def test_shared_compositions_of_identities_stay_cheap() -> None:
    """1,000 COMPOSE nodes each composing the one before with itself: the unfolded tree of
    halves would have 2**1000 leaves; the one-pass path keeps only non-empty halves."""
    nodes = [atom(), {"tag": "ID", "at": 0}]
    nodes += [{"tag": "COMPOSE", "left": i, "right": i} for i in range(1, 1001)]
    subject_bytes, certificate_bytes = pair(nodes, len(nodes) - 1)
    report = check_formation(subject_bytes, certificate_bytes, max_depth=64)
    assert report["status"] == "UNKNOWN"  # depth 1001 > 64, found by the ordered path
    shallow = nodes[:60]
    subject_bytes, certificate_bytes = pair(shallow, len(shallow) - 1)
    report = check_formation(subject_bytes, certificate_bytes)
    assert report["status"] == "CHECKED"
    assert report["observation"]["path_steps"] == []


def test_path_steps_of_compositions_come_back_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [atom(), apply(0), apply(1), apply(2)]
    nodes += [{"tag": "APPLY_STEP", "source": i, "target": i + 1} for i in range(3)]
    nodes += [{"tag": "COMPOSE", "left": 4, "right": 5}, {"tag": "COMPOSE", "left": 7, "right": 6}]
    nodes += [{"tag": "ID", "at": 0}, {"tag": "COMPOSE", "left": 9, "right": 8}]
    subject_bytes, certificate_bytes = pair(nodes, len(nodes) - 1)
    report = check_formation(subject_bytes, certificate_bytes)
    assert report["status"] == "CHECKED"
    assert len(report["observation"]["path_steps"]) == 3
    assert report == _slow(monkeypatch, subject_bytes, certificate_bytes)


@pytest.mark.parametrize("case", pure_cases(), ids=[c["case_id"] for c in pure_cases()])
def test_corpus_reports_do_not_depend_on_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, case: dict[str, Any]
) -> None:
    subject = b64url(case["subject_bytes_base64url"])
    certificate = b64url(case["certificate_bytes_base64url"])
    assert _slow(monkeypatch, subject, certificate) == case["expected_report"]


# --- admission order (§2.2, §3.2, §3.3) ---------------------------------------------------


def test_node_count_limit_precedes_root_and_node_validation() -> None:
    record = subject_record([atom()] * 1025, 0)
    record["root"] = 5000
    record["nodes"][3] = {"tag": "UNKNOWN"}
    with pytest.raises(FormationLimitError):
        admit_subject(canonical_bytes(record))
    with pytest.raises(FormationLimitError):
        admit_subject(canonical_bytes(subject_record([atom()] * 3, 0)), max_nodes=2)


def test_step_count_limit_precedes_certificate_root_validation() -> None:
    subject_bytes = canonical_bytes(subject_record([atom()] * 1025, 0))
    record = certificate_record(subject_bytes, subject_record([atom()] * 1025, 0))
    record["root"] = True
    with pytest.raises(FormationLimitError):
        admit_certificate(canonical_bytes(record))


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.pop("root"),
        lambda r: r.update(profile_digest="sha256:" + "A" * 64),
        lambda r: r.update(
            context={"ground_artifact_digest": r["context"]["ground_artifact_digest"]}
        ),
        lambda r: r["context"].update(ground_artifact_digest="ground"),
        lambda r: r.update(context=[]),
        lambda r: r.update(nodes=[]),
        lambda r: r.update(nodes={"tag": "ATOM"}),
        lambda r: r.update(root=2),
        lambda r: r["nodes"].append("ATOM"),
        lambda r: r["nodes"].append({"tag": 7}),
        lambda r: r["nodes"].append({"tag": "APPLY", "argument": 0, "at": 0}),
        lambda r: r["nodes"].append({"tag": "APPLY"}),
        lambda r: r["nodes"].append({"tag": "COMPOSE", "left": 0, "right": [0]}),
    ],
)
def test_subject_grammar_refusals_are_invalid(change: Any) -> None:
    record = subject_record([atom(), apply(0)], 1)
    change(record)
    with pytest.raises(FormationError) as caught:
        admit_subject(canonical_bytes(record))
    assert type(caught.value) is FormationError


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.pop("steps"),
        lambda r: r.update(subject_digest="subject"),
        lambda r: r.update(steps=[]),
        lambda r: r.update(root=1024),
        lambda r: r["steps"][0].update(node=1024),
        lambda r: r["steps"][0].update(rule="atom"),
        lambda r: r["steps"][0].update(premises=[0, 0, 0]),
        lambda r: r["steps"][0].update(premises=[1024]),
        lambda r: r["steps"][0].update(premises=0),
        lambda r: r["steps"].append([]),
    ],
)
def test_certificate_grammar_refusals_are_invalid(change: Any) -> None:
    subject_bytes = pair([atom(), apply(0)])[0]
    record = certificate_record(subject_bytes, subject_record([atom(), apply(0)]))
    change(record)
    with pytest.raises(FormationError) as caught:
        admit_certificate(canonical_bytes(record))
    assert type(caught.value) is FormationError


def test_wrong_schema_is_unsupported_and_non_string_schema_is_invalid() -> None:
    record = subject_record([atom()])
    record["schema_version"] = "VSTD-TYPED-FORMATION-CERTIFICATE-0.1"
    with pytest.raises(UnsupportedFormation):
        admit_subject(canonical_bytes(record))
    record["schema_version"] = 1
    with pytest.raises(FormationError) as caught:
        admit_subject(canonical_bytes(record))
    assert type(caught.value) is FormationError


def test_canonical_refusal_precedes_an_unsupported_schema() -> None:
    record = subject_record([atom()])
    record["schema_version"] = "OTHER"
    data = canonical_bytes(record).replace(b'"root":0', b'"root":-0')
    with pytest.raises(FormationError) as caught:
        admit_subject(data)
    assert type(caught.value) is FormationError


def test_report_denotation_oracle_for_a_shared_subexpression() -> None:
    # Two ATOMs with the same payload are different nodes with equal denotations: an
    # APPLY_STEP across them is decided by digest, not by node identity.
    nodes = [atom(), atom(), apply(1), {"tag": "APPLY_STEP", "source": 0, "target": 2}]
    report = check_formation(*pair(nodes))
    assert report["status"] == "CHECKED"
    compose = [*nodes, {"tag": "APPLY_STEP", "source": 1, "target": 2}, {"tag": "ID", "at": 0}]
    compose.append({"tag": "COMPOSE", "left": 5, "right": 4})  # ID(atom 0) then step from atom 1
    observation = check_formation(*pair(compose))["observation"]
    a0 = h_atom(atom()["payload_digest"])
    assert observation["path_steps"] == [{"source_digest": a0, "target_digest": h_apply(a0)}]
    assert canonical_digest({"x": 1}) != observation["denotation_digest"]


def test_non_ascii_payload_digest_met_by_the_one_pass_path_is_refused_not_raised() -> None:
    """An APPLY_STEP compares the forms of two ATOMs before the payloads are checked; a
    payload digest with a non-ASCII character must reach the ordered path's refusal, not
    escape as ``UnicodeEncodeError`` (found by the mutation property above)."""
    nodes = [atom(), atom(), apply(0), {"tag": "APPLY_STEP", "source": 1, "target": 2}]
    subject_bytes, certificate_bytes = pair(nodes, 0)
    second = subject_bytes.index(b'"payload_digest":"sha256:', subject_bytes.index(b"nodes"))
    second = subject_bytes.index(b'"payload_digest":"sha256:', second + 1) + 30
    mutated = subject_bytes[:second] + "é".encode() + subject_bytes[second:]
    report = check_formation(mutated, certificate_bytes)
    assert report["status"] == "INVALID"
    with pytest.MonkeyPatch.context() as patch:
        assert report == _slow(patch, mutated, certificate_bytes)
