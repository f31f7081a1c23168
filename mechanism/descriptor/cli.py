"""``evidenced descriptor``: check, make and run T81 experiment-descriptor inputs from files.

Commands (the :mod:`cli` contract: one JSON document on stdout, messages on stderr):

* ``descriptor check DESCRIPTOR PAYLOAD --operation OP [--policy FILE] [--allowlist FILE]``
  builds the honest binding a caller would pin (:func:`descriptor_binding`: both expected hashes
  computed from the given files, the requested operation, the host configuration digest),
  evaluates it in a fresh session holding both items, and prints the ``EvaluatedProposition``
  as canonical JSON plus one newline. Exit 0 PASS, 1 FAIL, 3 UNKNOWN. Without ``--policy`` /
  ``--allowlist`` the embedded default configuration is used (the daemon's default
  ``descriptor`` session uses the same). ``--max-descriptor-bytes``, ``--max-item-bytes`` and
  ``--max-steps`` may only lower the compiled limits (otherwise usage error, exit 2). A pair that
  cannot be bound at all (identical descriptor and payload bytes: the session protocol refuses
  duplicate evidence references) exits 65 (``BINDING_UNBUILDABLE``). It needs the
  ``descriptor`` extra (numpy, safetensors): without it, exit 69 (``EXTRA_MISSING``, the one
  line naming ``pip install 'evidenced[descriptor]'``) before any file is read. ``make`` and
  ``run-tisc`` need no extra.
* ``descriptor make PAYLOAD [--out FILE | --raw]`` prints ``{"descriptor": TEXT, "digest",
  "size"}`` for the canonical six-line descriptor of a fixture payload; ``--out FILE`` writes
  the exact bytes to FILE (stdout: the same document plus ``"written"``); ``--raw`` prints the
  exact bytes instead of JSON (the artifact explicitly asked for). Exit 0; 65 if the payload is
  not one of the two compiled fixtures (``DESCRIPTOR_UNKNOWN_PAYLOAD``).
* ``descriptor run-tisc FILE [--policy FILE] [--max-steps N]`` strictly decodes a TISC text
  file, runs it on the T81VM under the Axion policy (default: the embedded default policy) and
  prints the program, the policy digest (and parse error, if any) and the VM trace as JSON.
  Exit 0 halted without trap, 1 trapped, 3 step limit exhausted, 65 undecodable TISC.

Files are read with :func:`cli.read_input` (``-`` is stdin): a missing or unreadable one is 66,
one of more than 16 MiB is 65 with the cap named (``/dev/zero`` included). Files below the cap
reach the mechanism, whose own bounds decide (a descriptor over 4,096 bytes is
``DESCRIPTOR_TOO_LARGE``).
"""

from __future__ import annotations

import argparse
import hashlib
from typing import Any

from mechanism.canonical import canonical_bytes
from session import (
    CeilingError,
    EvidenceBindingError,
    EvidenceStore,
    MechanismOutcome,
    VerificationSession,
    cli,
    lower_only,
    require_extra,
)
from session.cli import Exit, RejectedInput, UsageError

from ._axion import PolicyEngine, policy_digest
from ._codec import MAX_DESCRIPTOR_BYTES, DescriptorError, encode_descriptor
from ._defaults import DEFAULT_ALLOWLIST, DEFAULT_POLICY
from ._mechanism import MAX_ITEM_BYTES, DescriptorAuthorizationMechanism, descriptor_binding
from ._tisc import TiscError, decode_program
from ._vm import DEFAULT_MAX_STEPS, run_program

__all__ = ["register"]

_OUTCOME_EXIT = {
    MechanismOutcome.PASS: Exit.OK,
    MechanismOutcome.FAIL: Exit.FAIL,
    MechanismOutcome.UNKNOWN: Exit.UNKNOWN,
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


def _check(args: argparse.Namespace) -> int:
    require_extra("descriptor")  # the mechanism inspects weights with numpy and safetensors
    descriptor = cli.read_input(args.descriptor)
    payload = cli.read_input(args.payload)
    policy = cli.read_input(args.policy) if args.policy is not None else DEFAULT_POLICY
    allowlist = cli.read_input(args.allowlist) if args.allowlist is not None else DEFAULT_ALLOWLIST
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
        raise RejectedInput(f"cannot bind this pair: {error}", code="BINDING_UNBUILDABLE") from None
    store = EvidenceStore()
    store.add(descriptor)
    store.add(payload)
    session = VerificationSession(store)
    session.register(mechanism)
    result = session.evaluate(binding)
    document = result.to_dict()
    cli.emit_bytes(canonical_bytes(document) + b"\n", document=document)
    if result.details:
        cli.say(f"{result.outcome.value} {result.details}")
    return _OUTCOME_EXIT[MechanismOutcome(result.outcome)]


def _make(args: argparse.Namespace) -> int:
    if args.raw and args.out is not None:
        raise UsageError("--raw and --out exclude each other")
    payload = cli.read_input(args.payload)
    try:
        descriptor = encode_descriptor(payload)
    except DescriptorError as error:
        raise RejectedInput(str(error), code="DESCRIPTOR_UNKNOWN_PAYLOAD") from None
    if args.raw:
        cli.emit_bytes(descriptor)
        return Exit.OK
    document: dict[str, Any] = {
        "descriptor": descriptor.decode("ascii"),
        "digest": "sha256:" + hashlib.sha256(descriptor).hexdigest(),
        "size": len(descriptor),
    }
    if args.out is not None:
        cli.write_output(args.out, descriptor)
        document["written"] = args.out
    cli.emit(document)
    return Exit.OK


def _run_tisc(args: argparse.Namespace) -> int:
    text = cli.read_input(args.file)
    policy = cli.read_input(args.policy) if args.policy is not None else DEFAULT_POLICY
    try:
        program = decode_program(text)
    except TiscError as error:
        raise RejectedInput(str(error), code="TISC_UNDECODABLE") from None
    engine = PolicyEngine.from_text(policy)
    result = run_program(program, engine, max_steps=args.max_steps)
    document = {
        "program": [instruction.to_dict() for instruction in program],
        "policy_digest": policy_digest(policy),
        "policy_error": None if engine.parse_failure is None else str(engine.parse_failure),
        "max_steps": args.max_steps,
        "result": result.to_dict(),
    }
    cli.emit(document)
    if engine.parse_failure is not None:
        cli.say(str(engine.parse_failure))
    if result.trap is not None:
        cli.say(f"trap {result.trap.value}: {result.trap_reason}")
        return Exit.FAIL
    if result.step_limit_exhausted:
        cli.say("step limit exhausted")
        return Exit.UNKNOWN
    return Exit.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "descriptor", help="T81 experiment descriptors: check, make, run-tisc"
    )
    commands = parser.add_subparsers(dest="descriptor_command", metavar="SUBCOMMAND")

    check = commands.add_parser(
        "check", help="evaluate a descriptor/payload pair (PASS/FAIL/UNKNOWN)"
    )
    check.add_argument("descriptor", metavar="DESCRIPTOR", help="descriptor file ('-': stdin)")
    check.add_argument("payload", metavar="PAYLOAD", help="payload file")
    check.add_argument(
        "--operation", required=True, metavar="OP", help="the operation to authorize, e.g. run"
    )
    check.add_argument("--policy", metavar="FILE", help="Axion policy text (default: embedded)")
    check.add_argument("--allowlist", metavar="FILE", help="allowlist JSON (default: embedded)")
    check.add_argument(
        "--max-descriptor-bytes",
        type=_lowered(MAX_DESCRIPTOR_BYTES),
        default=MAX_DESCRIPTOR_BYTES,
        metavar="N",
        help="lower the descriptor size limit",
    )
    check.add_argument(
        "--max-item-bytes",
        type=_lowered(MAX_ITEM_BYTES),
        default=MAX_ITEM_BYTES,
        metavar="N",
        help="lower the per-item size limit",
    )
    check.add_argument(
        "--max-steps",
        type=_lowered(DEFAULT_MAX_STEPS),
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help="lower the VM step limit",
    )
    check.set_defaults(handler=_check)

    make = commands.add_parser("make", help="the canonical descriptor for a fixture payload")
    make.add_argument("payload", metavar="PAYLOAD", help="payload file ('-': stdin)")
    make.add_argument("--out", metavar="FILE", help="write the exact descriptor bytes here")
    make.add_argument(
        "--raw", action="store_true", help="print the exact descriptor bytes instead of JSON"
    )
    make.set_defaults(handler=_make)

    run = commands.add_parser("run-tisc", help="run a TISC text file on the T81VM; print the trace")
    run.add_argument("file", metavar="FILE", help="TISC text file ('-': stdin)")
    run.add_argument("--policy", metavar="FILE", help="Axion policy text (default: embedded)")
    run.add_argument(
        "--max-steps",
        type=_lowered(DEFAULT_MAX_STEPS),
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help="lower the VM step limit",
    )
    run.set_defaults(handler=_run_tisc)
