"""The protocol-free holdout scorer (HOLDOUT-HARNESS) and interop comparer (HOLDOUT-INTEROP).

This module, like every scorer module of the package, imports nothing from ``session``,
``mechanism``, ``daemon`` or ``catalog`` (a test enforces it). It is schema-driven: the recipe
schema and the observation schema are data (:class:`Schemas`), validated with ``jsonschema``
(draft 2020-12) extended by two rules:

* ``x-sorted: true`` on an array: items must be in non-decreasing JavaScript default-sort order
  (``String(x)`` by UTF-16 code unit);
* ``pattern`` (and so ``propertyNames``) use ECMA-262 anchors: ``$`` matches only at the end of
  the string (Python's ``$`` also matches before a final newline), ``\\d``/``\\w`` are ASCII;

and one rule replaced for time, not meaning: ``uniqueItems`` (here and in the meta-schema check
of a schema) gives jsonschema's verdict and message, but in linear time where jsonschema compares
every pair of items it cannot sort (:func:`_unique`).

``jsonschema`` is the reference. For speed (ADR 0006) a schema is also compiled once with
``jsonschema-rs`` when every keyword and pattern in it lies in a subset where both validators
provably agree (:func:`_compilable`); the compiled validator only ever *accepts*: an instance it
rejects is validated again by ``jsonschema``, whose ``best_match`` renders the message, and
whose verdict stands. A schema outside the subset, or one that does not compile (a ``$ref``
that resolves nowhere: nothing is ever fetched), is validated by ``jsonschema`` alone, exactly
as before. Schema checks and compilations are cached by the schema's exact content.

A scoring run is refused as a whole (``ScoreReport.verdict == "REFUSED"``, no results) when,
checked in this order:

1. ``schemas-invalid``        a schema is not a valid draft 2020-12 schema;
2. ``challenge-unreadable``   a challenge value fails the strict reader's value rules;
3. ``challenge-schema``       any challenge fails the recipe schema;
4. ``duplicate-challenge-id`` two challenges share an id (decision: observations are keyed by
                              id, so such a set cannot be attributed);
5. ``observation-unreadable`` the document fails the strict reader;
6. ``observation-schema``     the document fails the observation schema (``x-sorted``,
                              ``uniqueItems`` and ``additionalProperties`` included);
7. ``implementation-mismatch`` the document's ``implementation`` is not the expected label;
8. ``release-mismatch``       its ``spec_release_id`` is not the run's release;
9. ``fixture-root-mismatch``  an observation's ``fixture_root`` differs from its challenge's
                              ``fixture.root``.

Otherwise each predicate scores pass (``True``), fail (``False``) or UNRESOLVED (``None``) by
the rules of docs/spec/holdout.md §3.4–§3.6 (one root per operator, own-member path lookup,
absent is UNRESOLVED, exact sorted refusal-set equality, RFC 8785 comparison). A challenge with
no observation is *missing*: its predicates count as unresolved. The verdict is ``PASS`` only
with zero fail, zero unresolved and zero missing; otherwise ``FAIL``. Nothing here raises for
bad input: every public function returns a report.

Every non-passing predicate and every missing challenge is explained
(``ScoreReport.explanations``, ``_explain``): computed after the decision, on first use, from
the same values; an explanation never changes a result.

Inputs: a caller's parsed values are copied exactly as the strict reader would read their JSON
text before anything else (:func:`score`); bytes are read by the strict reader
(:func:`score_bytes`, which also takes a challenge-set file's bytes); challenges this package's
reader has just produced are scored in place (:func:`score_read`, the command line's route).
All routes give the same report. The values scored are therefore always the strict reader's
(exact JSON types), which the exact-type evaluation of predicates (``_evaluate_read``) relies on.
"""

from __future__ import annotations

import json
import marshal
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

import attrs
import jsonschema
import jsonschema.validators
import jsonschema_rs
import orjson
import referencing
from jsonschema_specifications import REGISTRY as SPECIFICATIONS
from referencing.jsonschema import DRAFT202012

from session.canon._errors import CallerError

from ._explain import Explanation, explain, missing
from ._jcs import canonical, canonical_equal, is_number, js_sort_key, strict_equal
from ._reader import (
    MAX_DOCUMENT_BYTES,
    StrictReadError,
    check_json_value,
    read_json,
    shallow,
)

PREDICATE_OPS: Final = (
    "EQ",
    "NEQ",
    "HOLDS",
    "MOVES",
    "REFUSAL_SET_EQ",
    "VERDICT_EQ",
    "OUTCOME_EQ",
    "LT",
)

REFUSAL_CODES: Final = (
    "commitment-required",
    "challenge-folder-invalid",
    "commitment-invalid",
    "commitment-mismatch",
    "index-invalid",
    "schemas-invalid",
    "challenge-unreadable",
    "challenge-schema",
    "duplicate-challenge-id",
    "observation-unreadable",
    "observation-schema",
    "implementation-mismatch",
    "release-mismatch",
    "fixture-root-mismatch",
)

_ABSENT: Final = object()
_ARRAY_INDEX = re.compile(r"(?:0|[1-9][0-9]*)\Z")


class Refusal(CallerError):
    """A whole run (or an input to it) is refused; ``code`` is a stable reason string."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


# --------------------------------------------------------------------------- schemas


def _ecma_pattern(pattern: str, end: str = r"\Z") -> str:
    """Translate the ECMA-262 regex features whose Python meaning differs (``end`` replaces
    ``$``: Python's ``\\Z``; Rust's ``$`` already means the end of the text)."""
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            escaped = pattern[index + 1]
            out.append(
                {"d": "[0-9]", "D": "[^0-9]", "w": "[A-Za-z0-9_]", "W": "[^A-Za-z0-9_]"}.get(
                    escaped, char + escaped
                )
                if not in_class
                else {"d": "0-9", "w": "A-Za-z0-9_"}.get(escaped, char + escaped)
            )
            index += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
        elif char == "$":
            char = end
        out.append(char)
        index += 1
    return "".join(out)


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(_ecma_pattern(pattern))


def _pattern_rule(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if not isinstance(instance, str):
        return
    try:
        matched = _compiled(pattern).search(instance) is not None
    except re.error:
        yield jsonschema.ValidationError(f"unsupported pattern {pattern!r}")
        return
    if not matched:
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _x_sorted_rule(
    validator: Any, wanted: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if wanted is not True or not isinstance(instance, list):
        return
    keys = [js_sort_key(item) for item in instance]
    for position in range(1, len(keys)):
        if keys[position - 1] > keys[position]:
            yield jsonschema.ValidationError(f"array is not sorted at index {position}")
            return


# ``uniqueItems`` in linear time, with the reference's verdict and message. jsonschema sorts the
# items and compares neighbours; when they cannot be sorted (objects, or strings mixed with
# numbers) it compares every pair, which is quadratic: a 10 KB observation document took a
# second, and a schema whose ``type`` is a long array of objects as long to be checked. Here the
# sorting route is the reference's own (n log n); the pairwise route is replaced, for plain JSON
# values, by a set of one text per item, equal exactly when jsonschema's ``equal`` holds.

_TRUE: Final = object()
_FALSE: Final = object()


class _NotPlain(Exception):
    """A value outside plain JSON: its items are compared pairwise, as the reference does."""


def _unbool(value: Any) -> Any:
    """``jsonschema._utils.unbool``: booleans never sort or compare like 0 and 1."""
    if value is True:
        return _TRUE
    if value is False:
        return _FALSE
    return value


def _equal(one: Any, two: Any) -> bool:
    """``jsonschema._utils.equal``: Python equality, but booleans are not numbers, at any depth."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(map(_equal, one, two))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(
            key in two and _equal(value, two[key]) for key, value in one.items()
        )
    return bool(_unbool(one) == _unbool(two))


def _normalized(value: Any) -> Any:
    """``value`` rebuilt so that its ``repr`` is equal for two values exactly when
    :func:`_equal` holds: an integral float becomes the equal int (``1.0`` and ``1``, ``-0.0``
    and ``0``); an object becomes the tuple of its members sorted by name (member order does not
    count; a tuple never equals a list); booleans stay booleans (``True`` is not ``1`` in the
    text). Raises :class:`_NotPlain` for anything but exact dict (str keys), list, str, int,
    finite float, bool and None."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if value.is_integer():
            return int(value)
        if value != value or value in (math.inf, -math.inf):
            raise _NotPlain
        return value
    if kind is list:
        return [_normalized(item) for item in value]
    if kind is dict:
        if not all(type(name) is str for name in value):
            raise _NotPlain
        return tuple((name, _normalized(value[name])) for name in sorted(value))
    raise _NotPlain


def _unique(items: Any) -> bool:
    """``jsonschema._utils.uniq(items)``, without its quadratic route for plain JSON."""
    try:
        ordered = sorted(_unbool(item) for item in items)
        return not any(map(_equal, ordered, ordered[1:]))
    except (NotImplementedError, TypeError):
        pass
    try:
        # repr: the text of a str, never its hash (an attacker cannot choose colliding texts)
        texts = [repr(_normalized(item)) for item in items]
    except (_NotPlain, RecursionError, ValueError):  # ValueError: int above the digit limit
        seen: list[Any] = []
        for item in map(_unbool, items):
            if any(_equal(other, item) for other in seen):
                return False
            seen.append(item)
        return True
    return len(set(texts)) == len(texts)


def _unique_items_rule(
    validator: Any, wanted: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    if wanted and validator.is_type(instance, "array") and not _unique(instance):
        yield jsonschema.ValidationError(f"{instance!r} has non-unique elements")


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={
        "pattern": _pattern_rule,
        "x-sorted": _x_sorted_rule,
        "uniqueItems": _unique_items_rule,
    },
)
# The meta-schema applies ``uniqueItems`` to a schema's ``type``, ``required`` ...: the same rule.
_MetaValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"uniqueItems": _unique_items_rule}
)
_DIALECT: Final = "https://json-schema.org/draft/2020-12/"


@lru_cache(maxsize=1)
def _meta_registry() -> referencing.Registry[Any]:
    """The draft 2020-12 meta-schema and its vocabularies without their ``$schema`` keyword:
    jsonschema switches to the class a subschema's ``$schema`` names (its own, without the rule
    above) when it enters one, as it enters each vocabulary. Crawled, so its anchors
    (``$dynamicAnchor: meta``) replace the stock ones when combined with them."""
    resources = [
        (uri, DRAFT202012.create_resource(
            {key: value for key, value in SPECIFICATIONS.contents(uri).items() if key != "$schema"}
        ))
        for uri in SPECIFICATIONS
        if uri.startswith(_DIALECT)
    ]  # fmt: skip
    return referencing.Registry().with_resources(resources).crawl()


@attrs.frozen
class Schemas:
    """The recipe schema and the observation schema a scoring run is driven by (as data)."""

    recipe: Mapping[str, Any]
    observation: Mapping[str, Any]

    @classmethod
    def from_bytes(cls, recipe: bytes, observation: bytes) -> Schemas:
        """Read both schemas through the strict reader (raises :class:`Refusal`)."""
        try:
            parsed = (read_json(recipe), read_json(observation))
        except StrictReadError as error:
            raise Refusal("schemas-invalid", str(error)) from None
        for schema in parsed:
            _checked_schema(schema)
        return cls(recipe=parsed[0], observation=parsed[1])


def _check_schema(schema: Any) -> None:
    if not isinstance(schema, dict):
        raise Refusal("schemas-invalid", "a schema is not a JSON object")
    # jsonschema's check_schema (its first error), with the linear uniqueItems rule throughout.
    registry = _meta_registry()
    meta = _MetaValidator(
        registry.contents(_DIALECT + "schema"),
        registry=registry,
        format_checker=_MetaValidator.FORMAT_CHECKER,
    )
    for error in meta.iter_errors(schema):
        raise Refusal("schemas-invalid", error.message)


def _first_error(schema: Mapping[str, Any], instance: Any) -> str | None:
    """The best-matching schema error, or ``None``. A schema that cannot be applied (a
    ``$ref`` that resolves nowhere: no remote retrieval is ever attempted) raises
    :class:`Refusal` ``schemas-invalid``."""
    validator = _Validator(schema)
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    except Exception as failure:  # referencing.Unresolvable and its jsonschema wrappers
        raise Refusal(
            "schemas-invalid", f"the schema cannot be applied: {type(failure).__name__}"
        ) from None
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"at {where}: {error.message}"


# --------------------------------------------------------------------------- compiled schemas
#
# jsonschema-rs is used only on a subset of draft 2020-12 where it and the reference above
# provably agree, and only to accept: the reference re-validates whatever it rejects.
# Outside the subset (or when compiling fails) the reference validates alone. The subset:
#
# * keywords: the data keywords and subschema keywords listed below, ``x-sorted``, and
#   annotations; not ``patternProperties`` (the reference applies Python's regex semantics
#   to it, untranslated), ``multipleOf`` (float division differs), ``unevaluated*``, dynamic
#   or anchor references;
# * ``$schema`` and ``$id`` only at the root (``$schema`` draft 2020-12); ``$ref`` only ``#`` or
#   ``#/$defs/NAME`` for a NAME of the root ``$defs`` (nothing can be fetched or mis-resolved);
# * patterns: literals (``.`` excluded: ECMA's excludes ``\r`` and U+2028, Python's does not),
#   ``^ $ |``, groups ``(`` / ``(?:``, quantifiers ``* + ? {n} {n,} {n,m}`` (lazy too), classes
#   of literals, ranges and escaped punctuation, ``\d \D \w \W`` outside classes (translated to
#   ASCII classes for both engines), escaped punctuation; and the pattern must compile in
#   Python too. A quantifier never follows a quantifier but as the lazy ``?``: Python reads
#   ``a++``, ``a*+``, ``a?+`` and ``a{2}+`` as possessive (3.11), the ``regex`` crate as a
#   repeat of a repeat, and ECMA-262 refuses them: such a pattern is left to the reference.
#   The Rust side uses the ``regex`` crate (no backtracking, no match limits).

_DRAFT_2020_12: Final = "https://json-schema.org/draft/2020-12/schema"
_DATA_KEYWORDS: Final = frozenset(
    {
        "$comment", "title", "description", "default", "examples", "deprecated", "readOnly",
        "writeOnly", "format", "type", "enum", "const", "required", "minLength", "maxLength",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
        "uniqueItems", "minProperties", "maxProperties", "minContains", "maxContains",
        "dependentRequired", "x-sorted", "pattern", "$ref",
    }
)  # fmt: skip
_SUBSCHEMA: Final = frozenset(
    {"additionalProperties", "items", "propertyNames", "not", "if", "then", "else", "contains"}
)
_SUBSCHEMA_MAP: Final = frozenset({"properties", "dependentSchemas"})
_SUBSCHEMA_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_REF: Final = re.compile(r"#(?:/\$defs/([A-Za-z0-9_.-]+))?\Z")
_PUNCTUATION: Final = r"\^$.|?*+()\[\]{}/\\-"
_SAFE_PATTERN: Final = re.compile(
    rf"""(?:
        \\[dDwW]                                        # class escape, translated
      | \\[{_PUNCTUATION}]                              # escaped punctuation: a literal
      | \[\^?(?:[^\\\[\]]|\\[{_PUNCTUATION}])+\]        # class: literals, ranges, escapes
      | \((?!\?) | \(\?:                                # group (no lookaround, flags, names)
      | \{{[0-9]+(?:,[0-9]*)?\}}\??                     # counted quantifier
      | [)|^$*+?]                                       # structure, anchors, quantifiers
      | [^\\\[\](){{}}.]                                # any other literal character
    )*""",
    re.VERBOSE,
)
_SET_OPERATORS: Final = ("&&", "--", "~~", "||")
#: The pattern's tokens, in the alternatives of :data:`_SAFE_PATTERN`: a quantifier token, or
#: any other token (escapes and classes whole, so an escaped ``+`` is never a quantifier).
_TOKEN: Final = re.compile(
    r"""(?P<quantifier>\{[0-9]+(?:,[0-9]*)?\}\??|[*+?])
      | \\. | \[\^?(?:[^\\\[\]]|\\.)+\] | \(\?: | .""",
    re.VERBOSE | re.DOTALL,
)


def _safe_pattern(pattern: Any) -> bool:
    if not isinstance(pattern, str) or not _SAFE_PATTERN.fullmatch(pattern):
        return False
    if any(operator in pattern for operator in _SET_OPERATORS):
        return False
    if _repeats_a_quantifier(pattern):
        return False
    try:
        _compiled(pattern)  # the reference must be able to apply it too
    except re.error:
        return False
    return True


def _repeats_a_quantifier(pattern: str) -> bool:
    """Whether a quantifier follows a quantifier other than as the lazy ``?`` (``a++``,
    ``a*+``, ``a?+``, ``a{2}+``, ``a+?+``): the engines disagree on what it means."""
    previous: str | None = None
    for token in _TOKEN.finditer(pattern):
        quantifier = token.group("quantifier")
        if (
            quantifier is not None
            and previous is not None
            and (quantifier != "?" or previous.endswith("?"))
        ):
            return True
        previous = quantifier
    return False


def _for_rust(schema: Any, defs: frozenset[str], root: bool = False) -> Any:
    """A copy of ``schema`` with patterns translated for the Rust engine, or ``None`` when some
    keyword lies outside the subset above."""
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, dict):
        return None
    out: dict[str, Any] = {}
    for keyword, value in schema.items():
        translated = _keyword_for_rust(keyword, value, defs, root)
        if translated is _OUTSIDE:
            return None
        out[keyword] = translated
    return out


_OUTSIDE: Final = object()  # a keyword (or a member of it) outside the subset


def _keyword_for_rust(keyword: str, value: Any, defs: frozenset[str], root: bool) -> Any:
    """One keyword's value for the Rust engine (:func:`_for_rust`), or :data:`_OUTSIDE`."""
    if root and (keyword in ("$schema", "$id") or (keyword == "$defs" and isinstance(value, dict))):
        return _root_keyword_for_rust(keyword, value, defs)
    if keyword in _APPLICATORS:
        return _applicator_for_rust(keyword, value, defs)
    if keyword == "$ref":
        found = _REF.match(value) if isinstance(value, str) else None
        inside = found is not None and (found.group(1) is None or found.group(1) in defs)
        return value if inside else _OUTSIDE
    if keyword == "pattern":
        return _ecma_pattern(value, end="$") if _safe_pattern(value) else _OUTSIDE
    return value if keyword in _DATA_KEYWORDS else _OUTSIDE


_APPLICATORS: Final = _SUBSCHEMA | _SUBSCHEMA_MAP | _SUBSCHEMA_LIST


def _root_keyword_for_rust(keyword: str, value: Any, defs: frozenset[str]) -> Any:
    """The root's ``$schema`` (draft 2020-12 only), ``$id`` or ``$defs`` (a dict)."""
    if keyword == "$defs":
        return _members_for_rust(value, defs)
    return _OUTSIDE if keyword == "$schema" and value != _DRAFT_2020_12 else value


def _applicator_for_rust(keyword: str, value: Any, defs: frozenset[str]) -> Any:
    """A subschema keyword's value (one subschema, a map or a list of them) translated."""
    if keyword in _SUBSCHEMA:
        translated = _for_rust(value, defs)
        return _OUTSIDE if translated is None else translated
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    members = {name: _for_rust(member, defs) for name, member in pairs}
    if any(member is None for member in members.values()):
        return _OUTSIDE
    return members if isinstance(value, dict) else list(members.values())


def _members_for_rust(value: dict[str, Any], defs: frozenset[str]) -> Any:
    """The root's ``$defs``, each translated, or :data:`_OUTSIDE` at the first outside."""
    out: dict[str, Any] = {}
    for name, member in value.items():
        out[name] = _for_rust(member, defs)
        if out[name] is None:
            return _OUTSIDE
    return out


def _js_sorted_list(items: list[Any]) -> bool:
    """Whether ``items`` is non-decreasing in JavaScript's default sort order."""
    if len(items) < 2:
        return True
    if all(type(item) is str and item.isascii() for item in items):
        keys: list[Any] = items  # ASCII: code points are UTF-16 code units
    else:
        keys = [js_sort_key(item) for item in items]
    return all(keys[position - 1] <= keys[position] for position in range(1, len(keys)))


class _XSorted:
    """``x-sorted`` as a jsonschema-rs keyword: the same test as :func:`_x_sorted_rule`."""

    def __init__(self, parent_schema: Any, value: Any, schema_path: Any) -> None:
        self._wanted = value is True

    def validate(self, instance: Any) -> None:
        if self._wanted and isinstance(instance, list) and not _js_sorted_list(instance):
            raise ValueError("array is not sorted")


@attrs.define(eq=False, repr=False)  # nodes can form cycles ($ref)
class _SortedNode:
    """A schema node on the way to ``x-sorted`` arrays (for :func:`_sorted_walker`)."""

    wanted: bool = False
    props: dict[str, _SortedNode] = attrs.Factory(dict)
    additional: _SortedNode | None = None
    items: _SortedNode | None = None
    ref: _SortedNode | None = None

    def holds(self, instance: Any) -> bool:
        """Every ``x-sorted`` array this node (and what it leads to) applies to is sorted."""
        if self.wanted and isinstance(instance, list) and not _js_sorted_list(instance):
            return False
        if self.ref is not None and not self.ref.holds(instance):
            return False
        if isinstance(instance, dict):
            return self._members_hold(instance)
        if isinstance(instance, list) and self.items is not None:
            return all(self.items.holds(item) for item in instance)
        return True

    def _members_hold(self, instance: dict[str, Any]) -> bool:
        """:meth:`holds` for an object's members (all of them, with ``additional``)."""
        if self.additional is None:
            return all(
                child.holds(instance[name])
                for name, child in self.props.items()
                if name in instance
            )
        additional = self.additional
        return all(self.props.get(name, additional).holds(m) for name, m in instance.items())


def _schema_nodes(schema: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Every subschema object of a schema inside the subset, by ``id``."""
    nodes: dict[int, dict[str, Any]] = {}
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in nodes:
            continue
        nodes[id(node)] = node
        for keyword, value in node.items():
            if keyword in _SUBSCHEMA:
                stack.append(value)
            elif keyword in _SUBSCHEMA_MAP or keyword == "$defs":
                stack.extend(value.values())
            elif keyword in _SUBSCHEMA_LIST:
                stack.extend(value)
    return nodes


def _ref_target(schema: dict[str, Any], node: dict[str, Any]) -> Any:
    ref = node.get("$ref")
    if ref is None:
        return None
    return schema if ref == "#" else schema["$defs"][ref.removeprefix("#/$defs/")]


_IN_PLACE: Final = ("not", "if", "then", "else")  # subschemas applied to the same instance


def _loops_in_place(schema: dict[str, Any]) -> bool:
    """Whether applying the schema can return to a subschema without entering a member or an
    item (``$ref``, ``allOf``, ``if`` ... cycles): the reference recurses until Python's limit
    and refuses the schema as one that cannot be applied, so it is never compiled."""
    nodes = _schema_nodes(schema)

    def in_place(node: dict[str, Any]) -> list[Any]:
        found = [_ref_target(schema, node), *(node.get(k) for k in _IN_PLACE)]
        found += [*node.get("dependentSchemas", {}).values()]
        for keyword in ("allOf", "anyOf", "oneOf"):
            found += node.get(keyword, [])
        return [n for n in found if isinstance(n, dict)]

    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in nodes.values():
        if id(start) in state:
            continue
        path: list[tuple[dict[str, Any], Iterator[Any]]] = [(start, iter(in_place(start)))]
        state[id(start)] = 1
        while path:
            node, pending = path[-1]
            child = next(pending, None)
            if child is None:
                state[id(node)] = 2
                path.pop()
            elif state.get(id(child)) == 1:
                return True
            elif id(child) not in state:
                state[id(child)] = 1
                path.append((child, iter(in_place(child))))
    return False


def _sorted_walker(schema: dict[str, Any]) -> _SortedNode | bool | None:
    """Where ``x-sorted`` applies, when only ``properties``, ``additionalProperties``,
    ``items`` and ``$ref`` lead there (so the locations follow from the instance alone).

    Returns the root :class:`_SortedNode`; ``None`` when the schema has no ``x-sorted``; or
    ``False`` when another applicator (``allOf``, ``if``, ``prefixItems``, ...) leads to one:
    then the compiled validator checks the keyword itself. (Schemas that loop in place are
    never compiled: :func:`_loops_in_place`.)"""
    nodes = _schema_nodes(schema)
    relevant = _leading_to_sorted(schema, nodes)
    if not relevant:
        return None
    for node in nodes.values():
        _, others = _edges(schema, node)
        if any(id(n) in relevant for n in others) or (
            "prefixItems" in node and id(node.get("items")) in relevant
        ):
            return False
    built: dict[int, _SortedNode] = {key: _SortedNode() for key in relevant}
    for key in relevant:
        _link(schema, nodes[key], built[key], built)
    for out in built.values():  # skip nodes that only pass their instance on to a $ref
        for attribute in ("additional", "items", "ref"):
            setattr(out, attribute, _through(getattr(out, attribute)))
        out.props = {name: _through(child) for name, child in out.props.items()}
    return _through(built[id(schema)]) if id(schema) in relevant else None


def _edges(
    schema: dict[str, Any], node: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A node's subschemas the instance alone locates (members, items, ``$ref``), and the
    others."""
    paths = [*node.get("properties", {}).values(), _ref_target(schema, node)]
    paths += [node.get("additionalProperties"), node.get("items")]
    others = [node.get(k) for k in _SUBSCHEMA - {"additionalProperties", "items"}]
    others += [*node.get("dependentSchemas", {}).values()]
    for keyword in _SUBSCHEMA_LIST:
        others += node.get(keyword, [])
    return [p for p in paths if isinstance(p, dict)], [o for o in others if isinstance(o, dict)]


def _leading_to_sorted(schema: dict[str, Any], nodes: dict[int, dict[str, Any]]) -> set[int]:
    """The nodes (by ``id``) that are ``x-sorted`` or lead to one through any subschema."""
    relevant = {key for key, node in nodes.items() if node.get("x-sorted") is True}
    changed = True
    while changed:
        changed = False
        for key, node in nodes.items():
            paths, others = _edges(schema, node)
            if key not in relevant and any(id(n) in relevant for n in [*paths, *others]):
                relevant.add(key)
                changed = True
    return relevant


def _link(
    schema: dict[str, Any], node: dict[str, Any], out: _SortedNode, built: dict[int, _SortedNode]
) -> None:
    """Fill ``out``, the walker node of ``node``, with the walker nodes its subschemas lead to."""
    out.wanted = node.get("x-sorted") is True
    for name, child in node.get("properties", {}).items():
        if id(child) in built:
            out.props[name] = built[id(child)]
    for attribute, child in (
        ("additional", node.get("additionalProperties")),
        ("items", node.get("items")),
        ("ref", _ref_target(schema, node)),
    ):
        if id(child) in built:
            setattr(out, attribute, built[id(child)])
    if out.additional is not None:  # every other member goes through additional
        for name, child in node.get("properties", {}).items():
            out.props.setdefault(name, built.get(id(child), _SortedNode()))


def _through(node: _SortedNode | None) -> Any:
    """``node``, or what a chain of nodes that only hold a ``$ref`` leads to (no in-place
    loops: :func:`_loops_in_place`)."""
    while (
        node is not None
        and node.ref is not None
        and not (node.wanted or node.props or node.additional or node.items)
    ):
        node = node.ref
    return node


@attrs.frozen
class _Compiled:
    """A jsonschema-rs validator, and where ``x-sorted`` applies when it checks that itself."""

    validator: Any
    walker: _SortedNode | None

    def is_valid(self, instance: Any) -> bool:
        return bool(self.validator.is_valid(instance)) and (
            self.walker is None or self.walker.holds(instance)
        )


def _compile(schema: dict[str, Any]) -> _Compiled | None:
    """A compiled validator for a checked schema inside the subset, else ``None``."""
    defs = schema.get("$defs")
    names = frozenset(defs) if isinstance(defs, dict) else frozenset()
    translated = _for_rust(schema, names, root=True)
    if translated is None or _loops_in_place(translated):
        return None
    walker = _sorted_walker(translated)
    try:
        validator = jsonschema_rs.Draft202012Validator(
            translated,
            validate_formats=False,
            offline=True,
            keywords={"x-sorted": _XSorted} if walker is False else None,
            pattern_options=jsonschema_rs.RegexOptions(),
        )
    except Exception:  # a pattern the regex crate refuses; a $ref it cannot resolve
        return None
    return _Compiled(validator, walker if isinstance(walker, _SortedNode) else None)


@attrs.frozen
class _Checked:
    """The outcome of checking one schema: its ``schemas-invalid`` detail or ``None``, and
    its compiled validator (``None``: the reference validates alone)."""

    problem: str | None
    compiled: _Compiled | None


_CHECKED: dict[bytes, _Checked] = {}
_CHECKED_LOCK = threading.Lock()
_CHECKED_MAX = 32


def _checked(schema: Any) -> _Checked:
    """Check (and compile) ``schema`` once per exact content: the cache key is its marshal
    encoding, which exists only for exact built-in types (no caller code runs) and differs
    for any difference of content, type or member order."""
    try:
        key: bytes | None = marshal.dumps(schema, 2)
    except ValueError:
        key = None
    if key is not None:
        found = _CHECKED.get(key)
        if found is not None:
            return found
    try:
        _check_schema(schema)
    except Refusal as refusal:
        entry = _Checked(problem=refusal.detail, compiled=None)
    else:
        entry = _Checked(problem=None, compiled=None if key is None else _compile(schema))
    if key is not None:
        with _CHECKED_LOCK:
            if len(_CHECKED) >= _CHECKED_MAX:
                _CHECKED.clear()
            _CHECKED[key] = entry
    return entry


def _checked_schema(schema: Any) -> Any:
    """:func:`_check_schema` (raises :class:`Refusal`), returning the compiled validator."""
    entry = _checked(schema)
    if entry.problem is not None:
        raise Refusal("schemas-invalid", entry.problem)
    return entry.compiled


def _problem(schema: Mapping[str, Any], instance: Any, compiled: Any) -> str | None:
    """:func:`_first_error`, skipped when the compiled validator accepts the instance."""
    if compiled is not None:
        try:
            if compiled.is_valid(instance):
                return None
        except Exception:  # never trusted to reject: the reference decides below
            pass
    return _first_error(schema, instance)


def validate_challenge(challenge: Any, schemas: Schemas) -> str | None:
    """The first recipe-schema error of one parsed challenge, or ``None`` if it conforms
    (raises :class:`Refusal` ``schemas-invalid`` when the schema cannot be applied)."""
    return _problem(schemas.recipe, challenge, _checked(schemas.recipe).compiled)


def validate_observation_document(document: Any, schemas: Schemas) -> str | None:
    """The first observation-schema error of a parsed document, or ``None`` (raises
    :class:`Refusal` ``schemas-invalid`` when the schema cannot be applied)."""
    return _problem(schemas.observation, document, _checked(schemas.observation).compiled)


# --------------------------------------------------------------------------- predicates


def resolve_path(root: Any, path: Any) -> Any:
    """Walk a dot path by own members; return the value or the module's ABSENT sentinel.

    Objects are entered by member name, arrays by canonical decimal index (``"0"``, not
    ``"00"``). Inherited JavaScript names (``length``, ``constructor``) are never found.
    """
    if not isinstance(path, str):
        return _ABSENT
    current = root
    for segment in _segments(path):
        if isinstance(current, dict):
            current = current.get(segment, _ABSENT)
            if current is _ABSENT:
                return _ABSENT
        elif isinstance(current, list):
            if not _ARRAY_INDEX.match(segment) or int(segment) >= len(current):
                return _ABSENT
            current = current[int(segment)]
        else:
            return _ABSENT
    return current


@lru_cache(maxsize=4096)
def _segments(path: str) -> list[str]:
    return path.split(".")


def _js_sorted(items: list[Any]) -> list[Any]:
    """``sorted(items, key=js_sort_key)``; ASCII strings sort by themselves (their UTF-16 code
    units are their code points), without building keys."""
    if len(items) < 2:
        return items[:]
    if all(type(item) is str and item.isascii() for item in items):
        return sorted(items)
    return sorted(items, key=js_sort_key)


def is_absent(value: Any) -> bool:
    return value is _ABSENT


def _same(left: Any, right: Any) -> bool:
    """:func:`canonical_equal` for values the strict reader produced, without encoding them.

    Under that precondition (JSON types only, string keys, no lone surrogate, finite numbers,
    integers below 2**53) two values have equal RFC 8785 encodings exactly when: both are
    numbers (booleans are not) with equal values (ES formatting is injective on doubles but
    for 0 and -0, which Python's ``==`` equates too); or both have the same other JSON type
    and are equal strings, booleans or nulls, arrays of pairwise-same items, or objects with
    the same member names and pairwise-same values."""
    kind = type(left)
    if kind is not type(right):
        return kind in (int, float) and type(right) in (int, float) and bool(left == right)
    if kind is list:
        return len(left) == len(right) and all(map(_same, left, right))
    if kind is dict:
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    return bool(left == right)


def evaluate_predicate(predicate: Any, observation: Any) -> bool | None:
    """Score one predicate against one observation: ``True``, ``False`` or ``None``."""
    return _evaluate(predicate, observation, canonical_equal)


def _evaluate(predicate: Any, observation: Any, same: Callable[[Any, Any], bool]) -> bool | None:
    """:func:`evaluate_predicate`, comparing canonically with ``same`` (one rule per operator,
    :data:`_RULES`; each reads only what it needs)."""
    if not isinstance(predicate, dict) or not isinstance(observation, dict):
        return None
    op = predicate.get("op")
    if not isinstance(op, str):
        return None
    rule = _RULES.get(op)
    if rule is None:
        return None
    try:
        return rule(op, predicate, observation, same)
    except ValueError:
        return None


# The operators' rules for :func:`_evaluate`: ``(op, predicate, observation, same)``.
_Rule = Callable[[str, dict[str, Any], dict[str, Any], Callable[[Any, Any], bool]], "bool | None"]


def _verdict_rule(
    op: str,
    predicate: dict[str, Any],
    observation: dict[str, Any],
    same: Callable[[Any, Any], bool],
) -> bool | None:
    root = observation.get("candidate", _ABSENT) if op == "VERDICT_EQ" else observation
    found = resolve_path(root, predicate.get("path"))
    if found is _ABSENT:
        return None
    return "value" in predicate and strict_equal(found, predicate["value"])


def _refusal_set_rule(
    op: str,
    predicate: dict[str, Any],
    observation: dict[str, Any],
    same: Callable[[Any, Any], bool],
) -> bool | None:
    refusals = observation.get("refusal_set", _ABSENT)
    expected = predicate.get("value", [])  # missing counts as []
    if not isinstance(refusals, list):
        return None
    if not isinstance(expected, list):
        return False  # present but not an array (null included): equals no set
    return same(_js_sorted(refusals), _js_sorted(expected))


def _holds_rule(
    op: str,
    predicate: dict[str, Any],
    observation: dict[str, Any],
    same: Callable[[Any, Any], bool],
) -> bool | None:
    path = predicate.get("path")
    base = resolve_path(observation.get("baseline", _ABSENT), path)
    cand = resolve_path(observation.get("candidate", _ABSENT), path)
    if base is _ABSENT or cand is _ABSENT:
        return None
    equal = same(base, cand)
    return equal if op == "HOLDS" else not equal


def _eq_rule(
    op: str,
    predicate: dict[str, Any],
    observation: dict[str, Any],
    same: Callable[[Any, Any], bool],
) -> bool | None:
    left = resolve_path(observation, predicate.get("path"))
    if "value" in predicate:
        right = predicate["value"]
    else:
        right = resolve_path(observation, predicate.get("right"))
    if left is _ABSENT or right is _ABSENT:
        return None
    equal = same(left, right)
    return equal if op == "EQ" else not equal


def _lt_rule(
    op: str,
    predicate: dict[str, Any],
    observation: dict[str, Any],
    same: Callable[[Any, Any], bool],
) -> bool | None:
    left = resolve_path(observation, predicate.get("left"))
    right = resolve_path(observation, predicate.get("right"))
    if not is_number(left) or not is_number(right):
        return None
    return bool(left < right)


_RULES: Final[Mapping[str, _Rule]] = {
    "VERDICT_EQ": _verdict_rule,
    "OUTCOME_EQ": _verdict_rule,
    "REFUSAL_SET_EQ": _refusal_set_rule,
    "HOLDS": _holds_rule,
    "MOVES": _holds_rule,
    "EQ": _eq_rule,
    "NEQ": _eq_rule,
    "LT": _lt_rule,
}


# A path's segments, by path: challenge sets repeat their paths (``artifact.verdict``).
_SPLIT: dict[str, tuple[str, ...]] = {}
_SPLIT_MAX: Final = 4096


def _walk(node: Any, path: Any) -> Any:
    """:func:`resolve_path` for values the strict reader produced (exact ``dict`` and
    ``list`` containers, exact ``str`` paths): the same walk, with exact type tests."""
    if type(path) is not str:
        return _ABSENT
    segments = _SPLIT.get(path)
    if segments is None:
        if len(_SPLIT) >= _SPLIT_MAX:
            _SPLIT.clear()
        segments = _SPLIT[path] = tuple(path.split("."))
    for segment in segments:
        kind = type(node)
        if kind is dict:
            node = node.get(segment, _ABSENT)
            if node is _ABSENT:
                return _ABSENT
        elif kind is list:
            if _ARRAY_INDEX.match(segment) is None or int(segment) >= len(node):
                return _ABSENT
            node = node[int(segment)]
        else:
            return _ABSENT
    return node


def _strict_read(left: Any, right: Any) -> bool:
    """:func:`strict_equal` for values the strict reader produced (exact JSON types)."""
    kind = type(left)
    if kind is type(right):
        return kind is not dict and kind is not list and bool(left == right)
    return (kind is int or kind is float) and type(right) in (int, float) and bool(left == right)


def _evaluate_read(predicate: Any, observation: Any) -> bool | None:
    """``_evaluate(predicate, observation, _same)`` for a predicate and an observation that
    the strict reader produced (every scoring run's, after the copy or the read): the same
    rules, decided with exact type tests (:data:`_READ_RULES`; a test checks that both
    agree)."""
    if type(predicate) is not dict or type(observation) is not dict:
        return None
    op = predicate.get("op")
    if type(op) is not str:
        return None
    rule = _READ_RULES.get(op)
    return None if rule is None else rule(op, predicate, observation)


# The operators' rules for :func:`_evaluate_read`: ``(op, predicate, observation)``.
_ReadRule = Callable[[str, dict[str, Any], dict[str, Any]], "bool | None"]


def _verdict_read(op: str, predicate: dict[str, Any], observation: dict[str, Any]) -> bool | None:
    found = _walk(
        observation.get("candidate", _ABSENT) if op == "VERDICT_EQ" else observation,
        predicate.get("path"),
    )
    if found is _ABSENT:
        return None
    return "value" in predicate and _strict_read(found, predicate["value"])


def _refusal_set_read(
    op: str, predicate: dict[str, Any], observation: dict[str, Any]
) -> bool | None:
    refusals = observation.get("refusal_set", _ABSENT)
    expected = predicate.get("value", [])  # missing counts as []
    if type(refusals) is not list:
        return None
    if type(expected) is not list:
        return False  # present but not an array (null included): equals no set
    if len(refusals) != len(expected):
        return False  # sorting keeps the length; lists of different lengths differ
    if len(refusals) < 2:  # nothing to sort
        return _same(refusals, expected)
    try:
        return _same(_js_sorted(refusals), _js_sorted(expected))
    except ValueError:  # as _evaluate (unreachable for values the reader produced)
        return None


def _holds_read(op: str, predicate: dict[str, Any], observation: dict[str, Any]) -> bool | None:
    path = predicate.get("path")
    base = _walk(observation.get("baseline", _ABSENT), path)
    cand = _walk(observation.get("candidate", _ABSENT), path)
    if base is _ABSENT or cand is _ABSENT:
        return None
    if type(base) is str and type(cand) is str:  # the common case, decided at once
        return bool(base == cand) is (op == "HOLDS")
    return _same(base, cand) is (op == "HOLDS")


def _eq_read(op: str, predicate: dict[str, Any], observation: dict[str, Any]) -> bool | None:
    left = _walk(observation, predicate.get("path"))
    if "value" in predicate:
        right = predicate["value"]
    else:
        right = _walk(observation, predicate.get("right"))
    if left is _ABSENT or right is _ABSENT:
        return None
    if type(left) is str and type(right) is str:  # the common case, decided at once
        return bool(left == right) is (op == "EQ")
    return _same(left, right) is (op == "EQ")


def _lt_read(op: str, predicate: dict[str, Any], observation: dict[str, Any]) -> bool | None:
    left = _walk(observation, predicate.get("left"))
    right = _walk(observation, predicate.get("right"))
    if type(left) not in (int, float) or type(right) not in (int, float):
        return None
    return bool(left < right)


_READ_RULES: Final[Mapping[str, _ReadRule]] = {
    "VERDICT_EQ": _verdict_read,
    "OUTCOME_EQ": _verdict_read,
    "REFUSAL_SET_EQ": _refusal_set_read,
    "HOLDS": _holds_read,
    "MOVES": _holds_read,
    "EQ": _eq_read,
    "NEQ": _eq_read,
    "LT": _lt_read,
}


# --------------------------------------------------------------------------- scoring


@attrs.frozen
class ChallengeScore:
    """Per-challenge tally; ``missing`` when the document has no observation for it."""

    passed: int
    failed: int
    unresolved: int
    missing: bool
    results: tuple[bool | None, ...]

    def to_dict(self) -> dict[str, int]:
        return {"pass": self.passed, "fail": self.failed, "unresolved": self.unresolved}


@attrs.frozen
class ScoreReport:
    """The outcome of one scoring run. ``by_challenge`` is empty when refused."""

    verdict: str
    refusal: str | None
    detail: str | None
    by_challenge: Mapping[str, ChallengeScore]
    #: what :attr:`explanations` explains: (challenge id, predicate position, predicate,
    #: observation, result) per non-passing predicate; (challenge id, -1, predicate count,
    #: None, None) per missing challenge. Explained on first use, not while scoring.
    pending: tuple[tuple[str, int, Any, Any, bool | None], ...] = attrs.field(
        default=(), repr=False
    )
    _explained: list[tuple[Explanation, ...]] = attrs.field(
        factory=list, init=False, eq=False, repr=False
    )

    @property
    def explanations(self) -> tuple[Explanation, ...]:
        """Why each non-passing predicate (and each missing challenge) did not pass, in order
        (``_explain``); computed once, on first use, so a run that only needs its verdict
        does not pay for them."""
        if not self._explained:
            self._explained.append(
                tuple(
                    missing(cid, predicate) if index < 0 else explain(cid, index, predicate, *rest)
                    for cid, index, predicate, *rest in self.pending
                )
            )
        return self._explained[0]

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(cid for cid, score in self.by_challenge.items() if score.missing)

    @property
    def harness_passed(self) -> bool:
        return self.verdict == "PASS"

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "refusal": self.refusal,
            "by_challenge": {cid: score.to_dict() for cid, score in self.by_challenge.items()},
            "explanations": [explanation.to_dict() for explanation in self.explanations],
        }


def refused(code: str, detail: str) -> ScoreReport:
    return ScoreReport(verdict="REFUSED", refusal=code, detail=detail, by_challenge={})


_NO_COPY: Final = object()


def _plain_copy(value: Any) -> Any:
    """The fast route of :func:`_as_read`: the same copy, or ``_NO_COPY`` when unproven.

    ``marshal`` accepts only exact built-in types (running no code of the caller's objects);
    ``orjson`` then refuses what the strict reader could not have produced (non-string keys,
    lone surrogates, bytes, sets, integers of 2**53 and beyond). Its text has no duplicate
    member, so when it is shallow enough, and small enough that the reference's ``json.dumps``
    text (at most 5/4 as long: ``1e+16`` for ``1e16``) is too, the strict reader would read
    it exactly as ``orjson`` does; and that copy must equal the original, which catches what
    orjson writes as JSON silently (a tuple; NaN or an infinity written as null)."""
    try:
        marshal.dumps(value, 4)  # every version accepts the same types; 4 is the fastest
        text = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
        if len(text) > MAX_DOCUMENT_BYTES * 3 // 4:
            return _NO_COPY
        if not shallow(text):
            return _NO_COPY
        copy = orjson.loads(text)
        return copy if copy == value else _NO_COPY
    except Exception:
        return _NO_COPY


def _as_read(value: Any, code: str, where: str) -> Any:
    """A plain copy of a caller's parsed value, exactly as the strict reader would have read
    its JSON text (integers beyond 2**53 become doubles; dict/list/str subclasses become plain
    values), so that what is scored cannot alias, or run code of, the caller's objects.
    Raises :class:`Refusal` ``code`` for anything the strict reader would refuse."""
    copy = _plain_copy(value)
    if copy is not _NO_COPY:
        return copy
    try:
        check_json_value(value)
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return read_json(text.encode("utf-8"))
    except StrictReadError as error:
        raise Refusal(code, f"{where}{error}") from None
    except Exception as error:  # an exotic object (a subclass whose methods raise, ...)
        raise Refusal(code, f"{where}not a JSON value ({type(error).__name__})") from None


def _check_challenges(
    challenges: Sequence[Any], schemas: Schemas, compiled: Any, read: bool = False
) -> list[Any]:
    """The challenges as scored (copies, unless ``read``: the scorer's own reader produced
    them and no caller holds them), checked in the order of the module docstring."""
    seen: set[str] = set()
    try:
        originals = list(challenges)
    except Exception as error:
        raise Refusal("challenge-unreadable", f"not an array ({type(error).__name__})") from None
    # All at once when provably the same as one at a time (else one at a time, in order).
    copies = originals if read else _plain_copy(originals)
    plain: list[Any] = []
    for position, original in enumerate(originals):
        if copies is _NO_COPY:
            challenge = _as_read(original, "challenge-unreadable", f"challenge {position}: ")
        else:
            challenge = copies[position]
        plain.append(challenge)
        problem = _problem(schemas.recipe, challenge, compiled)
        if problem is not None:
            raise Refusal("challenge-schema", f"challenge {position} {problem}")
        # The scorer itself relies on these, whatever schema it was given.
        if not (
            isinstance(challenge, dict)
            and isinstance(challenge.get("id"), str)
            and isinstance(challenge.get("fixture"), dict)
            and isinstance(challenge["fixture"].get("root"), str)
            and isinstance(challenge.get("predicates"), list)
        ):
            raise Refusal(
                "challenge-schema", f"challenge {position} lacks id, fixture.root or predicates"
            )
    for challenge in plain:
        if challenge["id"] in seen:
            raise Refusal("duplicate-challenge-id", f"challenge id {challenge['id']!r} repeated")
        seen.add(challenge["id"])
    return plain


def _check_document(
    challenges: Sequence[Any],
    document: Any,
    schemas: Schemas,
    compiled: Any,
    expect_release: str,
    expect_implementation: str | None,
) -> None:
    problem = _problem(schemas.observation, document, compiled)
    if problem is not None:
        raise Refusal("observation-schema", problem)
    if not isinstance(document, dict):
        raise Refusal("observation-schema", "the document is not an object")
    if expect_implementation is not None and document.get("implementation") != (
        expect_implementation
    ):
        raise Refusal(
            "implementation-mismatch",
            f"document says {document.get('implementation')!r}, expected {expect_implementation!r}",
        )
    if document.get("spec_release_id") != expect_release:
        raise Refusal(
            "release-mismatch",
            f"document says {document.get('spec_release_id')!r}, run is {expect_release!r}",
        )
    observations = document.get("observations")
    if not isinstance(observations, dict):
        raise Refusal("observation-schema", "observations is not an object")
    for challenge in challenges:
        observation = observations.get(challenge["id"])
        if observation is None:
            continue
        declared = challenge["fixture"]["root"]
        if not isinstance(observation, dict) or observation.get("fixture_root") != declared:
            raise Refusal(
                "fixture-root-mismatch",
                f"{challenge['id']}: observed {observation.get('fixture_root')!r}"
                if isinstance(observation, dict)
                else f"{challenge['id']}: observation is not an object",
            )


def score(
    challenges: Sequence[Any],
    document: Any,
    *,
    schemas: Schemas,
    expect_release: str,
    expect_implementation: str | None = None,
) -> ScoreReport:
    """Score one parsed observation document against parsed challenges (HOLDOUT-HARNESS).

    Both are first copied exactly as the strict reader would read their JSON text, so the
    caller's objects are never scored in place."""
    return _score(challenges, document, schemas, expect_release, expect_implementation)


#: How :func:`_score` receives its inputs.
_VALUE: Final = "value"  # a caller's parsed value: copied as the strict reader would read it
_READ: Final = "read"  # produced by this package's strict reader, held by no caller
_BYTES: Final = "bytes"  # bytes, read here by the strict reader


def _score(
    challenges: Any,
    document: Any,
    schemas: Schemas,
    expect_release: str,
    expect_implementation: str | None,
    challenges_as: str = _VALUE,
    document_as: str = _VALUE,
) -> ScoreReport:
    """One scoring run; the refusals are checked in the module docstring's order."""
    try:
        challenges, document = _admitted(
            challenges,
            document,
            schemas,
            expect_release,
            expect_implementation,
            challenges_as,
            document_as,
        )
    except Refusal as refusal:
        return refused(refusal.code, refusal.detail)
    observations: dict[str, Any] = document["observations"]
    by_challenge: dict[str, ChallengeScore] = {}
    pending: list[tuple[str, int, Any, Any, bool | None]] = []
    for challenge in challenges:
        cid = challenge["id"]
        by_challenge[cid] = _challenge_score(cid, challenge, observations.get(cid), pending)
    failing = any(
        tally.missing or tally.failed > 0 or tally.unresolved > 0 for tally in by_challenge.values()
    )
    return ScoreReport(
        verdict="FAIL" if failing else "PASS",
        refusal=None,
        detail=None,
        by_challenge=by_challenge,
        pending=tuple(pending),
    )


def _admitted(
    challenges: Any,
    document: Any,
    schemas: Schemas,
    expect_release: str,
    expect_implementation: str | None,
    challenges_as: str,
    document_as: str,
) -> tuple[Any, Any]:
    """Refusals 1-9 in order: the challenges and the document as the strict reader's values,
    or :class:`Refusal`."""
    recipe, observation = (
        _checked_schema(schemas.recipe),
        _checked_schema(schemas.observation),
    )
    if challenges_as == _BYTES:
        challenges, challenges_as = read_challenge_array(challenges), _READ
    if not isinstance(challenges, Sequence) or isinstance(challenges, str | bytes):
        raise Refusal("challenge-unreadable", "the challenge set is not an array")
    challenges = _check_challenges(challenges, schemas, recipe, challenges_as == _READ)
    if document_as == _BYTES:
        try:
            document = read_json(document)
        except StrictReadError as error:
            raise Refusal("observation-unreadable", str(error)) from None
    elif document_as == _VALUE:
        document = _as_read(document, "observation-unreadable", "")
    _check_document(
        challenges, document, schemas, observation, expect_release, expect_implementation
    )
    return challenges, document


def _challenge_score(
    cid: str,
    challenge: dict[str, Any],
    observation: Any,
    pending: list[tuple[str, int, Any, Any, bool | None]],
) -> ChallengeScore:
    """One challenge's tally; what is to be explained (not passed, or missing) goes to
    ``pending``."""
    predicates = challenge["predicates"]
    if observation is None:
        results: tuple[bool | None, ...] = (None,) * len(predicates)
        pending.append((cid, -1, len(predicates), None, None))
        failed, unresolved = 0, len(predicates)
    else:
        # Both sides come from the strict reader: the exact-type evaluation applies.
        results = tuple([_evaluate_read(p, observation) for p in predicates])
        # Results are exactly True, False or None, so count() (by ==) counts each alone.
        failed, unresolved = results.count(False), results.count(None)
        if failed or unresolved:
            for index, result in enumerate(results):
                if result is not True:
                    pending.append((cid, index, predicates[index], observation, result))
    passed = len(results) - failed - unresolved
    return ChallengeScore(passed, failed, unresolved, observation is None, results)


def score_bytes(
    challenges: Sequence[Any] | bytes,
    document: bytes,
    *,
    schemas: Schemas,
    expect_release: str,
    expect_implementation: str | None = None,
) -> ScoreReport:
    """:func:`score` for an observation document still in bytes (read by the strict reader).

    ``challenges`` is either parsed challenges (copied, as :func:`score` does) or the bytes of
    a challenge-set file, one JSON array, read here by the strict reader (its refusal is
    ``challenge-unreadable``): then nothing needs copying, which is ``holdout score``'s route."""
    return _score(
        challenges,
        document,
        schemas,
        expect_release,
        expect_implementation,
        _BYTES if isinstance(challenges, bytes) else _VALUE,
        _BYTES,
    )


def score_read(
    challenges: list[Any],
    document: bytes,
    *,
    schemas: Schemas,
    expect_release: str,
    expect_implementation: str | None = None,
) -> ScoreReport:
    """:func:`score_bytes` for challenges this package's strict reader has just produced and
    that no other code holds (``load_challenge_folder``, :func:`read_challenge_array`): they
    are scored in place, not copied. Never pass values that came from anywhere else."""
    return _score(
        challenges, document, schemas, expect_release, expect_implementation, _READ, _BYTES
    )


def read_challenge_array(data: bytes) -> list[Any]:
    """Read a challenge-set file (one JSON array) strictly; raise :class:`Refusal`."""
    try:
        parsed = read_json(data)
    except StrictReadError as error:
        raise Refusal("challenge-unreadable", str(error)) from None
    if not isinstance(parsed, list):
        raise Refusal("challenge-unreadable", "a challenge-set file must be a JSON array")
    return parsed


# --------------------------------------------------------------------------- interop


@attrs.frozen
class Finding:
    """One difference between two documents' ``observations`` (``UNCLASSIFIED_FINDING``)."""

    path: str
    implementations: tuple[str, str]
    left: str | None  # canonical JSON text, or None when absent on that side
    right: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": "UNCLASSIFIED_FINDING",
            "path": self.path,
            "implementations": list(self.implementations),
            "left": self.left,
            "right": self.right,
        }


@attrs.frozen
class InteropReport:
    """HOLDOUT-INTEROP: ``NOT MEASURED`` (< 2 documents), ``PASS``, ``FAIL`` or ``REFUSED``."""

    status: str
    findings: tuple[Finding, ...]
    refusal: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "refusal": self.refusal,
            "findings": [finding.to_dict() for finding in self.findings],
        }


def _text(value: Any) -> str | None:
    return None if value is _ABSENT else canonical(value).decode("utf-8")


def compare_observations(
    left: Any, right: Any, labels: tuple[str, str] = ("left", "right")
) -> tuple[Finding, ...]:
    """Deep-compare two documents' ``observations`` members; objects recursively, arrays and
    scalars whole by canonical form. Producer labels are not compared."""
    findings: list[Finding] = []
    stack: list[tuple[str, Any, Any]] = [
        (
            "observations",
            left.get("observations", _ABSENT) if isinstance(left, dict) else _ABSENT,
            right.get("observations", _ABSENT) if isinstance(right, dict) else _ABSENT,
        )
    ]
    while stack:
        path, a, b = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=js_sort_key, reverse=True):
                stack.append((f"{path}.{key}", a.get(key, _ABSENT), b.get(key, _ABSENT)))
            continue
        if a is _ABSENT or b is _ABSENT or canonical(a) != canonical(b):
            findings.append(Finding(path, labels, _text(a), _text(b)))
    return tuple(findings)


def interop(documents: Sequence[Any]) -> InteropReport:
    """Compare every pair of (already scored) documents. Fewer than two: NOT MEASURED."""
    if len(documents) < 2:
        return InteropReport(status="NOT MEASURED", findings=())
    try:
        documents = [_as_read(document, "observation-unreadable", "") for document in documents]
    except Refusal as refusal:
        return InteropReport("REFUSED", (), f"{refusal.code}: {refusal.detail}")
    for document in documents:
        if not isinstance(document, dict):
            return InteropReport("REFUSED", (), "observation-schema: not an object")
    releases = {document.get("spec_release_id") for document in documents}
    if len(releases) != 1:
        return InteropReport("REFUSED", (), "release-mismatch: documents name different releases")
    findings: list[Finding] = []
    for i in range(len(documents)):
        for j in range(i + 1, len(documents)):
            labels = (
                str(documents[i].get("implementation", f"#{i}")),
                str(documents[j].get("implementation", f"#{j}")),
            )
            findings.extend(compare_observations(documents[i], documents[j], labels))
    return InteropReport(status="FAIL" if findings else "PASS", findings=tuple(findings))
