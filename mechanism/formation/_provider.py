"""The formation provider (entry point ``evidenced.mechanisms``: ``formation``).

* Options (:class:`FormationOptions`): the checker's lower-only ceilings ``max_nodes``,
  ``max_depth`` and ``max_path_steps`` (compiled defaults); a raised one is refused when the
  mechanism is created (``CeilingError``).
* ``create`` → :class:`FormationPathCertificateMechanism` with those ceilings; it states
  ``accepted_bounds`` ``EvidenceBounds(2, 524288)`` (two records of at most 262,144 bytes).
* ``honest_binding((subject, certificate), options)`` → :func:`formation_binding` (declared
  context as parameters; ``FormationError``, a ``ValueError``, when it cannot bind).
* ``announce`` → ``{"profile_digest"}``: the one typed-formation profile this mechanism checks
  (a subject declaring another is UNKNOWN); the honest binding takes it from the subject, so
  ``pin`` changes nothing.
* Catalog metadata: :mod:`._components`; holdout handler: :mod:`._holdout`; conformance samples:
  the packaged example pairs ``compose`` (PASS), ``tampered`` (FAIL) and
  ``unsupported-profile`` (UNKNOWN), when the fixtures are installed; decision schema:
  :mod:`._decision_schema`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any, Final

import attrs

from session import (
    BoundProposition,
    CatalogMetadata,
    ConformanceSample,
    EvidenceCountError,
    HoldoutHandler,
    MechanismOutcome,
    MechanismProvider,
    VerificationMechanism,
)

from ._mechanism import FormationPathCertificateMechanism, formation_binding
from ._wire import MAX_DEPTH, MAX_NODES, MAX_PATH_STEPS, MECHANISM_ID, PROFILE_DIGEST

__all__ = ["PROVIDER", "FormationOptions", "FormationProvider"]


@attrs.frozen
class FormationOptions:
    """``[sessions.<name>.options.formation]``: lower-only checker ceilings."""

    max_nodes: int = MAX_NODES
    max_depth: int = MAX_DEPTH
    max_path_steps: int = MAX_PATH_STEPS


class FormationProvider(MechanismProvider[FormationOptions]):
    """Provider of ``vstd.typed_formation.checked.0.1`` (module rules)."""

    mechanism_id = MECHANISM_ID
    options_type = FormationOptions

    def create(self, options: FormationOptions) -> FormationPathCertificateMechanism:
        return FormationPathCertificateMechanism(
            max_nodes=options.max_nodes,
            max_depth=options.max_depth,
            max_path_steps=options.max_path_steps,
        )

    def honest_binding(
        self, evidence: Sequence[bytes], options: FormationOptions
    ) -> BoundProposition:
        if len(evidence) != 2:
            raise EvidenceCountError("a formation submission is SUBJECT CERTIFICATE (two files)")
        return formation_binding(evidence[0], evidence[1])

    def announce(self, mechanism: VerificationMechanism) -> Mapping[str, str]:
        return {"profile_digest": PROFILE_DIGEST}

    def catalog_metadata(self) -> CatalogMetadata:
        from ._components import catalog_metadata

        return catalog_metadata()

    def holdout_handler(self) -> HoldoutHandler:
        from ._holdout import FormationHoldoutHandler

        return FormationHoldoutHandler(self)

    def decision_schema(self) -> Mapping[str, Any]:
        from ._decision_schema import decision_schema

        return decision_schema()

    def conformance_samples(self) -> Sequence[ConformanceSample]:
        try:
            folder = files("evidenced_fixtures") / "formation"
            pairs = {
                name: (
                    (folder / f"{name}.subject.json").read_bytes(),
                    (folder / f"{name}.certificate.json").read_bytes(),
                )
                for name in ("compose", "tampered", "unsupported-profile")
            }
        except (ModuleNotFoundError, OSError):  # an installation without the example pairs
            return ()
        return (
            ConformanceSample("compose", pairs["compose"], MechanismOutcome.PASS),
            ConformanceSample("tampered", pairs["tampered"], MechanismOutcome.FAIL),
            ConformanceSample(
                "unsupported-profile", pairs["unsupported-profile"], MechanismOutcome.UNKNOWN
            ),
        )


PROVIDER: Final = FormationProvider()
