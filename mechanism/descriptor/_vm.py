"""T81VM: a faithful interpreter for the fixture's instruction set (``t81vm`` provider, ``run``).

Rules (``docs/spec/descriptor.md`` §3.1–§3.3, the 243-register public VM):

* State: 243 int64 registers R0…R242 with value tags, zero/negative/positive flags, ``pc``,
  ``instruction_count``, the Axion log, the trace, the halted flag and the trap.
* Reserved registers: R0 reads as 0; writes to R0 and R75–R80 are silently ignored; after every
  executed instruction R75 = instruction_count and R79 = recursion depth (0); R76, R77, R78 and R80
  are held at 0 (no lineage, entropy, constitutional-mask or auxiliary value is computed here).
* ``step()``: fetch (``pc >= len(program)`` is an implicit Halt), then ``pc += 1`` and
  ``instruction_count += 1`` **before** the Axion pre-check; Axion is consulted for every
  instruction (caller ``t81vm``, syscall ``step``, the instruction's pc, ``next_opcode``,
  ``instruction_count``, recursion depth 0, stack usage 0, tier 1, ``trace_reasons``):
  Deny (and Quarantine) → logged ``deny``, trap ``SecurityFault``, not executed; Warn → logged
  ``warn``, continue; Allow/Defer → continue, not logged.
* Then operand validation and execution:
  - Halt (1): sets halted; operands ignored.
  - LoadImm (2): A must be a register (else ``DecodeFault``); literal kind Int or Bool (Bool: value
    0 or 1, else ``TypeFault``); handle kinds need constant pools, which this VM does not have →
    ``DecodeFault``. Writes B through the reserved-register guard; flags from the value.
  - Mul (7): A, B, C registers (else ``DecodeFault``); both sources tagged Int (else
    ``TypeFault``); a product outside int64 → ``BoundsFault`` (no BigInt path); R[A] = R[B]·R[C]
    tagged Int; flags from the result.
  - Any other opcode is refused, never guessed at: trap ``Unimplemented``.
* ``run(max_steps)`` steps until halted or trapped; exhausting ``max_steps`` first stops with
  ``step_limit_exhausted`` (no trap, not halted).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Final, Protocol

import attrs

from ._axion import PolicyEngine, SyscallContext, Verdict, VerdictKind
from ._tisc import Instruction, LiteralKind, Opcode

__all__ = [
    "DEFAULT_MAX_STEPS",
    "REGISTER_COUNT",
    "RESERVED_REGISTERS",
    "T81VM",
    "AxionEngine",
    "Trap",
    "VmResult",
    "run_program",
]

REGISTER_COUNT: Final = 243
RESERVED_REGISTERS: Final = frozenset({0, 75, 76, 77, 78, 79, 80})
DEFAULT_MAX_STEPS: Final = 100_000
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_SUPPORTED: Final = frozenset({Opcode.HALT, Opcode.LOAD_IMM, Opcode.MUL})


class AxionEngine(Protocol):
    """What the VM consults before every instruction (``PolicyEngine`` or a host's own)."""

    def evaluate(self, context: SyscallContext) -> Verdict: ...


class Trap(StrEnum):
    NONE = "None"
    DECODE_FAULT = "DecodeFault"
    TYPE_FAULT = "TypeFault"
    BOUNDS_FAULT = "BoundsFault"
    STACK_FAULT = "StackFault"
    DIVISION_FAULT = "DivisionFault"
    SECURITY_FAULT = "SecurityFault"
    TIER_FAULT = "TierFault"
    SHAPE_FAULT = "ShapeFault"
    TRAP_INSTRUCTION = "TrapInstruction"
    UNIMPLEMENTED = "Unimplemented"
    ASSERTION_FAILED = "AssertionFailed"
    ETHICS_VIOLATION = "EthicsViolation"
    CAPABILITY_DENIED = "CapabilityDenied"
    ACTIVATION_FAULT = "ActivationFault"


class Tag(StrEnum):
    INT = "Int"
    BOOL = "Bool"


def opcode_name(opcode: int) -> str:
    try:
        return {"LOAD_IMM": "LoadImm"}.get(Opcode(opcode).name, Opcode(opcode).name.title())
    except ValueError:
        return f"Opcode{opcode}"


@attrs.frozen
class VmResult:
    """The observable outcome of a run; ``to_dict`` is a canonical-codec value."""

    halted: bool
    trap: Trap | None
    trap_reason: str
    step_limit_exhausted: bool
    instruction_count: int
    pc: int
    trace: tuple[tuple[int, str], ...]
    axion_log: tuple[dict[str, Any], ...]
    registers: tuple[int, ...]
    tags: tuple[Tag, ...]

    def nonzero_registers(self) -> dict[str, str]:
        return {
            f"r{index}": str(value)
            for index, value in enumerate(self.registers)
            if value != 0 and index not in RESERVED_REGISTERS
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "halted": self.halted,
            "trap": None if self.trap is None else self.trap.value,
            "trap_reason": self.trap_reason,
            "step_limit_exhausted": self.step_limit_exhausted,
            "instruction_count": self.instruction_count,
            "trace": [[pc, name] for pc, name in self.trace],
            "axion_log": list(self.axion_log),
            "registers": self.nonzero_registers(),
        }


class T81VM:
    """One interpreter instance for one program and one Axion engine."""

    def __init__(self, program: Sequence[Instruction], engine: AxionEngine | None = None) -> None:
        self.program = tuple(program)
        self.engine: AxionEngine = engine if engine is not None else PolicyEngine()
        self.registers = [0] * REGISTER_COUNT
        self.tags = [Tag.INT] * REGISTER_COUNT
        self.flags = {"zero": True, "negative": False, "positive": False}
        self.pc = 0
        self.instruction_count = 0
        self.halted = False
        self.trap: Trap | None = None
        self.trap_reason = ""
        self.trace: list[tuple[int, str]] = []
        self.axion_log: list[dict[str, Any]] = []

    # -- helpers ---------------------------------------------------------------------------
    def _fault(self, trap: Trap, reason: str) -> Trap:
        self.trap = trap
        self.trap_reason = reason
        return trap

    def _set_register(self, index: int, value: int, tag: Tag) -> None:
        if index in RESERVED_REGISTERS:
            return  # the public setter silently ignores writes to R0 and R75–R80
        self.registers[index] = value
        self.tags[index] = tag

    def _set_flags(self, value: int) -> None:
        self.flags = {"zero": value == 0, "negative": value < 0, "positive": value > 0}

    def _sync_system_registers(self) -> None:
        self.registers[0] = 0
        self.registers[75] = self.instruction_count
        self.registers[79] = 0

    @staticmethod
    def _is_register(value: int) -> bool:
        return 0 <= value < REGISTER_COUNT

    # -- execution -------------------------------------------------------------------------
    def step(self) -> Trap | None:
        if self.halted or self.trap is not None:
            return self.trap
        pc = self.pc
        implicit = pc >= len(self.program)
        instruction = Instruction(Opcode.HALT.value) if implicit else self.program[pc]
        self.pc += 1
        self.instruction_count += 1
        context = SyscallContext(
            caller="t81vm",
            syscall="step",
            pc=pc,
            next_opcode=instruction.opcode,
            instruction_count=self.instruction_count,
            trace_reasons=tuple(str(entry["reason"]) for entry in self.axion_log),
        )
        verdict = self.engine.evaluate(context)
        if verdict.kind in (VerdictKind.DENY, VerdictKind.QUARANTINE):
            self.axion_log.append(
                {
                    "pc": pc,
                    "opcode": instruction.opcode,
                    "decision": "deny",
                    "reason": verdict.reason,
                }
            )
            return self._fault(Trap.SECURITY_FAULT, verdict.reason)
        if verdict.kind is VerdictKind.WARN:
            self.axion_log.append(
                {
                    "pc": pc,
                    "opcode": instruction.opcode,
                    "decision": "warn",
                    "reason": verdict.reason,
                }
            )
        trap = self._execute(instruction)
        if trap is not None:
            return trap
        self.trace.append((pc, "Halt" if implicit else opcode_name(instruction.opcode)))
        self._sync_system_registers()
        return None

    def _execute(self, instruction: Instruction) -> Trap | None:
        opcode = instruction.opcode
        if opcode not in _SUPPORTED:
            return self._fault(
                Trap.UNIMPLEMENTED,
                f"opcode {opcode} is outside the supported set (Halt, LoadImm, Mul)",
            )
        if opcode == Opcode.HALT:
            self.halted = True
            return None
        if opcode == Opcode.LOAD_IMM:
            if not self._is_register(instruction.a):
                return self._fault(Trap.DECODE_FAULT, f"LoadImm: invalid register {instruction.a}")
            if instruction.literal_kind == LiteralKind.INT:
                tag = Tag.INT
            elif instruction.literal_kind == LiteralKind.BOOL:
                if instruction.b not in (0, 1):
                    return self._fault(Trap.TYPE_FAULT, "LoadImm: Bool literal is 0 or 1")
                tag = Tag.BOOL
            else:
                return self._fault(
                    Trap.DECODE_FAULT,
                    f"LoadImm: literal kind {instruction.literal_kind} needs a constant pool",
                )
            self._set_register(instruction.a, instruction.b, tag)
            self._set_flags(instruction.b)
            return None
        # Mul
        for register in (instruction.a, instruction.b, instruction.c):
            if not self._is_register(register):
                return self._fault(Trap.DECODE_FAULT, f"Mul: invalid register {register}")
        if self.tags[instruction.b] is not Tag.INT or self.tags[instruction.c] is not Tag.INT:
            return self._fault(Trap.TYPE_FAULT, "Mul: sources must be Int")
        product = self.registers[instruction.b] * self.registers[instruction.c]
        if not _INT64_MIN <= product <= _INT64_MAX:
            return self._fault(Trap.BOUNDS_FAULT, "Mul: product outside int64")
        self._set_register(instruction.a, product, Tag.INT)
        self._set_flags(product)
        return None

    def run(self, max_steps: int = DEFAULT_MAX_STEPS) -> VmResult:
        exhausted = False
        steps = 0
        while not self.halted and self.trap is None:
            if steps >= max_steps:
                exhausted = True
                break
            self.step()
            steps += 1
        return VmResult(
            halted=self.halted,
            trap=self.trap,
            trap_reason=self.trap_reason,
            step_limit_exhausted=exhausted,
            instruction_count=self.instruction_count,
            pc=self.pc,
            trace=tuple(self.trace),
            axion_log=tuple(self.axion_log),
            registers=tuple(self.registers),
            tags=tuple(self.tags),
        )


def run_program(
    program: Sequence[Instruction],
    engine: AxionEngine | None = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> VmResult:
    """Run ``program`` to halt, trap or step-limit exhaustion."""
    return T81VM(program, engine).run(max_steps)
