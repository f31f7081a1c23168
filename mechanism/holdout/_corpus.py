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

Reading the index: the document must be of :data:`CORPUS_TYPE` with a ``cases`` array; each
case is read by one cattrs converter (:data:`CASES`): members other than ``name``,
``mechanism``, ``artifact``, ``leaf`` and ``note`` are refused first, an absent member reads as
``null``, then the first failing member in that order is named (``bad case name``, ``unknown
mechanism``, ``bad root``); ``note`` is free text and not kept. Then a repeated name, then a
root filed twice.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Final

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from session import read_capped
from session.canon import CallerError

from ._reader import StrictReadError, read_json

CORPUS_TYPE: Final = "EVIDENCED-HOLDOUT-CORPUS-v1"
MECHANISMS: Final = ("formation", "descriptor")
_ROOT_RE: Final = re.compile(r"root-[0-9a-f]{64}\Z")
_NAME_RE: Final = re.compile(r"[a-z0-9][a-z0-9-]*\Z")


class CorpusError(CallerError, ValueError):
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


class _Refused(ValueError):
    """A case member breaks its rule; ``named`` messages are prefixed with the case's name."""

    def __init__(self, message: str, *, named: bool = True) -> None:
        super().__init__(message)
        self.named = named


def _name(value: Any, _: Any = None) -> str:
    if not (isinstance(value, str) and _NAME_RE.match(value)):
        raise _Refused(f"bad case name {value!r}", named=False)
    return value


def _mechanism(value: Any, _: Any = None) -> str:
    if value not in MECHANISMS:
        raise _Refused(f"unknown mechanism {value!r}")
    return str(value)


def _root(value: Any, _: Any = None) -> str:
    if not (isinstance(value, str) and _ROOT_RE.match(value)):
        raise _Refused(f"bad root {value!r}")
    return value


@attrs.frozen
class _IndexCase:
    """The members of an ``INDEX.json`` case the scorer uses (``note`` is free text)."""

    name: str
    mechanism: str
    artifact: str
    leaf: str


_REQUIRED: Final = tuple(field.name for field in attrs.fields(_IndexCase))
_CASE_KEYS: Final = frozenset({*_REQUIRED, "note"})
#: Fields are structured in order and the first refusal is raised as is (no detailed
#: validation: the first failing member is the one named, and a valid index pays nothing for
#: collecting failures).
CASES: Final = cattrs.Converter(forbid_extra_keys=True, detailed_validation=False)
CASES.register_structure_hook(
    _IndexCase,
    make_dict_structure_fn(
        _IndexCase,
        CASES,
        _cattrs_forbid_extra_keys=True,
        name=override(struct_hook=_name),
        mechanism=override(struct_hook=_mechanism),
        artifact=override(struct_hook=_root),
        leaf=override(struct_hook=_root),
    ),
)
_STRUCTURE_CASE: Final = CASES.get_structure_hook(_IndexCase)  # one lookup, not one per case


def _case(raw: Any) -> Case:
    if not isinstance(raw, dict) or not raw.keys() <= _CASE_KEYS:
        raise CorpusError("index-invalid", "a case has unknown members")
    stored = {key: raw.get(key) for key in _REQUIRED}
    try:
        record = _STRUCTURE_CASE(stored, _IndexCase)
    except _Refused as refused:
        prefix = f"{stored['name']}: " if refused.named else ""
        raise CorpusError("index-invalid", f"{prefix}{refused}") from None
    return Case(
        name=record.name, mechanism=record.mechanism, artifact=record.artifact, leaf=record.leaf
    )
