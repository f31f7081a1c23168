"""Exact discovery over an index (docs/spec/formation.md §7.2): result shape, what never matches."""

from __future__ import annotations

import pytest

import catalog
from catalog import ComponentIndex, StoredPackage

CHECK = "mechanism:typed-formation-certificate-check"
RESULT_KEYS = {
    "schema_version",
    "index_id",
    "index_version",
    "index_digest",
    "query",
    "result",
    "match_count",
    "matches",
    "package_availability",
    "native_qualification",
    "ecosystem_completeness",
    "execution_performed",
    "claim_boundary",
}


@pytest.fixture(scope="module")
def index(reference_package: StoredPackage) -> ComponentIndex:
    return catalog.build_index([(reference_package, "packages/reference")])


def test_declared_match_has_the_exact_result_shape(
    index: ComponentIndex, reference_package: StoredPackage
) -> None:
    found = index.search_exact("VSTD-2", "OFFLINE_REPLAY", CHECK)
    assert set(found) == RESULT_KEYS
    assert found["query"] == {
        "schema_id": "VSTD-2",
        "interaction_mode": "OFFLINE_REPLAY",
        "relation_id": None,
        "mechanism_id": CHECK,
        "package_id": None,
        "package_version": None,
    }
    assert found["result"] == "DECLARED_MATCHES" and found["match_count"] == 1
    (match,) = found["matches"]
    assert set(match) == {
        "component_id",
        "package_id",
        "package_version",
        "package_sha256",
        "package_path",
        "registry_sha256",
        "component",
    }
    assert match["package_sha256"] == catalog.validate_package(reference_package)
    assert match["registry_sha256"] == reference_package.registry().canonical_digest()
    assert match["package_path"] == "packages/reference"
    assert match["component"]["execution_prerequisites"] == [
        "EXACT_IMPLEMENTATION_COORDINATE",
        "EXACT_NATIVE_INPUT",
        "EXACT_RULE_PROFILE:sha256:"
        "271760d604e1ade55cba4974c658b92263bd3ee8ae343677dd91d0e713fb677f",
        "RESOURCE_BOUNDS",
    ]
    assert found["package_availability"] == "NOT_CHECKED"
    assert found["native_qualification"] == "NOT_ESTABLISHED"
    assert found["ecosystem_completeness"] == "UNKNOWN"
    assert found["execution_performed"] is False
    assert found["index_digest"] == index.canonical_digest()


@pytest.mark.parametrize(
    ("schema", "mode", "mechanism", "relation"),
    [
        ("VSTD-TYPED-FORMATION-0.1", "OFFLINE_REPLAY", CHECK, None),  # native subject schema
        ("VSTD-2", "OFFLINE_REPLAY", "mechanism:typed-formation-receipt-recheck-v2", None),
        ("VSTD-2", "OFFLINE_REPLAY", None, "relation:certifies-everything"),
        ("VSTD-2", "LIVE_MUTATING", CHECK, None),
    ],
)
def test_native_schema_other_mechanism_unrelated_relation_or_live_mode_match_nothing(
    index: ComponentIndex, schema: str, mode: str, mechanism: str | None, relation: str | None
) -> None:
    found = index.search_exact(schema, mode, mechanism, relation)
    assert found["result"] == "NO_DECLARED_MATCH_IN_THIS_INDEX"
    assert found["match_count"] == 0 and found["matches"] == []
    assert found["execution_performed"] is False


def test_package_filters_are_exact(index: ComponentIndex) -> None:
    hit = index.search_exact(
        "VSTD-2",
        "OFFLINE_REPLAY",
        CHECK,
        package_id="package:evidenced-reference-components",
        package_version="0.1.0",
    )
    assert hit["match_count"] == 1
    for package_id, version in [("package:other", None), (None, "0.1.1"), (None, "0.1")]:
        miss = index.search_exact(
            "VSTD-2", "OFFLINE_REPLAY", CHECK, package_id=package_id, package_version=version
        )
        assert miss["match_count"] == 0


def test_search_never_raises_on_query_types(index: ComponentIndex) -> None:
    found = index.search_exact(["VSTD-2"], {"mode": 1}, 3, b"relation")
    assert found["match_count"] == 0
    assert all(value is None or isinstance(value, str) for value in found["query"].values())


class _EqualsEverything(str):
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


def test_package_filters_do_not_match_a_lying_str_subclass(index: ComponentIndex) -> None:
    """Exact discovery (docs/spec/formation.md §7.2): filters compare exact strings only."""
    for package_id, version in [
        (_EqualsEverything("package:other"), None),
        (None, _EqualsEverything("9")),
    ]:
        miss = index.search_exact(
            "VSTD-2", "OFFLINE_REPLAY", CHECK, package_id=package_id, package_version=version
        )
        assert miss["match_count"] == 0
        assert miss["result"] == "NO_DECLARED_MATCH_IN_THIS_INDEX"
