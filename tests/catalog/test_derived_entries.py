"""The reference registry is derived from the built-in providers, never hand-written.

``catalog/data/reference-components.json`` is what ``scripts/derive_catalog.py`` derives from
the providers' ``catalog_metadata()``; the catalog reads only that file (it imports no
mechanism). A declaration that changes next to a mechanism without a fresh derivation is caught
here, and the catalog's mechanism constants are the providers' own.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import testdata

import catalog
import mechanism.descriptor as descriptor
import mechanism.formation as formation
from session import load_provider

SCRIPT = testdata.REPO / "scripts" / "derive_catalog.py"


def test_the_derived_file_is_what_the_providers_declare_now() -> None:
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr


def test_every_declared_component_is_in_the_registry_with_its_packaging() -> None:
    registry = catalog.reference_registry()
    declared = {
        component["component_id"]
        for name in ("formation", "descriptor")
        for component in load_provider(name).catalog_metadata().components  # type: ignore[union-attr]
    }
    assert {component.component_id for component in registry.components} == declared
    assert {packaging.component_id for packaging in catalog.PACKAGING} == declared
    assert catalog.FORMATION_MECHANISM_ID == formation.MECHANISM_ID
    assert catalog.FORMATION_PROFILE_DIGEST == formation.PROFILE_DIGEST
    assert catalog.DESCRIPTOR_MECHANISM_ID == descriptor.MECHANISM_ID


def test_a_stale_derivation_is_reported_with_a_diff(tmp_path: Path) -> None:
    """The check compares exactly: one changed word in the file is stale, nothing is written."""
    current = (testdata.REPO / "catalog" / "data" / "reference-components.json").read_bytes()
    stale = tmp_path / "stale.json"
    stale.write_bytes(current.replace(b'"EXPERIMENTAL"', b'"SUPPORTED"', 1))
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--target", str(stale)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 1
    assert re.search(r'^- +"lifecycle": "SUPPORTED",$', completed.stderr, re.MULTILINE)
    assert re.search(r'^\+ +"lifecycle": "EXPERIMENTAL",$', completed.stderr, re.MULTILINE)
    assert "stale: run python scripts/derive_catalog.py" in completed.stderr
    assert stale.read_bytes() != current
