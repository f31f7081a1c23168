"""The descriptor provider's holdout handler (:class:`session.HoldoutHandler`).

Rules (``docs/holdout.md`` has the instrument's long form):

* Nodes: ``artifact`` is the descriptor, ``leaf`` the payload; ``evidence_refs`` holds
  (artifact, leaf). The descriptor's view is ``{schema, payload_reference, representation,
  provider, operations: [...], profile}`` (``operations`` is line 5 split on ``,``); the
  payload's is ``{"hex": ...}``. A pristine descriptor that is not six lines has no view.
* ``RESEAL`` recomputes the descriptor's payload reference (CanonFS) from the payload's bytes;
  ``RECOMPOSE_DAG`` encodes the compiled fixture's descriptor, or — for a payload that is no
  fixture — the pristine descriptor around the payload's own reference (what a forger writes).
* ``configure``: a caller may not replace the host's authorization configuration (``policy`` or
  ``allowlist`` → weakened); ``max_descriptor_bytes``, ``max_item_bytes``, ``max_steps`` are
  lower-only; ``operation`` and ``authorization_policy`` must be strings (else unsupported).
  The mechanism is the provider's; the binding is the honest one for the requested operation,
  with ``authorization_policy`` (when given) pinned in its parameters and trust roots.
* Resolution: a payload above the item bound → ``too-large``; a descriptor above its bound →
  ``too-large``, not UTF-8 → ``invalid-utf8``, refused by strict decoding → ``non-canonical-wire``
  when it has more than six lines (a positional record's duplicate field), else ``malformed``.
* Identities: the CanonFS content digest; for the descriptor its cited payload reference and the
  decoded provider, representation and operation when printable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs

from session import (
    HOLDOUT_OPTIONS_UNSUPPORTED,
    HOLDOUT_OPTIONS_WEAKENED,
    BoundProposition,
    EvidenceBindingError,
    HoldoutOptionsRefused,
    HoldoutStepError,
    VerificationMechanism,
    holdout_lower_only,
    splice_octets,
)

from ._canonfs import canonfs_hash
from ._catalog import CATALOG_DIGEST
from ._codec import MAX_DESCRIPTOR_BYTES, DescriptorError, decode_descriptor, encode_descriptor
from ._mechanism import MAX_ITEM_BYTES, descriptor_binding
from ._vm import DEFAULT_MAX_STEPS

if TYPE_CHECKING:
    from ._provider import DescriptorProvider

__all__ = ["DescriptorHoldoutHandler"]

_FIELDS: Final = (
    "schema",
    "payload_reference",
    "representation",
    "provider",
    "operations",
    "profile",
)
_HEX64: Final = re.compile(r"[0-9a-f]{64}\Z")
_PRINTABLE: Final = re.compile(r"[!-~]{1,128}\Z")
_CEILINGS: Final = {
    "max_descriptor_bytes": MAX_DESCRIPTOR_BYTES,
    "max_item_bytes": MAX_ITEM_BYTES,
    "max_steps": DEFAULT_MAX_STEPS,
}


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class DescriptorHoldoutHandler:
    """How the holdout instrument works with descriptor/payload pairs (module rules)."""

    evidence_roles: tuple[str, str] = ("artifact", "leaf")
    option_names: frozenset[str] = frozenset(
        {*_CEILINGS, "operation", "authorization_policy", "policy", "allowlist"}
    )

    def __init__(self, provider: DescriptorProvider) -> None:
        self._provider = provider

    def artifact_view(self, data: bytes) -> Any:
        lines = data.decode("ascii").split("\n")
        if len(lines) != 7 or lines[-1] != "":
            raise HoldoutStepError("view-impossible", "the pristine descriptor is not six lines")
        view: dict[str, Any] = dict(zip(_FIELDS, lines[:6], strict=True))
        view["operations"] = view["operations"].split(",")
        return view

    def leaf_view(self, data: bytes) -> Any:
        return {"hex": data.hex()}

    def render_artifact(self, view: Any) -> bytes:
        if not isinstance(view, dict):
            raise HoldoutStepError("render-impossible", "the descriptor view is not an object")

        def line(value: Any) -> str:
            if isinstance(value, str):
                return value
            if isinstance(value, list):
                return ",".join(item if isinstance(item, str) else _compact(item) for item in value)
            return _compact(value)

        return "".join(line(value) + "\n" for value in view.values()).encode("utf-8")

    def render_leaf(self, view: Any) -> bytes:
        if not isinstance(view, dict) or set(view) != {"hex"} or not isinstance(view["hex"], str):
            raise HoldoutStepError("render-impossible", "the payload view must be exactly {hex}")
        try:
            return bytes.fromhex(view["hex"])
        except ValueError:
            raise HoldoutStepError("render-impossible", "the payload view is not hex") from None

    def reseal(self, artifact: Any, leaf_bytes: bytes) -> None:
        if isinstance(artifact, dict):
            artifact["payload_reference"] = canonfs_hash(leaf_bytes)

    def recompose(self, leaf_bytes: bytes, pristine_artifact: bytes) -> bytes | None:
        try:
            return encode_descriptor(leaf_bytes)
        except DescriptorError:
            # Not a compiled fixture: the fresh descriptor a forger writes for this payload,
            # the pristine five other fields around the payload's own reference.
            view = self.artifact_view(pristine_artifact)
            self.reseal(view, leaf_bytes)
            return self.render_artifact(view)

    def configure(
        self, artifact: bytes, leaf: bytes, options: dict[str, Any]
    ) -> tuple[VerificationMechanism, BoundProposition]:
        if "policy" in options or "allowlist" in options:
            # A caller may not replace the host's authorization configuration.
            raise HoldoutOptionsRefused(HOLDOUT_OPTIONS_WEAKENED)
        lowered = holdout_lower_only(options, _CEILINGS)
        for name in ("operation", "authorization_policy"):
            if name in options and not isinstance(options[name], str):
                raise HoldoutOptionsRefused(HOLDOUT_OPTIONS_UNSUPPORTED)
        provider = self._provider
        mechanism = provider.create(provider.structure_options(lowered))
        try:
            binding = descriptor_binding(
                artifact, leaf, operation=options.get("operation"), mechanism=mechanism
            )
        except DescriptorError as error:
            raise HoldoutStepError("binding-impossible", str(error)) from None
        if "authorization_policy" in options:
            pinned = options["authorization_policy"]
            parameters = dict(binding.parameters)
            parameters["authorization_policy"] = pinned
            roots = sorted({pinned, CATALOG_DIGEST})
            try:
                binding = attrs.evolve(binding, parameters=parameters, trust_roots=tuple(roots))
            except EvidenceBindingError:
                raise HoldoutOptionsRefused(HOLDOUT_OPTIONS_UNSUPPORTED) from None
        return mechanism, binding

    def splice(self, data: bytes, role: str, name: str, value: str) -> bytes:
        return splice_octets(value) + b"\n" + data

    def resolve_checks(
        self, data: bytes, role: str, classify_json: Callable[[bytes], str]
    ) -> str | None:
        if role == "leaf":
            return "too-large" if len(data) > MAX_ITEM_BYTES else None
        if len(data) > MAX_DESCRIPTOR_BYTES:
            return "too-large"
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "invalid-utf8"
        try:
            decode_descriptor(data)
        except DescriptorError:
            # A positional record has no member names: a line beyond the sixth is a
            # duplicate field, which normalises to non-canonical-wire.
            return "non-canonical-wire" if data.count(b"\n") > 6 else "malformed"
        return None

    def baseline_report(self, artifact: bytes, leaf: bytes) -> Any:
        return None

    def identities(self, role: str, data: bytes, report: Any) -> dict[str, Any]:
        record: dict[str, Any] = {"content_digest": canonfs_hash(data)}
        if role != "artifact":
            return record
        lines = data.split(b"\n")
        if len(lines) >= 2:
            cited = lines[1].decode("ascii", errors="replace")
            if _HEX64.match(cited):
                record["cited_digest"] = cited
        try:
            fields = decode_descriptor(data)
        except DescriptorError:
            return record
        for name, value in (
            ("provider", fields.provider),
            ("representation", fields.representation),
            ("operation", fields.operation),
        ):
            if _PRINTABLE.match(value):
                record[name] = value
        return record
