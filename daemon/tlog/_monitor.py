"""A monitor (what a witness does): follow a log's checkpoints and prove each one consistent
with the last one seen; keep both notes as evidence of a fork (``docs/spec/transparency.md
§9``).

Rules (the contract), for each observed checkpoint note, in order, first match decides:

1. It must open under the pinned log key, else ``BAD_CHECKPOINT`` (nothing recorded: an
   unverifiable note proves nothing about the log).
2. No checkpoint seen yet: ``FIRST`` (recorded).
3. Same size: the same root is ``SAME``; another root is ``FORK``.
4. Smaller size than seen before: ``ROLLBACK`` (the log signed a larger tree earlier).
5. Larger: the consistency proof from the last size must verify (RFC 9162 §2.1.4.2): then
   ``GREW`` (recorded), else ``FORK``. A proof that cannot be obtained is ``UNPROVEN``
   (nothing recorded; the next observation tries again).
``FORK`` and ``ROLLBACK`` carry both signed notes (and the proof) as evidence; the last
consistent checkpoint stays the monitor's state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from daemon.tlog._checkpoint import Checkpoint, CheckpointError, open_checkpoint
from daemon.tlog._merkle import EMPTY_ROOT, verify_consistency
from daemon.tlog._note import VerifierKey, b64encode

#: ``prove(old_size, new_size)`` → consistency proof hashes (may raise on failure).
Prover = Callable[[int, int], list[bytes]]
ALARMS = frozenset({"FORK", "ROLLBACK"})


@attrs.frozen
class Observation:
    status: str
    message: str
    size: int | None = None
    previous_size: int | None = None
    evidence: tuple[tuple[str, bytes], ...] = ()

    @property
    def alarm(self) -> bool:
        return self.status in ALARMS

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message,
            "size": self.size,
            "previous_size": self.previous_size,
        }


class Monitor:
    def __init__(self, key: VerifierKey, last_note: bytes | None = None) -> None:
        self.key = key
        self.last_note: bytes | None = None
        self.last: Checkpoint | None = None
        if last_note is not None:
            self.last = open_checkpoint(last_note, key).checkpoint
            self.last_note = last_note

    def observe(self, note: bytes, prove: Prover) -> Observation:
        try:
            current = open_checkpoint(note, self.key).checkpoint
        except CheckpointError as error:
            return Observation("BAD_CHECKPOINT", f"{error.code}: {error}")
        last, last_note = self.last, self.last_note
        if last is None or last_note is None:
            self._record(current, note)
            return Observation("FIRST", "first checkpoint seen", current.size)
        both = (("previous.checkpoint", last_note), ("current.checkpoint", note))
        if current.size == last.size:
            if current.root == last.root:
                return Observation("SAME", "no new leaves", current.size, last.size)
            return Observation(
                "FORK",
                f"two checkpoints of size {current.size} with different roots",
                current.size,
                last.size,
                both,
            )
        if current.size < last.size:
            return Observation(
                "ROLLBACK",
                f"the log signed size {last.size} before and now signs {current.size}",
                current.size,
                last.size,
                both,
            )
        if last.size == 0:
            consistent = last.root == EMPTY_ROOT
            proof: list[bytes] = []
        else:
            try:
                proof = prove(last.size, current.size)
            except Exception as error:  # a daemon's refusal, a missing tile: try again later
                return Observation(
                    "UNPROVEN",
                    f"no consistency proof {last.size} -> {current.size}: {error}",
                    current.size,
                    last.size,
                )
            consistent = verify_consistency(last.size, current.size, proof, last.root, current.root)
        if not consistent:
            proof_text = "".join(b64encode(item) + "\n" for item in proof).encode("ascii")
            return Observation(
                "FORK",
                f"size {current.size} is not an append-only extension of size {last.size}",
                current.size,
                last.size,
                (*both, ("consistency.proof", proof_text)),
            )
        self._record(current, note)
        return Observation(
            "GREW", f"{current.size - last.size} new leaves", current.size, last.size
        )

    def _record(self, checkpoint: Checkpoint, note: bytes) -> None:
        self.last, self.last_note = checkpoint, note
