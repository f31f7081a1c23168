"""The public corpus: content-addressed fixture bytes plus an index of cases.

Layout (``holdout/corpus/``, package data shipped with the scorer):

* ``cas/<root>`` holds the exact bytes whose root is ``root-`` + lowercase hex SHA-256 of them;
* ``INDEX.json`` is ``{"type": "EVIDENCED-HOLDOUT-CORPUS-v1", "cases": [{"name", "mechanism",
  "artifact", "leaf", "note"?}, ...]}``: each case names a mechanism (``formation`` or
  ``descriptor``), the root of its artifact (certificate / descriptor) and of its leaf (subject /
  payload).

Rules: a root is the lookup authority. :meth:`Corpus.lookup` finds the (case, role) a root is
filed under, reads ``cas/<root>`` and refuses (:class:`CorpusError`) unless the bytes re-derive
to that root. A root filed under two roles or two cases makes the index invalid. Files are
read with :func:`session.read_capped` (16 MiB; a larger one is unreadable: ``index-invalid``
or ``unresolvable``).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Final

import attrs

from session import read_capped

from ._reader import StrictReadError, read_json

CORPUS_TYPE: Final = "EVIDENCED-HOLDOUT-CORPUS-v1"
MECHANISMS: Final = ("formation", "descriptor")
_ROOT_RE: Final = re.compile(r"root-[0-9a-f]{64}\Z")
_NAME_RE: Final = re.compile(r"[a-z0-9][a-z0-9-]*\Z")


class CorpusError(ValueError):
    """The corpus cannot answer: ``code`` is ``index-invalid``, ``unresolvable`` or
    ``root-mismatch``."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def root_of(data: bytes) -> str:
    return "root-" + hashlib.sha256(data).hexdigest()


@attrs.frozen
class Case:
    name: str
    mechanism: str
    artifact: str
    leaf: str


@attrs.frozen
class Corpus:
    directory: Path
    cases: tuple[Case, ...]
    by_root: dict[str, tuple[Case, str]]

    @classmethod
    def load(cls, directory: Path) -> Corpus:
        try:
            data = read_capped(directory / "INDEX.json")
        except OSError as error:
            raise CorpusError("index-invalid", str(error)) from None
        return cls.from_index(directory, data)

    @classmethod
    def from_index(cls, directory: Path, data: bytes) -> Corpus:
        """The corpus whose ``INDEX.json`` holds ``data`` (``cas/`` is read on lookup)."""
        try:
            index = read_json(data)
        except StrictReadError as error:
            raise CorpusError("index-invalid", str(error)) from None
        if not isinstance(index, dict) or index.get("type") != CORPUS_TYPE:
            raise CorpusError("index-invalid", f"INDEX.json is not a {CORPUS_TYPE} document")
        raw_cases = index.get("cases")
        if not isinstance(raw_cases, list):
            raise CorpusError("index-invalid", "INDEX.json needs a 'cases' array")
        cases: list[Case] = []
        names: set[str] = set()  # a scan of ``cases`` per case was quadratic in the index
        by_root: dict[str, tuple[Case, str]] = {}
        for raw in raw_cases:
            case = _case(raw)
            if case.name in names:
                raise CorpusError("index-invalid", f"case {case.name!r} repeated")
            names.add(case.name)
            for role in ("artifact", "leaf"):
                root = getattr(case, role)
                if root in by_root:
                    raise CorpusError("index-invalid", f"{root} is filed twice")
                by_root[root] = (case, role)
            cases.append(case)
        return cls(directory=directory, cases=tuple(cases), by_root=by_root)

    def read(self, root: str) -> bytes:
        """The stored bytes of ``root``, re-derived before they are returned."""
        if not _ROOT_RE.match(root):
            raise CorpusError("unresolvable", f"{root!r} is not a root")
        try:
            data = read_capped(self.directory / "cas" / root)
        except OSError:
            raise CorpusError("unresolvable", f"{root} is not stored") from None
        if root_of(data) != root:
            raise CorpusError("root-mismatch", f"stored bytes of {root} re-derive elsewhere")
        return data

    def lookup(self, root: str) -> tuple[Case, str]:
        """The case and role (``artifact`` or ``leaf``) ``root`` is filed under."""
        if root not in self.by_root:
            raise CorpusError("unresolvable", f"{root} is not in the corpus index")
        self.read(root)
        return self.by_root[root]

    def case(self, name: str) -> Case:
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)


def _case(raw: Any) -> Case:
    if not isinstance(raw, dict) or not set(raw) <= {
        "name",
        "mechanism",
        "artifact",
        "leaf",
        "note",
    }:
        raise CorpusError("index-invalid", "a case has unknown members")
    name, mechanism = raw.get("name"), raw.get("mechanism")
    artifact, leaf = raw.get("artifact"), raw.get("leaf")
    if not (isinstance(name, str) and _NAME_RE.match(name)):
        raise CorpusError("index-invalid", f"bad case name {name!r}")
    if mechanism not in MECHANISMS:
        raise CorpusError("index-invalid", f"{name}: unknown mechanism {mechanism!r}")
    for root in (artifact, leaf):
        if not (isinstance(root, str) and _ROOT_RE.match(root)):
            raise CorpusError("index-invalid", f"{name}: bad root {root!r}")
    assert isinstance(artifact, str) and isinstance(leaf, str) and isinstance(mechanism, str)
    return Case(name=name, mechanism=mechanism, artifact=artifact, leaf=leaf)
