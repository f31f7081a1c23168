"""The formation provider's holdout handler (:class:`session.HoldoutHandler`).

Rules (``docs/holdout.md`` has the instrument's long form):

* Nodes: ``artifact`` is the certificate, ``leaf`` the subject; ``evidence_refs`` holds
  (leaf, artifact). Both views are the records' parsed JSON.
* Rendering is the canonical bytes when the view is canonical; otherwise a deterministic
  non-canonical encoding (RFC 8785, then compact JSON) that admission refuses on its own terms.
* ``RESEAL`` recomputes the certificate's ``subject_digest`` from the leaf's bytes;
  ``RECOMPOSE_DAG`` rebuilds the certificate with the project's producer (None when it refuses).
* ``configure`` takes the lower-only ceilings ``max_nodes``, ``max_depth``, ``max_path_steps``
  (:func:`session.holdout_lower_only`) and answers the provider's mechanism and honest binding.
* Resolution: above the record bound → ``too-large``; not UTF-8 → ``invalid-utf8``; a record
  the wire refuses → the instrument's JSON classification; else None (the store decides).
* Identities: the content digest; for the certificate its cited subject digest and, from the
  baseline report's observation, ``type``, ``denotation_digest`` and ``formation_digest`` when
  they have their exact forms.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import rfc8785

from mechanism.canonical import CanonicalError, canonical_bytes, digest_bytes
from session import (
    BoundProposition,
    HoldoutStepError,
    VerificationMechanism,
    holdout_lower_only,
    splice_octets,
)

from ._checker import check_formation
from ._wire import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_PATH_STEPS,
    MAX_RECORD_BYTES,
    FormationError,
    FormationLimitError,
    admit_certificate,
    admit_subject,
)

if TYPE_CHECKING:
    from ._provider import FormationProvider

__all__ = ["FormationHoldoutHandler"]

_SHA256_REF: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")
_TYPE_FIELD: Final = re.compile(r"[A-Z][A-Z_]*\Z")
_CEILINGS: Final = {
    "max_nodes": MAX_NODES,
    "max_depth": MAX_DEPTH,
    "max_path_steps": MAX_PATH_STEPS,
}


def render_json_record(view: Any) -> bytes:
    """Canonical bytes when the value is canonical; otherwise RFC 8785, then compact JSON."""
    try:
        return canonical_bytes(view)
    except CanonicalError:
        pass
    try:
        return bytes(rfc8785.dumps(view))
    except rfc8785.CanonicalizationError:
        return json.dumps(view, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class FormationHoldoutHandler:
    """How the holdout instrument works with formation pairs (module rules)."""

    evidence_roles: tuple[str, str] = ("leaf", "artifact")
    option_names: frozenset[str] = frozenset(_CEILINGS)

    def __init__(self, provider: FormationProvider) -> None:
        self._provider = provider

    def artifact_view(self, data: bytes) -> Any:
        return json.loads(data)

    def leaf_view(self, data: bytes) -> Any:
        return json.loads(data)

    def render_artifact(self, view: Any) -> bytes:
        return render_json_record(view)

    def render_leaf(self, view: Any) -> bytes:
        return render_json_record(view)

    def reseal(self, artifact: Any, leaf_bytes: bytes) -> None:
        if isinstance(artifact, dict):
            artifact["subject_digest"] = digest_bytes(leaf_bytes)

    def recompose(self, leaf_bytes: bytes, pristine_artifact: bytes) -> bytes | None:
        from ._producer import produce_formation_certificate  # never by the checker

        try:
            return produce_formation_certificate(leaf_bytes)
        except Exception:  # the producer refusing this leaf is an observation, not a crash
            return None

    def configure(
        self, artifact: bytes, leaf: bytes, options: dict[str, Any]
    ) -> tuple[VerificationMechanism, BoundProposition]:
        provider = self._provider
        settings = provider.structure_options(holdout_lower_only(options, _CEILINGS))
        return provider.create(settings), provider.honest_binding((leaf, artifact), settings)

    def splice(self, data: bytes, role: str, name: str, value: str) -> bytes:
        if not data.startswith(b"{"):
            raise HoldoutStepError("wire-splice-impossible", "the record does not start with '{'")
        return b'{"' + splice_octets(name) + b'":"' + splice_octets(value) + b'",' + data[1:]

    def resolve_checks(
        self, data: bytes, role: str, classify_json: Callable[[bytes], str]
    ) -> str | None:
        if len(data) > MAX_RECORD_BYTES:
            return "too-large"
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "invalid-utf8"
        admit = admit_certificate if role == "artifact" else admit_subject
        try:
            admit(data)
        except FormationLimitError:
            return "too-large"
        except FormationError:
            return classify_json(data)
        return None

    def baseline_report(self, artifact: bytes, leaf: bytes) -> Any:
        try:
            return check_formation(leaf, artifact)
        except Exception:  # a pure check that cannot run simply yields no identities
            return None

    def identities(self, role: str, data: bytes, report: Any) -> dict[str, Any]:
        record: dict[str, Any] = {"content_digest": digest_bytes(data)}
        if role != "artifact":
            return record
        try:
            cited = json.loads(data).get("subject_digest")
        except (ValueError, AttributeError):
            cited = None
        if isinstance(cited, str) and _SHA256_REF.match(cited):
            record["cited_digest"] = cited
        observation = report.get("observation") if isinstance(report, dict) else None
        if isinstance(observation, dict):
            kind = observation.get("type")
            if isinstance(kind, str) and _TYPE_FIELD.match(kind):
                record["type"] = kind
            for name in ("denotation_digest", "formation_digest"):
                value = observation.get(name)
                if isinstance(value, str) and _SHA256_REF.match(value):
                    record[name] = value
        return record
