"""The holdout adapter: applies challenges to this project's artifacts and emits observations.

It reads a challenge set, resolves each fixture by root in the public corpus, applies the
recipe, evaluates through a real :class:`session.VerificationSession` with the real mechanism
registered, and writes ONE observation document. It never evaluates predicates.

Rules (``docs/holdout.md`` has the long form):

* The whole set is validated against this project's recipe schema first; an unknown operator
  (or any schema failure) refuses the whole emission (:class:`EmissionRefused`).
* Fixture lookup is by root only. A root not in the corpus, stored bytes that do not re-derive
  to their root, or a label (``artifact``/``leaf`` = case name) that disagrees with what the
  root is filed under: that challenge gets NO observation and is reported, never fixed.
* A case has two nodes: ``artifact`` (formation certificate / T81 descriptor) and ``leaf``
  (formation subject / T81 payload). Working views: formation records as parsed JSON; the
  descriptor as ``{schema, payload_reference, representation, provider, operations: [...],
  profile}`` (``operations`` is line 5 split on ``,``); the payload as ``{"hex": ...}``.
* The caller's pins are the honest binding for the *pristine* pair (``formation_binding`` /
  ``descriptor_binding``). The submission is the working bytes plus ``subject_id`` /
  ``evidence_refs``; those references stay the pristine ones (stale after a mutation) until a
  ``RESEAL`` recomputes them. Only the working bytes are served to the evidence store.
* ``RESEAL`` recomputes the artifact's citation of the leaf (``certificate.subject_digest`` /
  the payload-reference line) and the submission references, nothing else. An identity whose
  input is missing (no working artifact after ``RECOMPOSE_DAG``, a payload view that is not
  bytes) is left as it stands and the step continues; RESEAL never fails a challenge.
* ``CHECK_WITH_OPTIONS`` may only tighten: a looser or replaced setting yields the refusal
  code ``CHECK_OPTIONS_WEAKENED`` and an unknown or ill-typed one ``CHECK_OPTIONS_UNSUPPORTED``
  (verdict ``UNKNOWN``, nothing is evaluated). The last one wins; it is not applied to the
  evaluation ``RECOMPOSE_DAG`` runs. Its instrument option ``pins`` (``"pristine"``, the
  default, or ``"working"``) says whose bytes the caller's pins come from: with ``"working"``
  the caller is honest about the mutation (it pins, through the handler's ``configure``, and
  references exactly the working bytes it submits), so what the mechanism's own parsing and
  codec refuse is observed instead of the pins' mismatch.
* ``WIRE_PREPEND_DUPLICATE_MEMBER`` splices the pristine fixture node's bytes and serves them
  under the unchanged root; :func:`resolve_octets` gives the normalised outcome.
* ``RECOMPOSE_DAG`` rebuilds the artifact from the working leaf with the project's producer,
  evaluates it at once with default options and clears the working artifact.
* A step that cannot be applied (a path that does not exist, a view that cannot be rendered)
  leaves that challenge without an observation and is reported.
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from mechanism.canonical import CanonicalError, canonical_bytes, digest_bytes
from session import (
    HOLDOUT_OPTIONS_UNSUPPORTED,
    HOLDOUT_OPTIONS_WEAKENED,
    BoundProposition,
    EvidenceBindingError,
    EvidenceBounds,
    EvidenceStore,
    HoldoutHandler,
    HoldoutOptionsRefused,
    HoldoutStepError,
    VerificationSession,
    holdout_lower_only,
    provider_entries,
)
from session.canon import CallerError

from ._commitment import corpus_dir, project_schemas, release_id
from ._corpus import Corpus, CorpusError, root_of
from ._jcs import js_string
from ._reader import StrictReadError, check_json_value, read_json
from ._scorer import Schemas, validate_challenge

OBSERVATION_TYPE: Final = "EVIDENCED-HOLDOUT-OBSERVATION-v1"
DEFAULT_IMPLEMENTATION: Final = "evidenced-python"
RECIPE_OPS: Final = (
    "IDENTITY",
    "SET",
    "REVERSE",
    "RESEAL",
    "CHECK_WITH_OPTIONS",
    "WIRE_PREPEND_DUPLICATE_MEMBER",
    "RECOMPOSE_DAG",
)
RESOLVE_OUTCOMES: Final = (
    "ok",
    "bad-root-syntax",
    "unresolvable",
    "too-large",
    "invalid-utf8",
    "malformed",
    "non-canonical-wire",
    "root-mismatch",
)
OPTIONS_WEAKENED: Final = HOLDOUT_OPTIONS_WEAKENED
OPTIONS_UNSUPPORTED: Final = HOLDOUT_OPTIONS_UNSUPPORTED
SUBMISSION_INVALID: Final = "SUBMISSION_BINDING_INVALID"

# Session-level refusals carry only a message; they are observed as these codes.
SESSION_CODES: Final = (
    ("bound mechanism is not registered", "SESSION_MECHANISM_UNREGISTERED"),
    ("registered mechanism digest does not match", "SESSION_MECHANISM_DIGEST_MISMATCH"),
    ("evidence item bound exceeded", "SESSION_EVIDENCE_ITEM_BOUND_EXCEEDED"),
    ("evidence is unavailable", "SESSION_EVIDENCE_UNAVAILABLE"),
    ("evidence bytes do not match their reference", "SESSION_EVIDENCE_MISMATCH"),
    ("not a SHA-256 evidence reference", "SESSION_EVIDENCE_REFERENCE_INVALID"),
    ("evidence byte bound exceeded", "SESSION_EVIDENCE_BYTE_BOUND_EXCEEDED"),
)
SESSION_EXECUTION_FAILED: Final = "SESSION_EXECUTION_FAILED"
_CODE_RE: Final = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_INDEX: Final = re.compile(r"(?:0|[1-9][0-9]*)\Z")


class EmissionRefused(CallerError):
    """The whole emission is refused (nothing is written)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


#: One challenge cannot be observed (it gets no observation); handlers raise it too.
StepError = HoldoutStepError

_sha256_ref = digest_bytes


# --------------------------------------------------------------------------- options


_BOUND_OPTIONS: Final = ("max_evidence_items", "max_evidence_bytes")
#: ``CHECK_WITH_OPTIONS {"pins": ...}``: whose bytes the caller's pins are computed from.
PINS_OPTION: Final = "pins"
PINS_PRISTINE: Final = "pristine"  # the default: a forger's submission against honest pins
PINS_WORKING: Final = "working"  # the honest caller: it pins the (mutated) bytes it submits
_INSTRUMENT_OPTIONS: Final = (*_BOUND_OPTIONS, PINS_OPTION)


def _pins_working(options: dict[str, Any]) -> bool:
    """Whether the final evaluation's caller pins the working bytes (an invalid ``pins``
    value is refused by :func:`_configure`, so it never reaches an evaluation)."""
    return bool(options.get(PINS_OPTION, PINS_PRISTINE) == PINS_WORKING)


def _tighten_bound(binding: BoundProposition, options: dict[str, Any]) -> BoundProposition:
    """The binding's evidence bounds lowered to the caller's ``max_evidence_items`` /
    ``max_evidence_bytes`` (each may only be lower than or equal to the honest bound)."""
    current = binding.bounds.to_dict()
    lowered = holdout_lower_only(options, {name: current[name] for name in _BOUND_OPTIONS})
    if not lowered:
        return binding
    bounds = EvidenceBounds(**{**current, **lowered})
    return attrs.evolve(binding, bounds=bounds)


def _configure(
    handler: HoldoutHandler, artifact: bytes, leaf: bytes, options: dict[str, Any]
) -> tuple[Any, BoundProposition]:
    """CHECK_WITH_OPTIONS, in order: an option neither the handler nor the instrument knows is
    unsupported; the handler's own options (``configure``); then the evidence bounds."""
    if not set(options) <= {*handler.option_names, *_INSTRUMENT_OPTIONS}:
        raise HoldoutOptionsRefused(OPTIONS_UNSUPPORTED)
    if options.get(PINS_OPTION, PINS_PRISTINE) not in (PINS_PRISTINE, PINS_WORKING):
        raise HoldoutOptionsRefused(OPTIONS_UNSUPPORTED)
    own = {key: value for key, value in options.items() if key not in _INSTRUMENT_OPTIONS}
    mechanism, binding = handler.configure(artifact, leaf, own)
    return mechanism, _tighten_bound(binding, options)


# --------------------------------------------------------------------------- handlers


def _classify_json_refusal(data: bytes) -> str:
    """The normalised outcome of a JSON record the wire refused (handlers'
    ``resolve_checks`` receive it): the strict reader's verdict, else whether it re-encodes."""
    try:
        parsed = read_json(data)
    except StrictReadError as error:
        if error.code == "duplicate-member":
            return "non-canonical-wire"
        if error.code == "invalid-utf8":
            return "invalid-utf8"
        if error.code == "too-large":
            return "too-large"
        return "malformed"
    try:
        if canonical_bytes(parsed) != data:
            return "non-canonical-wire"
    except CanonicalError:
        return "non-canonical-wire"
    return "malformed"


def _installed_handlers() -> dict[str, HoldoutHandler]:
    """Every installed provider's holdout handler, by provider name (the corpus's
    ``mechanism``). A provider that cannot be loaded, has no handler or fails to give one is
    left out (its cases are then reported as unobservable, never a crash)."""
    handlers: dict[str, HoldoutHandler] = {}
    for entry in provider_entries():
        try:
            handler = entry.load().holdout_handler()
        except Exception:  # a provider that cannot be loaded cannot be observed either
            continue
        if handler is not None:
            handlers.setdefault(entry.name, handler)
    return handlers


HANDLERS: Final[dict[str, HoldoutHandler]] = _installed_handlers()


# --------------------------------------------------------------------------- evaluation


@attrs.frozen
class Evaluation:
    """What one evaluation yields for the observation."""

    verdict: str
    refusal_set: tuple[str, ...]
    report: Any


def _reason_codes(observations: Any, details: str) -> list[str]:
    if isinstance(observations, dict) and isinstance(observations.get("reason_codes"), list):
        codes = [code for code in observations["reason_codes"] if isinstance(code, str)]
        for member in observations.values():
            if isinstance(member, dict) and isinstance(member.get("reason_codes"), list):
                codes.extend(code for code in member["reason_codes"] if isinstance(code, str))
        return [code for code in codes if _CODE_RE.match(code)]
    if not details:
        return []
    for prefix, code in SESSION_CODES:
        if details.startswith(prefix):
            return [code]
    return [SESSION_EXECUTION_FAILED]


def evaluate_pair(
    handler: HoldoutHandler,
    pristine: tuple[bytes, bytes],
    working: tuple[bytes, bytes],
    refs: tuple[str, str],
    options: dict[str, Any],
) -> Evaluation:
    """Evaluate a submission through a real session with the real mechanism registered.

    ``pristine`` is the (artifact, leaf) pair the caller's pins are computed from; ``working``
    are the bytes served to the evidence store (order irrelevant); ``refs`` are the
    submission's evidence references by evidence position (``subject_id`` is the first);
    ``options`` are the caller's CHECK_WITH_OPTIONS.
    """
    try:
        mech, binding = _configure(handler, pristine[0], pristine[1], options)
    except HoldoutOptionsRefused as refused:
        return Evaluation("UNKNOWN", (refused.code,), None)
    except ValueError as error:
        if not _pins_working(options):
            raise  # the pristine pair always binds: anything else is a defect
        # The honest caller pins mutated bytes; the mechanism's binding builder may refuse
        # them (a subject whose declared context is malformed, say): nothing can be pinned.
        raise StepError("binding-impossible", f"{type(error).__name__}: {error}") from None
    try:
        binding = attrs.evolve(binding, subject_id=refs[0], evidence_refs=refs)
    except EvidenceBindingError:
        return Evaluation("UNKNOWN", (SUBMISSION_INVALID,), None)
    store = EvidenceStore()
    for data in working:
        store.add(data)
    session = VerificationSession(store)
    session.register(mech)
    try:
        result = session.evaluate(binding)
    except EvidenceBindingError:
        return Evaluation("UNKNOWN", (SUBMISSION_INVALID,), None)
    outcome = getattr(result.outcome, "value", result.outcome)
    codes = sorted(set(_reason_codes(result.observations, result.details)))
    observations = result.observations if isinstance(result.observations, dict) else {}
    report = observations.get("formation_report")
    return Evaluation(str(outcome), tuple(codes), report)


def resolve_octets(handler: HoldoutHandler, served: dict[str, bytes], root: str, role: str) -> str:
    """The normalised resolution outcome of the octets served under ``root``."""
    if not isinstance(root, str) or not re.fullmatch(r"root-[0-9a-f]{64}", root):
        return "bad-root-syntax"
    if root not in served:
        return "unresolvable"
    data = served[root]
    refused = handler.resolve_checks(data, role, _classify_json_refusal)
    if refused is not None:
        return refused
    # Served through the project's real evidence resolution: the octets arrive embedded under
    # the claimed address (as a daemon submission carries them) and are resolved by it; the
    # store refuses octets that do not hash to their address.
    address = "sha256:" + root.removeprefix("root-")
    store = EvidenceStore()
    try:
        store.import_base64({address: base64.b64encode(data).decode("ascii")})
        store.resolve(address)
    except EvidenceBindingError:
        return "root-mismatch"
    return "ok"


# --------------------------------------------------------------------------- recipe


def _walk(views: dict[str, Any], path: Any) -> tuple[Any, str]:
    """The container holding the path's last segment, and that segment."""
    if not isinstance(path, str):
        raise StepError("bad-path", "the step needs a path")
    head, *segments = path.split(".")
    if head not in views or views[head] is None:
        raise StepError("bad-path", f"{path!r} does not name a working node")
    if not segments:
        raise StepError("bad-path", f"{path!r} names a whole node")
    current = views[head]
    for segment in segments[:-1]:
        current = _child(current, segment, path)
    return current, segments[-1]


def _child(current: Any, segment: str, path: str) -> Any:
    if isinstance(current, dict) and segment in current:
        return current[segment]
    if isinstance(current, list) and _INDEX.match(segment) and int(segment) < len(current):
        return current[int(segment)]
    raise StepError("bad-path", f"{path!r}: no member {segment!r}")


def _set(views: dict[str, Any], path: Any, value: Any) -> None:
    container, last = _walk(views, path)
    if isinstance(container, dict):
        container[last] = copy.deepcopy(value)
    elif isinstance(container, list) and _INDEX.match(last) and int(last) < len(container):
        container[int(last)] = copy.deepcopy(value)
    else:
        raise StepError("bad-path", f"{path!r}: cannot set {last!r}")


def _reverse(views: dict[str, Any], path: Any) -> None:
    container, last = _walk(views, path)
    target = _child(container, last, str(path))
    if not isinstance(target, list):
        raise StepError("bad-path", f"{path!r} is not an array")
    target.reverse()


def _node(
    handler: HoldoutHandler, role: str, data: bytes, report: Any, verdict: str | None = None
) -> dict[str, Any]:
    node: dict[str, Any] = {"artifact_root": root_of(data), "size": len(data)}
    node.update(handler.identities(role, data, report))
    if verdict is not None:
        node["verdict"] = verdict
    return node


def _reseal(
    handler: HoldoutHandler, views: dict[str, Any], refs: tuple[str, ...]
) -> tuple[str, ...]:
    """RESEAL: recompute what a forger controls, each identity on its own (§2.2: an identity
    whose inputs are missing is left as it stands and the step continues, as the JS reference
    wraps each recompute in try/catch). Returns the submission's references."""
    if views["artifact"] is None:  # after RECOMPOSE_DAG: nothing left to reseal
        return refs
    try:
        leaf_bytes = handler.render_leaf(views["leaf"])
    except StepError:  # the citation's input (the leaf's bytes) does not exist
        return refs
    handler.reseal(views["artifact"], leaf_bytes)
    try:
        by_role = {"artifact": handler.render_artifact(views["artifact"]), "leaf": leaf_bytes}
    except StepError:
        return refs
    return tuple(_sha256_ref(by_role[r]) for r in handler.evidence_roles)


def observe_challenge(challenge: dict[str, Any], corpus: Corpus) -> dict[str, Any]:
    """One observation for one (schema-valid) challenge; raises :class:`StepError`."""
    fixture = challenge["fixture"]
    root = fixture["root"]
    try:
        case, role = corpus.lookup(root)
        pristine_artifact = corpus.read(case.artifact)
        pristine_leaf = corpus.read(case.leaf)
    except CorpusError as error:
        raise StepError(f"fixture-{error.code}", error.detail) from None
    labels = [(label, fixture[label]) for label in ("artifact", "leaf") if label in fixture]
    for label, name in labels:
        if label != role or name != case.name or len(labels) > 1:
            raise StepError(
                "fixture-label-disagreement",
                f"{label}={name!r} but {root} is the {role} of case {case.name!r}",
            )
    handler = HANDLERS.get(case.mechanism)
    if handler is None:
        raise StepError(
            "mechanism-unavailable",
            f"no installed mechanism provider offers a holdout handler for {case.mechanism!r}",
        )
    run = _RecipeRun.start(handler, root, role, pristine_artifact, pristine_leaf)
    for step in challenge["recipe"]:
        op = step["op"]
        apply = _STEPS.get(op)
        if apply is None:  # the schema refuses unknown ops first; this is the second wall
            raise EmissionRefused("unknown-operator", f"{op!r} is not a recipe operator")
        apply(run, step)
    return run.finish()


@attrs.define
class _RecipeRun:
    """What one challenge's recipe steps change: the working views, the evidence refs, the
    check options, the bytes served for a root, and the observation being built."""

    handler: HoldoutHandler
    root: str
    role: str
    pristine: dict[str, bytes]  # by role
    observation: dict[str, Any]
    views: dict[str, Any]
    refs: tuple[str, ...]
    options: dict[str, Any] = attrs.Factory(dict)
    served: dict[str, bytes] | None = None
    candidate: dict[str, Any] = attrs.Factory(dict)

    @classmethod
    def start(
        cls, handler: HoldoutHandler, root: str, role: str, artifact: bytes, leaf: bytes
    ) -> _RecipeRun:
        """The run before any step: the baseline observed, the views of the pristine bytes."""
        baseline_report = handler.baseline_report(artifact, leaf)
        observation: dict[str, Any] = {
            "fixture_root": root,
            "baseline": {
                "artifact": _node(handler, "artifact", artifact, baseline_report),
                "leaf": _node(handler, "leaf", leaf, None),
            },
        }
        views: dict[str, Any] = {
            "artifact": handler.artifact_view(artifact),
            "leaf": handler.leaf_view(leaf),
        }
        pristine = {"artifact": artifact, "leaf": leaf}
        refs = tuple(_sha256_ref(pristine[r]) for r in handler.evidence_roles)
        return cls(handler, root, role, pristine, observation, views, refs)

    def finish(self) -> dict[str, Any]:
        """The observation once every step ran: the served bytes resolved, the working views
        (unless a recomposition consumed them) rendered and checked."""
        handler, observation = self.handler, self.observation
        if self.served is not None:
            observation["resolve"] = {
                "outcome": resolve_octets(handler, self.served, self.root, self.role)
            }
        if self.views["artifact"] is not None:
            artifact_bytes = handler.render_artifact(self.views["artifact"])
            leaf_bytes = handler.render_leaf(self.views["leaf"])
            by_role = {"artifact": artifact_bytes, "leaf": leaf_bytes}
            pinned = (self.pristine["artifact"], self.pristine["leaf"])
            refs = self.refs
            if _pins_working(self.options):  # the honest caller pins and submits the working bytes
                pinned = (artifact_bytes, leaf_bytes)
                refs = tuple(_sha256_ref(by_role[r]) for r in handler.evidence_roles)
            result = evaluate_pair(
                handler,
                pinned,
                (by_role[handler.evidence_roles[0]], by_role[handler.evidence_roles[1]]),
                (refs[0], refs[1]),
                self.options,
            )
            self.candidate = {
                "artifact": _node(
                    handler, "artifact", artifact_bytes, result.report, result.verdict
                ),
                "leaf": _node(handler, "leaf", leaf_bytes, None),
            }
            observation["refusal_set"] = list(result.refusal_set)
        observation["candidate"] = self.candidate
        return observation


# The recipe operators, one function each: ``(run, step)`` applies the step to the run.


def _identity_step(run: _RecipeRun, step: dict[str, Any]) -> None:
    return None


def _set_step(run: _RecipeRun, step: dict[str, Any]) -> None:
    if "value" not in step:
        raise StepError("bad-step", "SET needs a value")
    _set(run.views, step.get("path"), step["value"])


def _reverse_step(run: _RecipeRun, step: dict[str, Any]) -> None:
    _reverse(run.views, step.get("path"))


def _reseal_step(run: _RecipeRun, step: dict[str, Any]) -> None:
    run.refs = _reseal(run.handler, run.views, run.refs)


def _options_step(run: _RecipeRun, step: dict[str, Any]) -> None:
    run.options = copy.deepcopy(step.get("options", {}))


def _duplicate_member_step(run: _RecipeRun, step: dict[str, Any]) -> None:
    if "name" not in step or "value" not in step:
        raise StepError("bad-step", "WIRE_PREPEND_DUPLICATE_MEMBER needs name and value")
    spliced = run.handler.splice(
        run.pristine[run.role], run.role, step["name"], js_string(step["value"])
    )
    run.served = {run.root: spliced}


def _recompose_step(run: _RecipeRun, step: dict[str, Any]) -> None:
    handler = run.handler
    leaf_bytes = handler.render_leaf(run.views["leaf"])
    artifact_bytes = handler.recompose(leaf_bytes, run.pristine["artifact"])
    run.candidate = {"leaf": _node(handler, "leaf", leaf_bytes, None)}
    run.observation.pop("refusal_set", None)
    if artifact_bytes is not None:
        by_role = {"artifact": artifact_bytes, "leaf": leaf_bytes}
        fresh = tuple(_sha256_ref(by_role[r]) for r in handler.evidence_roles)
        result = evaluate_pair(
            handler,
            (run.pristine["artifact"], run.pristine["leaf"]),
            (artifact_bytes, leaf_bytes),
            (fresh[0], fresh[1]),
            {},
        )
        run.candidate["artifact"] = _node(
            handler, "artifact", artifact_bytes, result.report, result.verdict
        )
        run.observation["refusal_set"] = list(result.refusal_set)
    run.views["artifact"] = None


_STEPS: Final[dict[str, Callable[[_RecipeRun, dict[str, Any]], None]]] = {
    "IDENTITY": _identity_step,
    "SET": _set_step,
    "REVERSE": _reverse_step,
    "RESEAL": _reseal_step,
    "CHECK_WITH_OPTIONS": _options_step,
    "WIRE_PREPEND_DUPLICATE_MEMBER": _duplicate_member_step,
    "RECOMPOSE_DAG": _recompose_step,
}


# --------------------------------------------------------------------------- emission


@attrs.frozen
class Emission:
    """One adapter run: the observation document plus what could not be observed."""

    document: dict[str, Any]
    problems: tuple[dict[str, str], ...]  # {"id", "code", "detail"} per unobserved challenge


def _admit_challenge(position: int, challenge: Any, schemas: Schemas) -> None:
    """One challenge of the set: a strict reader's value, schema-valid, known operators only
    (else :class:`EmissionRefused`)."""
    try:  # what the strict reader could have produced, and nothing else (no deep values)
        check_json_value(challenge)
    except StrictReadError as error:
        raise EmissionRefused("challenge-unreadable", f"challenge {position}: {error}") from None
    problem = validate_challenge(challenge, schemas)
    if problem is not None:
        raise EmissionRefused("challenge-schema", f"challenge {position} {problem}")
    for step in challenge["recipe"]:
        if step["op"] not in RECIPE_OPS:
            raise EmissionRefused("unknown-operator", f"{step['op']!r}")


def observe(
    challenges: Sequence[Any],
    *,
    corpus_directory: Path | None = None,
    schemas: Schemas | None = None,
    implementation: str = DEFAULT_IMPLEMENTATION,
    spec_release_id: str | None = None,
) -> Emission:
    """Apply every challenge; raise :class:`EmissionRefused` when the set is refused."""
    schemas = schemas if schemas is not None else project_schemas()
    directory = corpus_directory if corpus_directory is not None else corpus_dir()
    for position, challenge in enumerate(challenges):
        _admit_challenge(position, challenge, schemas)
    ids = [challenge["id"] for challenge in challenges]
    if len(set(ids)) != len(ids):
        raise EmissionRefused("duplicate-challenge-id", "challenge ids repeat")
    try:
        corpus = Corpus.load(directory)
    except CorpusError as error:
        raise EmissionRefused("corpus-invalid", error.detail) from None
    release = (
        spec_release_id
        if spec_release_id is not None
        else release_id(corpus_index=directory / "INDEX.json")
    )
    observations: dict[str, Any] = {}
    problems: list[dict[str, str]] = []
    for challenge in challenges:
        try:
            observations[challenge["id"]] = observe_challenge(challenge, corpus)
        except StepError as error:
            problems.append({"id": challenge["id"], "code": error.code, "detail": error.detail})
        except EmissionRefused:
            raise
        except Exception as error:  # reported, never a traceback; the rest is still observed
            problems.append(
                {
                    "id": challenge["id"],
                    "code": "adapter-internal-error",
                    "detail": f"{type(error).__name__}: {error}",
                }
            )
    document = {
        "type": OBSERVATION_TYPE,
        "implementation": implementation,
        "spec_release_id": release,
        "observations": observations,
    }
    return Emission(document=document, problems=tuple(problems))
