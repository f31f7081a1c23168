"""Every citation of ``docs/spec`` resolves; nothing cites material outside the repository.

Rules, over every tracked ``.py``, ``.md`` and ``.toml`` file (``git ls-files``, or a walk of the
checkout without ``.git``, ``.venv`` and build output when git cannot list it):

1. A citation is ``docs/spec/<name>.md`` optionally followed by section tokens ``§<id>`` — ids
   such as ``3``, ``3.4``, ``A``, ``C.2``; ranges (``§2.1–§2.2``) and lists (``§2.2, §3.1``,
   also across backticks) are read token by token. The file must exist, and every cited id must
   be the number of one of its headings (``## 3. …``, ``### 3.4 …``, ``## A. …``).
2. No file cites the originals the specification replaced (docs/spec/README.md maps them): a
   ``shared/`` path, a seed by number or by file name, a bare ``formation.md §N`` (or
   ``descriptor.md``/``holdout.md``) that is not under ``docs/spec/``, or an issue number.
   Exempt: ``docs/spec/README.md`` (the mapping table that names the seeds), this file (it
   spells the patterns), and test files named ``*manifest*`` (they compare the vendored test data
   with the reference folder when one is present).
3. The glossary defines, as a heading, every term of art the code relies on.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[1]
SPEC: Final = ROOT / "docs" / "spec"
SUFFIXES: Final = (".py", ".md", ".toml")
SKIP_DIRS: Final = frozenset({".git", ".venv", "build", "dist", "__pycache__"})

SECTION: Final = r"(?:[0-9]+(?:\.[0-9]+)*|[A-Z](?:\.[0-9]+)*)"
CITATION: Final = re.compile(
    rf"docs/spec/(?P<file>[A-Za-z0-9_-]+\.md)(?P<sections>(?:[\s`]*(?:,|and|[–-])?[\s`]*§{SECTION})*)"
)
TOKEN: Final = re.compile(rf"§({SECTION})")
HEADING: Final = re.compile(rf"^#{{1,6}}\s+({SECTION})[.\s]", re.MULTILINE)

# Spelt in two pieces so that this file does not itself name the folder it forbids
# (tests/test_data_manifest.py refuses tracked text that builds a path through it).
REFERENCE_FOLDER: Final = "sha" + "red"
OLD_STYLE: Final = (
    (re.compile(REFERENCE_FOLDER + "/"), "a path into the external reference folder"),
    (re.compile(r"(?i)\bseeds?\s*`?0\d\d\b"), "a seed text by number"),
    (re.compile(r"(?i)\bseed\b[^\n§]{0,3}§"), "a seed section"),
    (re.compile(r"\b00\d_[0-9a-f]{16}\b"), "a seed text by file name"),
    (
        re.compile(
            r"(?<!docs/spec/)(?<!docs/)\b(?:spec/)?(?:formation|descriptor|holdout)\.md`*\s*§"
        ),
        "a section of a behaviour reference outside docs/spec",
    ),
    (re.compile(r"(?i)\bissues?\s+#?\d+"), "an issue number"),
)
EXEMPT: Final = frozenset({"docs/spec/README.md", "tests/test_spec_citations.py"})

GLOSSARY_TERMS: Final = (
    "VSTD",
    "typed formation",
    "silo",
    "receipt",
    "T81",
    "TISC",
    "T81VM",
    "Axion",
    "CanonFS",
    "TRVM",
    "holdout",
    "residual obligation",
    "bound proposition",
    "evidence store",
    "canonical codec",
    "core codec",
    "admission",
    "compiled profile",
    "subject",
    "certificate",
    "denotation",
    "formation digest",
    "source identity",
    "silo commit",
    "census",
    "selection",
    "authority axiom agency",
    "catalog",
    "stored package",
    "planning surface",
    "readiness",
    "experiment descriptor",
    "payload reference",
    "descriptor identity",
    "final authorization",
    "allowlist",
    "SafeTensors",
    "challenge",
    "predicate",
    "UNRESOLVED",
    "refusal set",
    "commitment",
    "release id",
)


def _tracked_files() -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout.decode("utf-8")
        names = [name for name in listed.split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        names = [
            path.relative_to(ROOT).as_posix()
            for path in ROOT.rglob("*")
            if path.is_file()
            and not SKIP_DIRS.intersection(path.relative_to(ROOT).parts)
            and not any(part.endswith(".egg-info") for part in path.relative_to(ROOT).parts)
        ]
    return sorted(name for name in names if name.endswith(SUFFIXES) and (ROOT / name).is_file())


def _lines(name: str) -> Iterator[tuple[int, str]]:
    text = (ROOT / name).read_text(encoding="utf-8")
    yield from enumerate(text.splitlines(), start=1)


def _headings(spec_file: Path) -> frozenset[str]:
    return frozenset(HEADING.findall(spec_file.read_text(encoding="utf-8")))


def _citations() -> list[tuple[str, int, str, tuple[str, ...]]]:
    """(file, line, cited spec file, cited section ids) for every citation in the tree."""
    found = []
    for name in _tracked_files():
        text = (ROOT / name).read_text(encoding="utf-8")
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            sections = tuple(TOKEN.findall(match.group("sections")))
            found.append((name, line, match.group("file"), sections))
    return found


def test_the_tree_cites_the_specification() -> None:
    # Guards the scanner itself: a pattern that matched nothing would make the next test vacuous
    # (citations inside docs/spec do not count: the code and the guides must cite it).
    citations = [c for c in _citations() if not c[0].startswith("docs/spec/")]
    cited = {spec for _, _, spec, _ in citations}
    assert {"formation.md", "descriptor.md", "holdout.md"} <= cited
    assert sum(len(sections) for *_, sections in citations) > 100


def test_a_citation_of_a_missing_file_or_section_is_refused() -> None:
    broken: list[str] = []
    headings: dict[str, frozenset[str]] = {}
    for name, line, spec, sections in _citations():
        path = SPEC / spec
        if not path.is_file():
            broken.append(f"{name}:{line}: docs/spec/{spec} does not exist")
            continue
        known = headings.setdefault(spec, _headings(path))
        broken.extend(
            f"{name}:{line}: docs/spec/{spec} has no section §{section}"
            for section in sections
            if section not in known
        )
    assert broken == []


def test_the_scanner_reads_ranges_lists_and_backticks() -> None:
    text = (
        "see docs/spec/formation.md §2.1–§2.2, §3.4 and §12; "
        "`docs/spec/holdout.md §B.3`, `§C.1`. Not docs/spec/descriptor.md alone."
    )
    found = [
        (match.group("file"), TOKEN.findall(match.group("sections")))
        for match in CITATION.finditer(text)
    ]
    assert found == [
        ("formation.md", ["2.1", "2.2", "3.4", "12"]),
        ("holdout.md", ["B.3", "C.1"]),
        ("descriptor.md", []),
    ]


@pytest.mark.parametrize(
    "text",
    [
        f"See ``{REFERENCE_FOLDER}/spec/formation.md`` §1.2",
        f"read from ../{REFERENCE_FOLDER}/data/formation",
        "seed 002 §4.1",
        "Seed 000: storage admission",
        "seed `000_84f99e728d62cc98`",
        "the seed (§4.2: a declared link)",
        "(formation.md §7.1, field by field)",
        "``spec/descriptor.md`` §3.4",
        "`spec/formation.md` §8",
        "holdout.md §5",
        "(issue 7: one document)",
        "issue 5; each step measured",
    ],
)
def test_old_style_citations_are_recognised(text: str) -> None:
    assert any(pattern.search(text) for pattern, _ in OLD_STYLE)


@pytest.mark.parametrize(
    "text",
    [
        "docs/spec/formation.md §7.1",
        "`docs/spec/descriptor.md §3.4`",
        "docs/formation.md",
        "on the shared development machine",
        'relation_ids=["relation:shared"]',
        "a shared (acyclic) sub-value",
        "tissue 5",
    ],
)
def test_current_citations_and_ordinary_words_are_not_old_style(text: str) -> None:
    assert not any(pattern.search(text) for pattern, _ in OLD_STYLE)


def test_no_tracked_file_cites_material_outside_the_repository() -> None:
    offences: list[str] = []
    for name in _tracked_files():
        if name in EXEMPT or "manifest" in Path(name).name:
            continue
        for number, line in _lines(name):
            offences.extend(
                f"{name}:{number}: {why}: {line.strip()}"
                for pattern, why in OLD_STYLE
                if pattern.search(line)
            )
    assert offences == []


def test_the_glossary_defines_every_term_of_art() -> None:
    text = (SPEC / "glossary.md").read_text(encoding="utf-8")
    defined = {
        term.strip().casefold()
        for heading in re.findall(r"^###\s+(.+)$", text, re.MULTILINE)
        for term in heading.split(",")
    }
    missing = [term for term in GLOSSARY_TERMS if term.casefold() not in defined]
    assert missing == []


def test_every_glossary_entry_points_at_a_resolvable_section() -> None:
    text = (SPEC / "glossary.md").read_text(encoding="utf-8")
    entries = re.split(r"^###\s+", text, flags=re.MULTILINE)[1:]
    assert entries
    unreferenced = [entry.splitlines()[0] for entry in entries if "docs/spec/" not in entry]
    assert unreferenced == []
