"""The holdout adapter (public names): applies challenges to this project's artifacts through
the real mechanisms and real sessions and emits one observation document.

Unlike :mod:`holdout`, this module imports ``session`` and ``mechanism``. Rules in
``holdout._adapter`` and ``docs/holdout.md``.
"""

from ._adapter import (
    DEFAULT_IMPLEMENTATION,
    HANDLERS,
    OBSERVATION_TYPE,
    OPTIONS_UNSUPPORTED,
    OPTIONS_WEAKENED,
    PINS_OPTION,
    PINS_PRISTINE,
    PINS_WORKING,
    RECIPE_OPS,
    RESOLVE_OUTCOMES,
    SESSION_CODES,
    Emission,
    EmissionRefused,
    Evaluation,
    StepError,
    evaluate_pair,
    observe,
    observe_challenge,
    resolve_octets,
)
from ._corpus import CORPUS_TYPE, Case, Corpus, CorpusError, root_of

__all__ = [
    "CORPUS_TYPE",
    "DEFAULT_IMPLEMENTATION",
    "HANDLERS",
    "OBSERVATION_TYPE",
    "OPTIONS_UNSUPPORTED",
    "OPTIONS_WEAKENED",
    "PINS_OPTION",
    "PINS_PRISTINE",
    "PINS_WORKING",
    "RECIPE_OPS",
    "RESOLVE_OUTCOMES",
    "SESSION_CODES",
    "Case",
    "Corpus",
    "CorpusError",
    "Emission",
    "EmissionRefused",
    "Evaluation",
    "StepError",
    "evaluate_pair",
    "observe",
    "observe_challenge",
    "resolve_octets",
    "root_of",
]
