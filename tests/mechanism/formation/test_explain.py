"""``formation explain``: it never changes the check's answer, and it points where it stopped.

The verdict is compared with :func:`check_formation` (and with the reference's expected report)
over the whole interoperability corpus. Where a negative has one fault, the highlighted node is
compared with an oracle that does not use the checker: the first step that differs from the
producer's certificate (a step fault), or the shortest prefix of the subject the producer
refuses (a typing or depth fault).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import clirun
import pytest
import testdata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mechanism.canonical import canonical_bytes
from mechanism.formation import (
    FormationError,
    check_formation,
    produce_formation_certificate,
)
from mechanism.formation._checker import trace_formation
from mechanism.formation._explain import explain_formation
from mechanism.formation._explain_graph import render_dot, render_html, render_svg
from mechanism.formation._explain_view import plan_view, render_text

from ._builders import apply, atom, compose, ident, pair
from ._corpus import b64url, pure_cases
from .test_formation_properties import well_typed_nodes

CASES = pure_cases()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _bytes(case: dict[str, Any]) -> tuple[bytes, bytes]:
    return b64url(case["subject_bytes_base64url"]), b64url(case["certificate_bytes_base64url"])


@pytest.mark.parametrize("case", CASES, ids=[case["case_id"] for case in CASES])
def test_explain_never_changes_the_checkers_answer(case: dict[str, Any]) -> None:
    subject, certificate = _bytes(case)
    explanation = explain_formation(subject, certificate)
    assert canonical_bytes(explanation.report) == canonical_bytes(
        check_formation(subject, certificate)
    )
    assert canonical_bytes(explanation.report) == canonical_bytes(case["expected_report"])
    # The rule identifier agrees with the report's reason code and status.
    assert (explanation.rule is None) == (explanation.status == "CHECKED")
    described = json.loads(json.dumps(plan_view_json(subject, certificate)))
    assert described["report"] == case["expected_report"]


def plan_view_json(subject: bytes, certificate: bytes) -> dict[str, Any]:
    from mechanism.formation._explain_graph import describe

    return describe(plan_view(explain_formation(subject, certificate)))


def _prefix_refused_at(subject: bytes) -> int | None:
    """The smallest k such that the producer refuses the subject cut to nodes 0..k (root k)."""
    record = json.loads(subject)
    for k in range(len(record["nodes"])):
        cut = dict(record, nodes=record["nodes"][: k + 1], root=k)
        try:
            produce_formation_certificate(canonical_bytes(cut))
        except FormationError:
            return k
    return None


def _first_step_differing(subject: bytes, certificate: bytes) -> int | None:
    honest = json.loads(produce_formation_certificate(subject))["steps"]
    given_steps = json.loads(certificate)["steps"]
    if len(given_steps) != len(honest):
        return None
    return next(i for i, (a, b) in enumerate(zip(given_steps, honest, strict=True)) if a != b)


def _oracle(subject: bytes, certificate: bytes, reason: str) -> int | None:
    if reason == "FORMATION_CERTIFICATE_STEP_INVALID":
        return _first_step_differing(subject, certificate)
    return _prefix_refused_at(subject)


SINGLE_FAULT = [
    case
    for case in CASES
    if case["expected_report"]["reason_codes"]
    in (
        ["FORMATION_RULE_INVALID"],
        ["FORMATION_CERTIFICATE_STEP_INVALID"],
        ["FORMATION_LIMIT_EXCEEDED"],
    )
    and case["expected_report"]["subject_digest"] is not None
]


def test_the_single_fault_negatives_are_the_ones_expected() -> None:
    # Guards the property below against passing vacuously on a changed corpus.
    assert {case["case_id"] for case in SINGLE_FAULT} == {
        "wrong-application-target",
        "wrong-composition-endpoints",
        "read-form",
        "apply-code",
        "unused-invalid-node",
        "certificate-premise-order",
        "certificate-missing-step",
        "dependency-depth-limit",
    }


@pytest.mark.parametrize("case", SINGLE_FAULT, ids=[case["case_id"] for case in SINGLE_FAULT])
def test_highlighted_step_is_the_one_the_checker_reports(case: dict[str, Any]) -> None:
    subject, certificate = _bytes(case)
    _, trace = trace_formation(subject, certificate)
    explanation = explain_formation(subject, certificate)
    assert explanation.index == trace.index
    assert explanation.index == _oracle(
        subject, certificate, case["expected_report"]["reason_codes"][0]
    )
    svg = render_svg(plan_view(explanation), engine="grandalf")
    highlighted = re.findall(r'<g id="node-(\d+)"[^>]*class="[^"]*\bfailing\b', svg)
    assert highlighted == ([] if trace.index is None else [str(trace.index)])


MUTATIONS = ("premises", "rule", "node")


@SETTINGS
@given(nodes=well_typed_nodes(), data=st.data())
def test_a_tampered_step_is_highlighted_where_it_was_tampered(
    nodes: list[dict[str, Any]], data: st.DataObject
) -> None:
    subject, certificate = pair(nodes)
    record = json.loads(certificate)
    k = data.draw(st.integers(0, len(nodes) - 1), label="step")
    step = record["steps"][k]
    kind = data.draw(st.sampled_from(MUTATIONS), label="mutation")
    if kind == "premises":
        premises = step["premises"]
        if len(premises) < 2:
            step["premises"] = [*premises, 0]
        elif premises[0] != premises[1]:
            step["premises"] = premises[::-1]
        else:
            step["premises"] = [premises[0], premises[0] + 1]
    elif kind == "rule":
        step["rule"] = "READ" if step["rule"] != "READ" else "ATOM"
    else:
        step["node"] = k + 1
    tampered = canonical_bytes(record)
    explanation = explain_formation(subject, tampered)
    assert explanation.report == check_formation(subject, tampered)
    assert explanation.report["reason_codes"] == ["FORMATION_CERTIFICATE_STEP_INVALID"]
    assert explanation.index == k == _first_step_differing(subject, tampered)
    assert explanation.step_states[k] == "failed"
    assert explanation.step_states[:k] == ("ok",) * k


@SETTINGS
@given(nodes=well_typed_nodes(), data=st.data())
def test_an_ill_typed_node_is_highlighted_where_typing_breaks(
    nodes: list[dict[str, Any]], data: st.DataObject
) -> None:
    good = explain_formation(*pair(nodes))
    assert good.status == "CHECKED"
    types = [node.type or "" for node in good.nodes]
    # Append a node that breaks its rule, then whatever well-typed nodes follow.
    position = data.draw(st.integers(0, len(nodes) - 1), label="premise")
    bad = (
        {"tag": "READ", "code": position}
        if not types[position].startswith("CODE(")
        else apply(position)
    )
    faulty = [*nodes, bad, atom()]
    subject, certificate = pair(faulty, root=data.draw(st.integers(0, len(faulty) - 1)))
    explanation = explain_formation(subject, certificate)
    assert explanation.report == check_formation(subject, certificate)
    assert explanation.report["reason_codes"] == ["FORMATION_RULE_INVALID"]
    assert explanation.index == len(nodes) == _prefix_refused_at(subject)
    assert [n.state for n in explanation.nodes] == ["typed"] * len(nodes) + ["failed", "not typed"]


# --------------------------------------------------------------------------- the views


def _chain(length: int) -> tuple[bytes, bytes]:
    """An ATOM, then APPLYs and IDs in a long chain, composed at the top: a wide, deep DAG."""
    nodes: list[dict[str, Any]] = [atom()]
    for _ in range(length):
        nodes.append(apply(len(nodes) - 1))
    for index in range(0, length, 2):
        nodes.append(ident(index))
    return pair(nodes)


def test_a_large_subject_never_draws_more_than_max_nodes_and_says_what_was_left_out() -> None:
    subject, certificate = _chain(60)
    explanation = explain_formation(subject, certificate)
    view = plan_view(explanation, max_nodes=12)
    assert len(view.shown) == 12
    svg = render_svg(view, engine="grandalf")
    assert len(re.findall(r'<g id="node-\d+"', svg)) == 12
    assert "collapsed" in svg and f"drew 12 of {len(explanation.nodes)} nodes" in svg
    text = render_text(view)
    assert "not drawn" in text and "drew 12 of" in text
    assert len(plan_view(explanation, max_nodes=1).shown) == 1


def test_a_wrong_root_is_explained_as_a_binding_failure_naming_both_roots() -> None:
    subject, certificate = pair([atom(), apply(0)])
    record = json.loads(certificate)
    record["root"] = 0
    explanation = explain_formation(subject, canonical_bytes(record))
    assert explanation.rule == "BINDING_ROOT" and explanation.index is None
    assert "root 0 is not the subject's root 1" in explanation.why
    assert explanation.spec == "docs/spec/formation.md §3.6 step 5; §3.3"
    assert set(explanation.step_states) == {"not checked"}


def test_compose_endpoints_names_the_nodes_whose_forms_differ() -> None:
    nodes = [atom(), apply(0), atom("sha256:" + "1" * 64), ident(1), ident(2), compose(3, 4)]
    explanation = explain_formation(*pair(nodes))
    assert explanation.rule == "COMPOSE_ENDPOINTS" and explanation.index == 5
    assert "ends at the FORM built by node 1" in explanation.why
    assert "starts at the FORM built by node 2" in explanation.why
    assert explanation.blamed == (3, 4)


def test_dot_source_carries_ids_classes_and_tooltips() -> None:
    subject, certificate = _corpus_pair("wrong-composition-endpoints")
    dot = render_dot(plan_view(explain_formation(subject, certificate)))
    assert dot.startswith("digraph formation {")
    assert re.search(r'n5 \[id="node-5", class="node [^"]*failing', dot)
    assert '\\"record\\"' in dot  # the tooltip holds the node's full record


def _corpus_pair(case_id: str) -> tuple[bytes, bytes]:
    return _bytes(next(case for case in CASES if case["case_id"] == case_id))


@pytest.mark.parametrize(
    "engine",
    [
        "grandalf",
        pytest.param(
            "dot",
            marks=pytest.mark.skipif(
                shutil.which("dot") is None, reason="Graphviz dot not installed (make browser)"
            ),
        ),
    ],
)
def test_layout_is_top_down_premises_below_the_nodes_that_use_them(engine: str) -> None:
    subject, certificate = _corpus_pair("composition")
    svg = render_svg(plan_view(explain_formation(subject, certificate)), engine=engine)
    assert f'data-engine="{engine}"' in svg
    tops = {
        int(index): float(y)
        for index, y in re.findall(
            r'<g id="node-(\d+)"[^>]*>\s*<title>[^<]*</title>\s*<rect x="[-\d.]+" y="([-\d.]+)"',
            svg,
        )
    }
    assert len(tops) == 6
    edges = re.findall(r'data-tail="(\d+)" data-head="(\d+)"', svg)
    assert len(edges) == 8
    for tail, head in edges:
        assert tops[int(tail)] < tops[int(head)]


def test_html_is_self_contained() -> None:
    subject, certificate = _corpus_pair("read-form")
    page = render_html(plan_view(explain_formation(subject, certificate)), engine="grandalf")
    assert "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    assert "https://" not in page
    assert "docs/spec/formation.md §3.6 step 7; §3.2" in page


# --------------------------------------------------------------------------- the command


def cli(*args: str) -> clirun.CliResult:
    """``evidenced formation explain ARGS`` in-process."""
    return clirun.in_process(["formation", "explain", *args])


def test_the_real_process_explains_as_in_process() -> None:
    """One real process: the entry point, the exit status and the streams."""
    folder = testdata.fixture("formation", directory=True)
    args: list[str | Path] = ["formation", "explain", folder / "tampered.subject.json"]
    args += [folder / "tampered.certificate.json", "--format", "json"]
    real = clirun.subprocess_run(args, cwd=testdata.REPO)
    assert real.returncode == 1, real.err
    assert real == clirun.in_process(args)


@pytest.mark.parametrize(
    ("name", "code"), [("compose", 0), ("tampered", 1), ("unsupported-profile", 3)]
)
def test_explain_exits_like_check_and_its_json_carries_the_same_report(
    name: str, code: int
) -> None:
    folder = testdata.fixture("formation", directory=True)
    subject, certificate = folder / f"{name}.subject.json", folder / f"{name}.certificate.json"
    completed = cli(str(subject), str(certificate), "--format", "json")
    assert completed.returncode == code, completed.stderr
    document = json.loads(completed.stdout)
    assert document["report"] == check_formation(subject.read_bytes(), certificate.read_bytes())
    assert b"Traceback" not in completed.stderr


def test_explain_of_an_unreadable_file_is_rejected_and_a_bad_budget_is_a_usage_error(
    tmp_path: Any,
) -> None:
    missing = cli(str(tmp_path / "nope"), str(tmp_path / "nope"))
    assert missing.returncode == 66
    assert json.loads(missing.stdout)["error"]["code"] == "INPUT_UNREADABLE"
    folder = testdata.fixture("formation", directory=True)
    usage = cli(
        str(folder / "atom.subject.json"), str(folder / "atom.certificate.json"), "--max-nodes", "0"
    )
    assert usage.returncode == 2 and json.loads(usage.stdout)["error"]["exit"] == 2


def test_text_marks_the_failing_node_and_the_tampered_fixture_names_the_binding() -> None:
    folder = testdata.fixture("formation", directory=True)
    completed = cli(
        str(folder / "tampered.subject.json"),
        str(folder / "tampered.certificate.json"),
        "--format",
        "text",
    )
    assert completed.returncode == 1
    text = completed.stdout.decode()
    assert text.startswith("INVALID FORMATION_CERTIFICATE_BINDING_INVALID\n")
    assert "the certificate binds another subject" in text
    assert "BINDING_SUBJECT_DIGEST" in text


def test_traced_and_untraced_checks_agree_on_arbitrary_bytes() -> None:
    # The trace hook must not change any answer, including for garbage and swapped roles.
    subject, certificate = _corpus_pair("composition")
    for s, c in (
        (subject, certificate),
        (certificate, subject),
        (b"{}", b""),
        (subject, subject[:-1]),
    ):
        assert trace_formation(s, c)[0] == check_formation(s, c)
    mutated = copy.deepcopy(json.loads(subject))
    mutated["root"] = 0
    s = canonical_bytes(mutated)
    assert trace_formation(s, certificate)[0] == check_formation(s, certificate)


def test_explain_imports_no_producer_and_the_checker_imports_no_explain() -> None:
    from .test_formation_independence import _project_imports

    for module in ("_explain", "_explain_view", "_explain_graph", "_explain_cli"):
        imported = _project_imports(f"mechanism.formation.{module}")
        assert "mechanism.formation._checker" in imported
        assert not any("producer" in name for name in imported), module
    assert not any("explain" in name for name in _project_imports("mechanism.formation._checker"))
