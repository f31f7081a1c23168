"""Axion policy language: accepted clauses, fail-closed parsing, verdicts and Path B."""

from __future__ import annotations

import pytest

from mechanism.descriptor import (
    DEFAULT_POLICY,
    PolicyEngine,
    PolicyError,
    SyscallContext,
    VerdictKind,
    parse_policy,
    policy_digest,
)

from ._support import SAFETENSORS_REF, TISC_REF

ACCEPTED = [
    "(policy)",
    "(policy (tier 1) (max-instructions 4))",
    "(policy (max-recursion 10) (max-stack 3) (max-reflections 0) (max-meta-writes 0))",
    "(policy (max-tensors 1) (max-tensor-elements 4) (max-symbolic-nodes 1)"
    " (max-symbolic-graphs 1) (max-infinite-forms 0))",
    '(policy (allowed-tensor-hashes ["a" "b"]) (allowed-ternary-model-hashes []))',
    "(policy (ternary-weight-domain-check true))",
    "(policy (activation-ceiling 0.5))",
    "(policy (activation-ceiling (max-nonzero-fraction 0.25) (scope global) (mode-mask 3)))",
    '(policy (loop (id 1) (file "a.t81") (line 3) (column 4) (annotated true) (depth 1)'
    " (bound infinite)))",
    "(policy (require-match-guard (enum Option) (variant Some) (payload x) (result pass)))",
    '(policy (require-segment-event (segment stack) (action "alloc") (addr 4)))',
    '(policy (require-axion-event (reason "x")) (require-alignment (reason "y")))',
    "  (policy\n  (tier 2)\n)\n",
    DEFAULT_POLICY.decode(),
]

REFUSED = [
    ("unknown_clause", "(policy (allow-everything true))", "AXION_POLICY_UNKNOWN_CLAUSE"),
    ("unknown_clause_after_known", "(policy (tier 1) (frob 1))", "AXION_POLICY_UNKNOWN_CLAUSE"),
    ("bare_atom_clause", "(policy tier)", "AXION_POLICY_UNKNOWN_CLAUSE"),
    ("wrong_root", "(rules (tier 1))", "AXION_POLICY_ROOT_INVALID"),
    ("vector_root", "[policy]", "AXION_POLICY_ROOT_INVALID"),
    ("two_roots", "(policy) (policy)", "AXION_POLICY_ROOT_INVALID"),
    ("atom_before_root", "policy (tier 1)", "AXION_POLICY_ROOT_INVALID"),
    ("empty_text", "   ", "AXION_POLICY_ROOT_INVALID"),
    ("unbalanced_open", "(policy (tier 1)", "AXION_POLICY_SYNTAX"),
    ("unbalanced_close", ")(policy)", "AXION_POLICY_SYNTAX"),
    ("close_after_root", "(policy))", "AXION_POLICY_ROOT_INVALID"),
    ("mismatched_brackets", "(policy (tier 1])", "AXION_POLICY_SYNTAX"),
    ("stray_character", "(policy (tier 1) #)", "AXION_POLICY_SYNTAX"),
    ("comment_syntax", "(policy ; note\n)", "AXION_POLICY_SYNTAX"),
    ("negative_limit", "(policy (max-instructions -1))", "AXION_POLICY_CLAUSE_INVALID"),
    ("float_limit", "(policy (max-instructions 4.0))", "AXION_POLICY_CLAUSE_INVALID"),
    ("missing_value", "(policy (tier))", "AXION_POLICY_CLAUSE_INVALID"),
    ("two_values", "(policy (tier 1 2))", "AXION_POLICY_CLAUSE_INVALID"),
    ("bad_boolean", "(policy (ternary-weight-domain-check yes))", "AXION_POLICY_CLAUSE_INVALID"),
    ("hash_list_not_vector", '(policy (allowed-tensor-hashes "a"))', "AXION_POLICY_CLAUSE_INVALID"),
    (
        "unknown_subclause",
        '(policy (require-axion-event (because "x")))',
        "AXION_POLICY_CLAUSE_INVALID",
    ),
    (
        "missing_subclause",
        "(policy (require-segment-event (segment s)))",
        "AXION_POLICY_CLAUSE_INVALID",
    ),
    (
        "bad_match_result",
        "(policy (require-match-guard (enum E) (variant V) (result maybe)))",
        "AXION_POLICY_CLAUSE_INVALID",
    ),
    (
        "final_authorization_bad_payload",
        '(policy (final-authorization (operation run) (payload "*")))',
        "AXION_POLICY_CLAUSE_INVALID",
    ),
    (
        "final_authorization_pattern_operation",
        f'(policy (final-authorization (operation "r*") (payload "{TISC_REF}")))',
        "AXION_POLICY_CLAUSE_INVALID",
    ),
    ("duplicate_tier", "(policy (tier 1) (tier 2))", "AXION_POLICY_DUPLICATE_CLAUSE"),
    (
        "duplicate_limit",
        "(policy (max-instructions 4) (max-instructions 9))",
        "AXION_POLICY_DUPLICATE_CLAUSE",
    ),
    ("too_deep", "(policy " + "(" * 40 + ")" * 40 + ")", "AXION_POLICY_TOO_DEEP"),
    ("bad_utf8", b"(policy (tier \xff))", "AXION_POLICY_UTF8_INVALID"),
    ("too_large", "(policy " + " " * 70_000 + ")", "AXION_POLICY_TOO_LARGE"),
    ("not_text", 42, "AXION_POLICY_NOT_TEXT"),
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_policy_language_accepts_every_public_clause(text: str) -> None:
    parse_policy(text)


@pytest.mark.parametrize(
    ("text", "code"), [(t, c) for _, t, c in REFUSED], ids=[n for n, _, _ in REFUSED]
)
def test_policy_parse_refusals_have_stable_codes(text: object, code: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text)  # type: ignore[arg-type]
    assert caught.value.code == code


def test_hugely_nested_policy_text_never_raises_recursion_error() -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy("(" * 60_000)
    assert caught.value.code == "AXION_POLICY_TOO_DEEP"


def _step(count: int, opcode: int = 2, reasons: tuple[str, ...] = ()) -> SyscallContext:
    return SyscallContext(
        caller="t81vm",
        syscall="step",
        pc=count - 1,
        next_opcode=opcode,
        instruction_count=count,
        trace_reasons=reasons,
    )


def _final(operation: str = "run", payload: str = TISC_REF) -> SyscallContext:
    return SyscallContext(
        caller="descriptor-host",
        syscall="final-authorization",
        final_authorization=True,
        operation=operation,
        provider="t81vm",
        payload_reference=payload,
    )


def test_no_policy_allows_steps_but_denies_final_authorization() -> None:
    engine = PolicyEngine()
    assert engine.evaluate(_step(1)).kind is VerdictKind.ALLOW
    assert engine.evaluate(_final()).kind is VerdictKind.DENY


def test_max_instructions_denies_when_count_exceeds_limit() -> None:
    engine = PolicyEngine.from_text("(policy (max-instructions 3))")
    assert engine.evaluate(_step(3)).kind is VerdictKind.ALLOW
    verdict = engine.evaluate(_step(4))
    assert verdict.kind is VerdictKind.DENY
    assert verdict.reason == "Instruction count limit exceeded: count=4 limit=3"


def test_recursion_and_stack_limits_apply_in_order() -> None:
    engine = PolicyEngine.from_text("(policy (max-recursion 2) (max-stack 1))")
    context = SyscallContext(caller="t81vm", syscall="step", recursion_depth=3, stack_usage=5)
    assert engine.evaluate(context).reason.startswith("Recursion depth limit exceeded")


def test_tier_above_the_policy_tier_is_denied() -> None:
    engine = PolicyEngine.from_text("(policy (tier 0))")
    assert engine.evaluate(_step(1)).kind is VerdictKind.DENY


def test_ethics_theta7_denies_and_theta4_downgrades_allow_to_warn() -> None:
    engine = PolicyEngine.from_text("(policy)")
    deep = SyscallContext(caller="t81vm", syscall="step", recursion_depth=729)
    assert engine.evaluate(deep).kind is VerdictKind.DENY
    warm = SyscallContext(caller="t81vm", syscall="step", recursion_depth=244)
    assert engine.evaluate(warm).kind is VerdictKind.WARN


def test_require_clauses_are_checked_only_at_the_final_instruction() -> None:
    engine = PolicyEngine.from_text('(policy (require-axion-event (reason "audit")))')
    assert engine.evaluate(_step(1, opcode=2)).kind is VerdictKind.ALLOW
    assert engine.evaluate(_step(2, opcode=1)).kind is VerdictKind.DENY
    satisfied = _step(2, opcode=1, reasons=("warn: audit trail",))
    assert engine.evaluate(satisfied).kind is VerdictKind.ALLOW


def test_final_authorization_with_exact_entries_needs_an_exact_match() -> None:
    engine = PolicyEngine.from_text(DEFAULT_POLICY)
    assert engine.evaluate(_final()).kind is VerdictKind.ALLOW
    assert engine.evaluate(_final(operation="inspect")).kind is VerdictKind.DENY
    assert engine.evaluate(_final(payload=SAFETENSORS_REF)).kind is VerdictKind.DENY


def test_final_authorization_without_entries_is_governed_by_limits_only() -> None:
    engine = PolicyEngine.from_text("(policy (tier 1) (max-instructions 4))")
    assert engine.evaluate(_final()).kind is VerdictKind.ALLOW


def test_unknown_syscall_is_deferred() -> None:
    engine = PolicyEngine.from_text("(policy)")
    context = SyscallContext(caller="t81vm", syscall="promote")
    assert engine.evaluate(context).kind is VerdictKind.DEFER


def test_parse_failure_installs_a_deny_everything_engine() -> None:
    engine = PolicyEngine.from_text("(policy (unknown 1))")
    for context in (_step(1), _final()):
        verdict = engine.evaluate(context)
        assert verdict.kind is VerdictKind.DENY
        assert verdict.reason.startswith("Axion policy parse failed:")


def test_policy_digest_is_sha256_of_the_exact_text_bytes() -> None:
    assert policy_digest(b"(policy)") == policy_digest("(policy)")
    assert policy_digest(b"(policy)") != policy_digest(b"(policy) ")
