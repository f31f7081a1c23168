"""The reference registry of this project, derived from its mechanism providers.

Rules:

* The components and their packaging are those the built-in providers declare
  (``catalog_metadata()``, next to each mechanism, from its own constants:
  ``docs/spec/formation.md`` §7.1 field by field for formation, one component per separately
  callable stage for the descriptor — ``docs/catalog.md`` maps the implementation refs to the
  reference).
  ``scripts/derive_catalog.py`` derives them into ``catalog/data/reference-components.json``,
  which this module reads (strictly: no duplicate keys, no floats) at import; a test keeps the
  file equal to what the providers declare. The catalog therefore never imports a mechanism or
  the session protocol: ids and digests arrive as data.
* :data:`PACKAGING` declares, per component, which exact files a stored package retains: the
  module file of every source ref (resolved statically, never imported) and the schema,
  specification, profile and fixture files. Paths are relative to the source root (the
  directory holding the ``catalog`` package).
* :data:`FORMATION_MECHANISM_ID` and :data:`DESCRIPTOR_MECHANISM_ID` are the session mechanism
  ids of the ``formation`` and ``descriptor`` providers; :data:`FORMATION_PROFILE_DIGEST` is the
  rule profile the formation components pin (``EXACT_RULE_PROFILE:``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import attrs

from ._descriptor import ComponentDescriptor
from ._errors import ComponentRegistryError
from ._jsonio import read_json_file
from ._registry import ComponentRegistry

__all__ = [
    "DESCRIPTOR_MECHANISM_ID",
    "FORMATION_MECHANISM_ID",
    "FORMATION_PROFILE_DIGEST",
    "PACKAGING",
    "REGISTRY_VERSION",
    "ArtifactDeclaration",
    "ComponentPackaging",
    "packaging_from_dict",
    "reference_registry",
]

REGISTRY_VERSION: Final = "EVIDENCED-REFERENCE-COMPONENTS-0.1"
DERIVED_PATH: Final = Path(__file__).resolve().parent / "data" / "reference-components.json"


@attrs.frozen
class ArtifactDeclaration:
    """One exact file a stored package retains: ``role`` and source-root-relative ``path``."""

    role: str
    path: str


@attrs.frozen
class ComponentPackaging:
    """What a stored package retains for one component.

    ``source_refs`` are ``module:attribute`` refs whose defining module files are retained (the
    first is the component's own ``implementation_ref``); ``artifacts`` are the other exact files;
    ``dependencies`` become ``PACKAGE_DEPENDENCY:`` planning prerequisites.
    """

    component_id: str
    source_refs: tuple[str, ...]
    artifacts: tuple[ArtifactDeclaration, ...]
    dependencies: tuple[str, ...]


def _strings(value: object, what: str) -> tuple[str, ...]:
    if type(value) is not list or not all(type(item) is str and item for item in value):
        raise ComponentRegistryError(f"{what} must be a list of non-empty strings")
    return tuple(value)


def packaging_from_dict(data: object) -> ComponentPackaging:
    """A packaging declaration from its plain form (``{"component_id", "source_refs",
    "artifacts": [{"role", "path"}], "dependencies"}``); ``ComponentRegistryError`` otherwise."""
    keys = {"component_id", "source_refs", "artifacts", "dependencies"}
    if type(data) is not dict or set(data) != keys:
        raise ComponentRegistryError(f"a packaging declaration has exactly {sorted(keys)}")
    artifacts = data["artifacts"]
    if type(artifacts) is not list or not all(
        type(item) is dict
        and set(item) == {"role", "path"}
        and all(type(v) is str for v in item.values())
        for item in artifacts
    ):
        raise ComponentRegistryError("packaging artifacts are [{role, path}] strings")
    if type(data["component_id"]) is not str or not data["component_id"]:
        raise ComponentRegistryError("packaging component_id must be a non-empty string")
    return ComponentPackaging(
        data["component_id"],
        _strings(data["source_refs"], "packaging source_refs"),
        tuple(ArtifactDeclaration(item["role"], item["path"]) for item in artifacts),
        _strings(data["dependencies"], "packaging dependencies"),
    )


def _load() -> dict[str, dict[str, Any]]:
    document = read_json_file(DERIVED_PATH, ComponentRegistryError, "derived reference components")
    if type(document) is not dict or set(document) != {"providers"}:
        raise ComponentRegistryError(f"{DERIVED_PATH} holds exactly a providers list")
    providers: dict[str, dict[str, Any]] = {}
    for provider in document["providers"]:
        if type(provider) is not dict or set(provider) != {
            "provider",
            "mechanism_id",
            "components",
            "packaging",
        }:
            raise ComponentRegistryError(f"{DERIVED_PATH}: malformed provider entry")
        providers[provider["provider"]] = provider
    return providers


_PROVIDERS: Final = _load()
REFERENCE_COMPONENTS: Final[tuple[ComponentDescriptor, ...]] = tuple(
    ComponentDescriptor.from_dict(component)
    for provider in _PROVIDERS.values()
    for component in provider["components"]
)
PACKAGING: Final[tuple[ComponentPackaging, ...]] = tuple(
    packaging_from_dict(declared)
    for provider in _PROVIDERS.values()
    for declared in provider["packaging"]
)
FORMATION_MECHANISM_ID: Final[str] = _PROVIDERS["formation"]["mechanism_id"]
DESCRIPTOR_MECHANISM_ID: Final[str] = _PROVIDERS["descriptor"]["mechanism_id"]
(FORMATION_PROFILE_DIGEST,) = {
    digest
    for component in _PROVIDERS["formation"]["components"]
    for digest in ComponentDescriptor.from_dict(component).rule_profile_digests
}


def reference_registry() -> ComponentRegistry:
    """This project's registry: the formation entries and the descriptor mechanism's stages."""
    return ComponentRegistry(REFERENCE_COMPONENTS, registry_version=REGISTRY_VERSION)
