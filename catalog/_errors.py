"""Catalog error types.

Rules:

* Every catalog error is a ``ValueError`` subclass rooted at :class:`CatalogError`: it is the
  caller's (or the stored bytes') fault, never a service fault.
* :class:`ComponentRegistryError` — a component descriptor or registry declaration is malformed
  (wrong vocabulary, unsorted or duplicate identifiers, an invented prerequisite form).
* :class:`ComponentIndexError` — a stored package or index does not match its own declarations:
  a changed, missing or extra artifact byte, a digest mismatch, an unresolvable source reference.
* :class:`PlanningError` — an analysis or plan record is malformed (planning raises; readiness
  never raises for bad declarations, it reports ``INVALID``).
"""

from __future__ import annotations

from session.canon import CallerError

__all__ = ["CatalogError", "ComponentIndexError", "ComponentRegistryError", "PlanningError"]


class CatalogError(CallerError, ValueError):
    """Root of every catalog error."""


class ComponentRegistryError(CatalogError):
    """A component descriptor or registry declaration is malformed."""


class ComponentIndexError(CatalogError):
    """A stored package or index does not match the declarations that bind it."""


class PlanningError(CatalogError):
    """A validation analysis or plan record is malformed."""
