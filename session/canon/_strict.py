"""The project's one strict JSON reader: duplicate object keys are refused at any depth.

Rules, in this order (the first failure raises :class:`StrictJSONError`, a ``ValueError``):

1. ``bytes`` are decoded as strict UTF-8 ("not strict UTF-8: …"); a ``str`` is taken as is.
2. One JSON document is parsed by the standard library's decoder; a syntax error keeps its
   message, and nesting deep enough to exhaust the recursion limit is "nesting too deep".
3. While parsing, in document order: an object repeating a key raises
   :class:`DuplicateKeyError` (``.key`` is the repeated key; message ``duplicate key 'k'``);
   with ``refuse_constants`` (the default) ``NaN``/``Infinity``/``-Infinity`` raise
   ("non-finite number NaN"); with ``refuse_floats`` a number with a fraction or exponent
   raises ("floating-point number 1.5"), and so do the constants.

Size limits are the caller's (each reads a different kind of document under its own bound)
and so are error codes: callers catch :class:`StrictJSONError` and say what the document was.
The holdout scorer keeps its own reader (``holdout/_reader.py``): it is a port of another
implementation's reader with its own refusal vocabulary, and the scorer imports nothing of the
project.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ._errors import CallerError

__all__ = ["DuplicateKeyError", "StrictJSONError", "loads_strict_json"]


class StrictJSONError(CallerError, ValueError):
    """The document is not strict JSON (the message says why)."""


class DuplicateKeyError(StrictJSONError):
    """An object repeats a key."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(key)
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"non-finite number {name}")


def _no_float(text: str) -> Any:
    raise StrictJSONError(f"floating-point number {text}")


def loads_strict_json(
    data: bytes | str,
    *,
    refuse_constants: bool = True,
    refuse_floats: bool = False,
    parse_int: Callable[[str], Any] | None = None,
) -> Any:
    """Parse one strict JSON document (module rules); raise :class:`StrictJSONError`.

    ``parse_int`` (default ``int``) converts each integer literal; what it raises other than a
    ``ValueError`` propagates unchanged (a caller's own refusal)."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise StrictJSONError(f"not strict UTF-8: {error}") from None
    else:
        text = data
    options: dict[str, Any] = {"object_pairs_hook": _object}
    if refuse_constants or refuse_floats:
        options["parse_constant"] = _no_constant
    if refuse_floats:
        options["parse_float"] = _no_float
    if parse_int is not None:
        options["parse_int"] = parse_int
    try:
        return json.loads(text, **options)
    except StrictJSONError:
        raise
    except RecursionError:
        raise StrictJSONError("nesting too deep") from None
    except ValueError as error:
        raise StrictJSONError(str(error)) from None
