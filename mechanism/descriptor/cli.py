"""``evidenced descriptor``: check, make and run T81 experiment-descriptor inputs from files.

Commands (stdout carries exactly one document; messages are one line on stderr):

* ``descriptor check DESCRIPTOR PAYLOAD --operation OP [--policy FILE] [--allowlist FILE]``
  builds the honest binding a caller would pin (:func:`descriptor_binding`: both expected hashes
  computed from the given files, the requested operation, the host configuration digest),
  evaluates it in a fresh session holding both items, and prints the ``EvaluatedProposition``
  as canonical JSON plus one newline. Exit 0 PASS, 1 FAIL, 3 UNKNOWN. Without ``--policy`` /
  ``--allowlist`` the embedded default configuration is used (the daemon's default
  ``descriptor`` session uses the same). ``--max-descriptor-bytes``, ``--max-item-bytes`` and
  ``--max-steps`` may only lower the compiled limits (otherwise usage error, exit 2). A pair that
  cannot be bound at all (identical descriptor and payload bytes: the session protocol refuses
  duplicate evidence references) exits 65 with a one-line message.
* ``descriptor make PAYLOAD`` prints the canonical six-line descriptor bytes, exactly (raw
  ASCII, the documented exception to JSON output). Exit 0; 65 if the payload is not one of the
  two compiled fixtures.
* ``descriptor run-tisc FILE [--policy FILE] [--max-steps N]`` strictly decodes a TISC text
  file, runs it on the T81VM under the Axion policy (default: the embedded default policy) and
  prints the program, the policy digest (and parse error, if any) and the VM trace as JSON.
  Exit 0 halted without trap, 1 trapped, 3 step limit exhausted, 65 undecodable TISC.

Unreadable files exit 65 with a one-line message (the dispatcher handles ``OSError``); so does
a file of more than 16 MiB (:func:`session.read_capped`, the cap is named), ``/dev/zero``
included. Files below the cap reach the mechanism, whose own bounds decide (a descriptor over
4,096 bytes is ``DESCRIPTOR_TOO_LARGE``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mechanism.canonical import canonical_bytes
from session import (
    CeilingError,
    EvidenceBindingError,
    EvidenceStore,
    MechanismOutcome,
    VerificationSession,
    lower_only,
    read_capped,
)

from ._axion import PolicyEngine, policy_digest
from ._codec import MAX_DESCRIPTOR_BYTES, DescriptorError, encode_descriptor
from ._defaults import DEFAULT_ALLOWLIST, DEFAULT_POLICY
from ._mechanism import MAX_ITEM_BYTES, DescriptorAuthorizationMechanism, descriptor_binding
from ._tisc import TiscError, decode_program
from ._vm import DEFAULT_MAX_STEPS, run_program

__all__ = ["register"]

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_UNKNOWN = 3
EXIT_REJECTED = 65

_OUTCOME_EXIT = {
    MechanismOutcome.PASS: EXIT_OK,
    MechanismOutcome.FAIL: EXIT_FAIL,
    MechanismOutcome.UNKNOWN: EXIT_UNKNOWN,
}


def _lowered(ceiling: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        try:
            return lower_only("the limit", value, ceiling)
        except CeilingError:
            raise argparse.ArgumentTypeError(f"may only lower the limit (0 … {ceiling})") from None

    return parse


def _read(path: str) -> bytes:
    return read_capped(path)


def _check(args: argparse.Namespace) -> int:
    descriptor = _read(args.descriptor)
    payload = _read(args.payload)
    policy = _read(args.policy) if args.policy is not None else DEFAULT_POLICY
    allowlist = _read(args.allowlist) if args.allowlist is not None else DEFAULT_ALLOWLIST
    mechanism = DescriptorAuthorizationMechanism(
        policy,
        allowlist,
        max_descriptor_bytes=args.max_descriptor_bytes,
        max_item_bytes=args.max_item_bytes,
        max_steps=args.max_steps,
    )
    try:
        binding = descriptor_binding(
            descriptor, payload, operation=args.operation, mechanism=mechanism
        )
    except EvidenceBindingError as error:
        # e.g. identical descriptor and payload bytes: two equal evidence references cannot be
        # bound (the session protocol refuses them), so there is no proposition to evaluate.
        sys.stderr.write(f"descriptor check: cannot bind this pair: {error}\n")
        return EXIT_REJECTED
    store = EvidenceStore()
    store.add(descriptor)
    store.add(payload)
    session = VerificationSession(store)
    session.register(mechanism)
    result = session.evaluate(binding)
    sys.stdout.buffer.write(canonical_bytes(result.to_dict()) + b"\n")
    sys.stdout.flush()
    if result.details:
        sys.stderr.write(f"descriptor check: {result.outcome.value} {result.details}\n")
    return _OUTCOME_EXIT[MechanismOutcome(result.outcome)]


def _make(args: argparse.Namespace) -> int:
    payload = _read(args.payload)
    try:
        descriptor = encode_descriptor(payload)
    except DescriptorError as error:
        sys.stderr.write(f"descriptor make: {error}\n")
        return EXIT_REJECTED
    sys.stdout.buffer.write(descriptor)
    sys.stdout.flush()
    return EXIT_OK


def _run_tisc(args: argparse.Namespace) -> int:
    text = _read(args.file)
    policy = _read(args.policy) if args.policy is not None else DEFAULT_POLICY
    try:
        program = decode_program(text)
    except TiscError as error:
        sys.stderr.write(f"descriptor run-tisc: {error}\n")
        return EXIT_REJECTED
    engine = PolicyEngine.from_text(policy)
    result = run_program(program, engine, max_steps=args.max_steps)
    document = {
        "program": [instruction.to_dict() for instruction in program],
        "policy_digest": policy_digest(policy),
        "policy_error": None if engine.parse_failure is None else str(engine.parse_failure),
        "max_steps": args.max_steps,
        "result": result.to_dict(),
    }
    sys.stdout.write(json.dumps(document, sort_keys=True, indent=2) + "\n")
    sys.stdout.flush()
    if engine.parse_failure is not None:
        sys.stderr.write(f"descriptor run-tisc: {engine.parse_failure}\n")
    if result.trap is not None:
        sys.stderr.write(f"descriptor run-tisc: trap {result.trap.value}: {result.trap_reason}\n")
        return EXIT_FAIL
    if result.step_limit_exhausted:
        sys.stderr.write("descriptor run-tisc: step limit exhausted\n")
        return EXIT_UNKNOWN
    return EXIT_OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "descriptor", help="T81 experiment descriptors: check, make, run-tisc"
    )
    commands = parser.add_subparsers(dest="descriptor_command", metavar="SUBCOMMAND")

    check = commands.add_parser(
        "check", help="evaluate a descriptor/payload pair (PASS/FAIL/UNKNOWN)"
    )
    check.add_argument("descriptor", metavar="DESCRIPTOR")
    check.add_argument("payload", metavar="PAYLOAD")
    check.add_argument("--operation", required=True, metavar="OP")
    check.add_argument("--policy", metavar="FILE", help="Axion policy text (default: embedded)")
    check.add_argument("--allowlist", metavar="FILE", help="allowlist JSON (default: embedded)")
    check.add_argument(
        "--max-descriptor-bytes",
        type=_lowered(MAX_DESCRIPTOR_BYTES),
        default=MAX_DESCRIPTOR_BYTES,
        metavar="N",
    )
    check.add_argument(
        "--max-item-bytes", type=_lowered(MAX_ITEM_BYTES), default=MAX_ITEM_BYTES, metavar="N"
    )
    check.add_argument(
        "--max-steps", type=_lowered(DEFAULT_MAX_STEPS), default=DEFAULT_MAX_STEPS, metavar="N"
    )
    check.set_defaults(handler=_check)

    make = commands.add_parser("make", help="print the canonical descriptor for a fixture payload")
    make.add_argument("payload", metavar="PAYLOAD")
    make.set_defaults(handler=_make)

    run = commands.add_parser("run-tisc", help="run a TISC text file on the T81VM; print the trace")
    run.add_argument("file", metavar="FILE")
    run.add_argument("--policy", metavar="FILE", help="Axion policy text (default: embedded)")
    run.add_argument(
        "--max-steps", type=_lowered(DEFAULT_MAX_STEPS), default=DEFAULT_MAX_STEPS, metavar="N"
    )
    run.set_defaults(handler=_run_tisc)
