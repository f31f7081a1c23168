"""The independent typed-formation checker: ``check_formation(subject, certificate) -> report``.

Contract (``docs/spec/formation.md`` §3.4–§3.6). The checker trusts nothing
the certificate says beyond what it recomputes, never imports or calls the producer, reads no
files and touches no network. For any input it returns a report; it raises only for ceilings
that are not lowered-only ints (``TypeError``/``ValueError``, before any checking).

Check order, first failure stops and nothing partial is promoted:

1. admit the subject (wire admission + subject grammar): UNSUPPORTED schema → UNKNOWN
   ``FORMATION_PROFILE_UNSUPPORTED``; LIMIT → UNKNOWN ``FORMATION_LIMIT_EXCEEDED``;
   otherwise INVALID ``FORMATION_RECORD_INVALID``;
2. from here on the report carries ``subject_digest`` (digest of the exact subject bytes) and
   the subject's ``root``;
3. admit the certificate with the same mapping (before the subject's profile is compared);
4. subject ``profile_digest`` ≠ compiled digest → UNKNOWN ``FORMATION_PROFILE_UNSUPPORTED``;
5. certificate ``subject_digest``/``profile_digest``/``root`` ≠ subject digest / compiled
   digest / subject root → INVALID ``FORMATION_CERTIFICATE_BINDING_INVALID``;
6. step count ≠ node count, or step *i* has ``node`` ≠ *i*, ``rule`` ≠ tag, or ``premises`` ≠
   the node's ordered references → INVALID ``FORMATION_CERTIFICATE_STEP_INVALID``;
7. every node in source order (nodes outside the root's closure included): dependency depth
   above ``max_depth`` → UNKNOWN ``FORMATION_LIMIT_EXCEEDED`` (before typing the node); a
   typing-rule failure → INVALID ``FORMATION_RULE_INVALID``; an APPLY_STEP/COMPOSE whose step
   count would exceed ``max_path_steps`` → UNKNOWN ``FORMATION_LIMIT_EXCEEDED`` (tested before
   concatenating);
8. CHECKED with the root observation.

The report has exactly ``status``, ``subject_digest``, ``profile_digest`` (always the compiled
digest), ``root``, ``observation`` (CHECKED only), ``reason_codes`` (``[]`` or one code) and
``residual_obligations`` (the fixed eight, always).

Tracing (for ``formation explain``, never for a verdict): :func:`trace_formation` runs the
very same check and also fills a :class:`CheckTrace` naming the first failure's rule
(:data:`TRACE_RULES`), its node/step index, the admitted records and what inference computed.
The checker only writes the trace and reads nothing from it; the untraced path is unchanged.

Denotation identities (``H`` = digest of canonical bytes) are encoded by the small fixed-shape
encoders below; each emits exactly the canonical bytes of its dict (keys in sorted order, all
values digests, ASCII tags or ints), a fact the test-suite checks against the general codec.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from mechanism.formation._wire import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_PATH_STEPS,
    NODE_KEYS,
    NODE_REFERENCE_FIELDS,
    PROFILE_DIGEST,
    RESIDUAL_OBLIGATIONS,
    FormationError,
    FormationLimitError,
    UnsupportedFormation,
    admit_certificate,
    admit_subject,
    admit_subject_head,
    all_digests,
    validate_ceilings,
)
from session.canon import ServiceError, digest_bytes

__all__ = ["REASON_CODES", "TRACE_RULES", "CheckTrace", "check_formation", "trace_formation"]

RECORD_INVALID: Final = "FORMATION_RECORD_INVALID"
BINDING_INVALID: Final = "FORMATION_CERTIFICATE_BINDING_INVALID"
STEP_INVALID: Final = "FORMATION_CERTIFICATE_STEP_INVALID"
RULE_INVALID: Final = "FORMATION_RULE_INVALID"
PROFILE_UNSUPPORTED: Final = "FORMATION_PROFILE_UNSUPPORTED"
LIMIT_EXCEEDED: Final = "FORMATION_LIMIT_EXCEEDED"

# Closed vocabulary: reason code → the only status it can accompany.
REASON_CODES: Final[dict[str, str]] = {
    RECORD_INVALID: "INVALID",
    BINDING_INVALID: "INVALID",
    STEP_INVALID: "INVALID",
    RULE_INVALID: "INVALID",
    PROFILE_UNSUPPORTED: "UNKNOWN",
    LIMIT_EXCEEDED: "UNKNOWN",
}

_FORM: Final = "FORM"
_PATH: Final = "PATH"
# Reference fields per tag (a local copy for the hot loops).
_FIELDS: Final = dict(NODE_REFERENCE_FIELDS)


def _h(text: str) -> str:
    return digest_bytes(text.encode("ascii"))


def _atom_denotation(payload_digest: str) -> str:
    return _h('{"kind":"ATOM","payload_digest":"' + payload_digest + '"}')


def _apply_denotation(argument_digest: str) -> str:
    return _h('{"argument_digest":"' + argument_digest + '","kind":"APPLY"}')


def _path_denotation(source: str, target: str, steps: list[tuple[str, str]]) -> str:
    encoded = ",".join(
        '{"source_digest":"' + a + '","target_digest":"' + b + '"}' for a, b in steps
    )
    return _h(
        '{"kind":"PATH","path_steps":['
        + encoded
        + '],"source_digest":"'
        + source
        + '","target_digest":"'
        + target
        + '"}'
    )


def _code_denotation(subject_digest: str, node: int, dependency_nodes: list[int]) -> str:
    return _h(
        '{"dependency_nodes":['
        + ",".join(map(str, dependency_nodes))
        + '],"kind":"CODE","node":'
        + str(node)
        + ',"subject_digest":"'
        + subject_digest
        + '"}'
    )


def _formation_digest(subject_digest: str, node: int) -> str:
    return _h('{"node":' + str(node) + ',"subject_digest":"' + subject_digest + '"}')


def _members(bits: int) -> list[int]:
    """The sorted indices of the set bits of ``bits``."""
    members = []
    while bits:
        low = bits & -bits
        members.append(low.bit_length() - 1)
        bits ^= low
    return members


# Precompiled step templates (node indices never reach MAX_NODES): the whole text of an ATOM
# step at each index, the text before an index's premises, and each tag's closing text.
_INDEX: Final = tuple(str(index) for index in range(MAX_NODES))
_ATOM_STEP: Final = tuple(f'{{"node":{i},"premises":[],"rule":"ATOM"}}' for i in range(MAX_NODES))
_STEP_HEAD: Final = tuple(f'{{"node":{i},"premises":[' for i in range(MAX_NODES))
_STEP_TAIL: Final = {tag: f'],"rule":"{tag}"}}' for tag in _FIELDS}
_CERTIFICATE_HEAD: Final = f'{{"profile_digest":"{PROFILE_DIGEST}","root":'
_CERTIFICATE_STEPS: Final = ',"schema_version":"VSTD-TYPED-FORMATION-CERTIFICATE-0.1","steps":['


def _expected_certificate(nodes: list[dict[str, Any]], root: int, subject_digest: str) -> bytes:
    """The canonical bytes of the one certificate that binds this subject (§3.3).

    Written out directly from the precompiled templates: keys in sorted order, every value an
    ASCII tag, digest or int.
    """
    steps: list[str] = []
    append = steps.append
    index_text = _INDEX
    for index, node in enumerate(nodes):
        tag = node["tag"]
        fields = _FIELDS[tag]
        if not fields:
            append(_ATOM_STEP[index])
        elif len(fields) == 1:
            append(_STEP_HEAD[index] + index_text[node[fields[0]]] + _STEP_TAIL[tag])
        else:
            append(
                _STEP_HEAD[index]
                + index_text[node[fields[0]]]
                + ","
                + index_text[node[fields[1]]]
                + _STEP_TAIL[tag]
            )
    return _certificate_bytes(root, steps, subject_digest)


def _certificate_bytes(root: int, steps: list[str], subject_digest: str) -> bytes:
    """The certificate's canonical bytes around its step texts (one per node, in order)."""
    return (
        f"{_CERTIFICATE_HEAD}{root}{_CERTIFICATE_STEPS}{','.join(steps)}"
        f'],"subject_digest":"{subject_digest}"}}'
    ).encode("ascii")


class _Stop(Exception):
    """Internal: inference stopped with ``(status, reason)``; ``rule`` names the rule broken
    (one of :data:`TRACE_RULES`), for a traced check."""

    def __init__(self, status: str, reason: str, rule: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.rule = rule


#: Rule identifiers a :class:`CheckTrace` can name, by check-order step (§3.6).
TRACE_RULES: Final[dict[str, int]] = {
    "SUBJECT_ADMISSION": 1,
    "CERTIFICATE_ADMISSION": 3,
    "SUBJECT_PROFILE": 4,
    "BINDING_SUBJECT_DIGEST": 5,
    "BINDING_PROFILE_DIGEST": 5,
    "BINDING_ROOT": 5,
    "STEP_COUNT": 6,
    "STEP_NODE": 6,
    "STEP_RULE": 6,
    "STEP_PREMISES": 6,
    "DEPTH_LIMIT": 7,
    "APPLY_ARGUMENT": 7,
    "ID_AT": 7,
    "APPLY_STEP_TYPES": 7,
    "APPLY_STEP_TARGET": 7,
    "COMPOSE_TYPES": 7,
    "COMPOSE_ENDPOINTS": 7,
    "PATH_STEPS_LIMIT": 7,
    "READ_CODE": 7,
    "RESOURCE_LIMIT": 0,
}


class CheckTrace:
    """What a traced check saw (for ``formation explain``). The checker only writes it, so a
    traced check returns exactly the report an untraced one does.

    * ``rule`` — the :data:`TRACE_RULES` identifier of the first failure (``None``: CHECKED);
    * ``index`` — the node (= step) index it failed at, when it has one (a step or typing
      failure; ``STEP_COUNT`` and the binding/admission failures have none);
    * ``message`` — the admission error's message (``*_ADMISSION`` only);
    * ``subject`` / ``certificate`` — the admitted records (``certificate`` stays ``None`` when
      the exact-bytes fast path skipped its admission, or admission failed);
    * ``values`` / ``depths`` / ``ranks`` — per node in source order, what inference computed
      for every node it typed (a value's first item is its type string, e.g. ``"CODE(FORM)"``);
      a failure at node *k* leaves exactly nodes ``0…k-1``.
    """

    __slots__ = ("certificate", "depths", "index", "message", "ranks", "rule", "subject", "values")

    def __init__(self) -> None:
        self.rule: str | None = None
        self.index: int | None = None
        self.message: str | None = None
        self.subject: dict[str, Any] | None = None
        self.certificate: dict[str, Any] | None = None
        self.values: list[tuple[Any, ...]] = []
        self.depths: list[int] = []
        self.ranks: list[int] = []

    def stop(self, rule: str, index: int | None = None, message: str | None = None) -> None:
        self.rule, self.index, self.message = rule, index, message


def _report(
    status: str,
    reason: str | None,
    subject_digest: str | None = None,
    root: int | None = None,
    observation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "status": status,
        "subject_digest": subject_digest,
        "profile_digest": PROFILE_DIGEST,
        "root": root,
        "observation": observation,
        "reason_codes": [] if reason is None else [reason],
        "residual_obligations": list(RESIDUAL_OBLIGATIONS),
    }


def _admission_failure(error: FormationError) -> tuple[str, str]:
    if isinstance(error, UnsupportedFormation):
        return "UNKNOWN", PROFILE_UNSUPPORTED
    if isinstance(error, FormationLimitError):
        return "UNKNOWN", LIMIT_EXCEEDED
    return "INVALID", RECORD_INVALID


def check_formation(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    *,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
    max_path_steps: int = MAX_PATH_STEPS,
) -> dict[str, Any]:
    """Recheck a subject/certificate pair; return the exact §3.5 report (see module rules)."""
    validate_ceilings(max_nodes=max_nodes, max_depth=max_depth, max_path_steps=max_path_steps)
    return _bounded(subject_bytes, certificate_bytes, max_nodes, max_depth, max_path_steps, None)


def trace_formation(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    *,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
    max_path_steps: int = MAX_PATH_STEPS,
) -> tuple[dict[str, Any], CheckTrace]:
    """:func:`check_formation`'s report, plus the :class:`CheckTrace` of the same run."""
    validate_ceilings(max_nodes=max_nodes, max_depth=max_depth, max_path_steps=max_path_steps)
    trace = CheckTrace()
    report = _bounded(subject_bytes, certificate_bytes, max_nodes, max_depth, max_path_steps, trace)
    return report, trace


def check_admitted_subject(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    subject: dict[str, Any] | FormationError,
    subject_digest: str,
    *,
    max_nodes: int,
    max_depth: int,
    max_path_steps: int,
    head_only: bool = False,
) -> dict[str, Any]:
    """The session adapter's entry point: :func:`check_formation`'s report for a subject its
    caller has already admitted, so that it is admitted once per evaluation.

    The caller vouches for three facts and the check is the same as the public one under them:
    ``subject`` is what ``admit_subject(subject_bytes, max_nodes=max_nodes)`` returned (unchanged
    since) or the :class:`FormationError` it raised — with ``head_only``, what
    ``admit_subject_head(subject_bytes, max_nodes=max_nodes)`` returned (a record, unchanged
    since), whose per-node rules the check then applies itself, admitting the bytes in full
    only when the exact-pair path does not answer (as :func:`check_formation` does);
    ``subject_digest`` is ``digest_bytes(subject_bytes)``; the ceilings passed
    ``validate_ceilings``. Internal: the public :func:`check_formation` still admits the bytes
    itself.
    """
    return _bounded(
        subject_bytes,
        certificate_bytes,
        max_nodes,
        max_depth,
        max_path_steps,
        None,
        (subject, subject_digest),
        head_only,
    )


def _bounded(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    max_nodes: int,
    max_depth: int,
    max_path_steps: int,
    trace: CheckTrace | None,
    admitted: tuple[dict[str, Any] | FormationError, str] | None = None,
    head_only: bool = False,
) -> dict[str, Any]:
    try:
        return _check(
            subject_bytes,
            certificate_bytes,
            max_nodes,
            max_depth,
            max_path_steps,
            trace,
            admitted,
            head_only,
        )
    except (RecursionError, MemoryError):
        # A resource of this process ran out: the bounded check could not finish.
        if trace is not None:
            trace.stop("RESOURCE_LIMIT")
        return _report("UNKNOWN", LIMIT_EXCEEDED)


class AdmissionExhausted(ServiceError, RuntimeError):
    """A resource ran out while :func:`check_admitted_subject` admitted a head-only subject
    in full: raised to the caller, whose own admission it stands for."""


def _binding_rule(certificate: dict[str, Any], subject_digest: str, root: int) -> str:
    if certificate["subject_digest"] != subject_digest:
        return "BINDING_SUBJECT_DIGEST"
    if certificate["profile_digest"] != PROFILE_DIGEST:
        return "BINDING_PROFILE_DIGEST"
    return "BINDING_ROOT"


def _step_rule(step: dict[str, Any], index: int, tag: str) -> str:
    if step["node"] != index:
        return "STEP_NODE"
    return "STEP_RULE" if step["rule"] != tag else "STEP_PREMISES"


def _check(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    max_nodes: int,
    max_depth: int,
    max_path_steps: int,
    trace: CheckTrace | None = None,
    admitted: tuple[dict[str, Any] | FormationError, str] | None = None,
    head_only: bool = False,
) -> dict[str, Any]:
    if trace is None:
        checked = _checked_pair(
            subject_bytes,
            certificate_bytes,
            max_nodes,
            max_depth,
            max_path_steps,
            admitted,
            head_only,
        )
        if checked is not None:
            return checked
    subject, subject_digest = _subject_of(subject_bytes, max_nodes, admitted, head_only)
    if isinstance(subject, FormationError):
        _stop(trace, "SUBJECT_ADMISSION", message=str(subject))
        return _report(*_admission_failure(subject))
    root: int = subject["root"]
    nodes: list[dict[str, Any]] = subject["nodes"]
    # Fast path, same answers: exact bytes of the only certificate that binds this subject
    # are canonical, admissible (sizes follow from the admitted subject) and pass steps 5-6,
    # so only step 4 remains before inference. Anything else takes the ordered path.
    exact = type(certificate_bytes) is bytes and certificate_bytes == _expected_certificate(
        nodes, root, subject_digest
    )
    certificate: dict[str, Any] | None = None
    if not exact:
        try:
            certificate = admit_certificate(certificate_bytes, max_nodes=max_nodes)
        except FormationError as error:
            _stop(trace, "CERTIFICATE_ADMISSION", message=str(error))
            return _report(*_admission_failure(error), subject_digest, root)
    if trace is not None:
        trace.certificate = certificate
        trace.subject = subject
    if subject["profile_digest"] != PROFILE_DIGEST:
        _stop(trace, "SUBJECT_PROFILE")
        return _report("UNKNOWN", PROFILE_UNSUPPORTED, subject_digest, root)
    if certificate is not None:
        refused = _certificate_refusal(certificate, nodes, subject_digest, root, trace)
        if refused is not None:
            return refused
    try:
        observation = _infer(nodes, root, subject_digest, max_depth, max_path_steps, trace)
    except _Stop as stop:
        _stop(trace, stop.rule, len(trace.values) if trace is not None else None)
        return _report(stop.status, stop.reason, subject_digest, root)
    return _report("CHECKED", None, subject_digest, root, observation)


def _stop(
    trace: CheckTrace | None, rule: str, index: int | None = None, message: str | None = None
) -> None:
    """Name the first failure in ``trace``, when the check is traced."""
    if trace is not None:
        trace.stop(rule, index, message)


def _subject_of(
    subject_bytes: bytes,
    max_nodes: int,
    admitted: tuple[dict[str, Any] | FormationError, str] | None,
    head_only: bool,
) -> tuple[dict[str, Any] | FormationError, str]:
    """Step 1: the admitted subject, or the error its admission raised, with its digest
    (``""`` beside an error the check admitted itself)."""
    if admitted is not None and head_only:
        # Only the head was admitted: the ordered path admits the bytes in full, as the
        # adapter would have before handing the record over (so a resource running out here
        # is the adapter's execution failure, not this check's LIMIT).
        try:
            return admit_subject(subject_bytes, max_nodes=max_nodes), admitted[1]
        except FormationError as error:
            return error, admitted[1]
        except (RecursionError, MemoryError) as error:
            raise AdmissionExhausted from error
    if admitted is not None:
        return admitted
    try:
        subject = admit_subject(subject_bytes, max_nodes=max_nodes)
    except FormationError as error:
        return error, ""
    return subject, digest_bytes(subject_bytes)


def _certificate_refusal(
    certificate: dict[str, Any],
    nodes: list[dict[str, Any]],
    subject_digest: str,
    root: int,
    trace: CheckTrace | None,
) -> dict[str, Any] | None:
    """Steps 5–6 for an admitted certificate: its refusal report, or ``None`` when it binds
    this subject and its steps are the nodes' own."""
    if (
        certificate["subject_digest"] != subject_digest
        or certificate["profile_digest"] != PROFILE_DIGEST
        or certificate["root"] != root
    ):
        if trace is not None:
            trace.stop(_binding_rule(certificate, subject_digest, root))
        return _report("INVALID", BINDING_INVALID, subject_digest, root)
    steps: list[dict[str, Any]] = certificate["steps"]
    if len(steps) != len(nodes):
        _stop(trace, "STEP_COUNT")
        return _report("INVALID", STEP_INVALID, subject_digest, root)
    for index, (node, step) in enumerate(zip(nodes, steps, strict=True)):
        tag = node["tag"]
        if (
            step["node"] != index
            or step["rule"] != tag
            or step["premises"] != [node[field] for field in _FIELDS[tag]]
        ):
            if trace is not None:
                trace.stop(_step_rule(step, index, tag), index)
            return _report("INVALID", STEP_INVALID, subject_digest, root)
    return None


# Typed values during inference. A value is a tuple whose first item is its type string:
#   FORM:  ("FORM", origin)                         origin = the ATOM/APPLY node that built it
#   PATH:  ("PATH", source, target, steps, origin)  source/target = FORM origins,
#                                                   steps = ((source, target), ...) FORM origins
#   CODE:  ("CODE(T)", quoted_node, quoted_value, origin)
# READ returns the quoted value itself, so a value keeps its origin wherever it is read back.
# Denotations are computed only when something needs them (the APPLY_STEP rule, a COMPOSE
# whose endpoints come from different nodes, and the root observation), and memoised per
# origin; they are the §3.4 formulas either way.


class _Denotations:
    """Lazily computed, memoised denotation digests of the values built so far."""

    def __init__(self, subject_digest: str, nodes: list[dict[str, Any]]) -> None:
        self.subject_digest = subject_digest
        self.nodes = nodes
        self.forms: dict[int, str] = {}
        self.apply_arguments: dict[int, int] = {}  # APPLY origin -> argument FORM origin
        self.closures: list[int] = []  # filled by _infer; the fast path leaves it empty

    def dependency_nodes(self, index: int) -> list[int]:
        """The sorted dependency closure of node ``index`` (itself included)."""
        if index < len(self.closures):
            return _members(self.closures[index])
        return _dependency_nodes(self.nodes, index)

    def form(self, origin: int) -> str:
        known = self.forms.get(origin)
        if known is None:
            argument = self.apply_arguments.get(origin)
            if argument is None:
                known = _atom_denotation(self.nodes[origin]["payload_digest"])
            else:
                known = _apply_denotation(self.form(argument))
            self.forms[origin] = known
        return known

    def value(self, value: tuple[Any, ...]) -> str:
        kind = value[0]
        if kind == _FORM:
            return self.form(value[1])
        if kind == _PATH:
            return _path_denotation(
                self.form(value[1]),
                self.form(value[2]),
                [(self.form(a), self.form(b)) for a, b in value[3]],
            )
        quoted_node = value[1]
        return _code_denotation(
            self.subject_digest, quoted_node, self.dependency_nodes(quoted_node)
        )


def _dependency_nodes(nodes: list[dict[str, Any]], start: int) -> list[int]:
    """The sorted dependency closure of node ``start`` of an admitted subject (references
    point to earlier nodes), by a walk of the nodes it reaches."""
    seen = bytearray(start + 1)
    stack = [start]
    found: list[int] = []
    fields_of = _FIELDS
    while stack:
        index = stack.pop()
        if seen[index]:
            continue
        seen[index] = 1
        found.append(index)
        node = nodes[index]
        for field in fields_of[node["tag"]]:
            stack.append(node[field])
    found.sort()
    return found


def _infer(
    nodes: list[dict[str, Any]],
    root: int,
    subject_digest: str,
    max_depth: int,
    max_path_steps: int,
    trace: CheckTrace | None = None,
) -> dict[str, Any]:
    """Type every node in source order; return the root observation or raise ``_Stop``.

    A ``trace`` shares the per-node lists (no per-node cost): on a stop at node *k* they hold
    nodes ``0…k-1``."""
    denotations = _Denotations(subject_digest, nodes)
    values: list[tuple[Any, ...]] = []
    depths: list[int] = []
    ranks: list[int] = []
    if trace is not None:
        trace.values, trace.depths, trace.ranks = values, depths, ranks
    closures = denotations.closures  # dependency closure of each node, as a bit set
    origins: list[int] = []  # quotation origins of each node, as a bit set
    for index, node in enumerate(nodes):
        tag = node["tag"]
        if tag == "ATOM":
            if max_depth < 1:
                raise _Stop("UNKNOWN", LIMIT_EXCEEDED, "DEPTH_LIMIT")
            values.append((_FORM, index))
            depths.append(1)
            ranks.append(0)
            closures.append(1 << index)
            origins.append(0)
            continue
        fields = _FIELDS[tag]
        first = node[fields[0]]
        other: tuple[Any, ...] | None = None
        if len(fields) == 2:
            second = node[fields[1]]
            depth = 1 + max(depths[first], depths[second])
            rank = max(ranks[first], ranks[second])
            closure = (1 << index) | closures[first] | closures[second]
            origin = origins[first] | origins[second]
            other = values[second]
        else:
            depth = 1 + depths[first]
            rank = ranks[first]
            closure = (1 << index) | closures[first]
            origin = origins[first]
        if depth > max_depth:
            raise _Stop("UNKNOWN", LIMIT_EXCEEDED, "DEPTH_LIMIT")
        if tag == "QUOTE":
            rank += 1
            origin |= 1 << index
        value = _TYPING[tag](index, first, values[first], other, denotations, max_path_steps)
        values.append(value)
        depths.append(depth)
        ranks.append(rank)
        closures.append(closure)
        origins.append(origin)
    return _observation(denotations, values[root], root, ranks[root], depths[root], origins[root])


# The typing rules of step 7, one per non-ATOM tag: ``(index, first, argument, other,
# denotations, max_path_steps)`` → the node's value, or raise ``_Stop``. ``argument`` is the
# value of the node's first reference ``first``, ``other`` that of its second (two-reference
# tags only).
_Typing = Callable[
    [int, int, tuple[Any, ...], "tuple[Any, ...] | None", _Denotations, int], tuple[Any, ...]
]


def _type_apply(
    index: int,
    first: int,
    argument: tuple[Any, ...],
    other: tuple[Any, ...] | None,
    denotations: _Denotations,
    max_path_steps: int,
) -> tuple[Any, ...]:
    if argument[0] != _FORM:
        raise _Stop("INVALID", RULE_INVALID, "APPLY_ARGUMENT")
    denotations.apply_arguments[index] = argument[1]
    return (_FORM, index)


def _type_id(
    index: int,
    first: int,
    argument: tuple[Any, ...],
    other: tuple[Any, ...] | None,
    denotations: _Denotations,
    max_path_steps: int,
) -> tuple[Any, ...]:
    if argument[0] != _FORM:
        raise _Stop("INVALID", RULE_INVALID, "ID_AT")
    point = argument[1]
    return (_PATH, point, point, (), index)


def _type_apply_step(
    index: int,
    first: int,
    argument: tuple[Any, ...],
    other: tuple[Any, ...] | None,
    denotations: _Denotations,
    max_path_steps: int,
) -> tuple[Any, ...]:
    assert other is not None
    form = denotations.form
    if argument[0] != _FORM or other[0] != _FORM:
        raise _Stop("INVALID", RULE_INVALID, "APPLY_STEP_TYPES")
    source_origin, target_origin = argument[1], other[1]
    # The target's denotation must equal APPLY(source)'s; an APPLY node over the very
    # same origin has it by construction, anything else is compared by digest.
    if denotations.apply_arguments.get(target_origin) != source_origin and form(
        target_origin
    ) != _apply_denotation(form(source_origin)):
        raise _Stop("INVALID", RULE_INVALID, "APPLY_STEP_TARGET")
    if max_path_steps < 1:
        raise _Stop("UNKNOWN", LIMIT_EXCEEDED, "PATH_STEPS_LIMIT")
    return (_PATH, source_origin, target_origin, ((source_origin, target_origin),), index, 1)


def _type_compose(
    index: int,
    first: int,
    argument: tuple[Any, ...],
    other: tuple[Any, ...] | None,
    denotations: _Denotations,
    max_path_steps: int,
) -> tuple[Any, ...]:
    assert other is not None
    if argument[0] != _PATH or other[0] != _PATH:
        raise _Stop("INVALID", RULE_INVALID, "COMPOSE_TYPES")
    joint_left, joint_right = argument[2], other[1]
    if joint_left != joint_right and denotations.form(joint_left) != denotations.form(joint_right):
        raise _Stop("INVALID", RULE_INVALID, "COMPOSE_ENDPOINTS")
    if len(argument[3]) + len(other[3]) > max_path_steps:
        raise _Stop("UNKNOWN", LIMIT_EXCEEDED, "PATH_STEPS_LIMIT")
    return (_PATH, argument[1], other[2], argument[3] + other[3], index)


def _type_quote(
    index: int,
    first: int,
    argument: tuple[Any, ...],
    other: tuple[Any, ...] | None,
    denotations: _Denotations,
    max_path_steps: int,
) -> tuple[Any, ...]:
    return ("CODE(" + argument[0] + ")", first, argument, index)


def _type_read(
    index: int,
    first: int,
    argument: tuple[Any, ...],
    other: tuple[Any, ...] | None,
    denotations: _Denotations,
    max_path_steps: int,
) -> tuple[Any, ...]:
    if argument[0][:5] != "CODE(":
        raise _Stop("INVALID", RULE_INVALID, "READ_CODE")
    quoted: tuple[Any, ...] = argument[2]  # the quoted value itself
    return quoted


# The wire admitted only the seven tags (ATOM is typed in _infer itself).
_TYPING: Final[dict[str, _Typing]] = {
    "APPLY": _type_apply,
    "ID": _type_id,
    "APPLY_STEP": _type_apply_step,
    "COMPOSE": _type_compose,
    "QUOTE": _type_quote,
    "READ": _type_read,
}


def _observation(
    denotations: _Denotations,
    result: tuple[Any, ...],
    root: int,
    rank: int,
    depth: int,
    origins: int,
) -> dict[str, Any]:
    """The §3.5 root observation of the root's typed value."""
    form = denotations.form
    is_path = result[0] == _PATH
    return {
        "type": result[0],
        "denotation_digest": denotations.value(result),
        "source_digest": form(result[1]) if is_path else None,
        "target_digest": form(result[2]) if is_path else None,
        "path_steps": (
            [{"source_digest": form(a), "target_digest": form(b)} for a, b in result[3]]
            if is_path
            else []
        ),
        "quote_rank": rank,
        "required_depth": depth,
        "formation_digest": _formation_digest(denotations.subject_digest, root),
        "dependency_nodes": denotations.dependency_nodes(root),
        "quote_origins": _members(origins),
    }


# The one-pass path's tables: each tag's key count, its one reference field (the one-field
# tags) and its step text after the premises.
_KEY_COUNT: Final = {tag: len(keys) for tag, keys in NODE_KEYS.items()}
_FIELD: Final = {tag: fields[0] for tag, fields in _FIELDS.items() if len(fields) == 1}
_TAILS: Final = _STEP_TAIL

# --- the exact-pair fast path -----------------------------------------------------------------
#
# An honest pair (the subject and the one certificate that binds it, typed without a stop) is
# checked in one pass over the nodes: the subject's per-node grammar rules, the expected
# certificate's step texts and inference together, where the ordered path of _check makes
# three passes (admission's grammar, the expected certificate, inference). It answers only
# CHECKED, and only when every step of the ordered path would pass: the subject passed steps
# 1-6 and the record-level grammar (admit_subject_head), every per-node rule holds, the
# certificate is byte for byte the expected one (so steps 3, 5 and 6 hold), the profile is the
# compiled one (step 4) and inference never stopped (step 7). Anything else returns None and
# the ordered path decides, with its order of refusals untouched. Dependency closures are
# walked for the root alone (inference does not need them), not kept as bit sets per node.


def _checked_pair(
    subject_bytes: bytes,
    certificate_bytes: bytes,
    max_nodes: int,
    max_depth: int,
    max_path_steps: int,
    admitted: tuple[dict[str, Any] | FormationError, str] | None,
    head_only: bool = False,
) -> dict[str, Any] | None:
    """The CHECKED report of an honest pair, or ``None`` (the ordered path decides)."""
    if type(certificate_bytes) is not bytes or max_depth < 1:
        return None  # no certificate bytes to compare; node 0 (an ATOM) would stop on depth
    if admitted is None:
        subject = admit_subject_head(subject_bytes, max_nodes=max_nodes)
        node_rules = True
    else:
        subject = admitted[0] if type(admitted[0]) is dict else None
        node_rules = head_only  # else admit_subject applied them
    if subject is None or subject["profile_digest"] != PROFILE_DIGEST:
        return None
    subject_digest = digest_bytes(subject_bytes) if admitted is None else admitted[1]
    try:
        return _checked_nodes(
            subject["nodes"],
            subject["root"],
            subject_digest,
            certificate_bytes,
            max_depth,
            max_path_steps,
            node_rules,
        )
    except (KeyError, TypeError, IndexError, ValueError):
        # A node the rules refuse (a non-ASCII payload digest fails its denotation's ASCII encoding
        # before the payloads are checked): the ordered path says which rule and where.
        return None


def _checked_nodes(
    nodes: list[Any],
    root: int,
    subject_digest: str,
    certificate_bytes: bytes,
    max_depth: int,
    max_path_steps: int,
    node_rules: bool,
) -> dict[str, Any] | None:
    """One pass: per-node grammar (``node_rules``), step texts and inference, in the same rules
    as ``_subject_grammar``, ``_expected_certificate`` and ``_infer``; ``None`` at the first
    thing any of them would not pass.

    The per-node grammar, exactly: a node that is not a ``dict`` raises ``TypeError`` at
    ``node["tag"]``; a missing tag or reference raises ``KeyError``; an unhashable tag raises
    ``TypeError`` and an unknown one has no key count; a node whose tag and references are
    present and whose key count is its tag's has exactly its tag's keys; a reference is an
    exact ``int`` below the node's index; the ATOM payloads are checked together at the end.
    (An unknown tag has no key count, so ``len(node)`` never equals it.)
    The caller turns each of those exceptions into ``None``.
    """
    key_count = _KEY_COUNT
    walk = _OnePass(_Denotations(subject_digest, nodes), max_depth, max_path_steps)
    atom, binary, unary = walk.atom, walk.binary, walk.unary
    for index, node in enumerate(nodes):
        tag = node["tag"]
        if node_rules and len(node) != key_count.get(tag):
            return None
        if tag == "ATOM":
            atom(index, node)
        elif tag == "APPLY_STEP" or tag == "COMPOSE":
            if not binary(index, node, tag):
                return None
        elif not unary(index, node, tag):
            return None
    if node_rules and not all_digests(walk.payloads):
        return None
    if certificate_bytes != _certificate_bytes(root, walk.steps, subject_digest):
        return None
    result = walk.values[root]
    if result[0] == _PATH:
        result = (_PATH, result[1], result[2], _flat_steps(result[3]), result[4])
    return _report(
        "CHECKED",
        None,
        subject_digest,
        root,
        _observation(
            walk.denotations,
            result,
            root,
            walk.ranks[root],
            walk.depths[root],
            walk.origins[root],
        ),
    )


class _OnePass:
    """The per-node state of :func:`_checked_nodes`: each method types one node and appends
    its step text and value, depth, rank and quotation origins (a bit set); ``False`` at the
    first thing the ordered path would not pass. A path value carries its step count as a
    sixth item."""

    __slots__ = (
        "denotations",
        "depths",
        "max_depth",
        "max_path_steps",
        "origins",
        "payloads",
        "ranks",
        "steps",
        "values",
    )

    def __init__(self, denotations: _Denotations, max_depth: int, max_path_steps: int) -> None:
        self.denotations = denotations
        self.max_depth = max_depth
        self.max_path_steps = max_path_steps
        self.steps: list[str] = []
        self.payloads: list[object] = []
        self.values: list[tuple[Any, ...]] = []
        self.depths: list[int] = []
        self.ranks: list[int] = []
        self.origins: list[int] = []

    def atom(self, index: int, node: dict[str, Any]) -> None:
        self.payloads.append(node["payload_digest"])
        self.steps.append(_ATOM_STEP[index])
        self.values.append((_FORM, index))
        self.depths.append(1)
        self.ranks.append(0)
        self.origins.append(0)

    def binary(self, index: int, node: dict[str, Any], tag: str) -> bool:
        """An APPLY_STEP or a COMPOSE node."""
        if tag == "COMPOSE":
            first, second = node["left"], node["right"]
        else:
            first, second = node["source"], node["target"]
        if (
            type(first) is not int
            or type(second) is not int
            or not 0 <= first < index
            or not 0 <= second < index
        ):
            return False
        self.steps.append(_STEP_HEAD[index] + _INDEX[first] + "," + _INDEX[second] + _TAILS[tag])
        depths, ranks = self.depths, self.ranks
        depth = max(depths[first], depths[second]) + 1
        if depth > self.max_depth:
            return False
        argument = self.values[first]
        target = self.values[second]
        if tag == "APPLY_STEP":
            value = self._apply_step(index, argument, target)
        else:
            value = self._compose(index, argument, target)
        if value is None:
            return False
        self.values.append(value)
        depths.append(depth)
        ranks.append(max(ranks[first], ranks[second]))
        self.origins.append(self.origins[first] | self.origins[second])
        return True

    def _apply_step(
        self, index: int, argument: tuple[Any, ...], target: tuple[Any, ...]
    ) -> tuple[Any, ...] | None:
        if argument[0] != _FORM or target[0] != _FORM or self.max_path_steps < 1:
            return None
        source_origin, target_origin = argument[1], target[1]
        form = self.denotations.form
        if self.denotations.apply_arguments.get(target_origin) != source_origin and form(
            target_origin
        ) != _apply_denotation(form(source_origin)):
            return None
        return (_PATH, source_origin, target_origin, ((source_origin, target_origin),), index, 1)

    def _compose(
        self, index: int, argument: tuple[Any, ...], target: tuple[Any, ...]
    ) -> tuple[Any, ...] | None:
        if argument[0] != _PATH or target[0] != _PATH:
            return None
        joint_left, joint_right = argument[2], target[1]
        form = self.denotations.form
        if joint_left != joint_right and form(joint_left) != form(joint_right):
            return None
        count = argument[5] + target[5]
        if count > self.max_path_steps:
            return None
        # Steps are read back for the root observation only: a COMPOSE keeps its two
        # non-empty halves as a [left, right] pair (at most count - 1 pairs under one
        # value, whatever the sharing) instead of copying their concatenation.
        if not target[5]:
            halves = argument[3]
        elif not argument[5]:
            halves = target[3]
        else:
            halves = [argument[3], target[3]]
        return (_PATH, argument[1], target[2], halves, index, count)

    def unary(self, index: int, node: dict[str, Any], tag: str) -> bool:
        """An APPLY, ID, QUOTE or READ node."""
        first = node[_FIELD[tag]]
        if type(first) is not int or not 0 <= first < index:
            return False
        self.steps.append(_STEP_HEAD[index] + _INDEX[first] + _TAILS[tag])
        depth = self.depths[first] + 1
        if depth > self.max_depth:
            return False
        rank = self.ranks[first]
        origin = self.origins[first]
        argument = self.values[first]
        if tag == "APPLY":
            if argument[0] != _FORM:
                return False
            self.denotations.apply_arguments[index] = argument[1]
            value: tuple[Any, ...] = (_FORM, index)
        elif tag == "ID":
            if argument[0] != _FORM:
                return False
            point = argument[1]
            value = (_PATH, point, point, (), index, 0)
        elif tag == "QUOTE":
            rank += 1
            origin |= 1 << index
            value = ("CODE(" + argument[0] + ")", first, argument, index)
        else:  # READ
            if argument[0][:5] != "CODE(":
                return False
            value = argument[2]
        self.values.append(value)
        self.depths.append(depth)
        self.ranks.append(rank)
        self.origins.append(origin)
        return True


def _flat_steps(tree: tuple[tuple[int, int], ...] | list[Any]) -> tuple[tuple[int, int], ...]:
    """The steps of a fast-path path value, in order (its ``[left, right]`` pairs undone)."""
    flat: list[tuple[int, int]] = []
    stack = [tree]
    while stack:
        item = stack.pop()
        if type(item) is list:
            stack.append(item[1])
            stack.append(item[0])
        else:
            flat.extend(item)
    return tuple(flat)
