"""Lower-only resource ceilings: a host or caller may tighten a compiled limit, never raise it.

:func:`lower_only` is the one rule every configurable limit follows (mechanism constructors,
command-line options, holdout check options):

1. the value is an exact ``int`` (a ``bool`` is not an int) → else :class:`CeilingError`
   with ``reason == "not-int"`` ("<name> must be an int, not <type>");
2. it is at least 0 → else ``reason == "negative"``;
3. it is at most the compiled ceiling → else ``reason == "above-ceiling"``
   (both: "<name> may only be lowered: 0 <= <name> <= <ceiling>").

:class:`CeilingError` is both a ``ValueError`` and a ``TypeError``, so a caller catching either
catches every refusal; ``reason`` lets callers with a finer vocabulary (the holdout adapter
answers "weakened" only for a raised limit) tell them apart.
"""

from __future__ import annotations

from typing import Final, Literal

from session.canon import CallerError

__all__ = ["CeilingError", "lower_only"]

CeilingReason = Literal["not-int", "negative", "above-ceiling"]


class CeilingError(CallerError, ValueError, TypeError):
    """A resource ceiling that is not an exact int in ``0 … ceiling``."""

    def __init__(self, message: str, reason: CeilingReason) -> None:
        super().__init__(message)
        self.reason: Final[CeilingReason] = reason


def lower_only(name: str, value: object, ceiling: int) -> int:
    """``value`` when it is an exact int in ``0 … ceiling``; else :class:`CeilingError`."""
    if type(value) is not int:
        raise CeilingError(f"{name} must be an int, not {type(value).__name__}", "not-int")
    if not 0 <= value <= ceiling:
        raise CeilingError(
            f"{name} may only be lowered: 0 <= {name} <= {ceiling}",
            "negative" if value < 0 else "above-ceiling",
        )
    return value
