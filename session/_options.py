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

The converter and its hooks are the shared exact-type base (:mod:`session._exact`), the same the
daemon's configuration schema uses. ``where`` is the dotted path of the table (the daemon passes
``sessions.<session>.options.<mechanism>``). Range rules (lower-only ceilings and the like) are
the mechanism's: its constructor refuses them when the provider creates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeVar

from session.canon import CallerError

from ._exact import ExactError, exact_converter, structure_exact, type_name

__all__ = ["OPTIONS_CONVERTER", "OptionsError", "structure_options", "unstructure_options"]

T = TypeVar("T")


class OptionsError(CallerError, ValueError):
    """Options that do not structure into their class; the message names the key path."""


OPTIONS_CONVERTER: Final = exact_converter()


def structure_options(options_type: type[T], raw: object, *, where: str = "options") -> T:
    """``raw`` as ``options_type`` (module rules); raise :class:`OptionsError`."""
    if type(raw) is not dict or not all(type(key) is str for key in raw):
        raise OptionsError(f"{where}: expected table, got {type_name(raw)}")
    try:
        return structure_exact(OPTIONS_CONVERTER, raw, options_type, where)
    except ExactError as error:
        raise OptionsError(str(error)) from None


def unstructure_options(options: object) -> dict[str, Any]:
    """The plain table of an options instance (for reports and listings)."""
    value = OPTIONS_CONVERTER.unstructure(options)
    return dict(value) if isinstance(value, Mapping) else {}
