"""C2SP ``tlog-checkpoint``: the signed statement of a tree's size and root
(``docs/spec/transparency.md §3``).

Rules (the contract):

1. The text is ``<origin>\\n<size>\\n<base64 root>\\n`` followed by optional extension lines,
   which are parsed and ignored; this project emits none. The size is ASCII decimal without
   leading zeros (``0`` alone for the empty tree); the root is standard base64 of 32 bytes.
2. :func:`open_checkpoint`, in order, first failure decides (:class:`CheckpointError`,
   ``code``): the note must open under the given log key (:func:`daemon.tlog._note.open_note`
   codes ``NOTE_*``, the log key being the only key whose signature counts for the log);
   ``CHECKPOINT_MALFORMED`` for a text that is not a checkpoint; ``CHECKPOINT_ORIGIN`` when the
   origin line is not the log key's name. Witness cosignatures are counted separately
   (:func:`count_cosignatures`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import attrs

from daemon.tlog._merkle import HASH_SIZE
from daemon.tlog._note import (
    SIG_COSIGNATURE,
    NoteError,
    OpenedNote,
    SignerKey,
    VerifierKey,
    b64decode,
    b64encode,
    open_note,
    parse_note,
    sign_note,
)
from daemon.wire._errors import PeerError

_SIZE_RE: Final = re.compile(r"0|[1-9][0-9]{0,19}")


class CheckpointError(PeerError):
    """A checkpoint is refused; ``code`` is a ``NOTE_*`` or ``CHECKPOINT_*`` code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@attrs.frozen
class Checkpoint:
    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{b64encode(self.root)}\n"

    def sign(self, signer: SignerKey) -> bytes:
        return sign_note(self.text(), signer)

    @classmethod
    def parse_text(cls, text: str) -> Checkpoint:
        lines = text.split("\n")
        if len(lines) < 4 or lines[-1] != "":
            raise CheckpointError("CHECKPOINT_MALFORMED", "a checkpoint has at least three lines")
        origin, size, root = lines[0], lines[1], lines[2]
        if not origin:
            raise CheckpointError("CHECKPOINT_MALFORMED", "the origin line is empty")
        if not _SIZE_RE.fullmatch(size) or int(size) >= 2**63:
            raise CheckpointError("CHECKPOINT_MALFORMED", f"the size {size!r} is not a tree size")
        try:
            raw = b64decode(root)
        except ValueError:
            raw = b""
        if len(raw) != HASH_SIZE:
            raise CheckpointError("CHECKPOINT_MALFORMED", "the root is not base64 of 32 bytes")
        return cls(origin, int(size), raw)


@attrs.frozen
class SignedCheckpoint:
    """A checkpoint whose note verified under the log key; ``note`` is the exact bytes."""

    checkpoint: Checkpoint
    note: bytes
    opened: OpenedNote


def open_checkpoint(
    data: bytes, log_key: VerifierKey, witnesses: Sequence[VerifierKey] = ()
) -> SignedCheckpoint:
    """Verify a signed checkpoint under ``log_key`` (rule 2)."""
    try:
        opened = open_note(data, [log_key, *witnesses])
    except NoteError as error:
        raise CheckpointError(error.code, str(error)) from None
    if log_key not in opened.verified:
        raise CheckpointError("NOTE_UNVERIFIED", "no signature by the log's key")
    checkpoint = Checkpoint.parse_text(opened.note.text)
    if checkpoint.origin != log_key.name:
        raise CheckpointError(
            "CHECKPOINT_ORIGIN",
            f"origin {checkpoint.origin!r} is not the log key's name {log_key.name!r}",
        )
    return SignedCheckpoint(checkpoint, data, opened)


def count_cosignatures(signed: SignedCheckpoint, witnesses: Sequence[VerifierKey]) -> int:
    """How many distinct witness keys (type 0x04) cosigned the checkpoint (verified)."""
    wanted = {key for key in witnesses if key.sig_type == SIG_COSIGNATURE}
    return sum(1 for key in signed.opened.verified if key in wanted)


def peek_checkpoint(data: bytes) -> Checkpoint:
    """The checkpoint inside a note *without* verifying any signature (for messages)."""
    try:
        return Checkpoint.parse_text(parse_note(data).text)
    except NoteError as error:
        raise CheckpointError(error.code, str(error)) from None
