"""The example plugin's own suite: the conformance kit, and the SRI rules on real bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from evidenced_sri import PROVIDER, integrity_of, parse_metadata, strongest

from session import EvidenceStore, VerificationSession

RESOURCE = b"console.log('integrity');\n"


def test_the_provider_passes_the_conformance_kit(mechanism_conformance: Callable[..., Any]) -> None:
    report = mechanism_conformance("sri")
    assert report.mechanism_id == "example.sri.integrity.0.1"


def _decide(resource: bytes, metadata: bytes, **options: Any) -> tuple[str, str]:
    settings = PROVIDER.structure_options(options)
    store = EvidenceStore()
    store.add(resource)
    store.add(metadata)
    session = VerificationSession(store)
    session.register(PROVIDER.create(settings))
    result = session.evaluate(PROVIDER.honest_binding((resource, metadata), settings))
    return str(result.outcome), result.details


@pytest.mark.parametrize("algorithm", ["sha256", "sha384", "sha512"])
def test_a_resource_matches_its_own_integrity(algorithm: str) -> None:
    metadata = integrity_of(RESOURCE, algorithm).encode()
    assert _decide(RESOURCE, metadata) == ("PASS", "")


def test_a_changed_resource_is_refuted() -> None:
    metadata = integrity_of(RESOURCE).encode()
    assert _decide(RESOURCE + b" ", metadata) == ("FAIL", "SRI_DIGEST_MISMATCH")


def test_a_weaker_algorithm_cannot_vouch_beside_a_stronger_one() -> None:
    # The strongest algorithm present decides: a matching sha256 beside a wrong sha512 fails.
    metadata = f"{integrity_of(RESOURCE, 'sha256')} sha512-AAAA".encode()
    assert _decide(RESOURCE, metadata) == ("FAIL", "SRI_DIGEST_MISMATCH")


def test_unsupported_or_weak_metadata_is_unknown() -> None:
    assert _decide(RESOURCE, b"md5-AAAA sha1-BBBB") == ("UNKNOWN", "SRI_METADATA_EMPTY")
    weak = integrity_of(RESOURCE, "sha256").encode()
    assert _decide(RESOURCE, weak, minimum_algorithm="sha384") == (
        "UNKNOWN",
        "SRI_ALGORITHM_TOO_WEAK",
    )
    assert _decide(RESOURCE, "sha384-é".encode()) == ("UNKNOWN", "SRI_METADATA_UNREADABLE")


def test_metadata_parsing_ignores_what_browsers_ignore() -> None:
    parsed = parse_metadata("sha256-abc=?opt \n bogus sha999-x sha384-  sha512-de/f+")
    assert [(e.algorithm, e.value) for e in parsed] == [("sha256", "abc="), ("sha512", "de/f+")]
    assert [e.algorithm for e in strongest(parsed)] == ["sha512"]
