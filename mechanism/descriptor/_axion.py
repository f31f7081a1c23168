"""Axion: the T81 policy language (APL) and its verdict engine.

Policy text rules (``docs/spec/descriptor.md`` §3.4, newest public parser):

* UTF-8 text, at most ``MAX_POLICY_BYTES`` bytes, exactly one root form ``(policy clause…)`` and
  nothing after it but whitespace. Tokens: ``(`` ``)`` ``[`` ``]``, integers with optional sign,
  decimals, ``"strings"`` (escapes ``\\"`` and ``\\\\`` only) and symbols
  (``[A-Za-z0-9_-]``). Nesting deeper than ``MAX_POLICY_DEPTH`` is refused (no recursion is used);
  so is an integer of more than ``MAX_INTEGER_DIGITS`` digits (``AXION_POLICY_SYNTAX``).
* Clauses: ``(tier N)``; integer limits ``max-instructions``, ``max-recursion``, ``max-stack``,
  ``max-reflections``, ``max-meta-writes``, ``max-tensors``, ``max-tensor-elements``,
  ``max-symbolic-nodes``, ``max-symbolic-graphs``, ``max-infinite-forms``;
  ``(allowed-tensor-hashes [...])``, ``(allowed-ternary-model-hashes [...])``,
  ``(ternary-weight-domain-check true|false)``, ``(activation-ceiling X)`` or its clause-list
  form, ``(loop …)``, ``(require-match-guard …)``, ``(require-segment-event …)``,
  ``(require-axion-event (reason "…"))``, ``(require-alignment (reason "…"))``; and one
  experiment-local extension, ``(final-authorization (operation OP) (payload "HEX64"))``.
* **Any other clause is a parse error** (fail closed); so is a malformed argument or a repeated
  single-valued clause. :func:`parse_policy` raises :class:`PolicyError` with a stable code.

Engine rules (:meth:`PolicyEngine.evaluate`, never raises for a :class:`SyscallContext`):

1. A policy that failed to parse yields an engine that denies everything with reason
   ``"Axion policy parse failed: …"``.
2. Ethics first: recursion depth >= 729 is Deny (Θ7); recursion depth > 243 is a remembered Warn
   (Θ4).
3. Without a policy: a ``final_authorization`` context is Deny (nothing was authorized); every
   other context is Allow (public default).
4. With a policy: tier above the policy's ``tier`` is Deny; then ``max-instructions`` (Deny when
   ``instruction_count > limit``, reason ``"Instruction count limit exceeded: count=C limit=L"``),
   ``max-recursion``, ``max-stack``, ``max-reflections``, ``max-meta-writes`` in that order.
5. ``syscall == "step"`` with ``next_opcode == Halt`` is the final instruction: every ``require-*``
   and ``loop`` clause is a substring search over ``trace_reasons``; a missing one is Deny.
6. ``syscall == "final-authorization"`` (``final_authorization=True``, Path B): when the policy has
   ``final-authorization`` entries, the exact ``(operation, payload_reference)`` pair must be one of
   them, else Deny; without entries the policy does not restrict operations.
7. Any other syscall is Defer (the engine has no rule for it).
8. An Allow is downgraded to the remembered ethics Warn, if any.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

import attrs

from mechanism.canonical import digest_bytes
from session.canon import CallerError

from ._tisc import Opcode

__all__ = [
    "INTEGER_LIMIT_CLAUSES",
    "MAX_POLICY_BYTES",
    "MAX_POLICY_DEPTH",
    "POLICY_REASON_CODES",
    "Policy",
    "PolicyEngine",
    "PolicyError",
    "SyscallContext",
    "Verdict",
    "VerdictKind",
    "parse_policy",
    "policy_digest",
]

MAX_POLICY_BYTES: Final = 65_536
MAX_POLICY_DEPTH: Final = 16
MAX_INTEGER_DIGITS: Final = 64  # far below Python's int-from-str limit; no real limit needs more
THETA4_RECURSION_WARN: Final = 243
THETA7_RECURSION_CEILING: Final = 729

POLICY_REASON_CODES: Final = (
    "AXION_POLICY_NOT_TEXT",
    "AXION_POLICY_TOO_LARGE",
    "AXION_POLICY_UTF8_INVALID",
    "AXION_POLICY_SYNTAX",
    "AXION_POLICY_TOO_DEEP",
    "AXION_POLICY_ROOT_INVALID",
    "AXION_POLICY_UNKNOWN_CLAUSE",
    "AXION_POLICY_CLAUSE_INVALID",
    "AXION_POLICY_DUPLICATE_CLAUSE",
)

INTEGER_LIMIT_CLAUSES: Final = (
    "max-instructions",
    "max-recursion",
    "max-stack",
    "max-reflections",
    "max-meta-writes",
    "max-tensors",
    "max-tensor-elements",
    "max-symbolic-nodes",
    "max-symbolic-graphs",
    "max-infinite-forms",
)


class PolicyError(CallerError, ValueError):
    """Policy text was refused; ``code`` is one of :data:`POLICY_REASON_CODES`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class VerdictKind(StrEnum):
    ALLOW = "allow"
    WARN = "warn"
    DENY = "deny"
    DEFER = "defer"
    QUARANTINE = "quarantine"


@attrs.frozen
class Verdict:
    kind: VerdictKind = VerdictKind.DEFER
    reason: str = ""

    @property
    def permits(self) -> bool:
        """Allow and Warn let the action proceed; Deny, Defer and Quarantine do not."""
        return self.kind in (VerdictKind.ALLOW, VerdictKind.WARN)

    def to_dict(self) -> dict[str, str]:
        return {"decision": self.kind.value, "reason": self.reason}


@attrs.frozen
class SyscallContext:
    """What the engine is asked about (the public ``SyscallContext`` plus Path B fields)."""

    caller: str
    syscall: str
    pc: int = 0
    next_opcode: int | None = None
    instruction_count: int = 0
    recursion_depth: int = 0
    stack_usage: int = 0
    tier: int = 1
    reflection_count: int = 0
    meta_write_count: int = 0
    trace_reasons: tuple[str, ...] = ()
    final_authorization: bool = False
    operation: str | None = None
    provider: str | None = None
    payload_reference: str | None = None


# ---------------------------------------------------------------------------------------------
# Lexer and reader (iterative; no recursion)

# The string's quantifiers are possessive: its two branches start with different bytes and
# neither takes the closing quote, so nothing taken is ever given back to a match, and an
# unterminated 63 KB string costs no backtracking stack (10 MB with plain ``*``).
_TOKEN_RE: Final = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<open>[(\[])
  | (?P<close>[)\]])
  | (?P<string>"(?:[^"\\]++|\\["\\])*+")
  | (?P<float>[+-]?[0-9]+\.[0-9]+(?=[\s()\[\]]|$))
  | (?P<int>[+-]?[0-9]+(?=[\s()\[\]]|$))
  | (?P<symbol>[A-Za-z0-9_-]+(?=[\s()\[\]]|$))
    """,
    re.VERBOSE,
)


@attrs.frozen
class _Atom:
    kind: str  # "int" | "float" | "string" | "symbol"
    value: str | int


@attrs.frozen
class _Form:
    bracket: str  # "(" or "["
    items: tuple[_Form | _Atom, ...]


_Node = _Form | _Atom


def _atom(group: str | None, token: str) -> _Atom:
    """The atom a string, integer, decimal or symbol token reads as."""
    if group == "string":
        return _Atom("string", token[1:-1].replace('\\"', '"').replace("\\\\", "\\"))
    if group == "int":
        if len(token.lstrip("+-")) > MAX_INTEGER_DIGITS:
            raise PolicyError(
                "AXION_POLICY_SYNTAX", f"integer longer than {MAX_INTEGER_DIGITS} digits"
            )
        return _Atom("int", int(token))
    if group == "float":
        return _Atom("float", token)
    return _Atom("symbol", token)


def _read(text: str) -> _Form:
    stack: list[tuple[str, list[_Node]]] = []
    root: _Form | None = None
    position = 0
    while position < len(text):
        match = _TOKEN_RE.match(text, position)
        if match is None:
            raise PolicyError("AXION_POLICY_SYNTAX", f"unexpected character at offset {position}")
        position = match.end()
        group = match.lastgroup
        token = match.group()
        if group == "space":
            continue
        if root is not None:
            raise PolicyError("AXION_POLICY_ROOT_INVALID", "text after the root form")
        if group == "open":
            if len(stack) >= MAX_POLICY_DEPTH:
                raise PolicyError(
                    "AXION_POLICY_TOO_DEEP", f"nesting deeper than {MAX_POLICY_DEPTH}"
                )
            stack.append((token, []))
            continue
        if group == "close":
            if not stack:
                raise PolicyError("AXION_POLICY_SYNTAX", "unbalanced closing bracket")
            bracket, items = stack.pop()
            if {"(": ")", "[": "]"}[bracket] != token:
                raise PolicyError("AXION_POLICY_SYNTAX", "mismatched brackets")
            form = _Form(bracket, tuple(items))
            if stack:
                stack[-1][1].append(form)
            else:
                root = form
            continue
        if not stack:
            raise PolicyError("AXION_POLICY_ROOT_INVALID", "the root must be a (policy …) form")
        stack[-1][1].append(_atom(group, token))
    if stack:
        raise PolicyError("AXION_POLICY_SYNTAX", "unbalanced opening bracket")
    if root is None:
        raise PolicyError("AXION_POLICY_ROOT_INVALID", "empty policy text")
    return root


# ---------------------------------------------------------------------------------------------
# Policy model


@attrs.frozen
class FinalCheck:
    """A final-instruction requirement: ``needle`` must occur in a logged reason string."""

    clause: str
    needle: str

    def to_dict(self) -> dict[str, str]:
        return {"clause": self.clause, "needle": self.needle}


@attrs.frozen
class Policy:
    """A parsed Axion policy. Only the fields this VM can exercise change verdicts."""

    tier: int | None
    limits: Mapping[str, int]
    allowed_tensor_hashes: tuple[str, ...]
    allowed_ternary_model_hashes: tuple[str, ...]
    ternary_weight_domain_check: bool | None
    activation_ceiling: str | None
    final_checks: tuple[FinalCheck, ...]
    final_authorizations: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "tier": self.tier,
            "limits": dict(sorted(self.limits.items())),
            "final_checks": [check.to_dict() for check in self.final_checks],
            "final_authorizations": [
                {"operation": operation, "payload_reference": payload}
                for operation, payload in self.final_authorizations
            ],
        }


def _bad(clause: str, why: str) -> PolicyError:
    return PolicyError("AXION_POLICY_CLAUSE_INVALID", f"({clause} …): {why}")


def _head(form: _Node) -> str | None:
    if isinstance(form, _Form) and form.bracket == "(" and form.items:
        first = form.items[0]
        if isinstance(first, _Atom) and first.kind == "symbol":
            assert isinstance(first.value, str)
            return first.value
    return None


def _single(clause: str, form: _Form) -> _Atom:
    if len(form.items) != 2 or not isinstance(form.items[1], _Atom):
        raise _bad(clause, "expects exactly one value")
    return form.items[1]


def _nonnegative_int(clause: str, form: _Form) -> int:
    atom = _single(clause, form)
    if atom.kind != "int" or not isinstance(atom.value, int) or atom.value < 0:
        raise _bad(clause, "expects a non-negative integer")
    return atom.value


def _text_value(clause: str, atom: _Node) -> str:
    if not isinstance(atom, _Atom) or atom.kind not in ("string", "symbol", "int", "float"):
        raise _bad(clause, "expects a string, symbol or number value")
    return str(atom.value)


def _subclauses(
    clause: str, form: _Form, required: tuple[str, ...], optional: tuple[str, ...]
) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in form.items[1:]:
        name = _head(item)
        if name is None or name not in required + optional:
            raise _bad(clause, f"unknown or malformed sub-clause {name!r}")
        if name in values:
            raise _bad(clause, f"repeated sub-clause {name}")
        assert isinstance(item, _Form)
        if len(item.items) != 2:
            raise _bad(clause, f"({name} …) expects exactly one value")
        values[name] = _text_value(clause, item.items[1])
    missing = [name for name in required if name not in values]
    if missing:
        raise _bad(clause, f"missing sub-clause {missing[0]}")
    return values


def _hash_list(clause: str, form: _Form) -> tuple[str, ...]:
    if len(form.items) != 2 or not isinstance(form.items[1], _Form):
        raise _bad(clause, "expects one [ … ] list")
    vector = form.items[1]
    if vector.bracket != "[":
        raise _bad(clause, "expects one [ … ] list")
    values = []
    for item in vector.items:
        if not isinstance(item, _Atom) or item.kind != "string":
            raise _bad(clause, "list items are strings")
        assert isinstance(item.value, str)
        values.append(item.value)
    return tuple(values)


def parse_policy(text: str | bytes) -> Policy:
    """Parse Axion policy text; raise :class:`PolicyError` for anything not in the language."""
    root = _read(_policy_text(text))
    if root.bracket != "(" or _head(root) != "policy":
        raise PolicyError("AXION_POLICY_ROOT_INVALID", "the root must be a (policy …) form")
    parts = _PolicyParts()
    seen: set[str] = set()
    for form in root.items[1:]:
        name = _head(form)
        if name is None:
            raise PolicyError("AXION_POLICY_UNKNOWN_CLAUSE", "a clause is a (name …) form")
        assert isinstance(form, _Form)
        if name in seen and name not in _REPEATABLE:
            raise PolicyError("AXION_POLICY_DUPLICATE_CLAUSE", f"({name} …) given twice")
        seen.add(name)
        clause = _CLAUSES.get(name)
        if clause is None:
            raise PolicyError("AXION_POLICY_UNKNOWN_CLAUSE", f"unknown policy clause ({name} …)")
        clause(name, form, parts)
    return Policy(
        tier=parts.tier,
        limits=MappingProxyType(parts.limits),
        allowed_tensor_hashes=parts.tensor_hashes,
        allowed_ternary_model_hashes=parts.model_hashes,
        ternary_weight_domain_check=parts.domain_check,
        activation_ceiling=parts.ceiling,
        final_checks=tuple(parts.final_checks),
        final_authorizations=tuple(parts.final_authorizations),
    )


def _policy_text(text: object) -> str:
    """The policy text as ``str``: exact ``bytes`` decoded as UTF-8, either within the size cap."""
    if isinstance(text, bytes) and type(text) is bytes:
        if len(text) > MAX_POLICY_BYTES:
            raise PolicyError("AXION_POLICY_TOO_LARGE", f"more than {MAX_POLICY_BYTES} bytes")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise PolicyError("AXION_POLICY_UTF8_INVALID", "policy text is not UTF-8") from None
    if type(text) is not str:
        raise PolicyError("AXION_POLICY_NOT_TEXT", "policy text is str or bytes")
    if len(text.encode("utf-8", errors="surrogatepass")) > MAX_POLICY_BYTES:
        raise PolicyError("AXION_POLICY_TOO_LARGE", f"more than {MAX_POLICY_BYTES} bytes")
    return text


@attrs.define
class _PolicyParts:
    """What the clauses of one policy text have declared so far (a :class:`Policy` in making)."""

    tier: int | None = None
    limits: dict[str, int] = attrs.Factory(dict)
    tensor_hashes: tuple[str, ...] = ()
    model_hashes: tuple[str, ...] = ()
    domain_check: bool | None = None
    ceiling: str | None = None
    final_checks: list[FinalCheck] = attrs.Factory(list)
    final_authorizations: list[tuple[str, str]] = attrs.Factory(list)


# The clauses, one reader each: ``(name, form, parts)`` checks the clause's arguments (raising
# PolicyError) and records what it declares in ``parts``.


def _tier(name: str, form: _Form, parts: _PolicyParts) -> None:
    parts.tier = _nonnegative_int(name, form)


def _limit(name: str, form: _Form, parts: _PolicyParts) -> None:
    parts.limits[name] = _nonnegative_int(name, form)


def _tensor_hashes(name: str, form: _Form, parts: _PolicyParts) -> None:
    parts.tensor_hashes = _hash_list(name, form)


def _model_hashes(name: str, form: _Form, parts: _PolicyParts) -> None:
    parts.model_hashes = _hash_list(name, form)


def _domain_check(name: str, form: _Form, parts: _PolicyParts) -> None:
    atom = _single(name, form)
    if atom.kind != "symbol" or atom.value not in ("true", "false"):
        raise _bad(name, "expects true or false")
    parts.domain_check = atom.value == "true"


def _activation_ceiling(name: str, form: _Form, parts: _PolicyParts) -> None:
    if len(form.items) == 2 and isinstance(form.items[1], _Atom):
        atom = form.items[1]
        if atom.kind not in ("float", "int"):
            raise _bad(name, "expects a number")
        parts.ceiling = str(atom.value)
    else:
        values = _subclauses(name, form, (), ("max-nonzero-fraction", "scope", "mode-mask"))
        parts.ceiling = ",".join(f"{key}={value}" for key, value in sorted(values.items()))


def _loop(name: str, form: _Form, parts: _PolicyParts) -> None:
    values = _subclauses(
        name,
        form,
        ("id",),
        ("file", "line", "column", "annotated", "depth", "bound"),
    )
    parts.final_checks.append(FinalCheck(name, f"loop id={values['id']}"))


def _match_guard(name: str, form: _Form, parts: _PolicyParts) -> None:
    values = _subclauses(name, form, ("enum", "variant"), ("payload", "result"))
    needle = f"match guard {values['enum']}::{values['variant']}"
    if "payload" in values:
        needle += f" payload={values['payload']}"
    if "result" in values:
        if values["result"] not in ("pass", "fail"):
            raise _bad(name, "(result …) is pass or fail")
        needle += f" result={values['result']}"
    parts.final_checks.append(FinalCheck(name, needle))


def _segment_event(name: str, form: _Form, parts: _PolicyParts) -> None:
    values = _subclauses(name, form, ("segment", "action"), ("addr",))
    needle = f"segment {values['segment']} {values['action']}"
    if "addr" in values:
        needle += f" addr={values['addr']}"
    parts.final_checks.append(FinalCheck(name, needle))


def _reason_event(name: str, form: _Form, parts: _PolicyParts) -> None:
    values = _subclauses(name, form, ("reason",), ())
    parts.final_checks.append(FinalCheck(name, values["reason"]))


def _final_authorization(name: str, form: _Form, parts: _PolicyParts) -> None:
    values = _subclauses(name, form, ("operation", "payload"), ())
    if not re.fullmatch(r"[0-9a-f]{64}", values["payload"]):
        raise _bad(name, "(payload …) is 64 lowercase hex digits")
    if not re.fullmatch(r"[a-z][a-z0-9-]*", values["operation"]):
        raise _bad(name, "(operation …) is one exact operation name")
    parts.final_authorizations.append((values["operation"], values["payload"]))


_CLAUSES: Final[Mapping[str, Callable[[str, _Form, _PolicyParts], None]]] = MappingProxyType(
    {
        "tier": _tier,
        **dict.fromkeys(INTEGER_LIMIT_CLAUSES, _limit),
        "allowed-tensor-hashes": _tensor_hashes,
        "allowed-ternary-model-hashes": _model_hashes,
        "ternary-weight-domain-check": _domain_check,
        "activation-ceiling": _activation_ceiling,
        "loop": _loop,
        "require-match-guard": _match_guard,
        "require-segment-event": _segment_event,
        "require-axion-event": _reason_event,
        "require-alignment": _reason_event,
        "final-authorization": _final_authorization,
    }
)
_REPEATABLE: Final = frozenset(
    {
        "loop",
        "require-match-guard",
        "require-segment-event",
        "require-axion-event",
        "require-alignment",
        "final-authorization",
    }
)


def policy_digest(text: str | bytes) -> str:
    """``sha256:`` digest of the policy text's exact bytes (``str``: UTF-8, surrogates kept).

    Anything but ``str`` or exact ``bytes`` raises ``TypeError`` (never coerced).
    """
    if type(text) is str:
        data = text.encode("utf-8", errors="surrogatepass")
    elif type(text) is bytes:
        data = text
    else:
        raise TypeError("policy text is str or bytes")
    return digest_bytes(data)


# ---------------------------------------------------------------------------------------------
# Engine

_LIMIT_FIELDS: Final = (
    (
        "max-instructions",
        "instruction_count",
        "Instruction count limit exceeded: count={} limit={}",
    ),
    ("max-recursion", "recursion_depth", "Recursion depth limit exceeded: depth={} limit={}"),
    ("max-stack", "stack_usage", "Stack usage limit exceeded: usage={} limit={}"),
    ("max-reflections", "reflection_count", "Reflection limit exceeded: count={} limit={}"),
    ("max-meta-writes", "meta_write_count", "Meta-write limit exceeded: count={} limit={}"),
)


@attrs.frozen
class PolicyEngine:
    """Evaluates :class:`SyscallContext` values against one policy (or none, or a parse failure)."""

    policy: Policy | None = None
    parse_failure: PolicyError | None = None

    @classmethod
    def from_text(cls, text: str | bytes | None) -> PolicyEngine:
        """Parse ``text``; a parse failure yields a deny-everything engine (never raises)."""
        if text is None:
            return cls()
        try:
            return cls(policy=parse_policy(text))
        except PolicyError as error:
            return cls(parse_failure=error)

    def evaluate(self, context: SyscallContext) -> Verdict:
        if self.parse_failure is not None:
            return Verdict(
                VerdictKind.DENY, f"Axion policy parse failed: {self.parse_failure.message}"
            )
        remembered: Verdict | None = None
        if context.recursion_depth >= THETA7_RECURSION_CEILING:
            return Verdict(VerdictKind.DENY, "recursion ceiling exceeded (Theta-7)")
        if context.recursion_depth > THETA4_RECURSION_WARN:
            remembered = Verdict(VerdictKind.WARN, "recursion depth above 243 (Theta-4)")
        verdict = self._policy_verdict(context)
        if verdict.kind is VerdictKind.ALLOW and remembered is not None:
            return remembered
        return verdict

    def _policy_verdict(self, context: SyscallContext) -> Verdict:
        policy = self.policy
        if policy is None:
            if context.final_authorization:
                return Verdict(VerdictKind.DENY, "final authorization requires an installed policy")
            return Verdict(VerdictKind.ALLOW, "no policy installed")
        if policy.tier is not None and context.tier > policy.tier:
            return Verdict(
                VerdictKind.DENY, f"Tier limit exceeded: tier={context.tier} limit={policy.tier}"
            )
        for clause, field, message in _LIMIT_FIELDS:
            limit = policy.limits.get(clause)
            observed = getattr(context, field)
            if limit is not None and observed > limit:
                return Verdict(VerdictKind.DENY, message.format(observed, limit))
        if context.syscall == "step":
            return _step_verdict(policy, context)
        if context.syscall == "final-authorization" and context.final_authorization:
            return _final_authorization_verdict(policy, context)
        return Verdict(VerdictKind.DEFER, f"no rule for syscall {context.syscall!r}")


def _step_verdict(policy: Policy, context: SyscallContext) -> Verdict:
    """Rule 5: a step is allowed; the final one (``next_opcode == Halt``) only when every
    ``require-*`` and ``loop`` needle occurs in a logged reason."""
    if context.next_opcode == Opcode.HALT:
        for check in policy.final_checks:
            if not any(check.needle in reason for reason in context.trace_reasons):
                return Verdict(
                    VerdictKind.DENY,
                    f"final instruction check failed: ({check.clause}) "
                    f"{check.needle!r} not observed",
                )
    return Verdict(VerdictKind.ALLOW, "step allowed")


def _final_authorization_verdict(policy: Policy, context: SyscallContext) -> Verdict:
    """Rule 6: with ``final-authorization`` entries, the exact pair must be one of them."""
    if policy.final_authorizations:
        pair = (context.operation, context.payload_reference)
        if pair not in policy.final_authorizations:
            return Verdict(
                VerdictKind.DENY,
                "final authorization: operation/payload not authorized by policy",
            )
        return Verdict(VerdictKind.ALLOW, "final authorization: exact policy entry")
    return Verdict(VerdictKind.ALLOW, "final authorization: policy limits hold")
