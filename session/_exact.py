"""The one exact-type cattrs base: plain tables (TOML, JSON) into frozen attrs classes, with
every value of exactly its field's type and every error naming its key path.

Shared by the mechanism options (:mod:`session._options`) and the daemon's configuration
schema (``daemon.config._config_schema``): one set of hooks, one way to name a path.

Rules (the contract) of :func:`exact_converter`'s converters (``forbid_extra_keys=True``,
detailed validation):

1. ``str``, ``int`` and ``bool`` take exactly that type: a ``bool`` is not an ``int``, an
   ``int`` is not a ``str``. A ``float`` takes an ``int`` (not a ``bool``) or a ``float``,
   and gives a ``float``.
2. A union of those scalars (``int | str``) takes a value of exactly one of them. ``X |
   None`` takes ``None`` or X (cattrs' own rule).
3. ``tuple[X, ...]`` and ``list[X]`` take an array (a ``list``, or a ``tuple``) whose members
   are X; a member at fault is named by its index (``key[2]``). Other tuple shapes are
   refused when the hook is made (a programming error, never a user's).
4. An attrs class takes a table (exactly a ``dict``) of its declared keys only (an unknown key
   is ``<path>: unknown key 'k'``, several ``unknown keys [...]``); a field without a default
   that is missing is ``<path>: required``.
5. ``dict[str, Any]`` takes any table as it is (a copy); ``dict[str, X]`` takes a table whose
   values are X, each named by its key (``sessions.a``).
6. A value of the wrong type is ``<path>: expected <type>, got <type>`` with TOML's names
   (``table``, ``array``, ``null``, ``bool``, ``int``, ``float``, ``str``).

:func:`structure_exact` runs a converter and turns every violation in the document into one
list of ``<path>: <problem>`` messages, in document order (:class:`ExactError`).
"""

from __future__ import annotations

import types
import typing
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ForbiddenExtraKeysError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn

from session.canon import CallerError

__all__ = ["ExactError", "TypeMismatch", "exact_converter", "structure_exact", "type_name"]

T = TypeVar("T")
_SCALARS = (str, int, bool, float)


class ExactError(CallerError, ValueError):
    """A document that does not structure; :attr:`messages` are its ``path: problem``
    lines (rule 6), in document order, and ``str()`` joins them with ``; ``."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


class TypeMismatch(CallerError, TypeError):
    """A value of the wrong type (rule 6)."""

    def __init__(self, expected: str, value: object) -> None:
        super().__init__(f"expected {expected}, got {type_name(value)}")


def type_name(value: object) -> str:
    """The TOML name of a value's type (rule 6)."""
    if value is None:
        return "null"
    if type(value) is dict:
        return "table"
    if type(value) in (list, tuple):
        return "array"
    return type(value).__name__


class _ItemNote(str):
    """The note an array member's error carries: its index (rule 3)."""

    position: int

    def __new__(cls, position: int) -> _ItemNote:
        note = super().__new__(cls, f"array member {position}")
        note.position = position
        return note


def _exact(kind: type) -> Any:
    def hook(value: object, _: object) -> object:
        if type(value) is not kind:
            raise TypeMismatch(kind.__name__, value)
        return value

    return hook


def _float(value: object, _: object) -> float:
    if type(value) is not float and type(value) is not int:
        raise TypeMismatch("float", value)
    return float(value)


def _is_scalar_union(cl: Any) -> bool:
    if typing.get_origin(cl) not in (typing.Union, types.UnionType):
        return False
    members = typing.get_args(cl)
    return all(member in _SCALARS for member in members)


def _is_sequence(cl: Any) -> bool:
    return typing.get_origin(cl) in (tuple, list)


def _is_raw_table(cl: Any) -> bool:
    return bool(cl == dict[str, Any])


def _is_mapping(cl: Any) -> bool:
    return typing.get_origin(cl) is dict and cl != dict[str, Any]


def exact_converter() -> cattrs.Converter:
    """A new converter with the module rules' hooks (each caller owns its converter, so
    registering a hook for one document kind never changes another's)."""
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for kind in (str, int, bool):
        converter.register_structure_hook(kind, _exact(kind))
    converter.register_structure_hook(float, _float)

    def union_hook(cl: Any) -> Any:
        members = typing.get_args(cl)
        expected = " or ".join(member.__name__ for member in members)

        def hook(value: object, _: object) -> object:
            if type(value) not in members:
                raise TypeMismatch(expected, value)
            return value

        return hook

    def sequence_hook(cl: Any) -> Any:
        origin = typing.get_origin(cl)
        args = typing.get_args(cl)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise TypeError(f"exact documents support tuple[X, ...] only, not {cl}")
        item = args[0]

        def hook(value: object, _: object) -> object:
            if type(value) not in (list, tuple) or not isinstance(value, list | tuple):
                raise TypeMismatch("array", value)
            structured = []
            for index, member in enumerate(value):
                try:
                    structured.append(converter.structure(member, item))
                except Exception as error:
                    error.__notes__ = [*getattr(error, "__notes__", []), _ItemNote(index)]
                    raise
            return origin(structured)

        return hook

    def raw_table(value: object, _: object) -> dict[str, Any]:
        if type(value) is not dict:
            raise TypeMismatch("table", value)
        return dict(value)

    def class_hook(cl: Any) -> Any:
        generated = make_dict_structure_fn(cl, converter, _cattrs_forbid_extra_keys=True)

        def hook(value: object, _: object) -> object:
            if type(value) is not dict:
                raise TypeMismatch("table", value)
            return generated(value, cl)

        return hook

    def mapping_hook(cl: Any) -> Any:
        inner = converter.gen_structure_mapping(cl)

        def hook(value: object, kind: object) -> object:
            if type(value) is not dict:
                raise TypeMismatch("table", value)
            return inner(value, kind)

        return hook

    converter.register_structure_hook_factory(_is_scalar_union, union_hook)
    converter.register_structure_hook_factory(_is_sequence, sequence_hook)
    converter.register_structure_hook_func(_is_raw_table, raw_table)
    converter.register_structure_hook_factory(_is_mapping, mapping_hook)
    converter.register_structure_hook_factory(attrs.has, class_hook)
    return converter


def structure_exact(converter: cattrs.Converter, raw: object, cl: type[T], where: str = "") -> T:
    """``raw`` as ``cl`` (module rules), or :class:`ExactError` naming every violation; the
    paths start at ``where`` (``""``: the top level of the document)."""
    try:
        structured: T = converter.structure(raw, cl)
    except (cattrs.BaseValidationError, ForbiddenExtraKeysError, TypeMismatch) as error:
        raise ExactError(_messages(error, where)) from None
    return structured


def _messages(error: BaseException, path: str) -> list[str]:
    """Flatten cattrs' validation groups into ``path: problem`` lines, in document order."""
    if isinstance(error, ForbiddenExtraKeysError):
        extra = sorted(error.extra_fields)
        where = path or "<top level>"
        if len(extra) == 1:
            return [f"{where}: unknown key {extra[0]!r}"]
        return [f"{where}: unknown keys {extra}"]
    if isinstance(error, BaseExceptionGroup):
        found: list[str] = []
        for member in error.exceptions:
            found.extend(_messages(member, _extend(path, member)))
        return found
    if isinstance(error, KeyError):
        return [f"{path}: required"]
    if isinstance(error, TypeMismatch):
        return [f"{path}: {error}"]
    return [f"{path}: {type(error).__name__}: {error}"]


def _extend(path: str, error: BaseException) -> str:
    # Notes are added innermost first (an array member's, then its attribute's).
    for note in reversed(getattr(error, "__notes__", ())):
        if isinstance(note, AttributeValidationNote):
            path = f"{path}.{note.name}" if path else note.name
        elif isinstance(note, IterableValidationNote):
            if isinstance(note.index, str):  # a mapping's key
                path = f"{path}.{note.index}" if path else note.index
            else:
                path = f"{path}[{note.index}]"
        elif isinstance(note, _ItemNote):
            path = f"{path}[{note.position}]"
    return path
