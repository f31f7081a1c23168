"""The holdout instrument: challenge/observation grammar, strict reader, protocol-free scorer.

Importing ``holdout`` loads only the scorer side (no ``session``, ``mechanism``, ``daemon`` or
``catalog`` code), and only when a public name is first asked for: the scorer's libraries
(jsonschema, jsonschema-rs, rfc8785: the ``holdout`` extra) load with it, so the command line
registers ``evidenced holdout`` on an installation without them. The adapter, which evaluates
challenges through the real mechanisms, is the separate module :mod:`holdout.adapter`.
"""

# ruff: noqa: F401 (__getattr__ imports every public name and hands them out through locals())

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names for type checkers; at run time they load on first use
    from ._commitment import (
        RELEASE_FILES,
        challenge_commitment,
        corpus_index_path,
        load_challenge_folder,
        project_schemas,
        release_id,
        schema_dir,
    )
    from ._explain import PREDICATE_ROOTS, Explanation, Read, trace
    from ._jcs import canonical, canonical_equal, strict_equal
    from ._reader import MAX_DEPTH, MAX_DOCUMENT_BYTES, READ_ERROR_CODES, StrictReadError, read_json
    from ._scorer import (
        PREDICATE_OPS,
        REFUSAL_CODES,
        ChallengeScore,
        Finding,
        InteropReport,
        Refusal,
        Schemas,
        ScoreReport,
        compare_observations,
        evaluate_predicate,
        interop,
        read_challenge_array,
        resolve_path,
        score,
        score_bytes,
        validate_challenge,
        validate_observation_document,
    )


def __getattr__(name: str) -> Any:
    """The public names, loaded together the first time one is asked for (static relative
    imports only: the scorer sources import nothing dynamically, ``test_scorer_isolation``)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ._commitment import (
        RELEASE_FILES,
        challenge_commitment,
        corpus_index_path,
        load_challenge_folder,
        project_schemas,
        release_id,
        schema_dir,
    )
    from ._explain import PREDICATE_ROOTS, Explanation, Read, trace
    from ._jcs import canonical, canonical_equal, strict_equal
    from ._reader import MAX_DEPTH, MAX_DOCUMENT_BYTES, READ_ERROR_CODES, StrictReadError, read_json
    from ._scorer import (
        PREDICATE_OPS,
        REFUSAL_CODES,
        ChallengeScore,
        Finding,
        InteropReport,
        Refusal,
        Schemas,
        ScoreReport,
        compare_observations,
        evaluate_predicate,
        interop,
        read_challenge_array,
        resolve_path,
        score,
        score_bytes,
        validate_challenge,
        validate_observation_document,
    )

    loaded = {key: value for key, value in locals().items() if key in __all__}
    globals().update(loaded)
    return loaded[name]


__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "PREDICATE_OPS",
    "PREDICATE_ROOTS",
    "READ_ERROR_CODES",
    "REFUSAL_CODES",
    "RELEASE_FILES",
    "ChallengeScore",
    "Explanation",
    "Finding",
    "InteropReport",
    "Read",
    "Refusal",
    "Schemas",
    "ScoreReport",
    "StrictReadError",
    "canonical",
    "canonical_equal",
    "challenge_commitment",
    "compare_observations",
    "corpus_index_path",
    "evaluate_predicate",
    "interop",
    "load_challenge_folder",
    "project_schemas",
    "read_challenge_array",
    "read_json",
    "release_id",
    "resolve_path",
    "schema_dir",
    "score",
    "score_bytes",
    "strict_equal",
    "trace",
    "validate_challenge",
    "validate_observation_document",
]
