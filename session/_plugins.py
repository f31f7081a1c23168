"""Finding mechanism providers: the ``evidenced.mechanisms`` entry-point group.

Rules:

* :func:`provider_entries` lists the group's entry points from the installed distributions'
  metadata (nothing is imported), sorted by name, each with its ``module:attribute`` value and
  its distribution's name and version: what ``importlib.metadata`` answers, read from the
  metadata files by :mod:`._entry_points` when it can be sure to answer the same, else by
  ``importlib.metadata`` itself. It is the only place the session package looks beyond the
  process's own objects, and it reads metadata only.
* :func:`load_provider` loads one entry by name. An unknown name, a name two distributions
  register (ambiguous: which one runs must never depend on installation order), an import that
  fails, or an object that is neither a :class:`MechanismProvider` instance nor a subclass of it
  (instantiated with no arguments) raises :class:`ProviderLookupError` naming the entry and the
  cause. A loaded provider is kept for the process (its module is imported once anyway).
* :func:`load_reference` loads ``module:attribute`` directly; :func:`load_target` turns a tool's
  target — an entry-point name, or ``module:attribute`` naming a provider (instance or
  subclass), a mechanism instance, or a zero-argument factory of either — into (provider or
  None, a mechanism created with default options);
  :func:`providers_for_mechanism` answers every installed provider whose ``mechanism_id`` is the
  given one (``evidenced submit`` uses it to build a binding for a session whose mechanism it
  learns only from the daemon). It imports every entry's provider except a built-in one of
  another mechanism: :data:`BUILT_IN_MECHANISMS` states the mechanism id behind each of the
  project's own entry-point values, so a built-in provider is imported only when its id is the
  one asked for (a test holds the table to what the providers say). Every other entry, a
  third-party plugin's, is imported as before: a plugin claiming a built-in id is found
  beside the built-in provider, and the caller sees both.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Final

import attrs

from session.canon import EnvironmentFault

from ._provider import MechanismProvider
from ._types import VerificationMechanism

__all__ = [
    "ENTRY_POINT_GROUP",
    "ProviderEntry",
    "ProviderLookupError",
    "load_provider",
    "load_reference",
    "load_target",
    "provider_entries",
    "providers_for_mechanism",
]

ENTRY_POINT_GROUP: Final = "evidenced.mechanisms"

#: The mechanism id of each of the project's own providers, by entry-point value
#: (``pyproject.toml``): the providers :func:`providers_for_mechanism` need not import to know
#: which mechanism they make.
BUILT_IN_MECHANISMS: Final[Mapping[str, str]] = {
    "session._bytes_provider:PROVIDER": "vstd.bytes.sha256",
    "mechanism.formation._provider:PROVIDER": "vstd.typed_formation.checked.0.1",
    "mechanism.descriptor._provider:PROVIDER": "t81.experiment_descriptor.authorized.0.1",
}


class ProviderLookupError(EnvironmentFault, LookupError):
    """No usable provider under that name (the message says why)."""


@attrs.frozen
class ProviderEntry:
    """One registered provider: entry-point name and value, distribution name and version."""

    name: str
    value: str
    distribution: str | None
    version: str | None

    def load(self) -> MechanismProvider[Any]:
        """The provider object (module rules); raises :class:`ProviderLookupError`."""
        return _load(self.value, f"mechanism provider {self.name!r} ({self.value})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "distribution": self.distribution,
            "version": self.version,
        }


_LOADED: dict[str, MechanismProvider[Any]] = {}


def provider_entries() -> tuple[ProviderEntry, ...]:
    """Every entry of the group, sorted by (name, distribution)."""
    from ._entry_points import group_entries

    read = group_entries(ENTRY_POINT_GROUP)
    found = set() if read is None else {ProviderEntry(*entry) for entry in read}
    if read is None:
        from importlib.metadata import entry_points

        for point in entry_points(group=ENTRY_POINT_GROUP):
            dist = point.dist
            found.add(
                ProviderEntry(
                    point.name,
                    point.value,
                    None if dist is None else dist.name,
                    None if dist is None else dist.version,
                )
            )
    return tuple(sorted(found, key=lambda e: (e.name, e.distribution or "", e.value)))


def provider_names() -> tuple[str, ...]:
    return tuple(sorted({entry.name for entry in provider_entries()}))


def find_entry(name: str) -> ProviderEntry:
    """The one entry registered as ``name`` (unknown or ambiguous names raise)."""
    matches = [entry for entry in provider_entries() if entry.name == name]
    if not matches:
        raise ProviderLookupError(
            f"no mechanism provider {name!r} is installed (installed: {list(provider_names())})"
        )
    if len(matches) > 1:
        owners = sorted(f"{e.distribution} ({e.value})" for e in matches)
        raise ProviderLookupError(f"mechanism provider {name!r} is registered twice: {owners}")
    return matches[0]


def load_provider(name: str) -> MechanismProvider[Any]:
    """The provider registered as ``name``."""
    return find_entry(name).load()


def load_reference(reference: str) -> object:
    """The object ``module:attribute[.attribute]`` names (imported; errors are lookup errors)."""
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise ProviderLookupError(f"{reference!r} is not module:attribute")
    try:
        value: object = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except Exception as error:
        raise ProviderLookupError(
            f"{reference}: cannot be loaded ({type(error).__name__}: {error})"
        ) from None
    return value


def as_provider(value: object, what: str) -> MechanismProvider[Any]:
    """``value`` as a provider: an instance, or a subclass instantiated with no arguments."""
    if isinstance(value, type) and issubclass(value, MechanismProvider):
        try:
            value = value()
        except Exception as error:
            raise ProviderLookupError(
                f"{what}: cannot be instantiated ({type(error).__name__}: {error})"
            ) from None
    if not isinstance(value, MechanismProvider):
        raise ProviderLookupError(f"{what}: is not a MechanismProvider ({type(value).__name__})")
    identifier = getattr(value, "mechanism_id", None)
    if type(identifier) is not str or not identifier:
        raise ProviderLookupError(f"{what}: mechanism_id must be a non-empty string")
    return value


def _load(value: str, what: str) -> MechanismProvider[Any]:
    cached = _LOADED.get(value)
    if cached is not None:
        return cached
    try:
        loaded = load_reference(value)
    except ProviderLookupError as error:
        raise ProviderLookupError(f"{what}: {error}") from None
    provider = as_provider(loaded, what)
    _LOADED[value] = provider
    return provider


def providers_for_mechanism(
    mechanism_id: str,
) -> list[tuple[ProviderEntry, MechanismProvider[Any]]]:
    """Every installed provider whose ``mechanism_id`` is ``mechanism_id`` (unloadable ones are
    skipped: they cannot build a binding either; a built-in one of another mechanism is not
    imported, module rules)."""
    found = []
    for entry in provider_entries():
        built_in = BUILT_IN_MECHANISMS.get(entry.value)
        if built_in is not None and built_in != mechanism_id:
            continue
        try:
            provider = entry.load()
        except ProviderLookupError:
            continue
        if provider.mechanism_id == mechanism_id:
            found.append((entry, provider))
    return found


def load_target(target: str) -> tuple[MechanismProvider[Any] | None, VerificationMechanism]:
    """(provider or None, its default mechanism) for a tool's target (module rules)."""
    if ":" not in target:
        provider = load_provider(target)
        return provider, _create_default(provider, target)
    value = load_reference(target)
    is_provider_class = isinstance(value, type) and issubclass(value, MechanismProvider)
    if not is_provider_class and not _is_mechanism(value) and callable(value):
        try:
            value = value()
        except Exception as error:
            raise ProviderLookupError(
                f"{target}: the factory raised {type(error).__name__}: {error}"
            ) from None
    if isinstance(value, MechanismProvider) or (
        isinstance(value, type) and issubclass(value, MechanismProvider)
    ):
        provider = as_provider(value, target)
        return provider, _create_default(provider, target)
    if _is_mechanism(value):
        mechanism: VerificationMechanism = value  # type: ignore[assignment]
        return None, mechanism
    raise ProviderLookupError(f"{target}: neither a MechanismProvider nor a mechanism")


def _create_default(provider: MechanismProvider[Any], target: str) -> VerificationMechanism:
    try:
        return provider.create(provider.default_options())
    except Exception as error:
        raise ProviderLookupError(
            f"{target}: cannot create with default options: {type(error).__name__}: {error}"
        ) from None


def _is_mechanism(value: object) -> bool:
    return (
        not isinstance(value, type)
        and callable(getattr(value, "evaluate", None))
        and hasattr(value, "mechanism_id")
        and hasattr(value, "mechanism_digest")
    )
