"""The reference's ``test_typed_formation.py`` checklist (docs/spec/formation.md §8)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from mechanism.canonical import canonical_bytes
from mechanism.formation import (
    MAX_RECORD_BYTES,
    check_formation,
    produce_formation_certificate,
)

from ._builders import (
    AGENCY,
    GROUND,
    OTHER_PAYLOAD,
    PAYLOAD,
    PROFILE,
    RESIDUALS,
    apply,
    apply_step,
    atom,
    certificate_record,
    compose,
    digest,
    h_apply,
    h_atom,
    h_code,
    h_formation,
    h_path,
    ident,
    pair,
    quote,
    read,
    subject,
    subject_record,
)

FOREIGN_PROFILE = "sha256:770f948d29900a63a6ba55f2bbc61bdd18fec1a73769c8e1e524d664c40f6e06"
CHAIN = [atom(), apply(0), apply(1)]
TWO_STEP = [*CHAIN, apply_step(0, 1), apply_step(1, 2), compose(3, 4)]
NESTED = [atom(), quote(0), read(1), quote(1), read(3), read(4), quote(2)]


def checked(nodes: list[dict[str, Any]], root: int | None = None, **context: str) -> dict[str, Any]:
    subject_bytes, certificate_bytes = pair(nodes, root, **context)
    report = check_formation(subject_bytes, certificate_bytes)
    assert report["status"] == "CHECKED", report
    assert report["reason_codes"] == []
    assert report["residual_obligations"] == RESIDUALS
    assert report["subject_digest"] == digest(subject_bytes)
    observation: dict[str, Any] = report["observation"]
    return observation


def assert_refused(report: dict[str, Any], status: str, reason: str) -> None:
    assert report["status"] == status
    assert report["reason_codes"] == [reason]
    assert report["observation"] is None
    assert report["profile_digest"] == PROFILE
    assert report["residual_obligations"] == RESIDUALS


def rule_invalid(nodes: list[dict[str, Any]], root: int | None = None) -> None:
    report = check_formation(*pair(nodes, root))
    assert_refused(report, "INVALID", "FORMATION_RULE_INVALID")


def test_producer_and_independent_checker_are_available() -> None:
    assert list(inspect.signature(produce_formation_certificate).parameters) == ["subject_bytes"]
    parameters = inspect.signature(check_formation).parameters
    assert list(parameters)[:2] == ["subject_bytes", "certificate_bytes"]
    assert all(
        parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        for name in ("max_nodes", "max_depth", "max_path_steps")
    )


def test_atom_is_an_opaque_symbol_not_an_agency_claim() -> None:
    subject_bytes, naive = pair([atom()])
    assert produce_formation_certificate(subject_bytes) == naive
    observation = checked([atom()])
    assert observation == {
        "type": "FORM",
        "denotation_digest": h_atom(PAYLOAD),
        "source_digest": None,
        "target_digest": None,
        "path_steps": [],
        "quote_rank": 0,
        "required_depth": 1,
        "formation_digest": h_formation(digest(subject_bytes), 0),
        "dependency_nodes": [0],
        "quote_origins": [],
    }


def test_apply_step_checks_the_actual_apply_target() -> None:
    observation = checked([atom(), apply(0), apply_step(0, 1)])
    form, applied = h_atom(PAYLOAD), h_apply(h_atom(PAYLOAD))
    assert observation["type"] == "PATH"
    assert (observation["source_digest"], observation["target_digest"]) == (form, applied)
    assert observation["path_steps"] == [{"source_digest": form, "target_digest": applied}]
    assert observation["dependency_nodes"] == [0, 1, 2]
    assert observation["required_depth"] == 3
    # A target that is another ATOM is not APPLY(source).
    rule_invalid([atom(), atom(OTHER_PAYLOAD), apply_step(0, 1)])


def test_composition_checks_endpoints_and_exact_path_steps() -> None:
    observation = checked(TWO_STEP)
    a0 = h_atom(PAYLOAD)
    a1 = h_apply(a0)
    a2 = h_apply(a1)
    assert (observation["source_digest"], observation["target_digest"]) == (a0, a2)
    assert observation["path_steps"] == [
        {"source_digest": a0, "target_digest": a1},
        {"source_digest": a1, "target_digest": a2},
    ]
    assert observation["denotation_digest"] == h_path(a0, a2, [(a0, a1), (a1, a2)])
    # Reversed composition: the left path's target is not the right path's source.
    rule_invalid([*CHAIN, apply_step(0, 1), apply_step(1, 2), compose(4, 3)])


def test_identity_normalizes_denotation_without_erasing_formation() -> None:
    nodes = [atom(), apply(0), apply_step(0, 1), ident(0), compose(3, 2)]
    plain = checked(nodes, 2)
    normalised = checked(nodes, 4)
    for key in ("type", "denotation_digest", "source_digest", "target_digest", "path_steps"):
        assert plain[key] == normalised[key]
    assert plain["formation_digest"] != normalised["formation_digest"]
    assert normalised["required_depth"] > plain["required_depth"]


def test_quote_read_preserves_original_value_and_accumulated_provenance() -> None:
    types = ["FORM", "CODE(FORM)", "FORM", "CODE(CODE(FORM))", "CODE(FORM)", "FORM", "CODE(FORM)"]
    ranks = [0, 1, 1, 2, 2, 2, 2]
    observations = [checked(NESTED, root) for root in range(len(NESTED))]
    assert [o["type"] for o in observations] == types
    assert [o["quote_rank"] for o in observations] == ranks
    node5, node6 = observations[5], observations[6]
    assert node5["quote_origins"] == [1, 3]
    assert node5["dependency_nodes"] == [0, 1, 3, 4, 5]
    assert node5["required_depth"] == 5
    assert node6["quote_origins"] == [1, 6]
    assert node6["dependency_nodes"] == [0, 1, 2, 6]
    atom_denotation = observations[0]["denotation_digest"]
    assert observations[2]["denotation_digest"] == node5["denotation_digest"] == atom_denotation
    assert observations[2]["formation_digest"] != node5["formation_digest"]


def test_quote_read_of_path_retains_endpoints_and_steps() -> None:
    nodes = [*TWO_STEP, quote(5), read(6)]
    path = checked(nodes, 5)
    read_back = checked(nodes, 7)
    for key in ("type", "denotation_digest", "source_digest", "target_digest", "path_steps"):
        assert read_back[key] == path[key]
    assert read_back["quote_origins"] == [6]
    assert read_back["quote_rank"] == 1
    quoted = checked(nodes, 6)
    assert quoted["type"] == "CODE(PATH)"
    assert (quoted["source_digest"], quoted["target_digest"], quoted["path_steps"]) == (
        None,
        None,
        [],
    )


def test_denotation_and_formation_have_independent_byte_oracles() -> None:
    # The reference corpus's key denotations for the synthetic atom (docs/spec/formation.md §9).
    a0 = h_atom(PAYLOAD)
    a1, a2 = h_apply(a0), h_apply(h_apply(a0))
    assert a0.startswith("sha256:f10120a4") and a0.endswith("bb10")
    assert a1.startswith("sha256:346427af") and a1.endswith("b388")
    assert a2.startswith("sha256:c86b90e1") and a2.endswith("6da2")
    one_step = h_path(a0, a1, [(a0, a1)])
    assert one_step.startswith("sha256:5399def1") and one_step.endswith("caf2")
    two_step = h_path(a0, a2, [(a0, a1), (a1, a2)])
    assert two_step.startswith("sha256:7358e003") and two_step.endswith("7a58")
    identity = h_path(a0, a0, [])
    assert identity.startswith("sha256:da86faa9") and identity.endswith("f694")
    # The checker reproduces each oracle.
    assert checked([atom()])["denotation_digest"] == a0
    assert checked(CHAIN, 1)["denotation_digest"] == a1
    assert checked(CHAIN, 2)["denotation_digest"] == a2
    assert checked([atom(), apply(0), apply_step(0, 1)])["denotation_digest"] == one_step
    assert checked(TWO_STEP)["denotation_digest"] == two_step
    assert checked([atom(), ident(0)])["denotation_digest"] == identity
    nodes = [*CHAIN, quote(1)]
    subject_bytes = subject(nodes)
    code = checked(nodes)
    assert code["denotation_digest"] == h_code(digest(subject_bytes), 1, [0, 1])
    assert code["formation_digest"] == h_formation(digest(subject_bytes), 3)


@pytest.mark.parametrize("field", ["ground", "agency"])
def test_rebound_context_changes_identity_not_agency_evidence(field: str) -> None:
    nodes = [atom(), quote(0)]
    original = checked(nodes)
    coordinate = digest(b"another declared coordinate")
    rebound = (
        checked(nodes, ground=coordinate)
        if field == "ground"
        else checked(nodes, agency=coordinate)
    )
    assert rebound["type"] == original["type"] == "CODE(FORM)"
    assert rebound["denotation_digest"] != original["denotation_digest"]
    assert rebound["formation_digest"] != original["formation_digest"]


@pytest.mark.parametrize(
    "nodes",
    [
        [atom(), quote(0), apply(1)],
        [atom(), quote(0), ident(1)],
        [atom(), apply(0), apply_step(0, 1), read(2)],
    ],
    ids=["APPLY(code)", "ID(code)", "READ(path)"],
)
def test_code_is_not_form_and_path_is_not_code(nodes: list[dict[str, Any]]) -> None:
    rule_invalid(nodes)


@pytest.mark.parametrize(
    "nodes",
    [
        [atom(), read(0)],
        [atom(), compose(0, 0)],
        [atom(), apply_step(0, 0)],
    ],
    ids=["READ(atom)", "COMPOSE(atom,atom)", "APPLY_STEP(atom,atom)"],
)
def test_rejects_ill_typed_constructors(nodes: list[dict[str, Any]]) -> None:
    rule_invalid(nodes)


def test_checks_unused_nodes_but_reports_only_root_dependency_closure() -> None:
    observation = checked([atom(), atom(OTHER_PAYLOAD), apply(1)], 0)
    assert observation["dependency_nodes"] == [0]
    # An unused, ill-typed later node invalidates the whole subject.
    rule_invalid([atom(), read(0)], 0)


def _reused(case: str) -> tuple[bytes, bytes]:
    subject_bytes, certificate_bytes = pair(TWO_STEP)
    certificate = certificate_record(subject_bytes, subject_record(TWO_STEP))
    changed_subject = {
        "payload": lambda: subject([atom(OTHER_PAYLOAD), *TWO_STEP[1:]]),
        "ground_context": lambda: subject(TWO_STEP, ground=digest(b"other ground")),
        "agency_context": lambda: subject(TWO_STEP, agency=digest(b"other agency")),
        "root": lambda: subject(TWO_STEP, 4),
    }
    if case in changed_subject:
        return changed_subject[case](), certificate_bytes
    if case == "profile":
        certificate["profile_digest"] = FOREIGN_PROFILE
    elif case == "certificate_root":
        certificate["root"] = 4
    else:  # certificate_subject
        certificate["subject_digest"] = digest(b"another subject")
    return subject_bytes, canonical_bytes(certificate)


@pytest.mark.parametrize(
    "case",
    [
        "payload",
        "ground_context",
        "agency_context",
        "root",
        "profile",
        "certificate_root",
        "certificate_subject",
    ],
)
def test_certificate_cannot_be_reused_for_changed_subject(case: str) -> None:
    report = check_formation(*_reused(case))
    assert_refused(report, "INVALID", "FORMATION_CERTIFICATE_BINDING_INVALID")
    assert report["subject_digest"] is not None


def _mutated_steps(case: str) -> bytes:
    subject_bytes = subject(TWO_STEP)
    certificate = certificate_record(subject_bytes, subject_record(TWO_STEP))
    steps = certificate["steps"]
    if case == "omit":
        del steps[3]
    elif case == "reverse":
        steps.reverse()
    elif case == "duplicate":
        steps[4] = dict(steps[3])
    elif case == "wrong_rule":
        steps[1]["rule"] = "ID"
    elif case == "wrong_node":
        steps[2]["node"] = 1
    else:  # extra_step
        steps.append({"node": 6, "rule": "ATOM", "premises": []})
    return canonical_bytes(certificate)


@pytest.mark.parametrize(
    "case", ["omit", "reverse", "duplicate", "wrong_rule", "wrong_node", "extra_step"]
)
def test_certificate_steps_are_exact_not_status_assertions(case: str) -> None:
    report = check_formation(subject(TWO_STEP), _mutated_steps(case))
    assert_refused(report, "INVALID", "FORMATION_CERTIFICATE_STEP_INVALID")


@pytest.mark.parametrize("where", ["subject", "context", "node", "certificate", "step"])
def test_rejects_extra_status_claim_fields(where: str) -> None:
    record = subject_record([atom(), apply(0)])
    certificate = certificate_record(canonical_bytes(record), record)
    target = {
        "subject": record,
        "context": record["context"],
        "node": record["nodes"][1],
        "certificate": certificate,
        "step": certificate["steps"][0],
    }[where]
    target["claimed_status"] = "CHECKED"
    subject_bytes = canonical_bytes(record)
    if where in ("subject", "context", "node"):
        certificate["subject_digest"] = digest(subject_bytes)
    report = check_formation(subject_bytes, canonical_bytes(certificate))
    assert_refused(report, "INVALID", "FORMATION_RECORD_INVALID")
    in_certificate = where in ("certificate", "step")
    assert (report["subject_digest"] is not None) is in_certificate


@pytest.mark.parametrize("where", ["root", "reference", "certificate_node", "certificate_premise"])
def test_indices_reject_booleans(where: str) -> None:
    record = subject_record([atom(), apply(0)], 1)
    certificate = certificate_record(canonical_bytes(record), record)
    if where == "root":
        record["root"] = True
    elif where == "reference":
        record["nodes"][1]["argument"] = False
    elif where == "certificate_node":
        certificate["steps"][1]["node"] = True
    else:
        certificate["steps"][1]["premises"] = [False]
    subject_bytes = canonical_bytes(record)
    report = check_formation(subject_bytes, canonical_bytes(certificate))
    assert_refused(report, "INVALID", "FORMATION_RECORD_INVALID")


@pytest.mark.parametrize(
    "nodes",
    [
        [atom(), apply(1)],
        [atom(), apply(2), atom()],
        [atom(), {"tag": "==", "argument": 0}],
        [atom("CHECKED")],
    ],
    ids=["self_reference", "forward_reference", "alias_rule", "literal_verdict"],
)
def test_rejects_forward_cycles_alias_rules_and_literal_verdicts(
    nodes: list[dict[str, Any]],
) -> None:
    subject_bytes = subject(nodes, 0)
    certificate = certificate_record(subject_bytes, subject_record([atom()], 0))
    report = check_formation(subject_bytes, canonical_bytes(certificate))
    assert_refused(report, "INVALID", "FORMATION_RECORD_INVALID")
    assert report["subject_digest"] is None


def _noncanonical(data: bytes, how: str) -> bytes:
    if how == "duplicate":
        return data.replace(b'"root":0', b'"root":0,"root":0', 1)
    if how == "whitespace":
        return data[:1] + b" " + data[1:]
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    return data.replace(b"sha256:", b"sha256\xff", 1)  # bad_utf8


@pytest.mark.parametrize("how", ["duplicate", "whitespace", "bom", "bad_utf8"])
@pytest.mark.parametrize("record", ["subject", "certificate"])
def test_admission_requires_exact_canonical_bytes(record: str, how: str) -> None:
    subject_bytes, certificate_bytes = pair([atom()])
    if record == "subject":
        subject_bytes = _noncanonical(subject_bytes, how)
    else:
        certificate_bytes = _noncanonical(certificate_bytes, how)
    report = check_formation(subject_bytes, certificate_bytes)
    assert_refused(report, "INVALID", "FORMATION_RECORD_INVALID")
    assert (report["subject_digest"] is None) is (record == "subject")


@pytest.mark.parametrize("what", ["profile", "schema"])
def test_unsupported_profile_is_unknown_not_checked(what: str) -> None:
    if what == "profile":
        subject_bytes, certificate_bytes = pair([atom()], profile=FOREIGN_PROFILE)
    else:
        record = subject_record([atom()])
        record["schema_version"] = "VSTD-TYPED-FORMATION-0.2"
        subject_bytes = canonical_bytes(record)
        certificate_bytes = canonical_bytes(certificate_record(subject_bytes, record))
    report = check_formation(subject_bytes, certificate_bytes)
    assert_refused(report, "UNKNOWN", "FORMATION_PROFILE_UNSUPPORTED")


@pytest.mark.parametrize("record", ["subject", "certificate"])
def test_byte_budget_exhaustion_is_unknown(record: str) -> None:
    subject_bytes, certificate_bytes = pair([atom()])
    spaces = b" " * (MAX_RECORD_BYTES + 1)
    if record == "subject":
        subject_bytes = spaces
    else:
        certificate_bytes = spaces
    report = check_formation(subject_bytes, certificate_bytes)
    assert_refused(report, "UNKNOWN", "FORMATION_LIMIT_EXCEEDED")


def test_node_budget_exhaustion_is_unknown() -> None:
    report = check_formation(*pair([atom()] * 1025, 0))
    assert_refused(report, "UNKNOWN", "FORMATION_LIMIT_EXCEEDED")
    assert report["subject_digest"] is None


def test_exact_node_bound_accepts_independent_atoms() -> None:
    observation = checked([atom()] * 1024)
    assert observation["dependency_nodes"] == [1023]
    assert observation["required_depth"] == 1


class _HookedBytes(bytes):
    """A bytes subclass that records any hook the checker might call."""

    calls: list[str] = []  # noqa: RUF012 - shared on purpose: records across instances

    def __len__(self) -> int:
        self.calls.append("__len__")
        return super().__len__()

    def decode(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append("decode")
        return super().decode(*args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        self.calls.append("__getitem__")
        return super().__getitem__(key)

    def __iter__(self) -> Any:
        self.calls.append("__iter__")
        return super().__iter__()


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "bytes_subclass"])
@pytest.mark.parametrize("record", ["subject", "certificate"])
def test_only_admits_exact_immutable_bytes(record: str, kind: str) -> None:
    subject_bytes, certificate_bytes = pair([atom()])
    _HookedBytes.calls.clear()
    wrap = {"bytearray": bytearray, "memoryview": memoryview, "bytes_subclass": _HookedBytes}[kind]
    if record == "subject":
        report = check_formation(wrap(subject_bytes), certificate_bytes)
    else:
        report = check_formation(subject_bytes, wrap(certificate_bytes))
    assert_refused(report, "INVALID", "FORMATION_RECORD_INVALID")
    assert _HookedBytes.calls == []


@pytest.mark.parametrize(
    "data",
    [b"[" * 17, b"[" + b",".join([b"[]"] * 8193) + b"]"],
    ids=["depth_17", "8194_containers"],
)
@pytest.mark.parametrize("record", ["subject", "certificate"])
def test_syntax_budget_refuses_before_unbounded_decode(record: str, data: bytes) -> None:
    subject_bytes, certificate_bytes = pair([atom()])
    if record == "subject":
        subject_bytes = data
    else:
        certificate_bytes = data
    report = check_formation(subject_bytes, certificate_bytes)
    assert_refused(report, "UNKNOWN", "FORMATION_LIMIT_EXCEEDED")


def _chain(length: int) -> list[dict[str, Any]]:
    return [atom(), *(apply(index) for index in range(length - 1))]


def test_dependency_depth_bound_and_cheap_negative_precedence() -> None:
    assert checked(_chain(64))["required_depth"] == 64
    deep = _chain(65)
    report = check_formation(*pair(deep))
    assert_refused(report, "UNKNOWN", "FORMATION_LIMIT_EXCEEDED")
    assert report["subject_digest"] is not None
    # A wrong step rule is found by the cheap certificate comparison before inference.
    subject_bytes = subject(deep)
    certificate = certificate_record(subject_bytes, subject_record(deep))
    certificate["steps"][10]["rule"] = "ID"
    report = check_formation(subject_bytes, canonical_bytes(certificate))
    assert_refused(report, "INVALID", "FORMATION_CERTIFICATE_STEP_INVALID")


def test_expanded_path_budget_with_explicit_test_only_limit() -> None:
    subject_bytes, certificate_bytes = pair(TWO_STEP)
    assert check_formation(subject_bytes, certificate_bytes, max_path_steps=2)["status"] == (
        "CHECKED"
    )
    report = check_formation(subject_bytes, certificate_bytes, max_path_steps=1)
    assert_refused(report, "UNKNOWN", "FORMATION_LIMIT_EXCEEDED")
    report = check_formation(subject_bytes, certificate_bytes, max_path_steps=0)
    assert_refused(report, "UNKNOWN", "FORMATION_LIMIT_EXCEEDED")


def test_checker_imports_no_producer_and_survives_disabled_producer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mechanism.formation._producer as producer

    def disabled(subject_bytes: bytes) -> bytes:
        raise AssertionError("the checker called the producer")

    monkeypatch.setattr(producer, "produce_formation_certificate", disabled)
    subject_bytes, certificate_bytes = pair(TWO_STEP)
    assert check_formation(subject_bytes, certificate_bytes)["status"] == "CHECKED"
    forged = certificate_record(subject_bytes, subject_record(TWO_STEP))
    forged["steps"][5]["premises"] = [4, 3]
    report = check_formation(subject_bytes, canonical_bytes(forged))
    assert_refused(report, "INVALID", "FORMATION_CERTIFICATE_STEP_INVALID")


def test_context_constants_are_the_declared_synthetic_coordinates() -> None:
    # Guards the builders themselves: the corpus's synthetic context (docs/spec/formation.md §9).
    assert digest(b"synthetic ground") == GROUND
    assert AGENCY.startswith("sha256:41e3a27c")
