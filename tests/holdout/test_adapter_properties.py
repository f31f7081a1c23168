"""Property: any SET/REVERSE/RESEAL recipe on either mechanism yields either a schema-valid
observation whose refusal codes are in the closed vocabulary, or a StepError; nothing else
escapes, and the baseline never depends on the recipe."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mechanism import holdout
from mechanism.holdout.adapter import Corpus, StepError, observe_challenge

CORPUS = Corpus.load(holdout.corpus_index_path().parent)
SCHEMAS = holdout.project_schemas()
CASES = ["formation-identity", "formation-apply", "descriptor-tisc", "descriptor-safetensors"]

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["sha256:" + "0" * 64, "run", "inspect", "t81vm", "00", "PATH"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)
_paths = st.sampled_from(
    [
        "artifact.root",
        "artifact.steps",
        "artifact.steps.0.rule",
        "artifact.steps.1.premises",
        "artifact.subject_digest",
        "artifact.profile_digest",
        "artifact.provider",
        "artifact.operations",
        "artifact.operations.0",
        "artifact.payload_reference",
        "artifact.schema",
        "leaf.nodes",
        "leaf.nodes.0.tag",
        "leaf.context.ground_artifact_digest",
        "leaf.root",
        "leaf.hex",
        "artifact.new-member",
    ]
)
_steps = st.one_of(
    st.builds(lambda p, v: {"op": "SET", "path": p, "value": v}, _paths, _values),
    st.builds(lambda p: {"op": "REVERSE", "path": p}, _paths),
    st.just({"op": "RESEAL"}),
    st.just({"op": "RECOMPOSE_DAG"}),
    st.builds(
        lambda n, v: {"op": "WIRE_PREPEND_DUPLICATE_MEMBER", "name": n, "value": v},
        st.text(min_size=1, max_size=6),
        _values,
    ),
    st.builds(
        lambda o: {"op": "CHECK_WITH_OPTIONS", "options": o},
        st.dictionaries(
            st.sampled_from(["max_nodes", "max_steps", "max_evidence_bytes", "operation", "x"]),
            _values,
            max_size=2,
        ),
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    case=st.sampled_from(CASES),
    role=st.sampled_from(["artifact", "leaf"]),
    recipe=st.lists(_steps, max_size=4),
)
def test_any_recipe_yields_a_valid_observation_or_a_step_error(
    case: str, role: str, recipe: list[dict[str, Any]]
) -> None:
    challenge = {
        "id": "S1",
        "name": "fuzz",
        "fixture": {role: case, "root": getattr(CORPUS.case(case), role)},
        "recipe": recipe,
        "predicates": [],
    }
    assert holdout.validate_challenge(challenge, SCHEMAS) is None
    try:
        observation = observe_challenge(challenge, CORPUS)
    except StepError:
        return
    document = {
        "type": "EVIDENCED-HOLDOUT-OBSERVATION-v1",
        "implementation": "fuzz",
        "spec_release_id": "srel-" + "0" * 64,
        "observations": {"S1": observation},
    }
    assert holdout.validate_observation_document(document, SCHEMAS) is None
    pristine = observe_challenge({**challenge, "recipe": []}, CORPUS)
    assert observation["baseline"] == pristine["baseline"]
