"""Retained-silo formation inspection (``docs/spec/formation.md`` §6).

``inspect_silo_formation(commit_bytes, evidence, *, subject_path, certificate_path,
profile_path, ground_path) -> dict`` is local, pure and non-executing. It never raises for bad
input, never mutates its inputs, never calls a hook of a caller-supplied object, never fetches,
extracts or executes an artifact, and never promotes anything into a silo assessment.

Rules, in the order they are applied:

1. Commit admission (``VSTD-SILO-COMMIT-0.1``): exact ``bytes`` → ≤ 262,144 bytes → string-aware
   pre-scan (depth 16, 8,192 containers) → strict canonical JSON → an object with a string
   ``schema_version`` → that version → full commit validation (all 17 keys, census, portable
   paths, text rules, sorted-unique lists, derivations sorted by ``target_path``, ≤ 256
   relations sorted by ``type``/``source``/``target``, every referenced path in the census).
   A size/scan limit or a foreign schema version returns at once with
   ``COMMIT_UNSUPPORTED_OR_LIMITED`` and every facet ``UNKNOWN``; anything else malformed
   returns ``COMMIT_INVALID`` with binding and retention ``INVALID``. Either way
   ``commit_digest`` is null and ``coordinates`` is ``{}``. Declared derivations and relations
   (e.g. a CHECKS link) are validated, never consulted: a link is not proof that checking ran.
2. Each selector (subject, certificate, profile, ground, in that order) must be an exact ``str``
   portable path (``SELECTED_PATH_INVALID``) naming a census path
   (``SELECTED_PATH_NOT_IN_CENSUS``); subject/certificate/profile records must carry their exact
   role declaration (``SELECTED_ROLE_DECLARATION_INVALID``); ground bytes stay opaque.
3. The ground selector must be one of the commit's ``ground_paths``
   (``SELECTED_GROUND_NOT_DECLARED``).
4. The evidence snapshot: exactly a built-in ``dict`` (``EVIDENCE_MAPPING_UNSUPPORTED``), at most
   256 entries (``EVIDENCE_ENTRY_LIMIT``), exact ``str`` keys (``EVIDENCE_MAPPING_UNSUPPORTED``)
   that are strict digests (``EVIDENCE_MAPPING_INVALID``), not changed while it is copied
   (``EVIDENCE_SNAPSHOT_UNAVAILABLE``). Any of these discards the whole snapshot. A value that is
   not exactly ``bytes`` is kept as an invalid value; no value's methods are ever called.
5. Every distinct census digest, once, in ascending order: ``MISSING``; ``INVALID``
   (``OBJECT_BYTES_INVALID``); ``UNKNOWN`` (``SNAPSHOT_BYTE_LIMIT``: the object is over 4 MiB or
   would take the running total over 16 MiB; it is skipped and not counted); else hashed:
   ``INVALID`` (``OBJECT_DIGEST_MISMATCH``) or ``RETAINED``.
6. ``snapshot_retention``: declared sizes are checked per census entry (``OBJECT_SIZE_MISMATCH``);
   INVALID dominates UNKNOWN dominates INCOMPLETE (``CENSUS_OBJECT_MISSING``) dominates COMPLETE.
7. Selected objects: known-invalid bytes or a size mismatch make the binding INVALID; unavailable
   bytes are ``SELECTED_OBJECT_UNAVAILABLE`` (UNKNOWN).
8. The retained subject/certificate bytes are admitted (``FORMATION_RECORD_INVALID`` /
   ``FORMATION_RECORD_UNSUPPORTED_OR_LIMITED``) and, when both are present, the formation report
   is computed afresh by ``check_formation`` from exactly those digest-checked bytes.
9. Agency declaration: foreign version or self-consistent foreign action set →
   ``AGENCY_DECLARATION_UNSUPPORTED`` (UNKNOWN); inconsistent digest →
   ``AGENCY_DECLARATION_DIGEST_MISMATCH`` (INVALID); canonical and subject admitted → ``MATCHED``.
10. Subject context and certificate coordinates are compared with the commit's declarations
    (``SUBJECT_AGENCY_CONTEXT_MISMATCH``, ``SUBJECT_GROUND_CONTEXT_MISMATCH``,
    ``SUBJECT_PROFILE_COORDINATE_MISMATCH``, ``CERTIFICATE_COORDINATE_MISMATCH``), all INVALID;
    no admitted subject leaves the binding UNKNOWN.
11. Retained profile bytes other than the compiled profile are ``FORMATION_PROFILE_UNSUPPORTED``.
12. ``coordinate_binding`` is INVALID over UNKNOWN over BOUND; ``reason_codes`` is sorted and
    de-duplicated, always drawn from :data:`INSPECTION_REASON_CODES`.

The four observations stay independent; the residual obligations are always the fixed eight.
The commit grammar decisions this implementation had to make where the reference text is silent
(inner shape of ``derivations``/``relations``, text ceilings) are documented in ``docs/silo.md``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any, Final

from mechanism.canonical import (
    CanonicalError,
    CanonicalLimitError,
    CanonicalUnsupportedError,
    admit_record,
    canonical_digest,
    digest_bytes,
    is_digest,
)
from mechanism.formation._checker import check_formation
from mechanism.formation._wire import (
    PROFILE_DIGEST,
    RESIDUAL_OBLIGATIONS,
    FormationError,
    FormationLimitError,
    UnsupportedFormation,
    admit_certificate,
    admit_subject,
    profile_bytes,
)

__all__ = [
    "AGENCY_VERSION",
    "CANONICAL_AGENCY_ACTIONS",
    "CANONICAL_AGENCY_DIGEST",
    "COMMIT_SCHEMA",
    "INSPECTION_REASON_CODES",
    "MAX_COMMIT_BYTES",
    "MAX_EVIDENCE_ENTRIES",
    "MAX_OBJECT_BYTES",
    "MAX_SNAPSHOT_BYTES",
    "inspect_silo_formation",
]

COMMIT_SCHEMA: Final = "VSTD-SILO-COMMIT-0.1"
OBJECT_SCHEMA: Final = "VSTD-OBJECT-0.1"
AGENCY_VERSION: Final = "VSTD-AUTHORITY-AXIOM-AGENCY-0.1"
CANONICAL_AGENCY_ACTIONS: Final = (
    "CHALLENGE_WITH_COUNTEREVIDENCE",
    "EXIT_COMPOSITION",
    "EXPORT_ACCESSIBLE_SILO",
    "FORK_DERIVATION",
    "INDEPENDENTLY_INSPECT_ACCESSIBLE_ARTIFACTS",
    "PRESERVE_CONFLICT",
    "PRESERVE_UNKNOWN",
    "SELECT_TRUST_ROOTS",
    "WITHDRAW_OWN_AUTHORIZATION",
)
CANONICAL_AGENCY_DIGEST: Final = (
    "sha256:41e3a27c8322874bb5634890d33cff2a9170f2906c83d45d9c7968836d7e482c"
)

MAX_COMMIT_BYTES: Final = 262_144
MAX_COMMIT_DEPTH: Final = 16
MAX_COMMIT_CONTAINERS: Final = 8_192
MAX_EVIDENCE_ENTRIES: Final = 256
MAX_OBJECT_BYTES: Final = 4_194_304
MAX_SNAPSHOT_BYTES: Final = 16_777_216
MAX_CENSUS_ENTRIES: Final = 256
MAX_PARENTS: Final = 2
MAX_RELATIONS: Final = 256
MAX_COVERAGE_UNIVERSE: Final = 4_096

INSPECTION_REASON_CODES: Final = frozenset(
    {
        "AGENCY_DECLARATION_DIGEST_MISMATCH",
        "AGENCY_DECLARATION_UNSUPPORTED",
        "CENSUS_OBJECT_MISSING",
        "CERTIFICATE_COORDINATE_MISMATCH",
        "COMMIT_INVALID",
        "COMMIT_UNSUPPORTED_OR_LIMITED",
        "EVIDENCE_ENTRY_LIMIT",
        "EVIDENCE_MAPPING_INVALID",
        "EVIDENCE_MAPPING_UNSUPPORTED",
        "EVIDENCE_SNAPSHOT_UNAVAILABLE",
        "FORMATION_PROFILE_UNSUPPORTED",
        "FORMATION_RECORD_INVALID",
        "FORMATION_RECORD_UNSUPPORTED_OR_LIMITED",
        "OBJECT_BYTES_INVALID",
        "OBJECT_DIGEST_MISMATCH",
        "OBJECT_SIZE_MISMATCH",
        "SELECTED_GROUND_NOT_DECLARED",
        "SELECTED_OBJECT_UNAVAILABLE",
        "SELECTED_PATH_INVALID",
        "SELECTED_PATH_NOT_IN_CENSUS",
        "SELECTED_ROLE_DECLARATION_INVALID",
        "SNAPSHOT_BYTE_LIMIT",
        "SUBJECT_AGENCY_CONTEXT_MISMATCH",
        "SUBJECT_GROUND_CONTEXT_MISMATCH",
        "SUBJECT_PROFILE_COORDINATE_MISMATCH",
    }
)

ROLES: Final = ("subject", "certificate", "profile", "ground")
# (artifact_kind, declared_schema_id, media_type) each formation role's census record declares.
ROLE_DECLARATIONS: Final[Mapping[str, tuple[str, str, str]]] = {
    "subject": ("typed-formation-subject", "VSTD-TYPED-FORMATION-0.1", "application/json"),
    "certificate": (
        "typed-formation-certificate",
        "VSTD-TYPED-FORMATION-CERTIFICATE-0.1",
        "application/json",
    ),
    "profile": (
        "typed-formation-profile",
        "VSTD-TYPED-FORMATION-PROFILE-0.1",
        "application/json",
    ),
}

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


class CommitRefused(Exception):
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


# --------------------------------------------------------------------------------------------
# Evidence snapshot

_INVALID_VALUE: Final = object()


def _snapshot(evidence: object) -> tuple[dict[str, object] | None, str | None]:
    """Copy an exact built-in dict without calling any caller hook.

    Returns ``(snapshot, None)`` or ``(None, reason)``; non-``bytes`` values are replaced by a
    private marker so they can never be used (or have a method called) later.
    """
    if type(evidence) is not dict:
        return None, "EVIDENCE_MAPPING_UNSUPPORTED"
    if len(evidence) > MAX_EVIDENCE_ENTRIES:
        return None, "EVIDENCE_ENTRY_LIMIT"
    captured: dict[str, object] = {}
    try:
        for key, value in evidence.items():
            if type(key) is not str:
                return None, "EVIDENCE_MAPPING_UNSUPPORTED"
            if not is_digest(key):
                return None, "EVIDENCE_MAPPING_INVALID"
            captured[key] = value if type(value) is bytes else _INVALID_VALUE
    except RuntimeError:  # changed size or keys while being copied (another thread)
        return None, "EVIDENCE_SNAPSHOT_UNAVAILABLE"
    return captured, None


# --------------------------------------------------------------------------------------------
# Inspection


def _blank_result() -> dict[str, Any]:
    return {
        "commit_digest": None,
        "profile_digest": PROFILE_DIGEST,
        "coordinates": {},
        "coordinate_binding": "UNKNOWN",
        "snapshot_retention": "UNKNOWN",
        "agency_declaration": "UNKNOWN",
        "formation_report": None,
        "reason_codes": [],
        "residual_obligations": list(RESIDUAL_OBLIGATIONS),
    }


def _dominant(states: set[str], *, valid: str) -> str:
    for state in ("INVALID", "UNKNOWN", "INCOMPLETE"):
        if state in states:
            return state
    return valid


def _admit_role(
    role_bytes: bytes, admit: Any, reasons: set[str], binding: set[str]
) -> dict[str, Any] | None:
    try:
        record: dict[str, Any] = admit(role_bytes)
    except (UnsupportedFormation, FormationLimitError):
        reasons.add("FORMATION_RECORD_UNSUPPORTED_OR_LIMITED")
        binding.add("UNKNOWN")
        return None
    except FormationError:
        reasons.add("FORMATION_RECORD_INVALID")
        binding.add("INVALID")
        return None
    return record


def inspect_silo_formation(
    commit_bytes: object,
    evidence: object,
    *,
    subject_path: object,
    certificate_path: object,
    profile_path: object,
    ground_path: object,
) -> dict[str, Any]:
    """Inspect a retained silo's formation coordinates (see the module docstring for rules)."""
    result = _blank_result()
    try:
        commit = admit_commit(commit_bytes)
    except CommitRefused as refusal:
        if refusal.limited:
            result["reason_codes"] = ["COMMIT_UNSUPPORTED_OR_LIMITED"]
        else:
            result["coordinate_binding"] = "INVALID"
            result["snapshot_retention"] = "INVALID"
            result["reason_codes"] = ["COMMIT_INVALID"]
        return result
    assert type(commit_bytes) is bytes

    reasons: set[str] = set()
    binding: set[str] = set()

    def note(code: str, facet: str | None = None) -> None:
        reasons.add(code)
        if facet is not None:
            binding.add(facet)

    # 1–3. Coordinates.
    result["commit_digest"] = digest_bytes(commit_bytes)
    records: dict[str, dict[str, Any]] = {}
    by_path = {entry["path"]: entry["object"] for entry in commit["census"]}
    coordinates: dict[str, dict[str, Any]] = {}
    selectors = {
        "subject": subject_path,
        "certificate": certificate_path,
        "profile": profile_path,
        "ground": ground_path,
    }
    for role in ROLES:
        selector = selectors[role]
        if type(selector) is not str or not is_portable_path(selector):
            coordinates[role] = {"path": None, "object_digest": None}
            note("SELECTED_PATH_INVALID", "INVALID")
            continue
        record = by_path.get(selector)
        coordinates[role] = {
            "path": selector,
            "object_digest": None if record is None else record["object_digest"],
        }
        if record is None:
            note("SELECTED_PATH_NOT_IN_CENSUS", "INVALID")
            continue
        records[role] = record
        declared = ROLE_DECLARATIONS.get(role)
        if declared is not None and declared != (
            record["artifact_kind"],
            record["declared_schema_id"],
            record["media_type"],
        ):
            note("SELECTED_ROLE_DECLARATION_INVALID", "INVALID")
    result["coordinates"] = coordinates
    # An exact-str test first: ``in`` would call a foreign object's ``__eq__``.
    if type(ground_path) is not str or ground_path not in commit["ground_paths"]:
        note("SELECTED_GROUND_NOT_DECLARED", "INVALID")

    # 4–5. Snapshot, then each distinct census digest once, ascending, under the byte budget.
    snapshot, snapshot_error = _snapshot(evidence)
    states: dict[str, str] = {}
    retained: dict[str, bytes] = {}
    spent = 0
    for digest in census_digests(commit):
        if snapshot is None:
            states[digest] = "UNKNOWN"
            continue
        if digest not in snapshot:
            states[digest] = "MISSING"
            continue
        value = snapshot[digest]
        if type(value) is not bytes:
            states[digest] = "INVALID"
            note("OBJECT_BYTES_INVALID")
            continue
        size = len(value)
        if size > MAX_OBJECT_BYTES or spent + size > MAX_SNAPSHOT_BYTES:
            states[digest] = "UNKNOWN"
            note("SNAPSHOT_BYTE_LIMIT")
            continue
        spent += size
        if digest_bytes(value) != digest:
            states[digest] = "INVALID"
            note("OBJECT_DIGEST_MISMATCH")
            continue
        states[digest] = "RETAINED"
        retained[digest] = value

    # 6. Retention over the whole census.
    retention = set(states.values())
    if snapshot_error is not None:
        note(snapshot_error)
        retention.add("INVALID" if snapshot_error == "EVIDENCE_MAPPING_INVALID" else "UNKNOWN")
    for entry in commit["census"]:
        record = entry["object"]
        held = retained.get(record["object_digest"])
        if held is not None and len(held) != record["size_bytes"]:
            retention.add("INVALID")
            note("OBJECT_SIZE_MISMATCH")
    if "MISSING" in retention:
        note("CENSUS_OBJECT_MISSING")
        retention.add("INCOMPLETE")
    result["snapshot_retention"] = _dominant(retention, valid="COMPLETE")

    # 7–8. Selected objects, their bytes, and the fresh formation report.
    role_bytes: dict[str, bytes] = {}
    for role, record in records.items():
        state = states[record["object_digest"]]
        if state == "INVALID":
            binding.add("INVALID")
        elif state != "RETAINED":
            note("SELECTED_OBJECT_UNAVAILABLE", "UNKNOWN")
        else:
            held = retained[record["object_digest"]]
            if len(held) != record["size_bytes"]:
                binding.add("INVALID")
            role_bytes[role] = held
    subject = certificate = None
    if "subject" in role_bytes:
        subject = _admit_role(role_bytes["subject"], admit_subject, reasons, binding)
    if "certificate" in role_bytes:
        certificate = _admit_role(role_bytes["certificate"], admit_certificate, reasons, binding)
    if "subject" in role_bytes and "certificate" in role_bytes:
        result["formation_report"] = check_formation(
            role_bytes["subject"], role_bytes["certificate"]
        )

    # 9. Agency declaration.
    agency = "UNKNOWN"
    version = commit["authority_axiom_agency_version"]
    actions = commit["authority_axiom_agency"]
    if version != AGENCY_VERSION:
        note("AGENCY_DECLARATION_UNSUPPORTED", "UNKNOWN")
    elif (
        canonical_digest({"schema_version": version, "actions": sorted(actions)})
        != commit["authority_axiom_agency_digest"]
    ):
        agency = "INVALID"
        note("AGENCY_DECLARATION_DIGEST_MISMATCH", "INVALID")
    elif tuple(actions) != CANONICAL_AGENCY_ACTIONS:
        note("AGENCY_DECLARATION_UNSUPPORTED", "UNKNOWN")
    elif subject is not None:
        agency = "MATCHED"

    # 10. Subject context and certificate coordinates against the commit's declarations.
    if subject is None:
        binding.add("UNKNOWN")
    else:
        context = subject["context"]
        if context["authority_axiom_agency_digest"] != commit["authority_axiom_agency_digest"]:
            agency = "INVALID"
            note("SUBJECT_AGENCY_CONTEXT_MISMATCH", "INVALID")
        ground = records.get("ground")
        if ground is not None and context["ground_artifact_digest"] != ground["object_digest"]:
            note("SUBJECT_GROUND_CONTEXT_MISMATCH", "INVALID")
        profile = records.get("profile")
        if profile is not None and subject["profile_digest"] != profile["object_digest"]:
            note("SUBJECT_PROFILE_COORDINATE_MISMATCH", "INVALID")
        if certificate is not None and (
            certificate["subject_digest"] != records["subject"]["object_digest"]
            or certificate["profile_digest"] != subject["profile_digest"]
            or certificate["root"] != subject["root"]
        ):
            note("CERTIFICATE_COORDINATE_MISMATCH", "INVALID")
    result["agency_declaration"] = agency

    # 11. The profile bytes must be the compiled profile.
    if "profile" in role_bytes and role_bytes["profile"] != profile_bytes():
        note("FORMATION_PROFILE_UNSUPPORTED", "UNKNOWN")

    # 12. Outcome.
    result["coordinate_binding"] = _dominant(binding, valid="BOUND")
    result["reason_codes"] = sorted(reasons)
    return result
