"""The vendored conformance data is exactly the reference bytes, and nothing reads from outside.

Rules checked, in this order:

1. Every entry of ``tests/data/MANIFEST.json`` names a repository-relative file that exists and
   whose SHA-256 is the recorded one. A missing file fails naming it; a changed file fails
   naming it with both digests (recorded and actual).
2. Every file under ``tests/data/`` (the manifest aside) is listed: no unrecorded test data.
3. Only when a ``../shared`` folder (the reference material) sits beside the checkout: each
   vendored file whose reference exists there is byte-identical to it. This is the one place in
   the repository allowed to name that folder; nothing needs it.
4. No tracked file reads data from outside the checkout: no ``../shared``, no ``"shared"`` path
   component, no absolute machine path (``/work/``, ``/home/``, ``/Users/``, ``/root/``), no
   home directory (``Path.home()``, ``expanduser``), no literal file under a temp directory used
   as a data source (``"/tmp/name"``). Creating a fresh temp folder (``dir="/tmp"``) is fine.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
import testdata

ENTRIES: Final = testdata.manifest_entries()
REFERENCE: Final = testdata.REPO.parent / "shared"
_HEX64: Final = re.compile(r"[0-9a-f]{64}\Z")
THIS_FILE: Final = "tests/test_data_manifest.py"


def entry_problem(root: Path, entry: dict[str, Any]) -> str | None:
    """What is wrong with one manifest entry under ``root`` (``None``: the bytes are right)."""
    path = root / entry["path"]
    if not path.is_file():
        return f"{entry['path']}: vendored file missing (manifest sha256 {entry['sha256']})"
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual != entry["sha256"]:
        return f"{entry['path']}: sha256 {actual} does not match the manifest's {entry['sha256']}"
    return None


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry["path"] for entry in ENTRIES])
def test_vendored_file_has_the_manifest_digest(entry: dict[str, Any]) -> None:
    assert set(entry) == {"path", "sha256", "reference"}
    assert _HEX64.match(entry["sha256"]), entry
    relative = Path(entry["path"])
    assert not relative.is_absolute() and ".." not in relative.parts, entry
    assert (problem := entry_problem(testdata.REPO, entry)) is None, problem


def test_manifest_lists_each_file_once_and_every_file_under_tests_data() -> None:
    listed = [entry["path"] for entry in ENTRIES]
    assert len(listed) == len(set(listed))
    present = {
        path.relative_to(testdata.REPO).as_posix()
        for path in testdata.DATA.rglob("*")
        if path.is_file() and path != testdata.MANIFEST
    }
    assert present - set(listed) == set(), "unlisted files under tests/data/"


def test_a_corrupted_vendored_file_is_named_with_both_digests(tmp_path: Path) -> None:
    entry = ENTRIES[0]
    copy = tmp_path / entry["path"]
    copy.parent.mkdir(parents=True)
    data = bytearray(testdata.repo(entry["path"]).read_bytes())
    data[len(data) // 2] ^= 0x01
    copy.write_bytes(bytes(data))
    problem = entry_problem(tmp_path, entry)
    assert problem is not None
    assert entry["path"] in problem and entry["sha256"] in problem
    assert hashlib.sha256(bytes(data)).hexdigest() in problem


def test_a_missing_vendored_file_is_named(tmp_path: Path) -> None:
    entry = ENTRIES[-1]
    problem = entry_problem(tmp_path, entry)
    assert problem is not None and entry["path"] in problem and "missing" in problem
    with pytest.raises(testdata.MissingTestData, match=re.escape("tests/data/no-such-corpus.json")):
        testdata.data("no-such-corpus.json")


def test_vendored_bytes_equal_the_reference_beside_the_checkout_when_present() -> None:
    """Optional second check: only a machine with the reference material beside the checkout
    can compare; elsewhere the manifest digests (test 1) are the whole check."""
    mismatched: list[str] = []
    for entry in ENTRIES:
        reference = Path(entry["reference"])
        assert not reference.is_absolute() and ".." not in reference.parts, entry
        source = REFERENCE / reference
        if REFERENCE.is_dir() and source.is_file():
            expected = hashlib.sha256(source.read_bytes()).hexdigest()
            actual = hashlib.sha256(testdata.repo(entry["path"]).read_bytes()).hexdigest()
            if actual != expected:
                mismatched.append(f"{entry['path']}: sha256 {actual}, reference {expected}")
    assert mismatched == []


# ---- 4. nothing reads from outside the checkout ---------------------------------------------

FORBIDDEN: Final = (
    (re.compile(r"\.\./shared\b"), "reads the reference folder beside the checkout"),
    (re.compile(r"""["']shared["'/]"""), "builds a path through a 'shared' folder"),
    (re.compile(r"(?<![\w.~-])/(?:work|home|Users|root)/"), "names an absolute machine path"),
    (re.compile(r"Path\.home\(\)|expanduser\("), "reads from a home directory"),
    (re.compile(r"""["'](?:/var)?/tmp/[^"'\s]+"""), "reads a fixed file in a temp directory"),
)


def outside_reads(text: str) -> list[str]:
    """``line N: why: the offending text`` for every forbidden form in ``text``."""
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern, why in FORBIDDEN:
            if match := pattern.search(line):
                found.append(f"line {number}: {why}: {match.group(0)!r}")
    return found


def _tracked_files() -> list[str]:
    if shutil.which("git") and (testdata.REPO / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=testdata.REPO, capture_output=True, check=True
        ).stdout
        return [name for name in listed.decode().split("\0") if name]
    skip = {".git", ".venv", "build", "dist", ".mypy_cache", ".ruff_cache", ".hypothesis"}
    return [
        path.relative_to(testdata.REPO).as_posix()
        for path in testdata.REPO.rglob("*")
        if path.is_file()
        and not skip.intersection(path.relative_to(testdata.REPO).parts)
        and not any(part.endswith(".egg-info") for part in path.parts)
    ]


def test_no_tracked_file_reads_data_from_outside_the_checkout() -> None:
    offenders: list[str] = []
    for name in _tracked_files():
        path = testdata.REPO / name
        if name == THIS_FILE or not path.is_file():
            continue
        raw = path.read_bytes()
        if b"\0" in raw:
            continue  # binary data, not code or prose
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        offenders.extend(f"{name} {finding}" for finding in outside_reads(text))
    assert offenders == []


@pytest.mark.parametrize(
    "line",
    [
        'CORPUS = ROOT.parent / "shared" / "data" / "corpus.json"',
        "see ../shared/data/formation for the corpus",
        'SPEC = ROOT / "shared/spec/seeds/000.txt"',
        'DATA = Path("/work/main/fixtures/x.json")',
        "cd /home/dev/evidenced && make test",
        'payload = open("/Users/me/payload.bin", "rb")',
        "cache = Path.home() / '.evidenced'",
        'config = os.path.expanduser("~/evidenced.toml")',
        'observations = Path("/tmp/obs.json").read_bytes()',
        "corpus = '/var/tmp/corpus/INDEX.json'",
    ],
)
def test_each_way_of_reading_outside_the_checkout_is_found(line: str) -> None:
    assert len(outside_reads(f"ok = 1\n{line}\n")) == 1


@pytest.mark.parametrize(
    "line",
    [
        'path = Path(tempfile.mkdtemp(prefix="evd", dir="/tmp"))',
        'relation_ids=["relation:shared"]',
        "shared = [1]  # shared (acyclic) sub-values",
        "fixtures/holdout/corpus/cas/root-05952ab3",
        "evidenced serve --socket /run/evidenced/evidenced.sock",
        "src/daemon/work/home/thing",
    ],
)
def test_reading_inside_the_checkout_or_making_a_fresh_temp_dir_is_not_flagged(line: str) -> None:
    assert outside_reads(line) == []


def test_manifest_document_is_plain_json() -> None:
    document = json.loads(testdata.MANIFEST.read_bytes())
    assert set(document) == {"about", "files"} and document["files"]
