"""The retained-silo commit grammar (``VSTD-SILO-COMMIT-0.1``, ``docs/spec/formation.md`` §6).

``admit_commit(data) -> dict`` admits a commit's exact bytes and validates the whole commit;
it never raises anything but :class:`CommitRefused` for bad input and never mutates it.
:func:`is_text` and :func:`is_portable_path` are the commit's text and path rules, which the
inspection (:mod:`mechanism.formation._silo`) and the receipt reuse for their selectors.

Rules, in the order they are applied (the first failure decides):

1. Exact ``bytes`` → ≤ :data:`MAX_COMMIT_BYTES` (262,144) → string-aware pre-scan (depth 16,
   8,192 containers) → strict canonical JSON → an object with a string ``schema_version`` →
   that version. A size/scan limit or a foreign schema version is a refusal with ``limited``
   set (the inspection's ``COMMIT_UNSUPPORTED_OR_LIMITED``).
2. Full commit validation, else a refusal with ``limited`` unset (``COMMIT_INVALID``): exactly
   the 17 commit keys; ``publisher:sha256:<hex>``; at most two parents, digests, sorted and
   unique; a census of 1..256 entries sorted by unique path (no two paths equal ignoring case),
   each ``{path, object, necessity}`` with a portable path, a known necessity and an exact
   ``VSTD-OBJECT-0.1`` object (digest, size ≤ 4 MiB, text media type, artifact kind, schema
   id); ground paths sorted, unique, in the census; derivations sorted by ``target_path``
   and ≤ 256 relations sorted by ``type``/``source``/``target``, every path they name in the
   census; the text lists sorted and unique; a known completeness kind; the agency
   declaration (actions, version text, digest); the authority model path and the
   self-derivation record's paths in the census.
3. Text (:func:`is_text`): a non-empty exact ``str`` without edge whitespace, no C0 control,
   no code point 127–159 and no surrogate, within the field's ceiling. Portable path
   (:func:`is_portable_path`): text ≤ 240; ``/``-separated parts of ``[A-Za-z0-9_.-]+`` that
   are not ``.``/``..``, do not end with ``.``, and whose basename is not a reserved device
   name.

Declared derivations and relations (e.g. a CHECKS link) are validated, never consulted: a link
is not proof that checking ran. The decisions this grammar had to make where the reference
text is silent (inner shape of ``derivations``/``relations``, text ceilings) are documented in
``docs/silo.md``.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Final

from mechanism.canonical import (
    CanonicalError,
    CanonicalLimitError,
    CanonicalUnsupportedError,
    admit_record,
    is_digest,
)
from session.canon import CallerError

__all__ = [
    "COMMIT_SCHEMA",
    "MAX_COMMIT_BYTES",
    "MAX_OBJECT_BYTES",
    "MAX_PATH_CHARS",
    "OBJECT_SCHEMA",
    "CommitRefused",
    "admit_commit",
    "census_digests",
    "is_portable_path",
    "is_text",
]

COMMIT_SCHEMA: Final = "VSTD-SILO-COMMIT-0.1"
OBJECT_SCHEMA: Final = "VSTD-OBJECT-0.1"
MAX_COMMIT_BYTES: Final = 262_144
MAX_COMMIT_DEPTH: Final = 16
MAX_COMMIT_CONTAINERS: Final = 8_192
#: The largest census object a commit may declare (and the inspection may hash).
MAX_OBJECT_BYTES: Final = 4_194_304
MAX_CENSUS_ENTRIES: Final = 256
MAX_PARENTS: Final = 2
MAX_RELATIONS: Final = 256
MAX_COVERAGE_UNIVERSE: Final = 4_096

_COMMIT_KEYS: Final = frozenset(
    {
        "schema_version",
        "publisher_id",
        "parents",
        "census",
        "ground_paths",
        "derivations",
        "relations",
        "residual_obligations",
        "exclusions",
        "completeness_kind",
        "coverage_universe",
        "authority_axiom_agency",
        "authority_axiom_agency_version",
        "authority_axiom_agency_digest",
        "authority_model_path",
        "self_derivation_record",
        "created_at",
    }
)
_OBJECT_KEYS: Final = frozenset(
    {
        "schema_version",
        "object_digest",
        "size_bytes",
        "media_type",
        "artifact_kind",
        "declared_schema_id",
    }
)
_SELF_DERIVATION_KEYS: Final = frozenset(
    {
        "subject_path",
        "ground_paths",
        "mechanism_path",
        "retained_path",
        "relation_strength",
        "ground_self",
        "derivation_reflexivity",
        "reflexion_identity",
        "deriver_cycle_closed",
        "ground_self_evidence_path",
        "derivation_reflexivity_evidence_path",
        "reflexion_identity_evidence_path",
        "deriver_cycle_closure_evidence_path",
        "residual_obligations",
    }
)
_SELF_DERIVATION_FLAGS: Final = (
    "ground_self",
    "derivation_reflexivity",
    "reflexion_identity",
    "deriver_cycle_closed",
)
_SELF_DERIVATION_EVIDENCE_PATHS: Final = (
    "ground_self_evidence_path",
    "derivation_reflexivity_evidence_path",
    "reflexion_identity_evidence_path",
    "deriver_cycle_closure_evidence_path",
)
_NECESSITIES: Final = frozenset({"NECESSARY", "DISPENSABLE"})
_COMPLETENESS_KINDS: Final = frozenset(
    {"SILO_CENSUS", "DERIVATIONAL_COVERAGE", "SEMANTIC_COVERAGE", "LOGICAL_DECIDABILITY"}
)
_PUBLISHER_RE: Final = re.compile(r"publisher:sha256:[0-9a-f]{64}")
_PATH_PART_RE: Final = re.compile(r"[A-Za-z0-9_.-]+")
_FORBIDDEN_TEXT_RE: Final = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_RESERVED_BASENAMES: Final = frozenset(
    {"CON", "PRN", "AUX", "NUL"}
    | {f"COM{n}" for n in range(1, 10)}
    | {f"LPT{n}" for n in range(1, 10)}
)
MAX_PATH_CHARS: Final = 240
# Text ceilings the reference states (media type 256, artifact kind 128, schema id 256, agency
# action 128, coverage item 512, created_at 64) and those it leaves unstated (decided here, see
# docs/silo.md: obligations/exclusions/relation strength/agency version).
_MAX_MEDIA_TYPE: Final = 256
_MAX_ARTIFACT_KIND: Final = 128
_MAX_SCHEMA_ID: Final = 256
_MAX_ACTION: Final = 128
_MAX_COVERAGE_TEXT: Final = 512
_MAX_CREATED_AT: Final = 64
_MAX_NOTE_TEXT: Final = 512
_MAX_VERSION_TEXT: Final = 128
_MAX_RELATION_STRENGTH: Final = 128
_MAX_RELATION_TYPE: Final = 128


# --------------------------------------------------------------------------------------------
# Commit admission


class CommitRefused(CallerError):
    """A silo commit was not admitted. ``limited`` is True for UNSUPPORTED/LIMIT refusals."""

    def __init__(self, message: str, *, limited: bool) -> None:
        super().__init__(message)
        self.limited = limited


class _Malformed(Exception):
    """Internal: the admitted JSON value is not a valid ``SiloCommit``."""


def is_text(value: object, max_chars: int) -> bool:
    """The commit text rule: a non-empty exact ``str`` with no edge whitespace, ≤ ``max_chars``
    code points, no C0 control, no code point 127–159 and no surrogate."""
    if type(value) is not str or not value or len(value) > max_chars:
        return False
    if value != value.strip():
        return False
    return _FORBIDDEN_TEXT_RE.search(value) is None


def is_portable_path(value: object) -> bool:
    """The portable path rule: text ≤ 240; ``/``-separated parts of ``[A-Za-z0-9_.-]+`` that are
    not ``.``/``..``, do not end with ``.``, and whose basename (before the first ``.``,
    upper-cased) is not a reserved device name."""
    if not is_text(value, MAX_PATH_CHARS):
        return False
    assert type(value) is str
    for part in value.split("/"):
        if _PATH_PART_RE.fullmatch(part) is None or part in (".", "..") or part.endswith("."):
            return False
        if part.split(".", 1)[0].upper() in _RESERVED_BASENAMES:
            return False
    return True


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise _Malformed(message)


def _is_one_of(value: object, allowed: frozenset[str]) -> bool:
    # Exact str first: ``in`` on a set would hash a list/dict value and raise TypeError.
    return type(value) is str and value in allowed


def _strictly_ascending(items: list[Any]) -> bool:
    return all(left < right for left, right in itertools.pairwise(items))


def _text_list(value: object, max_chars: int, what: str, *, max_items: int | None = None) -> None:
    _require(type(value) is list, f"{what} must be a list")
    assert isinstance(value, list)
    if max_items is not None:
        _require(len(value) <= max_items, f"{what} has too many items")
    _require(all(is_text(item, max_chars) for item in value), f"{what} holds invalid text")
    _require(_strictly_ascending(value), f"{what} must be sorted and unique")


def _census_path(value: object, census_paths: frozenset[str], what: str) -> None:
    _require(is_portable_path(value), f"{what} is not a portable path")
    _require(value in census_paths, f"{what} is not a census path")


def _validate_object(record: object) -> None:
    _require(type(record) is dict, "census object must be an object")
    assert isinstance(record, dict)
    _require(record.keys() == _OBJECT_KEYS, "census object keys are not exact")
    _require(record["schema_version"] == OBJECT_SCHEMA, "census object schema is not supported")
    _require(is_digest(record["object_digest"]), "object_digest is not a digest")
    size = record["size_bytes"]
    _require(type(size) is int and 0 <= size <= MAX_OBJECT_BYTES, "size_bytes out of range")
    _require(is_text(record["media_type"], _MAX_MEDIA_TYPE), "media_type is not text")
    _require(is_text(record["artifact_kind"], _MAX_ARTIFACT_KIND), "artifact_kind is not text")
    _require(is_text(record["declared_schema_id"], _MAX_SCHEMA_ID), "schema id is not text")


def _validate_census(census: object) -> frozenset[str]:
    _require(type(census) is list, "census must be a list")
    assert isinstance(census, list)
    _require(1 <= len(census) <= MAX_CENSUS_ENTRIES, "census must hold 1..256 entries")
    paths: list[str] = []
    for entry in census:
        _require(type(entry) is dict, "census entry must be an object")
        _require(entry.keys() == {"path", "object", "necessity"}, "census entry keys not exact")
        _require(is_portable_path(entry["path"]), "census path is not a portable path")
        _require(_is_one_of(entry["necessity"], _NECESSITIES), "census necessity unsupported")
        _validate_object(entry["object"])
        paths.append(entry["path"])
    _require(_strictly_ascending(paths), "census must be sorted by unique path")
    _require(
        len({path.casefold() for path in paths}) == len(paths),
        "census paths collide case-insensitively",
    )
    return frozenset(paths)


def _validate_self_derivation(record: object, census_paths: frozenset[str]) -> None:
    _require(type(record) is dict, "self_derivation_record must be an object")
    assert isinstance(record, dict)
    _require(record.keys() == _SELF_DERIVATION_KEYS, "self_derivation_record keys not exact")
    _census_path(record["subject_path"], census_paths, "self-derivation subject_path")
    _census_path(record["mechanism_path"], census_paths, "self-derivation mechanism_path")
    ground_paths = record["ground_paths"]
    _require(type(ground_paths) is list, "self-derivation ground_paths must be a list")
    for path in ground_paths:
        _census_path(path, census_paths, "self-derivation ground path")
    _require(_strictly_ascending(ground_paths), "self-derivation ground_paths not sorted unique")
    retained = record["retained_path"]
    _require(type(retained) is list and len(retained) > 0, "retained_path must be non-empty")
    for path in retained:
        _census_path(path, census_paths, "retained_path step")
    _require(retained[0] in ground_paths, "retained_path must start in its ground_paths")
    _require(retained[-1] == record["subject_path"], "retained_path must end at subject_path")
    _require(
        is_text(record["relation_strength"], _MAX_RELATION_STRENGTH),
        "relation_strength is not text",
    )
    for flag in _SELF_DERIVATION_FLAGS:
        _require(type(record[flag]) is bool, f"{flag} must be a boolean")
    for key in _SELF_DERIVATION_EVIDENCE_PATHS:
        if record[key] is not None:
            _census_path(record[key], census_paths, key)
    _text_list(record["residual_obligations"], _MAX_NOTE_TEXT, "self-derivation obligations")


def _named_paths(record: dict[str, Any], census_paths: frozenset[str], what: str) -> None:
    # "Every path referenced anywhere must be a census path": a ``*_path`` field is null or a
    # census path, a ``*_paths`` field a list of census paths.
    for key, value in record.items():
        if key.endswith("_path"):
            if value is not None:
                _census_path(value, census_paths, f"{what} {key}")
        elif key.endswith("_paths"):
            _require(type(value) is list, f"{what} {key} must be a list")
            for path in value:
                _census_path(path, census_paths, f"{what} {key} entry")


def _non_decreasing(keys: list[Any]) -> bool:
    return all(left <= right for left, right in itertools.pairwise(keys))


def _validate_derivations(derivations: object, census_paths: frozenset[str]) -> None:
    """Derivation records: objects whose ``target_path`` (the sort key §6.3 names) is a census
    path, sorted by it; every other named path is a census path. §6.3 fixes no other field."""
    _require(type(derivations) is list, "derivations must be a list")
    assert isinstance(derivations, list)
    for record in derivations:
        _require(type(record) is dict, "derivation must be an object")
        _require("target_path" in record, "derivation has no target_path")
        _require(record["target_path"] is not None, "derivation target_path is null")
        _named_paths(record, census_paths, "derivation")
    _require(
        _non_decreasing([record["target_path"] for record in derivations]),
        "derivations must be sorted by target_path",
    )


# The text names a relation's sort key only in words ("type/source/target"); each component may
# be spelt as that word or in the commit's ``*_path`` style, never both (docs/silo.md).
_RELATION_FIELDS: Final = (
    ("type", "relation_type"),
    ("source", "source_path"),
    ("target", "target_path"),
)


def _relation_field(record: dict[str, Any], names: tuple[str, str]) -> Any:
    present = [name for name in names if name in record]
    _require(len(present) == 1, f"relation needs exactly one of {names}")
    return record[present[0]]


def _validate_relations(relations: object, census_paths: frozenset[str]) -> None:
    """Relation records (≤ 256): objects with a text type and census-path source and target (the
    sort key §6.3 names), sorted by (type, source, target); every other named path is a census
    path. §6.3 fixes no other field."""
    _require(type(relations) is list, "relations must be a list")
    assert isinstance(relations, list)
    _require(len(relations) <= MAX_RELATIONS, "relations: at most 256")
    keys: list[tuple[str, str, str]] = []
    for record in relations:
        _require(type(record) is dict, "relation must be an object")
        kind, source, target = (_relation_field(record, names) for names in _RELATION_FIELDS)
        _require(is_text(kind, _MAX_RELATION_TYPE), "relation type is not text")
        _census_path(source, census_paths, "relation source")
        _census_path(target, census_paths, "relation target")
        _named_paths(record, census_paths, "relation")
        keys.append((kind, source, target))
    _require(_non_decreasing(keys), "relations must be sorted by type/source/target")


def _validate_commit(commit: dict[str, Any]) -> None:
    """Full ``SiloCommit`` validation of an admitted commit object (``_Malformed`` on failure)."""
    _require(commit.keys() == _COMMIT_KEYS, "commit keys are not exactly the 17 commit fields")
    publisher = commit["publisher_id"]
    _require(
        type(publisher) is str and _PUBLISHER_RE.fullmatch(publisher) is not None,
        "publisher_id is not publisher:sha256:<hex>",
    )
    parents = commit["parents"]
    _require(type(parents) is list and len(parents) <= MAX_PARENTS, "parents: at most two")
    _require(all(is_digest(parent) for parent in parents), "parents must be digests")
    _require(_strictly_ascending(parents), "parents must be sorted and unique")

    census_paths = _validate_census(commit["census"])

    ground_paths = commit["ground_paths"]
    _require(type(ground_paths) is list, "ground_paths must be a list")
    for path in ground_paths:
        _census_path(path, census_paths, "ground path")
    _require(_strictly_ascending(ground_paths), "ground_paths must be sorted and unique")

    _validate_derivations(commit["derivations"], census_paths)
    _validate_relations(commit["relations"], census_paths)

    _text_list(commit["residual_obligations"], _MAX_NOTE_TEXT, "residual_obligations")
    _text_list(commit["exclusions"], _MAX_NOTE_TEXT, "exclusions")
    _require(
        _is_one_of(commit["completeness_kind"], _COMPLETENESS_KINDS),
        "completeness_kind unsupported",
    )
    _text_list(
        commit["coverage_universe"],
        _MAX_COVERAGE_TEXT,
        "coverage_universe",
        max_items=MAX_COVERAGE_UNIVERSE,
    )
    _text_list(commit["authority_axiom_agency"], _MAX_ACTION, "authority_axiom_agency")
    _require(
        is_text(commit["authority_axiom_agency_version"], _MAX_VERSION_TEXT),
        "authority_axiom_agency_version is not text",
    )
    _require(is_digest(commit["authority_axiom_agency_digest"]), "agency digest malformed")
    model_path = commit["authority_model_path"]
    if model_path is not None:
        _census_path(model_path, census_paths, "authority_model_path")
    _validate_self_derivation(commit["self_derivation_record"], census_paths)
    _require(is_text(commit["created_at"], _MAX_CREATED_AT), "created_at is not text")


def admit_commit(data: object) -> dict[str, Any]:
    """Admit exact ``VSTD-SILO-COMMIT-0.1`` bytes and validate the whole commit.

    Raises :class:`CommitRefused` (``limited`` for size/scan limits and unsupported schemas).
    """
    try:
        commit = admit_record(
            data,
            COMMIT_SCHEMA,
            max_bytes=MAX_COMMIT_BYTES,
            max_depth=MAX_COMMIT_DEPTH,
            max_containers=MAX_COMMIT_CONTAINERS,
        )
    except (CanonicalLimitError, CanonicalUnsupportedError) as error:
        raise CommitRefused(str(error), limited=True) from None
    except CanonicalError as error:
        raise CommitRefused(str(error), limited=False) from None
    try:
        _validate_commit(commit)
    except _Malformed as error:
        raise CommitRefused(str(error), limited=False) from None
    return commit


def census_digests(commit: dict[str, Any]) -> list[str]:
    """The distinct census object digests of an admitted commit, ascending."""
    return sorted({entry["object"]["object_digest"] for entry in commit["census"]})
