"""``EvidenceStore``: content-addressed evidence bytes (``docs/spec/formation.md`` §1.2).

Rules:

* A reference is ``sha256:`` + hex SHA-256 of the payload; bare 64-hex is accepted on input.
* ``add`` accepts exact ``bytes`` only and refuses a second, different payload under an
  existing reference ("evidence digest collision at <ref>").
* ``resolve`` re-hashes the stored bytes and refuses a mismatch, so bytes swapped in the store
  after ``add`` are never served under the old reference. It skips the hash only when the entry
  still holds the very ``bytes`` object ``add`` (or ``import_base64``) hashed: ``bytes`` are
  immutable, so that object cannot hold other bytes; any other object under the reference (a
  swapped entry, equal bytes included) is hashed again. A reference that is exactly a stored
  key (always a normalised reference) is looked up as it is, without normalising it again.
* ``import_base64`` validates every entry before storing any (nothing changes on failure).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping

from session.canon import digest_bytes as _reference

from ._types import EvidenceBindingError, normalise_digest

__all__ = ["EvidenceStore"]


class EvidenceStore:
    """An in-memory map from evidence reference to bytes."""

    def __init__(self) -> None:
        self._items: dict[str, bytes] = {}
        # reference -> the exact bytes object that was hashed to it (compared by identity)
        self._hashed: dict[str, bytes] = {}

    def add(self, payload: bytes) -> str:
        """Store exact ``bytes`` and return their reference."""
        if not isinstance(payload, bytes):
            raise TypeError("evidence payload must be bytes")
        payload = bytes(payload)
        reference = _reference(payload)
        existing = self._items.get(reference)
        if existing is not None and existing != payload:
            raise EvidenceBindingError(f"evidence digest collision at {reference}")
        self._items[reference] = payload
        self._hashed[reference] = payload
        return reference

    def resolve(self, reference: str) -> bytes:
        """The bytes under ``reference``, re-hashed unless they are the object hashed at
        ``add``."""
        return self.resolved(reference)[1]

    def resolved(self, reference: object) -> tuple[str, bytes]:
        """``(normalised reference, bytes)``: :meth:`resolve`'s answer with the reference the
        bytes were proved to hash to (same rules, same errors)."""
        if type(reference) is str:
            # Every key is a normalised reference (the digest ``add`` computed, or what
            # ``normalise_digest`` gave ``import_base64``), so an exact ``str`` found with the
            # bytes object that was hashed under it is its own normal form.
            payload = self._items.get(reference)
            if payload is not None and payload is self._hashed.get(reference):
                return reference, payload
        normalised = normalise_digest(reference)
        payload = self._items.get(normalised)
        if payload is None:
            raise EvidenceBindingError(f"evidence is unavailable: {normalised}")
        if payload is not self._hashed.get(normalised) and _reference(payload) != normalised:
            raise EvidenceBindingError(f"evidence bytes do not match their reference: {normalised}")
        return normalised, payload

    def __contains__(self, reference: object) -> bool:
        try:
            return normalise_digest(reference) in self._items
        except EvidenceBindingError:
            return False

    def __len__(self) -> int:
        return len(self._items)

    def export_base64(self, references: Iterable[str]) -> dict[str, str]:
        """``{normalised ref: padded standard base64}`` of resolved (re-hashed) evidence."""
        exported: dict[str, str] = {}
        for reference in references:
            normalised = normalise_digest(reference)
            exported[normalised] = base64.b64encode(self.resolve(normalised)).decode("ascii")
        return exported

    def import_base64(self, embedded: Mapping[str, str]) -> tuple[str, ...]:
        """Validate then store every embedded payload; return the normalised references."""
        decoded: list[tuple[str, bytes]] = []
        for reference, text in embedded.items():
            normalised = normalise_digest(reference)
            try:
                payload = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError, TypeError):
                raise EvidenceBindingError(
                    f"invalid base64 evidence payload for {normalised}"
                ) from None
            if _reference(payload) != normalised:
                raise EvidenceBindingError(
                    f"embedded evidence does not match reference {normalised}"
                )
            existing = self._items.get(normalised)
            if existing is not None and existing != payload:
                raise EvidenceBindingError(f"evidence digest collision at {normalised}")
            decoded.append((normalised, payload))
        for normalised, payload in decoded:
            self._items[normalised] = payload
            self._hashed[normalised] = payload
        return tuple(normalised for normalised, _ in decoded)
