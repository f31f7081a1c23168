"""Typed formation 0.1 wire: constants, the compiled profile, and record admission.

Contract (``docs/spec/formation.md`` §2.2, §3.1–§3.3):

* The compiled profile is exactly the packaged bytes of ``data/typed-formation-0.1.json``;
  importing this module fails loudly if they do not hash to the pinned compiled digest
  ``sha256:271760d6…677f``. A record naming any other profile is never loaded.
* ``admit_subject(data)`` and ``admit_certificate(data)`` admit one record, in this order,
  first failure wins:

  1. exact ``bytes`` → else INVALID; 2. at most ``MAX_RECORD_BYTES`` → else LIMIT;
  3. string-aware pre-decode scan (depth ``MAX_JSON_DEPTH`` counting the root,
     ``MAX_JSON_CONTAINERS`` openings) → LIMIT, or INVALID for an unmatched closer;
  4. strict UTF-8 and byte equality with the canonical re-encoding → else INVALID;
  5. an object with a string ``schema_version`` → else INVALID;
  6. the expected schema → else UNSUPPORTED;
  7. the record grammar below → INVALID, except the node/step count bound which is LIMIT.

  The grammar refuses every value outside the canonical value model by itself, so step 4's
  generic value-model scan runs only when the grammar refuses (its INVALID, if any, is the
  one reported): the same answers, without a second pass over an admissible record.

  Subject grammar, in order: exact top-level keys → ``profile_digest`` is a digest →
  ``context`` is an object with exactly the two context keys → both are digests → ``nodes``
  is a non-empty list → at most ``max_nodes`` nodes (LIMIT, before anything below) → ``root``
  is an exact int in ``0 <= root < len(nodes)`` → for each node in order: an object with a
  string ``tag`` → a known tag → exactly that tag's keys → an ATOM's ``payload_digest`` is a
  digest → every reference is an exact int strictly below the node's own index.

  Certificate grammar, in order: exact top-level keys → ``subject_digest`` and
  ``profile_digest`` are digests → ``steps`` is a non-empty list → at most ``max_nodes`` steps
  (LIMIT) → ``root`` is an exact int below ``MAX_NODES`` → each step is an object with exactly
  ``node``, ``rule``, ``premises``; ``node`` an exact int below ``MAX_NODES``; ``rule`` a known
  tag; ``premises`` a list of at most two exact ints below ``MAX_NODES``. Premises are only
  range-checked here; the checker compares them with the subject.

* Failures raise :class:`FormationError` (INVALID), :class:`FormationLimitError` (LIMIT: the
  bounded mechanism could not finish; not a refutation) or :class:`UnsupportedFormation`
  (UNSUPPORTED). Nothing else escapes for any input.

* Resource ceilings (node count, dependency depth, path steps) may be lowered by a caller but
  never raised: :func:`validate_ceilings` refuses a bool, a non-int, a negative value or a
  value above the compiled default before any checking starts (:class:`CeilingError`, both a
  ``ValueError`` and a ``TypeError``).

This module holds no inference: the checker and the producer each type terms on their own.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any, Final

from mechanism.canonical import (
    CanonicalError,
    CanonicalLimitError,
    CanonicalUnsupportedError,
    admit_record_deferred,
    check_value_model,
    digest_bytes,
    is_digest,
    parse_unscanned,
)
from session import CeilingError, lower_only
from session.canon import CallerError

__all__ = [
    "CERTIFICATE_SCHEMA",
    "MAX_DEPTH",
    "MAX_JSON_CONTAINERS",
    "MAX_JSON_DEPTH",
    "MAX_NODES",
    "MAX_PATH_STEPS",
    "MAX_RECORD_BYTES",
    "MECHANISM_ID",
    "NODE_KEYS",
    "NODE_REFERENCE_FIELDS",
    "PROFILE_DIGEST",
    "PROFILE_SCHEMA",
    "RESIDUAL_OBLIGATIONS",
    "SUBJECT_SCHEMA",
    "TAGS",
    "CeilingError",
    "FormationError",
    "FormationLimitError",
    "UnsupportedFormation",
    "admit_certificate",
    "admit_subject",
    "admit_subject_head",
    "all_digests",
    "node_references",
    "profile_bytes",
    "profile_digest",
    "schema_bytes",
    "validate_ceilings",
]

SUBJECT_SCHEMA: Final = "VSTD-TYPED-FORMATION-0.1"
CERTIFICATE_SCHEMA: Final = "VSTD-TYPED-FORMATION-CERTIFICATE-0.1"
PROFILE_SCHEMA: Final = "VSTD-TYPED-FORMATION-PROFILE-0.1"
MECHANISM_ID: Final = "vstd.typed_formation.checked.0.1"

MAX_NODES: Final = 1024
MAX_DEPTH: Final = 64
MAX_PATH_STEPS: Final = 4096
MAX_RECORD_BYTES: Final = 262144
MAX_JSON_DEPTH: Final = 16
MAX_JSON_CONTAINERS: Final = 8192

RESIDUAL_OBLIGATIONS: Final[tuple[str, ...]] = (
    "SOURCE_INTERPRETATION_NOT_ESTABLISHED",
    "GROUND_DERIVATION_NOT_ESTABLISHED",
    "SOURCE_TRACE_RELATION_NOT_ESTABLISHED",
    "SOURCE_LAYER_BOUNDARY_NOT_ESTABLISHED",
    "SELF_STATUS_NOT_ESTABLISHED",
    "GLOBAL_CYCLE_NOT_ESTABLISHED",
    "COMPLETENESS_NOT_ESTABLISHED",
    "AGENCY_NOT_CHECKED",
)

# The seven constructor tags and their references, in the order the certificate's premises
# list them (docs/spec/formation.md §3.2 table).
NODE_REFERENCE_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "ATOM": (),
    "APPLY": ("argument",),
    "ID": ("at",),
    "APPLY_STEP": ("source", "target"),
    "COMPOSE": ("left", "right"),
    "QUOTE": ("value",),
    "READ": ("code",),
}
TAGS: Final[tuple[str, ...]] = tuple(NODE_REFERENCE_FIELDS)
_NODE_KEYS: Final[dict[str, frozenset[str]]] = {
    "ATOM": frozenset({"tag", "payload_digest"}),
    **{
        tag: frozenset({"tag", *fields})
        for tag, fields in NODE_REFERENCE_FIELDS.items()
        if tag != "ATOM"
    },
}
#: Exactly the keys of a node with each tag (the per-node rules of the subject grammar).
NODE_KEYS: Final = _NODE_KEYS
_SUBJECT_KEYS: Final = frozenset({"schema_version", "profile_digest", "context", "nodes", "root"})
_CONTEXT_KEYS: Final = frozenset({"ground_artifact_digest", "authority_axiom_agency_digest"})
_CERTIFICATE_KEYS: Final = frozenset(
    {"schema_version", "subject_digest", "profile_digest", "steps", "root"}
)
_STEP_KEYS: Final = frozenset({"node", "rule", "premises"})

_PINNED_PROFILE_DIGEST: Final = (
    "sha256:271760d604e1ade55cba4974c658b92263bd3ee8ae343677dd91d0e713fb677f"
)
_PROFILE_FILE: Final = "typed-formation-0.1.json"
_SCHEMA_FILE: Final = "vstd-typed-formation-0.1.schema.json"


class FormationError(CallerError, ValueError):
    """A formation record or derivation is invalid (INVALID)."""


class FormationLimitError(FormationError):
    """The bounded mechanism could not finish; not a refutation (LIMIT → UNKNOWN)."""


class UnsupportedFormation(FormationError):
    """An unsupported schema or profile: never loaded, never checked (UNSUPPORTED → UNKNOWN)."""


def _read_package_data(name: str) -> bytes:
    return resources.files("mechanism.formation.data").joinpath(name).read_bytes()


_PROFILE_BYTES: Final = _read_package_data(_PROFILE_FILE)
PROFILE_DIGEST: Final = digest_bytes(_PROFILE_BYTES)
if PROFILE_DIGEST != _PINNED_PROFILE_DIGEST:  # pragma: no cover - a corrupted installation
    raise ImportError(f"packaged typed-formation profile hashes to {PROFILE_DIGEST}")


def profile_bytes() -> bytes:
    """The exact 1,498 bytes of the compiled typed-formation 0.1 profile (inert data)."""
    return _PROFILE_BYTES


def profile_digest() -> str:
    """The compiled profile digest, ``sha256:271760d6…677f``."""
    return PROFILE_DIGEST


def schema_bytes() -> bytes:
    """The packaged JSON Schema (2020-12) for subjects and certificates (structural only)."""
    return _read_package_data(_SCHEMA_FILE)


def validate_ceilings(*, max_nodes: object, max_depth: object, max_path_steps: object) -> None:
    """Refuse ceilings that are not exact ints in ``0 … default`` (they may only be lowered).

    Raises :class:`CeilingError` (:func:`session.lower_only`: a ``ValueError`` and a
    ``TypeError``) for a bool, a non-int, a negative value or one above the compiled default.
    """
    if max_nodes is MAX_NODES and max_depth is MAX_DEPTH and max_path_steps is MAX_PATH_STEPS:
        return  # the compiled defaults themselves (every check an adapter makes by default)
    lower_only("max_nodes", max_nodes, MAX_NODES)
    lower_only("max_depth", max_depth, MAX_DEPTH)
    lower_only("max_path_steps", max_path_steps, MAX_PATH_STEPS)


def _admit(data: object, schema: str) -> tuple[dict[str, Any], bytes | None]:
    """Steps 1-6. The generic value-model scan may be left pending (its bytes returned): the
    grammar of step 7 refuses every value outside the model by itself (exact keys, digests,
    known tags, bounded exact ints), so the scan runs only when the grammar refuses, to give
    the refusal step 4 would have given (:func:`_step_four_first`)."""
    try:
        return admit_record_deferred(
            data,
            schema,
            max_bytes=MAX_RECORD_BYTES,
            max_depth=MAX_JSON_DEPTH,
            max_containers=MAX_JSON_CONTAINERS,
        )
    except CanonicalLimitError as error:
        raise FormationLimitError(f"formation record exceeds a resource bound: {error}") from None
    except CanonicalUnsupportedError as error:
        raise UnsupportedFormation(f"unsupported formation record: {error}") from None
    except CanonicalError as error:
        raise FormationError(f"formation record is not canonical JSON: {error}") from None


def _count_limit_after_the_model(
    grammar: Callable[[dict[str, Any], int], None], record: dict[str, Any], pending: bytes | None
) -> None:
    """Before the node/step count LIMIT is reported: the grammar applied to every item (no
    count bound) accepts only values inside the model, so step 4 would have passed; only if it
    refuses does the generic scan decide (its INVALID first). Same cost per byte as admitting
    a record below the bound, which keeps admission linear in the record's size."""
    try:
        grammar(record, MAX_RECORD_BYTES)  # a bound no count can reach
    except FormationError:
        _step_four_first(pending)


def _step_four_first(pending: bytes | None) -> None:
    """Raise step 4's INVALID when the pending value-model scan fails (a grammar refusal,
    LIMIT included, is reported only when the record passed it, as before the deferral)."""
    try:
        check_value_model(pending)
    except CanonicalError as error:
        raise FormationError(f"formation record is not canonical JSON: {error}") from None


_DIGEST_PREFIX: Final = b"sha256:"
_DIGEST_LENGTH: Final = 71
_LOWER_HEX: Final = b"0123456789abcdef"
_PREFIX_NON_HEX: Final = b"sh:"  # the bytes of "sha256:" that are not lowercase hex digits


def _all_digests(values: list[object]) -> bool:
    """``all(map(is_digest, values))`` in a few C-level passes (the 1,024-ATOM hot path).

    Each item is an exact ``str`` of exactly 71 ASCII characters, so item *i* occupies bytes
    ``71*i … 71*i+70`` of the concatenation. The seven strided slices prove every item starts
    with ``sha256:``; those prefixes hold exactly ``n`` copies of the non-hex bytes ``s h :``,
    so deleting the lowercase hex digits leaves exactly ``b"sh:" * n`` only when every other
    byte (each item's last 64) is a lowercase hex digit.
    """
    count = len(values)
    if count < 8:  # too few for the passes below to pay off
        return all(map(is_digest, values))
    if set(map(type, values)) != {str} or set(map(len, values)) != {_DIGEST_LENGTH}:  # type: ignore[arg-type]
        return False
    joined: str = "".join(values)  # type: ignore[arg-type]
    if not joined.isascii():
        return False
    data = joined.encode("ascii")
    for offset, byte in enumerate(_DIGEST_PREFIX):
        if data[offset::_DIGEST_LENGTH] != bytes((byte,)) * count:
            return False
    return data.translate(None, _LOWER_HEX) == _PREFIX_NON_HEX * count


#: The checker's fast path checks ATOM payloads with the very same test.
all_digests: Final = _all_digests


def _is_index(value: object, bound: int) -> bool:
    return type(value) is int and 0 <= value < bound


def node_references(node: dict[str, Any]) -> list[int]:
    """The references of an admitted node, in the table order (the certificate's premises)."""
    return [node[field] for field in NODE_REFERENCE_FIELDS[node["tag"]]]


def admit_subject(data: object, *, max_nodes: int = MAX_NODES) -> dict[str, Any]:
    """Admit a ``VSTD-TYPED-FORMATION-0.1`` subject (rules in the module docstring)."""
    record, pending = _admit(data, SUBJECT_SCHEMA)
    try:
        _subject_grammar(record, max_nodes)
    except FormationLimitError:
        _count_limit_after_the_model(_subject_grammar, record, pending)
        raise
    except FormationError:
        _step_four_first(pending)
        raise
    return record


def admit_subject_head(data: object, *, max_nodes: int) -> dict[str, Any] | None:
    """Internal (the checker's exact-pair fast path): the subject grammar up to, not including,
    the per-node rules, on exact canonical bytes (:func:`~mechanism.canonical.parse_unscanned`:
    steps 3 and 4's value-model scan hold once the grammar does); ``None`` for any refusal, or
    anything that fast parse does not take. A caller that acts on the
    record must apply every per-node rule itself (the module rules; :data:`NODE_KEYS`,
    :func:`all_digests`) and take :func:`admit_subject`'s answer whenever one does not hold."""
    record = parse_unscanned(data, max_bytes=MAX_RECORD_BYTES)
    if type(record) is not dict or record.get("schema_version") != SUBJECT_SCHEMA:
        return None
    try:
        _subject_head(record, max_nodes)
    except FormationError:
        return None
    return record


def _subject_head(record: dict[str, Any], max_nodes: int) -> None:
    if record.keys() != _SUBJECT_KEYS:
        raise FormationError("subject must have exactly the five subject keys")
    if not is_digest(record["profile_digest"]):
        raise FormationError("subject profile_digest is not a digest")
    context = record["context"]
    if type(context) is not dict or context.keys() != _CONTEXT_KEYS:
        raise FormationError("subject context must have exactly the two context keys")
    if not (
        is_digest(context["ground_artifact_digest"])
        and is_digest(context["authority_axiom_agency_digest"])
    ):
        raise FormationError("subject context values must be digests")
    nodes = record["nodes"]
    if type(nodes) is not list or not nodes:
        raise FormationError("subject nodes must be a non-empty list")
    if len(nodes) > max_nodes:
        raise FormationLimitError(f"subject declares more than {max_nodes} nodes")
    if not _is_index(record["root"], len(nodes)):
        raise FormationError("subject root must select a node")


def _subject_grammar(record: dict[str, Any], max_nodes: int) -> None:
    _subject_head(record, max_nodes)
    nodes = record["nodes"]
    payloads: list[object] = []
    node_keys = _NODE_KEYS
    fields_of = NODE_REFERENCE_FIELDS
    for index, node in enumerate(nodes):
        tag = node.get("tag") if type(node) is dict else None
        if type(tag) is not str:
            raise FormationError(f"node {index} must be an object with a string tag")
        keys = node_keys.get(tag)
        if keys is None:
            raise FormationError(f"node {index} has an unknown constructor tag")
        if node.keys() != keys:
            raise FormationError(f"node {index} must have exactly the {tag} keys")
        fields = fields_of[tag]
        if not fields:  # ATOM: its payload digest is checked with the others below
            payloads.append(node["payload_digest"])
            continue
        for field in fields:
            reference = node[field]
            if type(reference) is not int or not 0 <= reference < index:
                raise FormationError(f"node {index} {field} must reference an earlier node")
    if not _all_digests(payloads):
        raise FormationError("an ATOM payload_digest is not a digest")


def admit_certificate(data: object, *, max_nodes: int = MAX_NODES) -> dict[str, Any]:
    """Admit a ``VSTD-TYPED-FORMATION-CERTIFICATE-0.1`` record (rules in the module docstring)."""
    record, pending = _admit(data, CERTIFICATE_SCHEMA)
    try:
        _certificate_grammar(record, max_nodes)
    except FormationLimitError:
        _count_limit_after_the_model(_certificate_grammar, record, pending)
        raise
    except FormationError:
        _step_four_first(pending)
        raise
    return record


def _certificate_grammar(record: dict[str, Any], max_nodes: int) -> None:
    if record.keys() != _CERTIFICATE_KEYS:
        raise FormationError("certificate must have exactly the five certificate keys")
    if not (is_digest(record["subject_digest"]) and is_digest(record["profile_digest"])):
        raise FormationError("certificate subject_digest and profile_digest must be digests")
    steps = record["steps"]
    if type(steps) is not list or not steps:
        raise FormationError("certificate steps must be a non-empty list")
    if len(steps) > max_nodes:
        raise FormationLimitError(f"certificate declares more than {max_nodes} steps")
    if not _is_index(record["root"], MAX_NODES):
        raise FormationError("certificate root must be a node index")
    for position, step in enumerate(steps):
        if type(step) is not dict or step.keys() != _STEP_KEYS:
            raise FormationError(f"certificate step {position} must have exactly its three keys")
        if not _is_index(step["node"], MAX_NODES):
            raise FormationError(f"certificate step {position} node must be a node index")
        if type(step["rule"]) is not str or step["rule"] not in NODE_REFERENCE_FIELDS:
            raise FormationError(f"certificate step {position} rule is not a constructor tag")
        premises = step["premises"]
        if (
            type(premises) is not list
            or len(premises) > 2
            or not all(_is_index(premise, MAX_NODES) for premise in premises)
        ):
            raise FormationError(f"certificate step {position} premises must be node indices")
