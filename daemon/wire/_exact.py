"""Exact structuring with cattrs: the field rules the daemon's JSON formats share.

Rules (the contract):

1. Each wire format has one converter made by :func:`exact_converter`:
   ``forbid_extra_keys=True`` and detailed validation (every field is tried; each failure is
   kept with the name of its attribute). ``bytes`` never travel in these formats: an explicit
   hook refuses them both ways (no silent base85 or ``repr``).
2. A field's rule is an ``Annotated`` marker, ``Annotated[T, Rule(check)]``. ``check`` is the
   field's cattrs structure hook, registered as is: it returns the field's value (a JSON
   object or array is the received value itself, never copied or re-walked) or raises
   :class:`FieldError`, whose message names the field as ``{key}``. ``Rule.dump`` is the
   unstructure hook (identity when ``None``). Classes that cannot carry markers (another
   package's) get the same checks as per-field overrides (:func:`rule_override`).
3. :func:`exact_keys` compares a mapping's keys with an exact key set (the wire names of a
   class's fields, :func:`wire_names`) and returns the unexpected and missing ones, sorted;
   callers refuse with their own words before structuring, so a wrong key set is always
   reported first (``forbid_extra_keys`` then never fires; it stays as the converter's
   guarantee).
4. :func:`first_failure` reads a :class:`cattrs.ClassValidationError`: the failing field first
   in ``order`` (then in field order), as ``(wire name, message)``; a failure of the class's
   own constructor comes back as ``(None, exception)`` for the caller to word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Protocol, get_origin

import attrs
import cattrs
from cattrs.errors import ClassValidationError
from cattrs.gen import override

from daemon.wire._errors import PeerError

__all__ = [
    "FieldError",
    "Rule",
    "exact_converter",
    "exact_keys",
    "first_failure",
    "rule_override",
]


class FieldError(PeerError, ValueError):
    """A JSON value breaks its field's rule. The message names the field as ``{key}``, unless
    ``keyed`` is false (a message quoting the value itself, which is never substituted)."""

    def __init__(self, message: str, *, keyed: bool = True) -> None:
        super().__init__(message)
        self.keyed = keyed

    def words(self, key: str) -> str:
        """The refusal's words, naming the field by its wire name ``key``."""
        text = str(self)
        return text.replace("{key}", key) if self.keyed else text


class Check(Protocol):
    """A field check: JSON value (and, as a cattrs hook, the annotation) → field value, or
    :class:`FieldError`."""

    def __call__(self, value: Any, annotation: Any = None, /) -> Any: ...


@attrs.frozen
class Rule:
    """The check (JSON value → field value) and the dump (field value → JSON) of a field."""

    check: Check
    dump: Callable[[Any], Any] | None = None


def _rule_of(annotation: Any) -> Rule | None:
    if get_origin(annotation) is not Annotated:
        return None
    for marker in annotation.__metadata__:
        if isinstance(marker, Rule):
            return marker
    return None


def _structure_factory(annotation: Any) -> Check:
    rule = _rule_of(annotation)
    assert rule is not None
    return rule.check


def _unstructure_factory(annotation: Any) -> Callable[[Any], Any]:
    rule = _rule_of(annotation)
    assert rule is not None
    return rule.dump if rule.dump is not None else _identity


def _identity(value: Any) -> Any:
    return value


def _refuse_bytes_structure(value: Any, _: Any) -> bytes:
    raise FieldError("{key} cannot be bytes: bytes never travel in JSON")


def _refuse_bytes_unstructure(value: bytes) -> Any:
    raise TypeError("bytes never travel in JSON (evidence is sent raw, after the header)")


def exact_converter() -> cattrs.Converter:
    """A converter for one wire format (rule 1) that applies ``Rule`` markers (rule 2)."""
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook_factory(lambda t: _rule_of(t) is not None, _structure_factory)
    converter.register_unstructure_hook_factory(
        lambda t: _rule_of(t) is not None, _unstructure_factory
    )
    converter.register_structure_hook(bytes, _refuse_bytes_structure)
    converter.register_unstructure_hook(bytes, _refuse_bytes_unstructure)
    return converter


def rule_override(rule: Rule) -> Any:
    """A per-field override applying ``rule`` (rule 2, for classes without markers)."""
    return override(struct_hook=rule.check, unstruct_hook=rule.dump)


def wire_names(cls: type, renames: Mapping[str, str] | None = None) -> dict[str, str]:
    """Attribute name → wire name for the fields of ``cls`` (``renames`` as given to the
    converter), in field order."""
    renames = renames or {}
    return {field.name: renames.get(field.name, field.name) for field in attrs.fields(cls)}


def exact_keys(
    data: Mapping[str, Any], expected: frozenset[str]
) -> tuple[list[str], list[str]] | None:
    """(unexpected, missing) keys of ``data``, sorted, or ``None`` when they are ``expected``."""
    keys = data.keys()
    if keys == expected:
        return None
    return sorted(keys - expected), sorted(expected - keys)


def first_failure(
    error: ClassValidationError, names: Mapping[str, str], order: Sequence[str] = ()
) -> tuple[str | None, BaseException]:
    """The failure to report (rule 4): ``(wire name, FieldError)`` for a field, else
    ``(None, exception)`` (the constructor refused, or a hook raised something unexpected)."""
    failures, others = error.group_exceptions()
    if failures:
        rank = {name: index for index, name in enumerate(order)}
        fields = list(names)
        exception, note = min(
            failures,
            key=lambda item: (rank.get(item[1].name, len(rank)), fields.index(item[1].name)),
        )
        if isinstance(exception, FieldError):
            return names[note.name], exception
        return None, exception
    return None, others[0]


def json_list(value: Any) -> Any:
    """Dump for a tuple field held as a JSON array."""
    return list(value)
