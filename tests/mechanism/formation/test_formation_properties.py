"""Property tests: grammar-generated subjects check; single mutations are refused; no raising."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mechanism.formation import REASON_CODES, check_formation, produce_formation_certificate

from ._builders import RESIDUALS, digest, pair

PAYLOADS = [digest(bytes([n])) for n in range(3)]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# A test-side type model (independent of the producer and the checker):
#   ("FORM", form)  form = ("ATOM", payload) | ("APPLY", form)
#   ("PATH", source_form, target_form)
#   ("CODE", quoted_model)


@st.composite
def well_typed_nodes(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A well-typed node list drawn constructor by constructor from the §3.2 grammar."""
    nodes: list[dict[str, Any]] = []
    models: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 24))):
        forms = [i for i, m in enumerate(models) if m[0] == "FORM"]
        paths = [i for i, m in enumerate(models) if m[0] == "PATH"]
        codes = [i for i, m in enumerate(models) if m[0] == "CODE"]
        steps = [(i, j) for i in forms for j in forms if models[j][1] == ("APPLY", models[i][1])]
        joins = [(i, j) for i in paths for j in paths if models[i][2] == models[j][1]]
        options = ["ATOM"]
        options += ["APPLY", "ID"] if forms else []
        options += ["APPLY_STEP"] if steps else []
        options += ["COMPOSE"] if joins else []
        options += ["QUOTE"] if models else []
        options += ["READ"] if codes else []
        tag = draw(st.sampled_from(options))
        if tag == "ATOM":
            payload = draw(st.sampled_from(PAYLOADS))
            nodes.append({"tag": "ATOM", "payload_digest": payload})
            models.append(("FORM", ("ATOM", payload)))
        elif tag == "APPLY":
            i = draw(st.sampled_from(forms))
            nodes.append({"tag": "APPLY", "argument": i})
            models.append(("FORM", ("APPLY", models[i][1])))
        elif tag == "ID":
            i = draw(st.sampled_from(forms))
            nodes.append({"tag": "ID", "at": i})
            models.append(("PATH", models[i][1], models[i][1]))
        elif tag == "APPLY_STEP":
            i, j = draw(st.sampled_from(steps))
            nodes.append({"tag": "APPLY_STEP", "source": i, "target": j})
            models.append(("PATH", models[i][1], models[j][1]))
        elif tag == "COMPOSE":
            i, j = draw(st.sampled_from(joins))
            nodes.append({"tag": "COMPOSE", "left": i, "right": j})
            models.append(("PATH", models[i][1], models[j][2]))
        elif tag == "QUOTE":
            i = draw(st.integers(0, len(models) - 1))
            nodes.append({"tag": "QUOTE", "value": i})
            models.append(("CODE", models[i]))
        else:
            i = draw(st.sampled_from(codes))
            nodes.append({"tag": "READ", "code": i})
            models.append(models[i][1])
    return nodes


@st.composite
def valid_pairs(draw: st.DrawFn) -> tuple[bytes, bytes]:
    nodes = draw(well_typed_nodes())
    root = draw(st.integers(0, len(nodes) - 1))
    return pair(nodes, root)


def _assert_refusal(report: dict[str, Any]) -> None:
    assert report["status"] in ("INVALID", "UNKNOWN")
    (reason,) = report["reason_codes"]
    assert REASON_CODES[reason] == report["status"]
    assert report["observation"] is None
    assert report["residual_obligations"] == RESIDUALS


@SETTINGS
@given(valid_pairs())
def test_generated_subjects_produce_a_certificate_that_checks(pair_: tuple[bytes, bytes]) -> None:
    subject_bytes, naive = pair_
    certificate = produce_formation_certificate(subject_bytes)
    assert certificate == naive
    report = check_formation(subject_bytes, certificate)
    assert report["status"] == "CHECKED"
    assert report["reason_codes"] == []
    assert report["residual_obligations"] == RESIDUALS


@SETTINGS
@given(
    valid_pairs(),
    st.booleans(),
    st.integers(min_value=0),
    st.sampled_from(["replace", "delete", "insert"]),
    st.integers(0, 255),
)
def test_any_single_byte_mutation_is_refused_with_one_closed_reason(
    pair_: tuple[bytes, bytes], in_subject: bool, position: int, how: str, byte: int
) -> None:
    subject_bytes, certificate_bytes = pair_
    target = subject_bytes if in_subject else certificate_bytes
    index = position % len(target)
    if how == "replace":
        if target[index] == byte:
            byte = (byte + 1) % 256
        mutated = target[:index] + bytes([byte]) + target[index + 1 :]
    elif how == "delete":
        mutated = target[:index] + target[index + 1 :]
    else:
        mutated = target[:index] + bytes([byte]) + target[index:]
    if in_subject:
        report = check_formation(mutated, certificate_bytes)
    else:
        report = check_formation(subject_bytes, mutated)
    _assert_refusal(report)


_JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 2**54)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["ATOM", "READ", "QUOTE", PAYLOADS[0], "VSTD-TYPED-FORMATION-0.1"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["tag", "nodes", "root", "steps", "node", "premises", "rule", "x"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@SETTINGS
@given(st.binary(max_size=300) | _JSONISH.map(lambda v: repr(v).encode()), st.binary(max_size=64))
def test_nothing_raises_out_of_check_formation_for_any_bytes(subject: bytes, cert: bytes) -> None:
    report = check_formation(subject, cert)
    if report["status"] != "CHECKED":
        _assert_refusal(report)


@SETTINGS
@given(_JSONISH, valid_pairs())
def test_nothing_raises_for_structured_records_or_non_bytes(
    value: Any, pair_: tuple[bytes, bytes]
) -> None:
    import json

    subject_bytes, certificate_bytes = pair_
    try:
        encoded = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    except ValueError:
        encoded = b"null"
    for report in (
        check_formation(encoded, certificate_bytes),
        check_formation(subject_bytes, encoded),
        check_formation(value, certificate_bytes),
        check_formation(subject_bytes, value),
    ):
        _assert_refusal(report)
