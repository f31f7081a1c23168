"""Derive the catalog's reference components from the built-in mechanism providers.

The catalog never imports a mechanism (it builds, indexes, plans and assesses readiness from
declarations only), so the reference registry is *derived* ahead of time: this script asks every
provider of the ``evidenced`` distribution (entry points ``evidenced.mechanisms``) for its
``catalog_metadata()`` — declared next to the mechanism, from its own constants — validates each
component and packaging declaration with the catalog's own types, and writes
``catalog/data/reference-components.json``, which ``catalog._entries`` reads. Rules:

* providers sorted by entry-point name; each ``{"provider", "mechanism_id", "components",
  "packaging"}`` with components in ``ComponentDescriptor.to_dict()`` form (string sets sorted);
* a provider without catalog metadata contributes nothing; a component id declared twice, or a
  packaging entry for an undeclared component, is an error;
* the file is JSON with sorted keys, two-space indentation and a final newline.

``python scripts/derive_catalog.py`` rewrites the file (``--target PATH``: another file);
``--check`` only compares (exit 1 and a diff on stderr when the file is stale;
``tests/catalog/test_derived_entries.py`` runs it).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "catalog" / "data" / "reference-components.json"
DISTRIBUTION = "evidenced"


def _normalised(component: dict[str, Any]) -> dict[str, Any]:
    """``ComponentDescriptor.to_dict()`` form: every string set sorted and unique."""
    return {
        key: sorted(set(value)) if isinstance(value, list | tuple) else value
        for key, value in component.items()
    }


def derive() -> str:
    """The derived file's text (the catalog is not imported: it reads this very file)."""
    from session import provider_entries

    providers: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in provider_entries():
        if entry.distribution != DISTRIBUTION:
            continue
        provider = entry.load()
        metadata = provider.catalog_metadata()
        if metadata is None:
            continue
        components = [_normalised(dict(c)) for c in metadata.components]
        ids = [c["component_id"] for c in components]
        if seen & set(ids) or len(set(ids)) != len(ids):
            raise ValueError(f"provider {entry.name!r} declares a component twice: {ids}")
        seen.update(ids)
        packaging = [dict(p) for p in metadata.packaging]
        for declared in packaging:
            if declared.get("component_id") not in ids:
                raise ValueError(f"{entry.name}: packaging for undeclared {declared}")
        providers.append(
            {
                "provider": entry.name,
                "mechanism_id": provider.mechanism_id,
                "components": components,
                "packaging": packaging,
            }
        )
    return json.dumps({"providers": providers}, indent=2, sort_keys=True) + "\n"


def validate() -> None:
    """Load the written file the way the catalog does (its own types validate every field)."""
    import catalog

    catalog.reference_registry()
    declared = {packaging.component_id for packaging in catalog.PACKAGING}
    listed = {component.component_id for component in catalog.reference_registry().components}
    if declared != listed:
        raise ValueError(f"components without packaging: {sorted(listed ^ declared)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when stale")
    parser.add_argument("--target", type=Path, default=TARGET, help="the derived file")
    args = parser.parse_args(argv)
    target: Path = args.target
    derived = derive()
    current = target.read_text("utf-8") if target.is_file() else ""
    if args.check:
        if current == derived:
            if target == TARGET:
                validate()
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            derived.splitlines(keepends=True),
            str(target),
            "derived from the providers",
        )
        sys.stderr.write("".join(diff))
        sys.stderr.write("stale: run python scripts/derive_catalog.py\n")
        return 1
    target.write_text(derived, "utf-8")
    if target == TARGET:
        validate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
