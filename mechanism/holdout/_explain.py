"""Why a predicate did not pass: the scorer's explanation of every non-passing result.

Part of the scorer (bound by the release id, imports nothing of the project's protocol code).
The scorer decides first (``_scorer._evaluate``); only a predicate that did not pass, and every
challenge without an observation, is explained here, so a passing run costs nothing extra.

Rules:

* Every path is shown **from the observation root**, with the root its operator reads
  (docs/spec/holdout.md §3.4): ``HOLDS``/``MOVES`` read ``baseline.<path>`` and
  ``candidate.<path>``; ``VERDICT_EQ`` reads ``candidate.<path>``; ``EQ``, ``NEQ``,
  ``OUTCOME_EQ`` and ``LT`` read ``<path>`` (and ``<right>``/``<left>``) from the root;
  ``REFUSAL_SET_EQ`` reads ``refusal_set``.
* A read that resolved carries the observed ``value``. A read that did not carries
  ``resolved: false``, the ``nearest`` existing prefix (``""`` is the observation root), the
  first ``missing`` segment and what the prefix holds (``members`` of an object, sorted and
  capped at :data:`MAX_MEMBERS`; ``length`` of an array; else ``holds``, the JSON type).
* A ``hint`` is given when the same path resolves from another root (a wrong guess of the
  root, the commonest silent ``UNRESOLVED``): it names the path that would resolve.
* ``why`` says in one sentence what decided: the compared values differ or are equal, a literal
  that JavaScript ``===`` never matches, a refusal set's ``extra`` and ``lacking`` codes, a
  side that is not a number, no ``refusal_set`` (nothing was evaluated), no observation.

Path walking here is the scorer's (``resolve_path``: own members only, canonical array
indices, a null or a scalar has no members); a test checks that both agree.
"""

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from ._jcs import is_number, js_sort_key

MAX_MEMBERS: Final = 32
_ARRAY_INDEX: Final = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_ABSENT: Final = object()
_NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})

#: The root each predicate operator reads its paths from (``""`` is the observation root).
PREDICATE_ROOTS: Final = {
    "HOLDS": ("baseline", "candidate"),
    "MOVES": ("baseline", "candidate"),
    "VERDICT_EQ": ("candidate",),
    "EQ": ("",),
    "NEQ": ("",),
    "OUTCOME_EQ": ("",),
    "LT": ("",),
    "REFUSAL_SET_EQ": ("refusal_set",),
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _join(prefix: str, path: str) -> str:
    return f"{prefix}.{path}" if prefix and path else prefix or path


class Read(NamedTuple):
    """One path a predicate read, from the observation root (module rules)."""

    path: str
    resolved: bool
    value: Any = None
    nearest: str = ""
    missing: str = ""
    holds: Mapping[str, Any] = _NOTHING

    def to_dict(self) -> dict[str, Any]:
        if self.resolved:
            return {"path": self.path, "value": self.value}
        return {
            "path": self.path,
            "resolved": False,
            "nearest": self.nearest,
            "missing": self.missing,
            **self.holds,
        }


def trace(root: Any, path: str) -> Read:
    """Walk ``path`` (from the observation root) as the scorer does, remembering how far it got."""
    current = root
    done: list[str] = []
    for segment in path.split("."):
        if isinstance(current, dict) and segment in current:
            current = current[segment]
        elif (
            isinstance(current, list)
            and _ARRAY_INDEX.match(segment)
            and int(segment) < len(current)
        ):
            current = current[int(segment)]
        else:
            return Read(path, False, None, ".".join(done), segment, _holds(current))
        done.append(segment)
    return Read(path, True, current)


def _resolves(root: Any, path: str) -> bool:
    """Whether :func:`trace` would resolve ``path`` (without recording anything)."""
    current = root
    for segment in path.split("."):
        if isinstance(current, dict) and segment in current:
            current = current[segment]
        elif (
            isinstance(current, list)
            and _ARRAY_INDEX.match(segment)
            and int(segment) < len(current)
        ):
            current = current[int(segment)]
        else:
            return False
    return True


def _holds(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        if all(type(name) is str and name.isascii() for name in value):
            names = sorted(value)  # ASCII: code points are UTF-16 code units
        else:
            names = sorted(value, key=js_sort_key)
        if len(names) > MAX_MEMBERS:
            return {"members": names[:MAX_MEMBERS], "more_members": len(names) - MAX_MEMBERS}
        return {"members": names}
    if isinstance(value, list):
        return {"length": len(value)}
    return {"holds": _json_type(value)}


class Explanation(NamedTuple):
    """Why one predicate of one challenge did not pass (or why a challenge has no results)."""

    challenge: str
    result: str  # "fail", "unresolved" or "missing"
    why: str
    position: int | None = None  # the predicate's position in the challenge (None: missing)
    predicate: Any = None
    reads: tuple[Read, ...] = ()
    expected: Any = _ABSENT
    hint: str | None = None
    extra: Mapping[str, Any] = _NOTHING

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"challenge": self.challenge, "result": self.result}
        if self.position is not None:
            out["predicate"] = self.position
            out["op"] = self.predicate.get("op") if isinstance(self.predicate, dict) else None
        if self.reads:
            out["reads"] = [read.to_dict() for read in self.reads]
        if self.expected is not _ABSENT:
            out["expected"] = self.expected
        out.update(self.extra)
        out["why"] = self.why
        if self.hint is not None:
            out["hint"] = self.hint
        return out

    def line(self) -> str:
        """One human line (for stderr)."""
        if self.position is None:
            return f"{self.challenge}: {self.why}"
        op = self.predicate.get("op") if isinstance(self.predicate, dict) else "?"
        where = ", ".join(read.path for read in self.reads) or "-"
        text = f"{self.challenge} predicate {self.position} {op} {where}: {self.result}: {self.why}"
        return text + (f" ({self.hint})" if self.hint else "")


def missing(challenge: str, predicates: int) -> Explanation:
    return Explanation(
        challenge,
        "missing",
        f"the document has no observation for this challenge ({predicates} predicates unresolved)",
    )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if is_number(value) else _json_type(value)


def _hint(observation: Any, op: str, path: str) -> str | None:
    """A path that resolves from another root than the one ``op`` reads (module rules)."""
    roots = PREDICATE_ROOTS.get(op, ("",))
    tried: list[str] = []
    for plane in ("candidate", "baseline"):
        if path.startswith(plane + "."):  # the operator's root written out again
            tried.append(path[len(plane) + 1 :])
        elif roots == ("",):  # a plane's path given to an operator that reads from the root
            tried.append(f"{plane}.{path}")
    for alternative in tried:
        full = [_join(root, alternative) for root in roots]
        if all(_resolves(observation, candidate) for candidate in full):
            reads = " and ".join(f"{root}.<path>" if root else "<path>" for root in roots)
            return f"{op} reads {reads} from the observation root; {alternative!r} would resolve"
    return None


def _unresolved_reads(
    observation: Any, op: str, reads: tuple[Read, ...], paths: tuple[str, ...]
) -> tuple[str, str | None]:
    absent = [read.path for read in reads if not read.resolved]
    verb = "does" if len(absent) == 1 else "do"
    why = f"{' and '.join(absent)} {verb} not resolve"
    for path in paths:
        hint = _hint(observation, op, path)
        if hint is not None:
            return why, hint
    return why, None


def explain(
    challenge: str, index: int, predicate: Any, observation: Any, passed: bool | None
) -> Explanation:
    """The explanation of predicate ``index`` of ``challenge``, which scored ``passed``
    (``False`` fail or ``None`` unresolved) against ``observation`` (both from the reader)."""
    result = "fail" if passed is False else "unresolved"
    why, reads, more = _why(predicate, observation)
    return Explanation(challenge, result, why, index, predicate, reads, **more)


#: What decided a result: ``why``, the reads shown, and the explanation's further fields.
_Why = tuple[str, tuple[Read, ...], dict[str, Any]]


def _why(predicate: Any, observation: Any) -> _Why:
    """The explanation's decisive sentence, reads and further fields (module rules)."""
    if not isinstance(predicate, dict):
        return "the predicate is not an object", (), {}
    op = predicate.get("op")
    if op not in PREDICATE_ROOTS:
        return f"unknown predicate operator {op!r}", (), {}
    if op == "REFUSAL_SET_EQ":
        return _refusal_set_why(predicate, observation)
    traced = _traced(op, predicate, observation)
    if traced is None:
        return "a path the operator needs is missing", (), {}
    reads, paths = traced
    if not all(read.resolved for read in reads):
        why, hint = _unresolved_reads(observation, op, reads, paths)
        return why, reads, {"hint": hint}
    return _compared_why(op, predicate, reads)


def _traced(
    op: str, predicate: dict[str, Any], observation: Any
) -> tuple[tuple[Read, ...], tuple[str, ...]] | None:
    """The reads of the paths ``op`` needs, from the roots it reads, and the paths themselves;
    ``None`` when one of them is missing (or not a string)."""
    raw = [predicate.get(name) for name in (("left", "right") if op == "LT" else ("path",))]
    if op in ("EQ", "NEQ") and "value" not in predicate:
        raw.append(predicate.get("right"))
    paths = tuple(path for path in raw if isinstance(path, str))
    if len(paths) != len(raw):
        return None
    roots = PREDICATE_ROOTS[op]
    if op in ("HOLDS", "MOVES"):
        reads = tuple(trace(observation, _join(root, paths[0])) for root in roots)
    elif op == "VERDICT_EQ":
        reads = (trace(observation, _join("candidate", paths[0])),)
    else:
        reads = tuple(trace(observation, path) for path in paths)
    return reads, paths


def _refusal_set_why(predicate: dict[str, Any], observation: Any) -> _Why:
    """``REFUSAL_SET_EQ``: the observed refusal set against the expected one."""
    read = trace(observation, "refusal_set")
    expected = predicate.get("value", [])
    more: dict[str, Any] = {"expected": expected}
    if not read.resolved:
        return "no refusal_set: nothing was evaluated", (read,), more
    if not isinstance(read.value, list):
        return "refusal_set is not an array", (read,), more
    if not isinstance(expected, list):
        return "the value is not an array: no refusal set equals it", (read,), more
    observed = {js_sort_key(code): code for code in read.value}
    wanted = {js_sort_key(code): code for code in expected}
    extra = [observed[key] for key in sorted(observed.keys() - wanted.keys())]
    lacking = [wanted[key] for key in sorted(wanted.keys() - observed.keys())]
    more["extra"] = {"extra": extra, "lacking": lacking}
    return f"the refusal sets differ: extra {extra}, lacking {lacking}", (read,), more


def _compared_why(op: str, predicate: dict[str, Any], reads: tuple[Read, ...]) -> _Why:
    """An operator whose reads all resolved: what its comparison of the values found."""
    values = [read.value for read in reads]
    if op in ("VERDICT_EQ", "OUTCOME_EQ"):
        if "value" not in predicate:
            return "the predicate has no value (JavaScript === undefined is false)", reads, {}
        literal = predicate["value"]
        if isinstance(literal, (dict, list)):
            return (
                "an object or array value is never === (reference identity)",
                reads,
                {"expected": literal},
            )
        return (
            f"observed {_text(values[0])}, expected {_text(literal)}",
            reads,
            {"expected": literal},
        )
    if op == "LT":
        for name, value in zip(("left", "right"), values, strict=True):
            if not is_number(value):
                return f"{name} is a {_json_type(value)}, not a number", reads, {}
        return f"{_text(values[0])} is not less than {_text(values[1])}", reads, {}
    if op in ("EQ", "NEQ") and "value" in predicate:
        equal_word = "equals" if op == "NEQ" else "differs from"
        return (
            f"the observed value {equal_word} the literal (RFC 8785)",
            reads,
            {"expected": predicate["value"]},
        )
    if op in ("HOLDS", "EQ"):
        return "the two values differ (RFC 8785)", reads, {}
    return "the two values are equal (RFC 8785)", reads, {}
