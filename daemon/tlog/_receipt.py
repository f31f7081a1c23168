"""Decision receipts: an audit line, its index, an inclusion proof and the signed checkpoint
the proof is against, checkable offline with the log's verifier key alone
(``docs/spec/transparency.md §7``).

Rules (the contract):

1. A receipt is one JSON object with exactly the keys ``format``
   (:data:`RECEIPT_FORMAT`), ``log_index`` and ``tree_size`` (integers), ``line`` (the audit
   line's exact text, without its newline), ``inclusion_proof`` (standard base64 hashes, leaf
   sibling first) and ``checkpoint`` (the signed note's text).
2. :func:`verify_receipt`, in order, first failure decides (``code``):
   ``RECEIPT_MALFORMED`` (not such an object); the checkpoint must open under the log key
   (``NOTE_*``, ``CHECKPOINT_*``); ``WITNESS_THRESHOLD`` when fewer than ``threshold`` of the
   given witness keys cosigned it; ``RECEIPT_TREE_SIZE`` when ``tree_size`` is not the
   checkpoint's size; ``RECEIPT_INDEX`` when the line's own ``seq`` is not ``log_index + 1``;
   ``RECEIPT_PROOF`` when the proof does not place the line's leaf hash at ``log_index``
   under the checkpoint's root.
3. Verification never raises for a bad receipt: it returns a :class:`ReceiptReport`.
4. The receipt is the typed :class:`Receipt`, read and written through one converter
   (:data:`RECEIPTS`, :func:`daemon.wire._exact.exact_converter`): :func:`read_receipt` checks the
   exact key set first (one refusal naming the keys), then the fields, and when several fail
   names the first in :data:`Receipt.CHECK_ORDER` (``format``, ``log_index``, ``tree_size``,
   ``inclusion_proof``, then ``line``/``checkpoint``). Integers are exact (booleans and
   floats are refused). :func:`make_receipt` writes the keys in field order, the order
   :func:`encode_receipt`'s bytes keep.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Final

import attrs
from cattrs.errors import ClassValidationError

from daemon.tlog._checkpoint import (
    CheckpointError,
    SignedCheckpoint,
    count_cosignatures,
    open_checkpoint,
)
from daemon.tlog._merkle import leaf_hash, verify_inclusion
from daemon.tlog._note import VerifierKey, b64decode, b64encode
from daemon.wire._exact import (
    FieldError,
    Rule,
    exact_converter,
    exact_keys,
    first_failure,
    wire_names,
)

RECEIPT_FORMAT: Final = "evidenced-receipt-v1"
MAX_RECEIPT_BYTES: Final = 8 * 1024 * 1024


def _format(value: Any, _: Any = None) -> str:
    if value != RECEIPT_FORMAT:
        raise FieldError(f"unknown receipt format {value!r}", keyed=False)
    return RECEIPT_FORMAT


def _count(value: Any, _: Any = None) -> int:
    if type(value) is not int or value < 0:
        raise FieldError("{key} is not a non-negative integer")
    return value


def _hashes(value: Any, _: Any = None) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise FieldError("{key} is not a list of base64 strings")
    return value


def _text(value: Any, _: Any = None) -> str:
    if not isinstance(value, str):
        raise FieldError("line and checkpoint are strings", keyed=False)
    return value


@attrs.frozen
class Receipt:
    """One decision receipt (rule 1), fields in the order its JSON keeps them."""

    #: Which field a refusal names when several fail (rule 4).
    CHECK_ORDER: ClassVar[tuple[str, ...]] = ("format", "log_index", "tree_size", "inclusion_proof")

    format: Annotated[str, Rule(_format)]
    log_index: Annotated[int, Rule(_count)]
    tree_size: Annotated[int, Rule(_count)]
    line: Annotated[str, Rule(_text)]
    inclusion_proof: Annotated[list[str], Rule(_hashes)]
    checkpoint: Annotated[str, Rule(_text)]


RECEIPTS: Final = exact_converter()
_NAMES: Final = wire_names(Receipt)
_KEYS: Final = frozenset(_NAMES.values())


def read_receipt(value: Any) -> Receipt | str:
    """A parsed JSON value as a :class:`Receipt`, or the refusal's words (rule 4)."""
    if not isinstance(value, dict) or exact_keys(value, _KEYS) is not None:
        return f"a receipt is an object with exactly the keys {sorted(_KEYS)}"
    try:
        return RECEIPTS.structure(value, Receipt)
    except ClassValidationError as error:
        key, failure = first_failure(error, _NAMES, Receipt.CHECK_ORDER)
        if key is None or not isinstance(failure, FieldError):  # pragma: no cover - defensive
            raise
        return failure.words(key)


def make_receipt(
    line: bytes, log_index: int, tree_size: int, proof: Sequence[bytes], checkpoint: bytes
) -> dict[str, Any]:
    receipt = Receipt(
        RECEIPT_FORMAT,
        log_index,
        tree_size,
        line.decode("utf-8"),
        [b64encode(item) for item in proof],
        checkpoint.decode("utf-8"),
    )
    fields: dict[str, Any] = RECEIPTS.unstructure(receipt)
    return fields


def encode_receipt(receipt: dict[str, Any]) -> bytes:
    return (json.dumps(receipt, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


@attrs.frozen
class ReceiptReport:
    verified: bool
    code: str | None = None
    message: str | None = None
    log_index: int | None = None
    tree_size: int | None = None
    origin: str | None = None
    cosignatures: int = 0
    line: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        line = self.line or {}
        return {
            "status": "VERIFIED" if self.verified else "INVALID",
            "code": self.code,
            "message": self.message,
            "origin": self.origin,
            "log_index": self.log_index,
            "tree_size": self.tree_size,
            "cosignatures": self.cosignatures,
            "decision_id": line.get("decision_id"),
            "event": line.get("event"),
            "outcome": line.get("outcome"),
        }


def _refuse(code: str, message: str, **known: Any) -> ReceiptReport:
    return ReceiptReport(False, code, message, **known)


def _parse(data: bytes) -> Receipt | str:
    if len(data) > MAX_RECEIPT_BYTES:
        return f"a receipt is at most {MAX_RECEIPT_BYTES} bytes"
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "not a JSON document"
    return read_receipt(value)


def verify_receipt(
    data: bytes,
    log_key: VerifierKey,
    *,
    witnesses: Sequence[VerifierKey] = (),
    threshold: int = 0,
) -> ReceiptReport:
    """Check a receipt offline (rule 2)."""
    parsed = _parse(data)
    if isinstance(parsed, str):
        return _refuse("RECEIPT_MALFORMED", parsed)
    index, size = parsed.log_index, parsed.tree_size
    known: dict[str, Any] = {"log_index": index, "tree_size": size}
    try:
        signed: SignedCheckpoint = open_checkpoint(
            parsed.checkpoint.encode("utf-8"), log_key, witnesses
        )
    except CheckpointError as error:
        return _refuse(error.code, str(error), **known)
    known["origin"] = signed.checkpoint.origin
    cosigned = count_cosignatures(signed, witnesses)
    known["cosignatures"] = cosigned
    if cosigned < threshold:
        return _refuse(
            "WITNESS_THRESHOLD",
            f"{cosigned} of the given witnesses cosigned the checkpoint; {threshold} required",
            **known,
        )
    if size != signed.checkpoint.size:
        return _refuse(
            "RECEIPT_TREE_SIZE",
            f"tree_size {size} is not the checkpoint's size {signed.checkpoint.size}",
            **known,
        )
    line = parsed.line.encode("utf-8")
    try:
        fields = json.loads(line)
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or type(fields.get("seq")) is not int:
        return _refuse("RECEIPT_INDEX", "the line is not an audit line with a seq", **known)
    known["line"] = fields
    if fields["seq"] != index + 1:
        return _refuse(
            "RECEIPT_INDEX",
            f"the line is seq {fields['seq']}, not the line at log_index {index}",
            **known,
        )
    try:
        proof = [b64decode(item) for item in parsed.inclusion_proof]
    except ValueError:
        return _refuse("RECEIPT_MALFORMED", "an inclusion proof hash is not base64", **known)
    if not verify_inclusion(leaf_hash(line), index, size, proof, signed.checkpoint.root):
        return _refuse(
            "RECEIPT_PROOF",
            f"the inclusion proof does not place this line at index {index} under the"
            " checkpoint's root",
            **known,
        )
    return ReceiptReport(True, **known)
