"""Typed mechanism options: one cattrs converter, exact types, errors that name the key path.

A provider declares its options as a frozen attrs class (every field with a default, so ``{}``
means "the defaults"). :func:`structure_options` turns a plain table (a TOML table from the
daemon's configuration, a JSON object, keyword arguments) into that class with
:data:`OPTIONS_CONVERTER` — the one converter for options, ``forbid_extra_keys=True`` — and
these rules, in document order, the first violation raising :class:`OptionsError`:

1. the table is exactly a ``dict`` with ``str`` keys → else "<where>: expected table, got T";
2. no key the class does not declare → else "<where>: unknown key 'k'" (several: "unknown
   keys ['a', 'b']");
3. every value has exactly its field's type: ``bool`` is not an ``int``, an ``int`` is not a
   ``str``; a ``float`` field takes an ``int`` (not a ``bool``) or a ``float``; a ``tuple[X,
   ...]``/``list[X]`` field takes an array (a ``list`` or ``tuple``) of X; ``X | None`` takes
   ``None`` or X; a nested attrs class takes a table (these rules, recursively) → else
   "<where>.<key>: expected int, got bool" (array members as "<key>[2]");
4. a field without a default that is missing → "<where>.<key>: required".

``where`` is the dotted path of the table (the daemon passes
``sessions.<session>.options.<mechanism>``). Range rules (lower-only ceilings and the like) are
the mechanism's: its constructor refuses them when the provider creates it.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, Final, TypeVar

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn

__all__ = ["OPTIONS_CONVERTER", "OptionsError", "structure_options", "unstructure_options"]

T = TypeVar("T")


class OptionsError(ValueError):
    """Options that do not structure into their class; the message names the key path."""


class _Mismatch(TypeError):
    """A value of the wrong type (raised by the exact-type hooks)."""

    def __init__(self, expected: str, value: object) -> None:
        super().__init__(f"expected {expected}, got {_type_name(value)}")


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if type(value) is dict:
        return "table"
    if type(value) in (list, tuple):
        return "array"
    return type(value).__name__


OPTIONS_CONVERTER: Final = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)


def _exact(kind: type) -> Any:
    def hook(value: object, _: object) -> object:
        if type(value) is not kind:
            raise _Mismatch(kind.__name__, value)
        return value

    return hook


def _float(value: object, _: object) -> float:
    if type(value) is not float and type(value) is not int:
        raise _Mismatch("float", value)
    return float(value)


for _kind in (str, int, bool):
    OPTIONS_CONVERTER.register_structure_hook(_kind, _exact(_kind))
OPTIONS_CONVERTER.register_structure_hook(float, _float)


def _is_sequence(cl: Any) -> bool:
    origin = typing.get_origin(cl)
    return origin is tuple or origin is list


def _sequence_hook(cl: Any) -> Any:
    origin = typing.get_origin(cl)
    args = typing.get_args(cl)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        raise TypeError(f"options support tuple[X, ...] only, not {cl}")
    item = args[0]

    def hook(value: object, _: object) -> object:
        if type(value) not in (list, tuple) or not isinstance(value, list | tuple):
            raise _Mismatch("array", value)
        structured = []
        for index, member in enumerate(value):
            try:
                structured.append(OPTIONS_CONVERTER.structure(member, item))
            except Exception as error:
                error.__notes__ = [*getattr(error, "__notes__", []), _ItemNote(index)]
                raise
        return origin(structured)

    return hook


class _ItemNote(str):
    """The note an array member's error carries (its index)."""

    position: int

    def __new__(cls, position: int) -> _ItemNote:
        note = super().__new__(cls, f"array member {position}")
        note.position = position
        return note


def _class_hook(cl: Any) -> Any:
    generated = make_dict_structure_fn(cl, OPTIONS_CONVERTER, _cattrs_forbid_extra_keys=True)

    def hook(value: object, _: object) -> object:
        if type(value) is not dict:
            raise _Mismatch("table", value)
        return generated(value, cl)

    return hook


OPTIONS_CONVERTER.register_structure_hook_factory(_is_sequence, _sequence_hook)
OPTIONS_CONVERTER.register_structure_hook_factory(attrs.has, _class_hook)


def _messages(error: BaseException, path: str) -> list[str]:
    """Flatten cattrs' validation groups into ``path: message`` lines, in document order."""
    if isinstance(error, ForbiddenExtraKeysError):
        extra = sorted(error.extra_fields)
        if len(extra) == 1:
            return [f"{path}: unknown key {extra[0]!r}"]
        return [f"{path}: unknown keys {extra}"]
    if isinstance(error, BaseExceptionGroup):
        found: list[str] = []
        for member in error.exceptions:
            found.extend(_messages(member, _extend(path, member)))
        return found
    if isinstance(error, KeyError):
        return [f"{path}: required"]
    if isinstance(error, _Mismatch):
        return [f"{path}: {error}"]
    return [f"{path}: {type(error).__name__}: {error}"]


def _extend(path: str, error: BaseException) -> str:
    # Notes are added innermost first (an array member's, then its attribute's).
    for note in reversed(getattr(error, "__notes__", ())):
        if isinstance(note, AttributeValidationNote):
            path = f"{path}.{note.name}"
        elif isinstance(note, IterableValidationNote):
            path = f"{path}[{note.index}]"
        elif isinstance(note, _ItemNote):
            path = f"{path}[{note.position}]"
    return path


def structure_options(options_type: type[T], raw: object, *, where: str = "options") -> T:
    """``raw`` as ``options_type`` (module rules); raise :class:`OptionsError`."""
    if type(raw) is not dict or not all(type(key) is str for key in raw):
        raise OptionsError(f"{where}: expected table, got {_type_name(raw)}")
    try:
        return OPTIONS_CONVERTER.structure(raw, options_type)
    except (ClassValidationError, ForbiddenExtraKeysError, _Mismatch) as error:
        raise OptionsError("; ".join(_messages(error, where))) from None


def unstructure_options(options: object) -> dict[str, Any]:
    """The plain table of an options instance (for reports and listings)."""
    value = OPTIONS_CONVERTER.unstructure(options)
    return dict(value) if isinstance(value, Mapping) else {}
