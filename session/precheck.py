"""The pair pre-check pipeline and its standard steps (the public face of
``session._precheck``, whose module docstring is this one: :data:`__doc__` is copied from it so
the API reference shows the contract where the names are)."""

from ._precheck import (
    PairPrecheck,
    PairState,
    PrecheckFailed,
    PrecheckStep,
    Refusal,
    binding_type,
    evidence_bytes,
    evidence_pair,
    evidence_rehash,
    evidence_size,
    evidence_sizes,
    implementation,
    pair_bounds,
    pair_references,
    parameters,
    predicate,
    step,
    subject_is_first,
    trust_roots,
)
from ._precheck import __doc__ as _CONTRACT

__doc__ = _CONTRACT
__all__ = [
    "PairPrecheck",
    "PairState",
    "PrecheckFailed",
    "PrecheckStep",
    "Refusal",
    "binding_type",
    "evidence_bytes",
    "evidence_pair",
    "evidence_rehash",
    "evidence_size",
    "evidence_sizes",
    "implementation",
    "pair_bounds",
    "pair_references",
    "parameters",
    "predicate",
    "step",
    "subject_is_first",
    "trust_roots",
]
