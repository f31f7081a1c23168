"""The one declaration of the distribution's extras (``session/_extras.py``), held to
``pyproject.toml``, and the one line a missing extra is said with.

A module is made missing the way the import system itself allows: ``sys.modules[name] = None``
(``importlib.util.find_spec`` then finds nothing, and ``import name`` fails), so the real
look-up runs and nothing of ours is replaced.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tomllib
from typing import Any

import pytest
import testdata
from distributions import closure
from packaging.utils import canonicalize_name

from session import EXTRAS, ExtraMissing, missing_extra, require_extra

PYPROJECT = tomllib.loads((testdata.REPO / "pyproject.toml").read_text(encoding="utf-8"))
OPTIONAL: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


def _providers(module: str) -> set[str]:
    """The installed distributions that put ``module`` on the path."""
    mapping = importlib.metadata.packages_distributions()
    return {str(canonicalize_name(name)) for name in mapping.get(module, [])}


def test_the_declared_extras_are_pyprojects_but_all_and_test() -> None:
    assert set(EXTRAS) == set(OPTIONAL) - {"all", "test"}


def test_all_is_every_extra_and_test_installs_all() -> None:
    """The README's two commands install everything: ``make`` installs ``[test]``."""
    assert OPTIONAL["all"] == [f"evidenced[{','.join(sorted(EXTRAS))}]"]
    assert "evidenced[all]" in OPTIONAL["test"]


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_every_module_of_an_extra_comes_from_a_distribution_that_extra_installs(
    extra: str,
) -> None:
    core = set(closure("evidenced"))
    with_extra = set(closure("evidenced", [extra]))
    for module in EXTRAS[extra].modules:
        providers = _providers(module)
        assert providers, f"{module} is installed by no distribution here"
        assert providers <= with_extra - core, f"{module}: {providers} (core: {providers & core})"


def test_the_core_installs_no_module_of_any_extra() -> None:
    core = set(closure("evidenced"))
    leaked = {
        module: _providers(module) & core
        for extra in EXTRAS.values()
        for module in extra.modules
        if _providers(module) & core
    }
    assert leaked == {}


def test_a_missing_module_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing_extra("descriptor") is None
    require_extra("descriptor")
    monkeypatch.setitem(sys.modules, "safetensors", None)
    missing = missing_extra("descriptor")
    assert isinstance(missing, ExtraMissing) and isinstance(missing, ImportError)
    assert str(missing) == (
        "the T81 descriptor mechanism needs the 'descriptor' extra: "
        "pip install 'evidenced[descriptor]'"
    )
    assert (missing.code, missing.extra, missing.missing) == (
        "EXTRA_MISSING",
        "descriptor",
        ("safetensors",),
    )
    with pytest.raises(ExtraMissing, match=r"^my feature needs the 's3' extra: pip install"):
        monkeypatch.setitem(sys.modules, "boto3", None)
        require_extra("s3", "my feature")


def test_looking_an_extra_up_imports_nothing() -> None:
    probe = (
        "import json, sys\n"
        "from session import missing_extra\n"
        "print(json.dumps([missing_extra(name) is None for name in "
        "('descriptor', 'explain', 'holdout', 's3')]))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'safetensors', 'grandalf', 'jsonschema', 'jsonschema_rs', 'rfc8785', "
        "'referencing', 'boto3'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    found: list[Any] = [json.loads(line) for line in done.stdout.splitlines()]
    assert found == [[True, True, True, True], []]
