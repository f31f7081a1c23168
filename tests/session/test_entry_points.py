"""The entry-point reader (``session/_entry_points.py``) answers what ``importlib.metadata``
answers, or defers to it.

A command line looks up its mechanism providers without importing ``importlib.metadata``: the
reader must find the same entries, with the same distribution names and versions, over the
installed distributions and over made-up ones (shadowed names, several versions, folded
headers, comments), and answer ``None`` where it could differ (a zip archive or an egg on the
path, another distribution finder, an entry line ``importlib.metadata`` refuses, a folded
``Name``).
"""

from __future__ import annotations

import importlib.metadata
import sys
import zipfile
from pathlib import Path

import pytest

from session._entry_points import group_entries

GROUP = "evidenced.mechanisms"


def _expected(group: str) -> list[tuple[str, str, str, str]]:
    return sorted(
        (point.name, point.value, point.dist.name, point.dist.version)
        for point in importlib.metadata.entry_points(group=group)
        if point.dist is not None
    )


def _read(group: str) -> list[tuple[str, str, str, str]]:
    read = group_entries(group)
    assert read is not None, f"the reader deferred for {group!r}"
    return sorted(read)


def _dist(
    root: Path, directory: str, metadata: str, entry_points: str | None, name: str = "METADATA"
) -> None:
    folder = root / directory
    folder.mkdir(parents=True)
    (folder / name).write_text(metadata, encoding="utf-8")
    if entry_points is not None:
        (folder / "entry_points.txt").write_text(entry_points, encoding="utf-8")


def _metadata(name: str, version: str, extra: str = "") -> str:
    return (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{extra}\nA long description.\n"
    )


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two ``sys.path`` directories of made-up distributions (and nothing else on the path)."""
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(
        first,
        "Alpha_Plugins-1.0.dist-info",
        _metadata("Alpha.Plugins", "1.0", "License: one\n  folded line\nName: not-this"),
        "# a comment\n\n[console_scripts]\nalpha = alpha:main\n\n"
        f"[{GROUP}]\n  alpha = alpha._provider:PROVIDER  \n; kept = as a name\nbeta=beta:B\n",
    )
    _dist(first, "plain-2.0.dist-info", _metadata("plain", "2.0"), None)
    _dist(
        first,
        "gamma-0.1.egg-info",
        _metadata("gamma", "0.1"),
        f"[{GROUP}]\ngamma = g:P\n",
        name="PKG-INFO",  # an egg-info directory made by setup.py develop
    )
    # Shadowed by the first directory's distribution of the same normalized name.
    _dist(
        second,
        "alpha.plugins-9.0.dist-info",
        _metadata("alpha-plugins", "9.0"),
        f"[{GROUP}]\nshadowed = nowhere:P\n",
    )
    _dist(second, "delta-3.dist-info", _metadata("Delta", "3"), f"[{GROUP}]\ndelta = d:P\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second), str(tmp_path / "missing")])
    return first, second


def test_the_installed_distributions_read_as_importlib_metadata_reads_them() -> None:
    groups = {
        point.group for dist in importlib.metadata.distributions() for point in dist.entry_points
    }
    assert GROUP in groups
    for group in groups:
        assert _read(group) == _expected(group), group


def test_made_up_distributions_read_as_importlib_metadata_reads_them(
    roots: tuple[Path, Path],
) -> None:
    assert _read(GROUP) == _expected(GROUP)
    assert {entry[0] for entry in _read(GROUP)} == {"alpha", "; kept", "beta", "gamma", "delta"}
    assert _read("console_scripts") == _expected("console_scripts")
    assert _read("no.such.group") == [] == _expected("no.such.group")


def test_a_zip_archive_on_the_path_is_left_to_importlib_metadata(
    roots: tuple[Path, Path], tmp_path: Path
) -> None:
    archive = tmp_path / "packed.zip"
    with zipfile.ZipFile(archive, "w") as packed:
        packed.writestr("packed-1.dist-info/METADATA", _metadata("packed", "1"))
        packed.writestr("packed-1.dist-info/entry_points.txt", f"[{GROUP}]\npacked = p:P\n")
    sys.path.append(str(archive))
    assert group_entries(GROUP) is None
    assert "packed" in {point.name for point in importlib.metadata.entry_points(group=GROUP)}


def test_an_egg_on_the_path_is_left_to_importlib_metadata(
    roots: tuple[Path, Path], tmp_path: Path
) -> None:
    egg = tmp_path / "old-1.0.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    sys.path.append(str(egg))
    assert group_entries(GROUP) is None


def test_another_distribution_finder_is_left_to_importlib_metadata(
    roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Finder:
        @staticmethod
        def find_spec(*args: object) -> None:
            return None

        @staticmethod
        def find_distributions(*args: object) -> list[object]:
            return []

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    assert group_entries(GROUP) is None


def test_an_entry_line_importlib_metadata_refuses_is_left_to_it(roots: tuple[Path, Path]) -> None:
    """A section line without ``=`` in any distribution (in any group) makes
    ``importlib.metadata`` raise: the reader does not answer in its place."""
    first, _ = roots
    _dist(first, "broken-1.dist-info", _metadata("broken", "1"), "[other.group]\nno equals\n")
    assert group_entries(GROUP) is None


@pytest.mark.parametrize(
    "metadata",
    [
        "Metadata-Version: 2.1\nName: folded\n  name\nVersion: 1\n",
        "Metadata-Version: 2.1\nVersion: 1\n",
        "Metadata-Version: 2.1\n\nName: late\nVersion: 1\n",
        "",
    ],
    ids=["folded-name", "no-name", "name-in-body", "empty"],
)
def test_a_name_the_reader_cannot_read_plainly_is_left_to_importlib_metadata(
    roots: tuple[Path, Path], metadata: str
) -> None:
    first, _ = roots
    _dist(first, "odd-1.dist-info", metadata, f"[{GROUP}]\nodd = o:P\n")
    assert group_entries(GROUP) is None
