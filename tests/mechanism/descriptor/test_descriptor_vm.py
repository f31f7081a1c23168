"""T81VM: fixture semantics, reserved registers, traps, per-instruction Axion checks, limits."""

from __future__ import annotations

import attrs

from mechanism.descriptor import (
    FIXTURE_PROGRAM,
    REGISTER_COUNT,
    T81VM,
    Instruction,
    PolicyEngine,
    SyscallContext,
    Trap,
    Verdict,
    VerdictKind,
    run_program,
)

HALT = Instruction(1)


def load(register: int, value: int, kind: int = 0) -> Instruction:
    return Instruction(2, register, value, 0, kind)


def mul(target: int, left: int, right: int) -> Instruction:
    return Instruction(7, target, left, right)


@attrs.define
class RecordingEngine:
    """Records every context and answers with a fixed verdict per pc (Allow otherwise)."""

    verdicts: dict[int, Verdict] = attrs.field(factory=dict)
    contexts: list[SyscallContext] = attrs.field(factory=list)

    def evaluate(self, context: SyscallContext) -> Verdict:
        self.contexts.append(context)
        return self.verdicts.get(context.pc, Verdict(VerdictKind.ALLOW, "ok"))


def test_running_the_fixture_leaves_r42_equal_42() -> None:
    result = run_program(FIXTURE_PROGRAM)
    assert result.halted and result.trap is None
    assert result.registers[40:43] == (6, 7, 42)
    assert result.trace == ((0, "LoadImm"), (1, "LoadImm"), (2, "Mul"), (3, "Halt"))
    assert result.nonzero_registers() == {"r40": "6", "r41": "7", "r42": "42"}


def test_vm_has_243_registers_and_r242_is_valid_but_r243_is_a_decode_fault() -> None:
    assert REGISTER_COUNT == 243
    assert run_program([load(242, 5), HALT]).registers[242] == 5
    result = run_program([load(243, 5), HALT])
    assert result.trap is Trap.DECODE_FAULT and not result.halted


def test_writes_to_r0_and_r75_to_r80_are_silently_ignored() -> None:
    program = [load(0, 9), *(load(r, 9) for r in range(75, 81)), load(81, 9), HALT]
    vm = T81VM(program)
    result = vm.run()
    assert result.halted
    assert result.registers[0] == 0
    assert result.registers[81] == 9
    assert [result.registers[r] for r in (76, 77, 78, 79, 80)] == [0, 0, 0, 0, 0]
    assert result.registers[75] == result.instruction_count  # synced tick, not the written 9


def test_axion_is_consulted_before_every_instruction_with_incremented_count() -> None:
    engine = RecordingEngine()
    run_program(FIXTURE_PROGRAM, engine)
    seen = [
        (c.caller, c.syscall, c.pc, c.next_opcode, c.instruction_count) for c in engine.contexts
    ]
    assert seen == [
        ("t81vm", "step", 0, 2, 1),
        ("t81vm", "step", 1, 2, 2),
        ("t81vm", "step", 2, 7, 3),
        ("t81vm", "step", 3, 1, 4),
    ]


def test_deny_is_a_security_fault_and_the_instruction_is_not_executed() -> None:
    engine = RecordingEngine({2: Verdict(VerdictKind.DENY, "no multiplying")})
    result = run_program(FIXTURE_PROGRAM, engine)
    assert result.trap is Trap.SECURITY_FAULT
    assert result.registers[42] == 0
    assert result.axion_log == (
        {"pc": 2, "opcode": 7, "decision": "deny", "reason": "no multiplying"},
    )


def test_quarantine_also_stops_the_instruction() -> None:
    engine = RecordingEngine({0: Verdict(VerdictKind.QUARANTINE, "ceiling")})
    result = run_program(FIXTURE_PROGRAM, engine)
    assert result.trap is Trap.SECURITY_FAULT and result.registers[40] == 0


def test_warn_is_logged_and_execution_continues() -> None:
    engine = RecordingEngine({1: Verdict(VerdictKind.WARN, "careful")})
    result = run_program(FIXTURE_PROGRAM, engine)
    assert result.halted and result.registers[42] == 42
    assert result.axion_log == ({"pc": 1, "opcode": 2, "decision": "warn", "reason": "careful"},)
    assert engine.contexts[2].trace_reasons == ("careful",)


def test_allow_and_defer_are_not_logged() -> None:
    engine = RecordingEngine({0: Verdict(VerdictKind.DEFER, "later")})
    result = run_program(FIXTURE_PROGRAM, engine)
    assert result.halted and result.axion_log == ()


def test_max_instructions_3_denies_the_halt_step() -> None:
    engine = PolicyEngine.from_text("(policy (tier 1) (max-instructions 3))")
    result = run_program(FIXTURE_PROGRAM, engine)
    assert result.trap is Trap.SECURITY_FAULT and not result.halted
    assert result.trap_reason == "Instruction count limit exceeded: count=4 limit=3"
    assert result.registers[42] == 42  # Mul ran; only Halt was refused


def test_max_instructions_4_allows_the_fixture() -> None:
    engine = PolicyEngine.from_text("(policy (tier 1) (max-instructions 4))")
    assert run_program(FIXTURE_PROGRAM, engine).halted


def test_policy_that_requires_an_unlogged_event_denies_at_halt_only() -> None:
    engine = PolicyEngine.from_text('(policy (require-axion-event (reason "x")))')
    result = run_program(FIXTURE_PROGRAM, engine)
    assert result.trap is Trap.SECURITY_FAULT
    assert [entry["pc"] for entry in result.axion_log] == [3]


def test_unparsable_policy_denies_every_step() -> None:
    engine = PolicyEngine.from_text("(policy (frobnicate 1))")
    result = run_program(FIXTURE_PROGRAM, engine)
    assert result.trap is Trap.SECURITY_FAULT and result.instruction_count == 1
    assert result.trap_reason.startswith("Axion policy parse failed:")


def test_running_off_the_end_is_an_implicit_halt_still_checked_by_axion() -> None:
    engine = RecordingEngine()
    result = run_program(FIXTURE_PROGRAM[:3], engine)
    assert result.halted and result.trace[-1] == (3, "Halt")
    assert engine.contexts[-1].next_opcode == 1 and engine.contexts[-1].pc == 3


def test_implicit_halt_can_be_denied() -> None:
    engine = PolicyEngine.from_text("(policy (max-instructions 3))")
    result = run_program(FIXTURE_PROGRAM[:3], engine)
    assert result.trap is Trap.SECURITY_FAULT and not result.halted


def test_step_limit_stops_without_a_trap() -> None:
    result = run_program(FIXTURE_PROGRAM, max_steps=2)
    assert result.step_limit_exhausted and not result.halted and result.trap is None
    assert result.instruction_count == 2


def test_opcodes_outside_the_fixture_set_are_refused_not_guessed() -> None:
    for opcode in (0, 3, 5, 6, 8, 9, 200):
        result = run_program([load(1, 2), Instruction(opcode, 1, 1, 1), HALT])
        assert result.trap is Trap.UNIMPLEMENTED, opcode
        assert result.registers[1] == 2


def test_mul_on_a_bool_register_is_a_type_fault() -> None:
    result = run_program([load(1, 1, kind=1), load(2, 3), mul(3, 1, 2), HALT])
    assert result.trap is Trap.TYPE_FAULT


def test_mul_with_an_invalid_source_register_is_a_decode_fault() -> None:
    assert run_program([mul(3, 1, 300), HALT]).trap is Trap.DECODE_FAULT
    assert run_program([mul(-1, 1, 2), HALT]).trap is Trap.DECODE_FAULT


def test_mul_overflow_is_a_bounds_fault() -> None:
    result = run_program([load(1, 2**62), load(2, 4), mul(3, 1, 2), HALT])
    assert result.trap is Trap.BOUNDS_FAULT


def test_negative_products_are_plain_int64() -> None:
    result = run_program([load(1, -6), load(2, 7), mul(3, 1, 2), HALT])
    assert result.registers[3] == -42 and result.to_dict()["registers"]["r3"] == "-42"


def test_handle_literals_need_pools_and_are_decode_faults() -> None:
    assert run_program([load(1, 0, kind=5), HALT]).trap is Trap.DECODE_FAULT


def test_bool_literal_outside_0_1_is_a_type_fault() -> None:
    assert run_program([load(1, 2, kind=1), HALT]).trap is Trap.TYPE_FAULT
