"""Typed decisions: what a ``decision`` answer's ``result`` says, as frozen attrs classes read by
one cattrs converter.

Rules (the contract):

1. One converter, :data:`CONVERTER`, built on the project's exact-type base
   (:func:`session._exact.exact_converter`: a ``str`` is exactly a ``str``, an ``int`` is not a
   ``bool``, arrays are arrays): nothing is coerced, so a result of the wrong shape is refused,
   never quietly turned into another value.
2. Where the wire is closed, it is closed by the codec, not here: a ``decision`` header has
   exactly its keys (``daemon.wire._records.Decision``; a new key is a new protocol version,
   agreed in the ``hello``). What this module reads is *inside* that header, and is open:

   * :class:`Evaluation` (the session's ``EvaluatedProposition.to_dict()``) must have its nine
     keys with their types; **a key it does not know is ignored**, so a daemon that adds a
     field to its results does not break older clients (the untyped ``SubmitResult.result``
     keeps every key as sent).
   * :class:`Observations` is the mechanism's own, a different document per mechanism (and a
     third-party mechanism's is unknown here): it is kept whole (``raw``), with the parts the
     built-in mechanisms share typed when present — ``status``, ``reason_codes``,
     ``residual_obligations`` (the obligations a PASS leaves to the caller) and ``reports``
     (every observation whose key ends in ``_report``: the formation checker's, the
     descriptor stages'). A part of the wrong type is refused (rule 1); an absent one is
     ``None`` / empty.
3. :func:`evaluation_of` structures a ``result`` object, raising :class:`ValueError` naming the
   field at fault; the clients turn that into ``ServerProtocolError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs
from cattrs.gen import make_dict_structure_fn

from session import MechanismOutcome
from session._exact import ExactError, exact_converter, structure_exact

__all__ = ["CONVERTER", "Evaluation", "Observations", "evaluation_of"]

_REPORT_SUFFIX: Final = "_report"


@attrs.frozen
class Observations:
    """A mechanism's observations (rule 2): the whole document and its shared parts."""

    raw: Mapping[str, Any] = attrs.field(factory=dict)
    status: str | None = None
    reason_codes: tuple[str, ...] = ()
    residual_obligations: tuple[str, ...] = ()
    reports: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Evaluation:
    """A decision's result (``EvaluatedProposition`` as the daemon sent it; rule 2)."""

    binding_digest: str
    outcome: MechanismOutcome
    mechanism_id: str
    mechanism_digest: str
    evidence_refs: tuple[str, ...]
    trust_roots: tuple[str, ...]
    observed_evidence_bytes: int
    details: str
    observations: Observations

    @property
    def passed(self) -> bool:
        return self.outcome is MechanismOutcome.PASS


def _make_converter() -> Any:
    converter = exact_converter()

    def outcome(value: object, _: object) -> MechanismOutcome:
        if type(value) is not str or value not in MechanismOutcome.__members__:
            raise ValueError(f"not an outcome: {value!r}")
        return MechanismOutcome(value)

    def observations(value: object, _: object) -> Observations:
        if type(value) is not dict:
            raise ValueError(f"observations are not an object: {type(value).__name__}")
        status = value.get("status")
        if status is not None and type(status) is not str:
            raise ValueError(f"observations.status is not a string: {type(status).__name__}")
        return Observations(
            raw=value,
            status=status,
            reason_codes=converter.structure(value.get("reason_codes", ()), tuple[str, ...]),
            residual_obligations=converter.structure(
                value.get("residual_obligations", ()), tuple[str, ...]
            ),
            reports={key: item for key, item in value.items() if key.endswith(_REPORT_SUFFIX)},
        )

    # A class's own hook is found before the base's factories (attrs classes, ``str``, of
    # which the outcome is a subclass); registered before Evaluation's hook is generated,
    # which looks its fields' hooks up once.
    converter.register_structure_hook(MechanismOutcome, outcome)
    converter.register_structure_hook(Observations, observations)
    # An open document (rule 2): the generated hook ignores keys it does not know.
    open_evaluation = make_dict_structure_fn(Evaluation, converter, _cattrs_forbid_extra_keys=False)

    def evaluation(value: object, _: object) -> Evaluation:
        if type(value) is not dict:
            raise ValueError(f"the result is not an object: {type(value).__name__}")
        built: Evaluation = open_evaluation(value, Evaluation)
        return built

    converter.register_structure_hook(Evaluation, evaluation)
    return converter


#: The client room's one converter (rule 1).
CONVERTER: Final = _make_converter()


def evaluation_of(result: Mapping[str, Any]) -> Evaluation:
    """The typed :class:`Evaluation` of a ``decision``'s ``result`` (rule 3)."""
    try:
        return structure_exact(CONVERTER, result, Evaluation, "result")
    except ExactError as error:
        raise ValueError(str(error)) from None
