"""EvidenceStore rules (docs/spec/formation.md §1.2)."""

from __future__ import annotations

import base64
import hashlib

import pytest

from session import EvidenceBindingError, EvidenceStore


def ref(payload: bytes) -> str:
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def test_add_returns_the_prefixed_reference_and_resolve_accepts_bare_hex() -> None:
    store = EvidenceStore()
    assert store.add(b"x") == ref(b"x")
    assert store.resolve(ref(b"x")[7:]) == b"x"
    assert ref(b"x") in store and ref(b"x")[7:] in store


@pytest.mark.parametrize("payload", ["text", bytearray(b"x"), memoryview(b"x"), None])
def test_non_bytes_payloads_are_refused(payload: object) -> None:
    with pytest.raises(TypeError, match="evidence payload must be bytes"):
        EvidenceStore().add(payload)  # type: ignore[arg-type]


def test_missing_evidence_is_unavailable() -> None:
    with pytest.raises(EvidenceBindingError, match="evidence is unavailable: sha256:"):
        EvidenceStore().resolve("0" * 64)


def test_bytes_swapped_in_the_store_are_caught_on_every_resolve() -> None:
    store = EvidenceStore()
    reference = store.add(b"original")
    store._items[reference] = b"tampered"
    with pytest.raises(EvidenceBindingError, match="evidence bytes do not match their reference"):
        store.resolve(reference)


def test_bytes_swapped_after_a_resolve_are_still_caught() -> None:
    """``resolve`` skips the hash only for the very object ``add`` hashed, never by reference."""
    store = EvidenceStore()
    reference = store.add(b"original")
    assert store.resolve(reference) == b"original"
    store._items[reference] = b"tampered"
    with pytest.raises(EvidenceBindingError, match="evidence bytes do not match their reference"):
        store.resolve(reference)
    with pytest.raises(EvidenceBindingError, match="evidence bytes do not match their reference"):
        store.export_base64([reference])


def test_swapped_in_equal_bytes_are_hashed_again_and_served() -> None:
    store = EvidenceStore()
    reference = store.add(b"original")
    equal = bytes(bytearray(b"original"))  # another object holding the same bytes
    store._items[reference] = equal
    assert store.resolve(reference) is equal


def test_bytes_swapped_after_a_base64_import_are_caught() -> None:
    store = EvidenceStore()
    (reference,) = store.import_base64({ref(b"x"): base64.b64encode(b"x").decode()})
    assert store.resolve(reference) == b"x"
    store._items[reference] = b"y"
    with pytest.raises(EvidenceBindingError, match="evidence bytes do not match their reference"):
        store.resolve(reference)


def test_a_colliding_payload_is_refused_and_the_original_kept() -> None:
    store = EvidenceStore()
    reference = store.add(b"a")
    store._items[reference] = b"a"  # same bytes again is fine
    store.add(b"a")
    store._items[reference] = b"b"
    with pytest.raises(EvidenceBindingError, match="evidence digest collision"):
        store.add(b"a")


def test_malformed_reference_is_refused_and_contains_never_raises() -> None:
    with pytest.raises(EvidenceBindingError, match="not a SHA-256 evidence reference"):
        EvidenceStore().resolve("nope")
    assert "nope" not in EvidenceStore()
    assert 5 not in EvidenceStore()


def test_base64_round_trip() -> None:
    source = EvidenceStore()
    references = [source.add(b"one"), source.add(b"\x00two")]
    exported = source.export_base64(references)
    assert exported[references[0]] == base64.b64encode(b"one").decode()
    target = EvidenceStore()
    assert target.import_base64(exported) == tuple(references)
    assert target.resolve(references[1]) == b"\x00two"


def test_import_refuses_mismatched_bytes_and_changes_nothing() -> None:
    store = EvidenceStore()
    good = base64.b64encode(b"good").decode()
    bad = {ref(b"good"): good, ref(b"other"): good}
    with pytest.raises(EvidenceBindingError, match="embedded evidence does not match reference"):
        store.import_base64(bad)
    assert len(store) == 0


def test_import_refuses_invalid_base64() -> None:
    with pytest.raises(EvidenceBindingError, match="invalid base64 evidence payload"):
        EvidenceStore().import_base64({ref(b"x"): "!!not base64"})
