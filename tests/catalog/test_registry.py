"""Descriptor and registry rules: sorted declarations, closed vocabularies, exact matching,
the bare-hex registry digest, and the daemon's ``entry_for_mechanism``."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import pytest

import catalog
from catalog import ComponentDescriptor, ComponentRegistry, ComponentRegistryError

PRODUCER = "component:artifact-network-typed-formation-producer"
CHECKER = "component:artifact-network-typed-formation-checker"
RECHECKER = "component:artifact-network-typed-formation-receipt-rechecker"
ADAPTER = "component:artifact-network-typed-formation-session-mechanism"
FORMATION_ID = "vstd.typed_formation.checked.0.1"
SUBJECT_SCHEMA = "VSTD-TYPED-FORMATION-0.1"


def _descriptor(**changes: Any) -> ComponentDescriptor:
    base = catalog.reference_registry().get(CHECKER)
    assert base is not None
    fields = {f.name: getattr(base, f.name) for f in attrs.fields(ComponentDescriptor)}
    fields.update(changes)
    return ComponentDescriptor(**fields)


def test_string_lists_are_stored_sorted_and_unique() -> None:
    descriptor = _descriptor(domain_tags=["z", "a", "z", "m"], relation_ids=("r2", "r1", "r2"))
    assert descriptor.domain_tags == ("a", "m", "z")
    assert descriptor.relation_ids == ("r1", "r2")
    for component in catalog.reference_registry().components:
        for key, value in component.to_dict().items():
            if isinstance(value, list):
                assert value == sorted(set(value)), (component.component_id, key)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"domain_tags": "artifact"}, "a bare string is not a list of tags"),
        ({"domain_tags": ["ok", ""]}, "empty list item"),
        ({"domain_tags": ["ok", 3]}, "non-string list item"),
        ({"kind": "ORACLE"}, "kind outside the closed vocabulary"),
        ({"interaction_modes": ["TELEPATHIC"]}, "unknown interaction mode"),
        ({"interaction_modes": []}, "no interaction mode"),
        ({"lifecycle": "STABLE"}, "unknown lifecycle"),
        ({"availability": True}, "availability must be a vocabulary string"),
        ({"implementation_ref": "mechanism.formation.check_formation"}, "ref without colon"),
        ({"implementation_ref": "mechanism.formation:A.b.c"}, "ref deeper than Class.method"),
        ({"implementation_ref": "mechanism/formation:check"}, "ref with a path separator"),
        (
            {"execution_prerequisites": ["EXACT_RULE_PROFILE:271760d6"]},
            "a rule profile prerequisite without a sha256: digest",
        ),
        ({"claim_boundary": ""}, "empty claim boundary"),
    ],
)
def test_malformed_descriptor_is_refused(changes: dict[str, Any], reason: str) -> None:
    with pytest.raises(ComponentRegistryError):
        _descriptor(**changes)


def test_registry_refuses_duplicate_component_ids() -> None:
    one = _descriptor()
    with pytest.raises(ComponentRegistryError, match="duplicate"):
        ComponentRegistry([one, _descriptor(native_system="other")], registry_version="v")


def test_registry_digest_is_bare_hex_over_ascii_escaped_sorted_compact_json() -> None:
    # A non-ASCII character distinguishes the ASCII-escaped core codec from the UTF-8 one.
    registry = ComponentRegistry(
        [_descriptor(native_system="Vérifier ✓")], registry_version="test-1"
    )
    document = {
        "schema_version": "VSTD-INTEROPERABILITY-CATALOG-1.1",
        "registry_version": "test-1",
        "components": [registry.components[0].to_dict()],
    }
    ascii_bytes = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    utf8_bytes = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = registry.canonical_digest()
    assert digest == hashlib.sha256(ascii_bytes.encode("ascii")).hexdigest()
    assert digest != hashlib.sha256(utf8_bytes.encode("utf-8")).hexdigest()
    assert len(digest) == 64 and not digest.startswith("sha256:")


def test_registry_digest_ignores_declaration_order_but_not_content() -> None:
    components = list(catalog.reference_registry().components)
    forward = ComponentRegistry(components, registry_version="v")
    backward = ComponentRegistry(reversed(components), registry_version="v")
    assert forward.canonical_digest() == backward.canonical_digest()
    changed = [_descriptor(availability="UNAVAILABLE"), *components[1:]]
    assert ComponentRegistry(changed, registry_version="v").canonical_digest() != (
        forward.canonical_digest()
    )
    assert [c.component_id for c in forward.components] == sorted(
        c.component_id for c in components
    )


# (schema, mode, relation, mechanism) -> expected component ids, in component-id order.
MATCH_TABLE: list[tuple[object, object, object, object, list[str]]] = [
    ("VSTD-2", "OFFLINE_REPLAY", None, "mechanism:typed-formation-certificate-check", [CHECKER]),
    ("VSTD-2", "OFFLINE_REPLAY", "relation:checks-typed-formation-certificate", None, [CHECKER]),
    (
        "VSTD-2",
        "OFFLINE_REPLAY",
        "relation:checks-typed-formation-certificate",
        "mechanism:typed-formation-certificate-check",
        [CHECKER],
    ),
    ("VSTD-2", "STATIC", "relation:produces-typed-formation-certificate", None, [PRODUCER]),
    ("VSTD-2", "OFFLINE_REPLAY", None, FORMATION_ID, [ADAPTER]),
    ("VSTD-2", "OFFLINE_REPLAY", "relation:rechecks-typed-formation-receipt", None, [RECHECKER]),
    # The native subject schema is not the planning surface.
    ("VSTD-TYPED-FORMATION-0.1", "OFFLINE_REPLAY", None, FORMATION_ID, []),
    (
        "VSTD-TYPED-FORMATION-0.1",
        "STATIC",
        "relation:produces-typed-formation-certificate",
        None,
        [],
    ),
    # Mode must be declared.
    ("VSTD-2", "LIVE_MUTATING", None, "mechanism:typed-formation-certificate-check", []),
    ("VSTD-2", "STATIC", None, "mechanism:typed-formation-certificate-check", []),
    # Unrelated relation / another mechanism.
    ("VSTD-2", "OFFLINE_REPLAY", "relation:unrelated", None, []),
    ("VSTD-2", "OFFLINE_REPLAY", None, "mechanism:other", []),
    # Relations x mechanisms: the checker's relation with the adapter's mechanism matches nothing.
    ("VSTD-2", "OFFLINE_REPLAY", "relation:checks-typed-formation-certificate", FORMATION_ID, []),
    # Neither relation nor mechanism: nothing is a declared match.
    ("VSTD-2", "OFFLINE_REPLAY", None, None, []),
    # Wrong types never raise, they match nothing.
    (["VSTD-2"], "OFFLINE_REPLAY", None, FORMATION_ID, []),
    ("VSTD-2", b"OFFLINE_REPLAY", None, FORMATION_ID, []),
    ("VSTD-2", "OFFLINE_REPLAY", None, 7, []),
]


@pytest.mark.parametrize(("schema", "mode", "relation", "mechanism", "expected"), MATCH_TABLE)
def test_match_exact_table(
    schema: object, mode: object, relation: object, mechanism: object, expected: list[str]
) -> None:
    matches = catalog.reference_registry().match_exact(
        schema, mode, relation_id=relation, mechanism_id=mechanism
    )
    assert [m.component_id for m in matches] == expected


def test_match_exact_returns_component_id_order() -> None:
    shared = _descriptor(component_id="component:z-last", relation_ids=["relation:shared"])
    first = _descriptor(component_id="component:a-first", relation_ids=["relation:shared"])
    registry = ComponentRegistry([shared, first], registry_version="v")
    found = registry.match_exact("VSTD-2", "OFFLINE_REPLAY", relation_id="relation:shared")
    assert [m.component_id for m in found] == ["component:a-first", "component:z-last"]


def test_entry_for_mechanism_returns_the_adapter_descriptor_as_plain_json() -> None:
    entry = catalog.entry_for_mechanism(FORMATION_ID)
    assert entry is not None
    assert entry["component_id"] == ADAPTER and entry["kind"] == "ADAPTER"
    assert json.loads(json.dumps(entry)) == entry
    entry["kind"] = "MUTATED BY CALLER"
    again = catalog.entry_for_mechanism(FORMATION_ID)
    assert again is not None and again["kind"] == "ADAPTER"


@pytest.mark.parametrize(
    "mechanism_id",
    [
        "vstd.typed_formation.checked.0.2",
        "mechanism:typed-formation-certificate-check",
        "",
        None,
        7,
    ],
)
def test_entry_for_mechanism_is_none_for_non_adapters_and_unknown_ids(mechanism_id: Any) -> None:
    assert catalog.entry_for_mechanism(mechanism_id) is None


def test_registry_round_trips_through_its_dict_and_refuses_unsorted_lists() -> None:
    registry = catalog.reference_registry()
    again = ComponentRegistry.from_dict(json.loads(json.dumps(registry.canonical_dict())))
    assert again == registry and again.canonical_digest() == registry.canonical_digest()
    tampered = registry.canonical_dict()
    tampered["components"][0]["domain_tags"].reverse()
    with pytest.raises(ComponentRegistryError, match="sorted"):
        ComponentRegistry.from_dict(tampered)
    extra = registry.canonical_dict()
    extra["components"][0]["verdict"] = "CHECKED"
    with pytest.raises(ComponentRegistryError, match="unexpected"):
        ComponentRegistry.from_dict(extra)


@pytest.mark.parametrize(("schema", "mode", "relation", "mechanism", "expected"), MATCH_TABLE)
def test_match_exact_takes_positional_arguments_in_search_exact_order(
    schema: object, mode: object, relation: object, mechanism: object, expected: list[str]
) -> None:
    """docs/spec/formation.md §7.2 gives ``search_exact(schema_id, interaction_mode, mechanism_id,
    relation_id, ...)``; registry and descriptor matching accept the same positional order."""
    registry = catalog.reference_registry()
    found = registry.match_exact(schema, mode, mechanism, relation)
    assert [m.component_id for m in found] == expected
    for component in registry.components:
        assert component.matches_exact(schema, mode, mechanism, relation) is (
            component.component_id in expected
        )


def test_planning_and_readiness_accept_the_package_positionally(
    reference_package: catalog.StoredPackage, kit: Any
) -> None:
    analysis = kit.analysis_for("component:artifact-network-typed-formation-checker")
    registry = reference_package.registry()
    plan = catalog.plan_validation(analysis, registry, reference_package)
    assert plan == catalog.plan_validation(analysis, registry, package=reference_package)
    assert plan.binding_scope == "STORED_PACKAGE"
    report = catalog.assess_execution_readiness(
        analysis, plan, registry, [], None, None, reference_package
    )
    assert report.package_digest == plan.package_digest
    assert "plan is bound to a stored package that was not supplied" not in report.findings
