"""The checker and the adapter never import, call or need the producer.

Normative behaviour: docs/spec/formation.md §3.6.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import mechanism.formation as formation

from ._corpus import CORPUS_PATH

PACKAGE_DIR = Path(formation.__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent.parent


def _project_imports(module: str) -> set[str]:
    """Project modules imported (transitively) by ``module``, read from source with ``ast``."""
    seen: set[str] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        path = PROJECT_ROOT / (name.replace(".", "/") + ".py")
        if not path.is_file():
            path = PROJECT_ROOT / name.replace(".", "/") / "__init__.py"
        if not path.is_file():
            continue  # third-party or standard library
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                pending.append(node.module)
                pending.extend(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                pending.extend(alias.name for alias in node.names)
    return seen


def test_checker_and_wire_import_no_producer_transitively() -> None:
    imported = _project_imports("mechanism.formation._checker")
    assert "mechanism.formation._wire" in imported
    assert not any("producer" in name for name in imported)


def test_adapter_imports_no_producer_transitively() -> None:
    imported = _project_imports("mechanism.formation._mechanism")
    assert "mechanism.formation._checker" in imported
    assert not any("producer" in name for name in imported)


def test_producer_imports_no_checker() -> None:
    imported = _project_imports("mechanism.formation._producer")
    assert not any("checker" in name or "_mechanism" in name for name in imported)


# In a fresh interpreter: the package namespace is set up without running its __init__ (which
# re-exports the producer), and the producer module is made unavailable in sys.modules. The
# checker and the adapter must import and decide the corpus without it.
_DISABLED_PRODUCER = textwrap.dedent(
    """
    import base64, json, sys, types
    import mechanism

    package = types.ModuleType("mechanism.formation")
    package.__path__ = [{package_dir!r}]
    sys.modules["mechanism.formation"] = package
    sys.modules["mechanism.formation._producer"] = None  # import raises ImportError

    from mechanism.formation._checker import check_formation
    from mechanism.formation._mechanism import FormationPathCertificateMechanism, formation_binding
    from session import EvidenceStore, VerificationSession

    try:
        import mechanism.formation._producer
    except ImportError:
        pass
    else:
        raise SystemExit("the producer was importable")

    def decode(text):
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

    corpus = json.loads(open({corpus!r}, "rb").read())
    mismatches = 0
    for case in corpus["pure_cases"]:
        subject = decode(case["subject_bytes_base64url"])
        certificate = decode(case["certificate_bytes_base64url"])
        report = check_formation(subject, certificate)
        mismatches += report != case["expected_report"]
    atom = corpus["pure_cases"][0]
    subject = decode(atom["subject_bytes_base64url"])
    certificate = decode(atom["certificate_bytes_base64url"])
    store = EvidenceStore()
    store.add(subject)
    store.add(certificate)
    session = VerificationSession(store)
    session.register(FormationPathCertificateMechanism())
    outcome = session.evaluate(formation_binding(subject, certificate)).outcome.value
    loaded = sorted(name for name in sys.modules if "producer" in name and sys.modules[name])
    print(json.dumps({{"mismatches": mismatches, "outcome": outcome, "loaded": loaded}}))
    """
)


def test_checker_and_adapter_work_with_the_producer_unavailable() -> None:
    script = _DISABLED_PRODUCER.format(package_dir=str(PACKAGE_DIR), corpus=str(CORPUS_PATH))
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=PROJECT_ROOT,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == '{"mismatches": 0, "outcome": "PASS", "loaded": []}'


_PUBLIC_PACKAGE_WITHOUT_PRODUCER = textwrap.dedent(
    """
    import sys
    sys.modules["mechanism.formation._producer"] = None  # import raises ImportError

    from mechanism.formation import (
        FormationPathCertificateMechanism, check_formation, formation_binding,
        inspect_silo_formation,
    )
    import mechanism.formation as formation
    try:
        formation.produce_formation_certificate
    except ImportError:
        print("producer unavailable; package usable")
    """
)


def test_public_package_imports_and_checks_with_the_producer_unavailable() -> None:
    # §3.6: the checker does not depend on the producer — not even through the package
    # `mechanism.formation`, which re-exports the producer only on first use.
    completed = subprocess.run(
        [sys.executable, "-c", _PUBLIC_PACKAGE_WITHOUT_PRODUCER],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=PROJECT_ROOT,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "producer unavailable; package usable"
    assert formation.produce_formation_certificate.__module__ == "mechanism.formation._producer"
