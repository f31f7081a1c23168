"""The session adapter ``DescriptorAuthorizationMechanism`` (evidence pair: descriptor, payload).

Contract. The caller pins, in the binding's ``parameters`` (exactly these four keys), the
expected ``descriptor_identity`` and ``payload_reference`` (64 lowercase hex, CanonFS), the
requested ``operation`` and the ``authorization_policy`` (the host configuration digest, see
``_authorization``). None of them is ever taken from the descriptor being validated, and the
descriptor has no permission field. ``evaluate`` never raises and never reads caller files.

Every decision has ``details`` = its reason code (``""`` for PASS) and observations with exactly:
``status`` (``CHECKED``/``INVALID``/``UNKNOWN``), ``reason_codes`` (``[code]`` or ``[]``),
``failed_stage``, ``stage_order``, one report per stage (``storage_report``,
``descriptor_report``, ``discovery``, ``authorization_report``, ``provider_report``; ``null`` for
a stage not reached), ``catalog_digest``, ``residual_obligations`` (fixed list),
``trust_roots_meaning`` and ``claim_scope``. Every observation is a value of the network
canonical codec.

Stages, in order; the first failure decides. FAIL = a refuted binding, descriptor, capability,
payload or authorization; UNKNOWN = unsupported shapes, exhausted limits, deferred decisions.

binding (all UNKNOWN unless noted):
 1. binding not exactly ``BoundProposition`` → ``DESCRIPTOR_BINDING_UNSUPPORTED``
 2. ``mechanism_id`` not this id, or ``mechanism_digest`` not a strict ``sha256:`` digest equal
    to this source identity → ``DESCRIPTOR_IMPLEMENTATION_UNSUPPORTED``
 3. ``predicate`` not the mechanism id or ``expected`` not exactly ``"AUTHORIZED_AND_OBSERVED"``
    → ``DESCRIPTOR_PREDICATE_UNSUPPORTED``
 4. ``parameters`` not a dict of exactly the four keys with string values, the two references
    64 lowercase hex and the policy a strict digest → ``DESCRIPTOR_PARAMETERS_UNSUPPORTED``
    (validated on a copy). The requested operation may be any string: one the compiled catalog
    does not offer (``inspect`` for ``t81vm``, ``run,inspect``, ``*``) is a refuted capability,
    FAIL ``DISCOVERY_OPERATION_NOT_OFFERED`` at step 19, not an unsupported binding shape.
 5. ``authorization_policy`` is not this host's configuration digest
    → ``DESCRIPTOR_AUTHORIZATION_POLICY_UNSUPPORTED``
 6. ``trust_roots`` not exactly ``sorted({authorization_policy, CATALOG_DIGEST})``
    → ``DESCRIPTOR_ROOTS_UNSUPPORTED``
 7. ``bounds`` not ``EvidenceBounds(2, n)`` with exact ints, ``0 <= n <= 2 * max_item_bytes``
    → ``DESCRIPTOR_BOUNDS_UNSUPPORTED``
 8. ``evidence_refs`` not two distinct strict digests, or ``subject_id`` not a strict digest
    → ``DESCRIPTOR_REFERENCES_UNSUPPORTED``
 9. ``subject_id != evidence_refs[0]`` → FAIL ``DESCRIPTOR_SUBJECT_BINDING_INVALID``
storage (intake under the storage policy, before any descriptor preflight):
 10. evidence not a tuple/list of two items → ``DESCRIPTOR_EVIDENCE_UNAVAILABLE``
 11. an item not exact ``bytes`` → FAIL ``DESCRIPTOR_EVIDENCE_TYPE_INVALID``
 12. an item above ``max_item_bytes`` or the pair above the bound
     → ``DESCRIPTOR_STORAGE_LIMIT_EXCEEDED``
 13. ``sha256`` of the pair differs from ``evidence_refs``
     → FAIL ``DESCRIPTOR_EVIDENCE_BINDING_INVALID`` (admitted bytes may still carry
     invalid metadata)
descriptor (preflight):
 14. CanonFS identity of the descriptor bytes ≠ pinned ``descriptor_identity``
     → FAIL ``DESCRIPTOR_IDENTITY_MISMATCH``
 15. CanonFS hash of the payload bytes ≠ pinned ``payload_reference``
     → FAIL ``DESCRIPTOR_PAYLOAD_HASH_MISMATCH``
 16. strict decoding (``_codec``): its code; FAIL, or UNKNOWN for unsupported versions/limits
 17. declared payload reference ≠ pinned ``payload_reference``
     → FAIL ``DESCRIPTOR_PAYLOAD_REFERENCE_MISMATCH``
discovery (validated operation discovery in the compiled catalog):
 18. the declared provider's adapter; its representation checked by equality with the adapter's
     known valid fixture (reference and bytes) → FAIL ``DISCOVERY_REPRESENTATION_MISMATCH``
 19. the requested operation not in the adapter's compiled singleton set
     → FAIL ``DISCOVERY_OPERATION_NOT_OFFERED``
authorization: ``AuthorizationConfig.authorize``, exactly one path per provider: Path B (a
 separate Axion evaluation with ``final_authorization=true``) for ``t81vm``, Path C (the exact
 local allowlist, instead of Axion) for ``native-weights``: DENIED → FAIL with its code,
 UNKNOWN → UNKNOWN.
provider (only now; on the admitted bytes, never the caller's source):
 ``t81vm``: decode TISC, run the VM under the host's Axion engine (instruction-level checks)
 with the step limit: ``SecurityFault`` → FAIL ``PROVIDER_SECURITY_FAULT``; any other trap →
 FAIL ``PROVIDER_TRAP``; step limit → UNKNOWN ``PROVIDER_STEP_LIMIT_EXHAUSTED``.
 ``native-weights``: ``inspect_weights`` (private 0600 snapshot, real ``safetensors``): its
 ``WEIGHTS_*`` code, FAIL or UNKNOWN as it reports.
 Then the observation must equal the fixture's intended semantics from the compiled catalog
 → else FAIL ``PROVIDER_SEMANTICS_MISMATCH``.
Any unexpected exception after step 13 → UNKNOWN ``DESCRIPTOR_EXECUTION_UNKNOWN``.
PASS (status ``CHECKED``) only when every stage holds.

The mechanism digest is this package's own source identity (:data:`MECHANISM_DIGEST`): ``H`` of
the compiled catalog digest and the ``sha256`` of each implementation source, in a fixed order.
"""

from __future__ import annotations

import copy
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from mechanism.canonical import MAX_CANONICAL_INT, digest_bytes, is_digest
from session import (
    BoundProposition,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
    PairPrecheck,
    PairState,
    PrecheckFailed,
    SourceIdentity,
    lower_only,
)
from session import precheck as _steps

from ._authorization import AuthorizationConfig, HostText
from ._canonfs import canonfs_hash, is_canonfs_ref
from ._catalog import CATALOG, CATALOG_BY_PROVIDER, CATALOG_DIGEST, ProviderAdapter
from ._codec import (
    DESCRIPTOR_REASON_CODES,
    MAX_DESCRIPTOR_BYTES,
    DescriptorError,
    DescriptorFields,
    decode_descriptor,
    encode_descriptor,
)
from ._defaults import DEFAULT_ALLOWLIST, DEFAULT_POLICY
from ._tisc import TiscError, decode_program
from ._vm import DEFAULT_MAX_STEPS, Trap, run_program
from ._weights import MAX_WEIGHTS_BYTES, WEIGHTS_REASON_CODES, inspect_weights

__all__ = [
    "CLAIM_SCOPE",
    "DECISION_REASON_CODES",
    "EXPECTED",
    "MAX_ITEM_BYTES",
    "MECHANISM_DIGEST",
    "MECHANISM_ID",
    "PARAMETER_KEYS",
    "RESIDUAL_OBLIGATIONS",
    "STAGE_ORDER",
    "DescriptorAuthorizationMechanism",
    "default_mechanism",
    "descriptor_binding",
]

MECHANISM_ID: Final = "t81.experiment_descriptor.authorized.0.1"
EXPECTED: Final = "AUTHORIZED_AND_OBSERVED"
PARAMETER_KEYS: Final = (
    "authorization_policy",
    "descriptor_identity",
    "operation",
    "payload_reference",
)
MAX_ITEM_BYTES: Final = MAX_WEIGHTS_BYTES
STAGE_ORDER: Final = ("binding", "storage", "descriptor", "discovery", "authorization", "provider")
CLAIM_SCOPE: Final = "EXACT_FIXTURE_DESCRIPTOR_AUTHORIZATION_ONLY"
TRUST_ROOTS_MEANING: Final = "DECLARED_ASSUMPTIONS_ONLY"
RESIDUAL_OBLIGATIONS: Final = (
    "COMPILED_CATALOG_DESCRIBES_THE_TWO_PROVIDERS",
    "KNOWN_FIXTURES_HAVE_INTENDED_SEMANTICS",
    "CALLER_EXPECTED_REFERENCES_ARE_AUTHENTIC",
    "HOST_ENFORCES_FINAL_AUTHORIZATION",
    "NO_PROVIDER_SIGNATURES_OR_AUTHENTICATED_DESCRIPTORS",
    "NO_INFERRED_LOGICAL_IDENTITY",
    "NO_GENERAL_FORMAT_VALIDATION_OR_SANDBOX_CLAIM",
    "CALLER_AND_PROVIDER_SHARE_ONE_TRUSTED_PROCESS",
    "HASH_COLLISION_RESISTANCE_ASSUMED",
)

BINDING_REASON_CODES: Final = (
    "DESCRIPTOR_BINDING_UNSUPPORTED",
    "DESCRIPTOR_IMPLEMENTATION_UNSUPPORTED",
    "DESCRIPTOR_PREDICATE_UNSUPPORTED",
    "DESCRIPTOR_PARAMETERS_UNSUPPORTED",
    "DESCRIPTOR_AUTHORIZATION_POLICY_UNSUPPORTED",
    "DESCRIPTOR_ROOTS_UNSUPPORTED",
    "DESCRIPTOR_BOUNDS_UNSUPPORTED",
    "DESCRIPTOR_REFERENCES_UNSUPPORTED",
    "DESCRIPTOR_SUBJECT_BINDING_INVALID",
)
STORAGE_REASON_CODES: Final = (
    "DESCRIPTOR_EVIDENCE_UNAVAILABLE",
    "DESCRIPTOR_EVIDENCE_TYPE_INVALID",
    "DESCRIPTOR_STORAGE_LIMIT_EXCEEDED",
    "DESCRIPTOR_EVIDENCE_BINDING_INVALID",
)
PIN_REASON_CODES: Final = (
    "DESCRIPTOR_IDENTITY_MISMATCH",
    "DESCRIPTOR_PAYLOAD_HASH_MISMATCH",
    "DESCRIPTOR_PAYLOAD_REFERENCE_MISMATCH",
)
DISCOVERY_REASON_CODES: Final = (
    "DISCOVERY_REPRESENTATION_MISMATCH",
    "DISCOVERY_OPERATION_NOT_OFFERED",
)
AUTHORIZATION_REASON_CODES: Final = (
    "AUTHORIZATION_POLICY_INVALID",
    "AUTHORIZATION_ALLOWLIST_INVALID",
    "AUTHORIZATION_NOT_ALLOWLISTED",
    "AUTHORIZATION_AXION_DENIED",
    "AUTHORIZATION_AXION_DEFERRED",
)
PROVIDER_REASON_CODES: Final = (
    "PROVIDER_PAYLOAD_UNDECODABLE",
    "PROVIDER_SECURITY_FAULT",
    "PROVIDER_TRAP",
    "PROVIDER_STEP_LIMIT_EXHAUSTED",
    "PROVIDER_SEMANTICS_MISMATCH",
    *WEIGHTS_REASON_CODES,
)
DECISION_REASON_CODES: Final = (
    *BINDING_REASON_CODES,
    *STORAGE_REASON_CODES,
    *PIN_REASON_CODES,
    *DESCRIPTOR_REASON_CODES,
    *DISCOVERY_REASON_CODES,
    *AUTHORIZATION_REASON_CODES,
    *PROVIDER_REASON_CODES,
    "DESCRIPTOR_EXECUTION_UNKNOWN",
)

_SOURCE_FILES: Final = (
    "_mechanism.py",
    "_codec.py",
    "_catalog.py",
    "_canonfs.py",
    "_tisc.py",
    "_vm.py",
    "_axion.py",
    "_authorization.py",
    "_weights.py",
    "../canonical.py",
)
_HERE: Final = Path(__file__).resolve().parent
_IDENTITY: Final = SourceIdentity.read(
    "t81.descriptor-mechanism-source-identity.v1",
    ((name.removeprefix("../"), _HERE / name) for name in _SOURCE_FILES),
    {"catalog_digest": CATALOG_DIGEST},
)
MECHANISM_DIGEST: Final = _IDENTITY.digest

# Pre-check steps 1–13 that precede the descriptor preflight; 10–13 are storage admission.
_STORAGE_STEPS: Final = frozenset({"evidence", "evidence_type", "evidence_size", "rehash"})


class _Stop(Exception):
    """Internal: a stage decided; carries the outcome and reason code."""

    def __init__(self, outcome: MechanismOutcome, code: str) -> None:
        super().__init__(code)
        self.outcome = outcome
        self.code = code


def _unknown(code: str) -> _Stop:
    return _Stop(MechanismOutcome.UNKNOWN, code)


def _fail(code: str) -> _Stop:
    return _Stop(MechanismOutcome.FAIL, code)


def _canonical_report(value: Any) -> Any:
    """A copy of a stage report that is a network-canonical value, whatever it quotes.

    Reports may quote host or caller text (a policy's ``require-*`` needle in a VM trap reason,
    an allowlist's duplicate key, a library message). Such a string that is not NFC or holds a
    lone surrogate is replaced by its ASCII escape (``ascii(text)[1:-1]``), and an integer outside
    ``0 … 2**53 − 1`` by its decimal string, so that the decision can always be encoded (the CLI
    and the daemon print it). Reports are built here with a small fixed depth.
    """
    kind = type(value)
    if kind is dict:
        return {key: _canonical_report(member) for key, member in value.items()}
    if kind is list or kind is tuple:
        return [_canonical_report(member) for member in value]
    if kind is str:
        try:
            value.encode("utf-8")
            if unicodedata.is_normalized("NFC", value):
                return value
        except UnicodeEncodeError:
            pass
        return ascii(value)[1:-1]
    if kind is int and not 0 <= value <= MAX_CANONICAL_INT:
        return str(value)
    return value


def _pins_valid(parameters: dict[Any, Any]) -> bool:
    """Step 4 on the parameter copy: string keys and values, the two references 64 lowercase
    hex (CanonFS) and the policy a strict digest."""
    return all(type(key) is str and type(value) is str for key, value in parameters.items()) and (
        is_canonfs_ref(parameters["descriptor_identity"])
        and is_canonfs_ref(parameters["payload_reference"])
        and is_digest(parameters["authorization_policy"])
    )


class DescriptorAuthorizationMechanism:
    """Evidence pair (descriptor bytes, payload bytes) → PASS / FAIL / UNKNOWN with stage reports.

    ``policy`` (Axion text) and ``allowlist`` (JSON) are the host's authorization configuration
    (text, bytes, or a path object naming the file, read once here);
    ``max_descriptor_bytes``, ``max_item_bytes`` and ``max_steps`` may only be lowered.
    """

    mechanism_id: str = MECHANISM_ID
    mechanism_digest: str = MECHANISM_DIGEST

    def __init__(
        self,
        policy: HostText = DEFAULT_POLICY,
        allowlist: HostText = DEFAULT_ALLOWLIST,
        *,
        max_descriptor_bytes: int = MAX_DESCRIPTOR_BYTES,
        max_item_bytes: int = MAX_ITEM_BYTES,
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> None:
        self.max_descriptor_bytes = lower_only(
            "max_descriptor_bytes", max_descriptor_bytes, MAX_DESCRIPTOR_BYTES
        )
        self.max_item_bytes = lower_only("max_item_bytes", max_item_bytes, MAX_ITEM_BYTES)
        self.max_steps = lower_only("max_steps", max_steps, DEFAULT_MAX_STEPS)
        self.authorization = AuthorizationConfig(policy, allowlist)
        self.mechanism_id = MECHANISM_ID
        self.mechanism_digest = MECHANISM_DIGEST
        self.precheck = self._precheck()

    def _precheck(self) -> PairPrecheck:
        """Steps 1–13 of the module contract, in order (:mod:`session._precheck`). The
        descriptor compares the id and predicate by equality and takes any tuple/list of two
        items, as its reference does."""
        policy = self.authorization.digest
        return PairPrecheck(
            (
                _steps.binding_type("DESCRIPTOR_BINDING_UNSUPPORTED"),
                _steps.implementation(
                    "DESCRIPTOR_IMPLEMENTATION_UNSUPPORTED",
                    MECHANISM_ID,
                    MECHANISM_DIGEST,
                    exact_types=False,
                ),
                _steps.predicate(
                    "DESCRIPTOR_PREDICATE_UNSUPPORTED", MECHANISM_ID, EXPECTED, exact_types=False
                ),
                _steps.parameters("DESCRIPTOR_PARAMETERS_UNSUPPORTED", PARAMETER_KEYS, _pins_valid),
                _steps.step(
                    "authorization_policy",
                    "DESCRIPTOR_AUTHORIZATION_POLICY_UNSUPPORTED",
                    lambda state: bool(state.parameters["authorization_policy"] == policy),
                ),
                _steps.trust_roots(
                    "DESCRIPTOR_ROOTS_UNSUPPORTED",
                    lambda copied: tuple(sorted({copied["authorization_policy"], CATALOG_DIGEST})),
                ),
                _steps.pair_bounds("DESCRIPTOR_BOUNDS_UNSUPPORTED", self.max_evidence_bytes),
                _steps.pair_references("DESCRIPTOR_REFERENCES_UNSUPPORTED"),
                _steps.subject_is_first("DESCRIPTOR_SUBJECT_BINDING_INVALID"),
                _steps.evidence_pair("DESCRIPTOR_EVIDENCE_UNAVAILABLE", exact_container=False),
                _steps.evidence_bytes("DESCRIPTOR_EVIDENCE_TYPE_INVALID"),
                _steps.evidence_size("DESCRIPTOR_STORAGE_LIMIT_EXCEEDED", self.max_item_bytes),
                _steps.evidence_rehash("DESCRIPTOR_EVIDENCE_BINDING_INVALID"),
            )
        )

    @property
    def authorization_policy_digest(self) -> str:
        """The digest a caller pins as ``parameters["authorization_policy"]``."""
        return self.authorization.digest

    @property
    def max_evidence_bytes(self) -> int:
        return 2 * self.max_item_bytes

    @property
    def accepted_bounds(self) -> EvidenceBounds:
        """The most evidence one evaluation accepts (read by hosts to clamp session bounds)."""
        return EvidenceBounds(2, self.max_evidence_bytes)

    # ------------------------------------------------------------------------------------------
    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        reports: dict[str, Any] = {
            "storage_report": None,
            "descriptor_report": None,
            "discovery": None,
            "authorization_report": None,
            "provider_report": None,
        }
        stage = ["binding"]
        try:
            parameters, descriptor, payload = self._admit(binding, evidence, stage, reports)
            try:
                stage[0] = "descriptor"
                fields = self._descriptor_stage(descriptor, payload, parameters, reports)
                stage[0] = "discovery"
                adapter = self._discovery_stage(fields, payload, parameters, reports)
                stage[0] = "authorization"
                self._authorization_stage(adapter, parameters, reports)
                stage[0] = "provider"
                self._provider_stage(adapter, payload, reports)
            except _Stop:
                raise
            except Exception:
                raise _unknown("DESCRIPTOR_EXECUTION_UNKNOWN") from None
        except _Stop as stop:
            return self._decision(stop.outcome, stop.code, stage[0], reports)
        return self._decision(MechanismOutcome.PASS, None, None, reports)

    @staticmethod
    def _decision(
        outcome: MechanismOutcome, code: str | None, stage: str | None, reports: dict[str, Any]
    ) -> MechanismDecision:
        status = {
            MechanismOutcome.PASS: "CHECKED",
            MechanismOutcome.FAIL: "INVALID",
            MechanismOutcome.UNKNOWN: "UNKNOWN",
        }[outcome]
        observations = {
            "status": status,
            "reason_codes": [] if code is None else [code],
            "failed_stage": stage,
            "stage_order": list(STAGE_ORDER),
            **{name: _canonical_report(report) for name, report in reports.items()},
            "catalog_digest": CATALOG_DIGEST,
            "residual_obligations": list(RESIDUAL_OBLIGATIONS),
            "trust_roots_meaning": TRUST_ROOTS_MEANING,
            "claim_scope": CLAIM_SCOPE,
        }
        return MechanismDecision(outcome=outcome, details=code or "", observations=observations)

    # -- binding and storage ---------------------------------------------------------------------
    def _admit(
        self,
        binding: BoundProposition,
        evidence: Sequence[bytes],
        stage: list[str],
        reports: dict[str, Any],
    ) -> tuple[dict[str, str], bytes, bytes]:
        """Steps 1–13; a storage refusal (10–13) records the storage report. An exception in
        either stage is ``DESCRIPTOR_BINDING_UNSUPPORTED`` at the stage it happened in."""
        try:
            admitted = self.precheck.run(binding, evidence)
        except PrecheckFailed as failed:
            if failed.step in _STORAGE_STEPS:
                stage[0] = "storage"
            raise _unknown("DESCRIPTOR_BINDING_UNSUPPORTED") from None
        if not isinstance(admitted, PairState):
            if admitted.step in _STORAGE_STEPS:
                stage[0] = "storage"
                reports["storage_report"] = {"status": "REFUSED", "reason_codes": [admitted.code]}
            raise _Stop(admitted.outcome, admitted.code)
        stage[0] = "storage"
        descriptor, payload = admitted.items
        reports["storage_report"] = {
            "status": "ADMITTED",
            "reason_codes": [],
            "items": [
                {"role": "descriptor", "size": len(descriptor), "digest": binding.evidence_refs[0]},
                {"role": "payload", "size": len(payload), "digest": binding.evidence_refs[1]},
            ],
        }
        return admitted.parameters, descriptor, payload

    # -- descriptor ------------------------------------------------------------------------------
    def _descriptor_stage(
        self, descriptor: bytes, payload: bytes, parameters: dict[str, str], reports: dict[str, Any]
    ) -> DescriptorFields:
        identity = canonfs_hash(descriptor)
        observed_payload = canonfs_hash(payload)
        report: dict[str, Any] = {
            "status": "INVALID",
            "reason_codes": [],
            "identity": identity,
            "identity_matches_pin": identity == parameters["descriptor_identity"],
            "payload_reference_observed": observed_payload,
            "payload_matches_pin": observed_payload == parameters["payload_reference"],
            "fields": None,
            "declared_reference_matches_pin": None,
        }
        reports["descriptor_report"] = report

        def refuse(stop: _Stop, status: str = "INVALID") -> _Stop:
            report["status"] = status
            report["reason_codes"] = [stop.code]
            return stop

        if not report["identity_matches_pin"]:
            raise refuse(_fail("DESCRIPTOR_IDENTITY_MISMATCH"))
        if not report["payload_matches_pin"]:
            raise refuse(_fail("DESCRIPTOR_PAYLOAD_HASH_MISMATCH"))
        try:
            fields = decode_descriptor(descriptor, max_bytes=self.max_descriptor_bytes)
        except DescriptorError as error:
            if error.kind == "invalid":
                raise refuse(_fail(error.code)) from None
            raise refuse(_unknown(error.code), error.kind.upper()) from None
        report["fields"] = fields.to_dict()
        report["declared_reference_matches_pin"] = (
            fields.payload_reference == parameters["payload_reference"]
        )
        if not report["declared_reference_matches_pin"]:
            raise refuse(_fail("DESCRIPTOR_PAYLOAD_REFERENCE_MISMATCH"))
        report["status"] = "VALID"
        return fields

    # -- discovery -------------------------------------------------------------------------------
    @staticmethod
    def _discovery_stage(
        fields: DescriptorFields,
        payload: bytes,
        parameters: dict[str, str],
        reports: dict[str, Any],
    ) -> ProviderAdapter:
        adapter = CATALOG_BY_PROVIDER[fields.provider]
        requested = parameters["operation"]
        representation_holds = (
            fields.representation == adapter.representation
            and fields.payload_reference == adapter.fixture_reference
            and payload == adapter.fixture_bytes
        )
        report: dict[str, Any] = {
            "status": "DISCOVERED",
            "reason_codes": [],
            "catalog_digest": CATALOG_DIGEST,
            "provider": adapter.provider,
            "representation": adapter.representation,
            "operations": sorted(adapter.operations),
            "fixture_reference": adapter.fixture_reference,
            "representation_equals_fixture": representation_holds,
            "requested_operation": requested,
            "operation_offered": requested in adapter.operations,
        }
        reports["discovery"] = report
        if not representation_holds:
            report["status"] = "REFUSED"
            report["reason_codes"] = ["DISCOVERY_REPRESENTATION_MISMATCH"]
            raise _fail("DISCOVERY_REPRESENTATION_MISMATCH")
        if requested not in adapter.operations or requested != fields.operation:
            report["status"] = "REFUSED"
            report["reason_codes"] = ["DISCOVERY_OPERATION_NOT_OFFERED"]
            raise _fail("DISCOVERY_OPERATION_NOT_OFFERED")
        return adapter

    # -- authorization ---------------------------------------------------------------------------
    def _authorization_stage(
        self, adapter: ProviderAdapter, parameters: dict[str, str], reports: dict[str, Any]
    ) -> None:
        result = self.authorization.authorize(
            adapter.provider, parameters["operation"], adapter.fixture_reference
        )
        reports["authorization_report"] = result.to_dict()
        if result.status == "DENIED":
            assert result.reason_code is not None
            raise _fail(result.reason_code)
        if result.status != "AUTHORIZED":
            raise _unknown(result.reason_code or "AUTHORIZATION_AXION_DEFERRED")

    # -- provider --------------------------------------------------------------------------------
    def _provider_stage(
        self, adapter: ProviderAdapter, payload: bytes, reports: dict[str, Any]
    ) -> None:
        runner: Callable[[bytes, dict[str, Any]], Any] = (
            self._run_t81vm if adapter.provider == "t81vm" else self._run_weights
        )
        report: dict[str, Any] = {
            "provider": adapter.provider,
            "operation": sorted(adapter.operations)[0],
            "status": "OBSERVED",
            "reason_codes": [],
        }
        reports["provider_report"] = report
        observed = runner(payload, report)
        report["intended"] = copy.deepcopy(adapter.intended)
        report["matches_intended"] = observed == adapter.intended
        if not report["matches_intended"]:
            report["status"] = "INVALID"
            report["reason_codes"] = ["PROVIDER_SEMANTICS_MISMATCH"]
            raise _fail("PROVIDER_SEMANTICS_MISMATCH")

    def _run_t81vm(self, payload: bytes, report: dict[str, Any]) -> dict[str, Any]:
        try:
            program = decode_program(payload)
        except TiscError as error:
            report["status"] = "INVALID"
            report["reason_codes"] = [error.code]
            raise _fail("PROVIDER_PAYLOAD_UNDECODABLE") from None
        result = run_program(program, self.authorization.engine, max_steps=self.max_steps)
        report["policy_digest"] = self.authorization.record["axion_policy"]
        report["max_steps"] = self.max_steps
        report["vm"] = result.to_dict()
        if result.trap is Trap.SECURITY_FAULT:
            report["status"] = "INVALID"
            report["reason_codes"] = ["PROVIDER_SECURITY_FAULT"]
            raise _fail("PROVIDER_SECURITY_FAULT")
        if result.trap is not None:
            report["status"] = "INVALID"
            report["reason_codes"] = ["PROVIDER_TRAP"]
            raise _fail("PROVIDER_TRAP")
        if result.step_limit_exhausted:
            report["status"] = "UNKNOWN"
            report["reason_codes"] = ["PROVIDER_STEP_LIMIT_EXHAUSTED"]
            raise _unknown("PROVIDER_STEP_LIMIT_EXHAUSTED")
        return {
            "halted": result.halted,
            "trap": None,
            "trace": [[pc, name] for pc, name in result.trace],
            "registers": result.nonzero_registers(),
        }

    def _run_weights(self, payload: bytes, report: dict[str, Any]) -> dict[str, Any]:
        result = inspect_weights(payload, max_bytes=self.max_item_bytes)
        report["weights"] = result.to_dict()
        if result.status != "OBSERVED":
            assert result.reason_code is not None
            report["status"] = result.status
            report["reason_codes"] = [result.reason_code]
            if result.status == "UNKNOWN":
                raise _unknown(result.reason_code)
            raise _fail(result.reason_code)
        keys = ("name", "dtype", "shape", "data_hex", "values")
        return {
            "tensors": [
                {key: tensor[key] for key in keys if key in tensor} for tensor in result.tensors
            ]
        }


def default_mechanism() -> DescriptorAuthorizationMechanism:
    """The mechanism with the embedded default policy and two-entry allowlist."""
    return DescriptorAuthorizationMechanism()


def _catalog_operation(descriptor_bytes: bytes, payload_bytes: bytes) -> str:
    for adapter in CATALOG:
        if adapter.fixture_bytes == payload_bytes:
            return sorted(adapter.operations)[0]
    for adapter in CATALOG:
        if encode_descriptor(adapter.fixture_bytes) == descriptor_bytes:
            return sorted(adapter.operations)[0]
    raise DescriptorError(
        "DESCRIPTOR_PAYLOAD_NOT_ADMITTED",
        "neither the payload nor the descriptor is a compiled fixture's; pass operation explicitly",
    )


def descriptor_binding(
    descriptor_bytes: bytes,
    payload_bytes: bytes,
    *,
    operation: str | None = None,
    mechanism: DescriptorAuthorizationMechanism | None = None,
    mechanism_digest: str | None = None,
) -> BoundProposition:
    """The honest binding a caller would pin for this pair.

    ``operation=None`` takes the compiled catalog's operation for the payload's fixture; when the
    payload is no fixture (e.g. a payload changed after its genuine descriptor was made), the
    operation of the fixture whose *canonical descriptor* (compiled, :func:`encode_descriptor`)
    the descriptor bytes are exactly, so that such a pair is evaluated (and refused) rather than
    unbindable. Nothing is parsed out of the descriptor. If neither matches, ``DescriptorError``
    (``DESCRIPTOR_PAYLOAD_NOT_ADMITTED``): pass ``operation`` explicitly. Expected references are
    computed from the given bytes, never read from the descriptor.
    """
    if type(descriptor_bytes) is not bytes or type(payload_bytes) is not bytes:
        raise TypeError("descriptor and payload are exact bytes")
    host = mechanism if mechanism is not None else default_mechanism()
    if operation is None:
        operation = _catalog_operation(descriptor_bytes, payload_bytes)
    policy = host.authorization_policy_digest
    descriptor_ref = digest_bytes(descriptor_bytes)
    return BoundProposition(
        subject_id=descriptor_ref,
        predicate=MECHANISM_ID,
        expected=EXPECTED,
        mechanism_id=MECHANISM_ID,
        mechanism_digest=mechanism_digest
        if mechanism_digest is not None
        else host.mechanism_digest,
        evidence_refs=(descriptor_ref, digest_bytes(payload_bytes)),
        trust_roots=(policy, CATALOG_DIGEST),
        bounds=EvidenceBounds(2, host.max_evidence_bytes),
        parameters={
            "authorization_policy": policy,
            "descriptor_identity": canonfs_hash(descriptor_bytes),
            "operation": operation,
            "payload_reference": canonfs_hash(payload_bytes),
        },
    )
