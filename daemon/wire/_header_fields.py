"""The field types of protocol headers and their converter, :data:`HEADERS` (``docs/protocol.md``).

Rules (the contract): a header field's type says exactly what the JSON value must be, and the
refusal when it is not (``{key}`` is the field's wire name; :mod:`daemon.wire._exact` rule 2).

* Integers are exact (``bool`` is not an integer) and bounded: :data:`RequestId`
  ``0..2**53-1``, :data:`Version` ``0..65535``, :data:`Size` ``0..2**63-1`` — "``{key}`` must
  be an integer 0..MAX".
* :data:`Text` is an exact string ("must be a string"); :data:`JsonObject` an exact JSON
  object ("must be an object"), passed through as received, never copied or re-walked.
* Arrays: :data:`Versions` (1 to 16 integers 0..65535), :data:`Sessions` (objects),
  :data:`ItemSizes` (integers >= 0), :data:`Proof` (strings); "must be an array" first, then
  the item rule. Held as tuples (the session list as received), sent back as arrays.
* A batch's :data:`BatchPairs` (1 to :data:`MAX_BATCH_PAIRS` objects of exactly ``binding``, an
  object, and ``items``, byte counts; held as :class:`BatchPair`) and its answer's
  :data:`BatchAnswers` (objects whose ``kind`` is ``decision`` or ``error``; each is read by
  its own event's rules). The first failing pair is named: "``{key}[i]`` must be …".
* The decision's chain fields (:data:`AuditSeq`, :data:`LineDigest`, :data:`LogIndex`,
  :data:`AuditLine`) may be ``null``; their cross-field rule lives with :class:`Decision`.
* :data:`HEADERS` is the converter of this format (``forbid_extra_keys``, detailed
  validation); the protocol structures and unstructures every header event with it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final

import attrs

from daemon.wire._exact import Check, FieldError, Rule, exact_converter, json_list

MAX_REQUEST_ID: Final = 2**53 - 1
MAX_SIZE: Final = 2**63 - 1
#: The largest audit ``seq`` a decision may carry (a signed 64-bit integer).
MAX_AUDIT_SEQ: Final = 2**63 - 1
LINE_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")
#: The most pairs one batch (``submit_batch``, HTTP ``decisions:batch``) carries.
MAX_BATCH_PAIRS: Final = 64

HEADERS: Final = exact_converter()


def _integer(maximum: int) -> Check:
    refusal = f"{{key}} must be an integer 0..{maximum}"

    def check(value: Any, _: Any = None) -> int:
        if type(value) is not int or not 0 <= value <= maximum:
            raise FieldError(refusal)
        return value

    return check


def _optional(check: Check) -> Check:
    def optional(value: Any, _: Any = None) -> Any:
        return None if value is None else check(value)

    return optional


def _text(value: Any, _: Any = None) -> str:
    if type(value) is not str:
        raise FieldError("{key} must be a string")
    return value


def _object(value: Any, _: Any = None) -> dict[str, Any]:
    if type(value) is not dict:
        raise FieldError("{key} must be an object")
    return value


def _array(value: Any, _: Any = None) -> list[Any]:
    if type(value) is not list:
        raise FieldError("{key} must be an array")
    return value


def _versions(value: Any, _: Any = None) -> tuple[int, ...]:
    versions = _array(value)
    if not versions or len(versions) > 16:
        raise FieldError("{key} must list 1..16 versions")
    for version in versions:
        if type(version) is not int or not 0 <= version <= 65535:
            raise FieldError("{key} must be integers")
    return tuple(versions)


def _sessions(value: Any, _: Any = None) -> list[dict[str, Any]]:
    sessions = _array(value)
    if any(type(item) is not dict for item in sessions):
        raise FieldError("{key} must be objects")
    return sessions


def _item_sizes(value: Any, _: Any = None) -> tuple[int, ...]:
    sizes = _array(value)
    for size in sizes:
        if type(size) is not int or size < 0:
            raise FieldError("{key} must be byte counts")
    return tuple(sizes)


def _proof(value: Any, _: Any = None) -> tuple[str, ...]:
    proof = _array(value)
    if any(type(item) is not str for item in proof):
        raise FieldError("{key} must be base64 strings")
    return tuple(proof)


@attrs.frozen
class BatchPair:
    """One pair of a ``submit_batch``: a binding's wire form and its items' byte counts (the
    header's ``{"binding": ..., "items": [...]}``)."""

    binding: dict[str, Any]
    item_sizes: tuple[int, ...]


def batch_pairs(value: Any, _: Any = None) -> tuple[BatchPair, ...]:
    """The pairs of a ``submit_batch`` header, or :class:`FieldError` naming the first bad one."""
    pairs = _array(value)
    if not 1 <= len(pairs) <= MAX_BATCH_PAIRS:
        raise FieldError(f"{{key}} must be an array of 1..{MAX_BATCH_PAIRS} pairs")
    parsed = []
    for index, pair in enumerate(pairs):
        if type(pair) is not dict or pair.keys() != {"binding", "items"}:
            raise FieldError(
                f'{{key}}[{index}] must be an object with exactly "binding" and "items"'
            )
        binding, sizes = pair["binding"], pair["items"]
        if type(binding) is not dict:
            raise FieldError(f"{{key}}[{index}].binding must be an object")
        if type(sizes) is not list or any(type(size) is not int or size < 0 for size in sizes):
            raise FieldError(f"{{key}}[{index}].items must be an array of byte counts")
        parsed.append(BatchPair(binding, tuple(sizes)))
    return tuple(parsed)


def _dump_pairs(pairs: tuple[BatchPair, ...]) -> list[dict[str, Any]]:
    return [{"binding": pair.binding, "items": list(pair.item_sizes)} for pair in pairs]


def _batch_answers(value: Any, _: Any = None) -> tuple[dict[str, Any], ...]:
    answers = _array(value)
    for answer in answers:
        if type(answer) is not dict or answer.get("kind") not in ("decision", "error"):
            raise FieldError("{key} must be decision or error objects")
    return tuple(answers)


def _audit_seq(value: Any, _: Any = None) -> int | None:
    if value is not None and (type(value) is not int or not 1 <= value <= MAX_AUDIT_SEQ):
        raise FieldError(f"{{key}} must be null or an integer 1..{MAX_AUDIT_SEQ}")
    return value


def _line_digest(value: Any, _: Any = None) -> str | None:
    if value is not None and (type(value) is not str or LINE_DIGEST_RE.match(value) is None):
        raise FieldError("{key} must be null or sha256:<64 hex>")
    return value


_request_id = _integer(MAX_REQUEST_ID)

RequestId = Annotated[int, Rule(_request_id)]
OptionalRequestId = Annotated[int | None, Rule(_optional(_request_id))]
Version = Annotated[int, Rule(_integer(65535))]
Size = Annotated[int, Rule(_integer(MAX_SIZE))]
Text = Annotated[str, Rule(_text)]
OptionalText = Annotated[str | None, Rule(_optional(_text))]
JsonObject = Annotated[dict[str, Any], Rule(_object)]
Versions = Annotated[tuple[int, ...], Rule(_versions, json_list)]
Sessions = Annotated[list[dict[str, Any]], Rule(_sessions)]
ItemSizes = Annotated[tuple[int, ...], Rule(_item_sizes, json_list)]
Proof = Annotated[tuple[str, ...], Rule(_proof, json_list)]
BatchPairs = Annotated[tuple[BatchPair, ...], Rule(batch_pairs, _dump_pairs)]
BatchAnswers = Annotated[tuple[dict[str, Any], ...], Rule(_batch_answers, json_list)]
AuditSeq = Annotated[int | None, Rule(_audit_seq)]
LineDigest = Annotated[str | None, Rule(_line_digest)]
LogIndex = Annotated[int | None, Rule(_optional(_integer(MAX_AUDIT_SEQ - 1)))]
AuditLine = Annotated[str | None, Rule(_optional(_text))]
