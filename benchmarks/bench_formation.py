"""Benchmark: ``check_formation`` and ``produce_formation_certificate`` against a parsing floor.

Run: ``.venv/bin/python benchmarks/bench_formation.py [--rounds N] [--quick] [--json PATH]``.

Pairs: (a) the minimal one-ATOM pair; (b) 1,024-node pairs — 1,024 ATOMs (the largest subject
1,024 nodes can make: every other constructor's node is smaller) and a mix of all seven
constructors; (c) a 64-deep APPLY chain (the deepest admissible).

Two references, each measured in its own interleaved rounds (benchmarks/_harness.py):

* the **true floor** — SHA-256 and ``orjson.loads`` of the subject (the checker provably does
  both: the report carries the subject digest, and orjson is its parser) plus one comparison
  of the certificate with an equal copy (every check reads each certificate byte). No check
  can go below it; no goal is set against it, it shows what the checker costs beyond reading;
* the **goal reference** — SHA-256 and ``json.loads`` of both records, which the goals
  (≤ 1.6× on (b), ≤ 2× on (a)) were written against. It is a *baseline*, not a floor: the
  checker never parses or hashes an honest certificate (it compares it with the one expected
  certificate) and parses the subject with orjson, so a ratio below 1 would be real.

``evaluate`` is the session adapter called directly with the honest binding (its one-pass
preflight rehashes both items — no session vouches for them — and admits the subject's head,
which the pure check is handed).

**session decision / bare check** (goal ≤ 3.3× on the minimal pair): what the daemon
runs per pair (``daemon.server._evaluation.evaluate_pair``: a fresh evidence store holding
both items, a fresh ``VerificationSession``, ``evaluate(binding)``) against
``check_formation`` of the same pair, which it provably does too (a true floor).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
from typing import Any

import orjson
from _harness import Op, Report, at_most, main

from mechanism.canonical import canonical_bytes
from mechanism.formation import (
    PROFILE_DIGEST,
    FormationPathCertificateMechanism,
    check_formation,
    formation_binding,
    produce_formation_certificate,
)
from session import EvidenceStore, VerificationSession


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


GROUND = _digest(b"benchmark ground")
AGENCY = "sha256:41e3a27c8322874bb5634890d33cff2a9170f2906c83d45d9c7968836d7e482c"


def _subject(nodes: list[dict[str, Any]], root: int) -> bytes:
    return canonical_bytes(
        {
            "schema_version": "VSTD-TYPED-FORMATION-0.1",
            "profile_digest": PROFILE_DIGEST,
            "context": {"ground_artifact_digest": GROUND, "authority_axiom_agency_digest": AGENCY},
            "nodes": nodes,
            "root": root,
        }
    )


def _atom(n: int) -> dict[str, Any]:
    return {"tag": "ATOM", "payload_digest": _digest(n.to_bytes(4, "big"))}


def minimal() -> list[dict[str, Any]]:
    return [_atom(0)]


def atoms_1024() -> list[dict[str, Any]]:
    return [_atom(n) for n in range(1024)]


def mixed_1024() -> list[dict[str, Any]]:
    """Blocks of ATOM, APPLY, APPLY, APPLY_STEP x2, COMPOSE, ID, QUOTE, READ (9 nodes)."""
    nodes: list[dict[str, Any]] = []
    while len(nodes) + 9 <= 1024:
        b = len(nodes)
        nodes += [
            _atom(b),
            {"tag": "APPLY", "argument": b},
            {"tag": "APPLY", "argument": b + 1},
            {"tag": "APPLY_STEP", "source": b, "target": b + 1},
            {"tag": "APPLY_STEP", "source": b + 1, "target": b + 2},
            {"tag": "COMPOSE", "left": b + 3, "right": b + 4},
            {"tag": "ID", "at": b},
            {"tag": "QUOTE", "value": b + 5},
            {"tag": "READ", "code": b + 7},
        ]
    while len(nodes) < 1024:
        nodes.append(_atom(len(nodes)))
    return nodes


def chain_64() -> list[dict[str, Any]]:
    return [_atom(0), *({"tag": "APPLY", "argument": i} for i in range(63))]


def _floor(subject: bytes, certificate: bytes, copy: bytes) -> None:
    """The true floor: hash and parse the subject, read every certificate byte once."""
    hashlib.sha256(subject).digest()
    orjson.loads(subject)
    assert certificate == copy


def _reference(subject: bytes, certificate: bytes) -> None:
    """The goal reference (a baseline): hash and parse both records with json.loads."""
    hashlib.sha256(subject).digest()
    hashlib.sha256(certificate).digest()
    json.loads(subject)
    json.loads(certificate)


def session_decision(
    mechanism: FormationPathCertificateMechanism, binding: Any, items: tuple[bytes, bytes]
) -> object:
    """What the daemon runs per pair (``evaluate_pair``): store, session, evaluate."""
    store = EvidenceStore()
    for item in items:
        store.add(item)
    verification = VerificationSession(store)
    verification.register(mechanism)
    return verification.evaluate(binding)


def run(report: Report, args: argparse.Namespace) -> None:
    cases = [
        ("(a) minimal one-ATOM", minimal(), 0, at_most(2.0)),
        ("(b) 1024 ATOMs", atoms_1024(), 1023, at_most(1.6)),
        ("(b) 1024 mixed", mixed_1024(), 1016, at_most(1.6)),
        ("(c) 64-deep chain", chain_64(), 63, None),
    ]
    print("true floor = sha256(subject) + orjson.loads(subject) + certificate == an equal copy")
    print("reference  = sha256 + json.loads of both records (the goals' reference; a baseline)")
    for name, nodes, root, goal in cases:
        subject = _subject(nodes, root)
        certificate = produce_formation_certificate(subject)
        copy = bytes(bytearray(certificate))  # equal bytes, another object: a real comparison
        report_ = check_formation(subject, certificate)
        assert report_["status"] == "CHECKED", report_
        print(f"{name}: subject {len(subject)} B, certificate {len(certificate)} B")
        binding = formation_binding(subject, certificate)
        mechanism = FormationPathCertificateMechanism()
        check = functools.partial(check_formation, subject, certificate)
        report.compare_many(
            functools.partial(_floor, subject, certificate, copy),
            [
                Op(f"check_formation {name}", check),
                # produce reads only the subject, and hashes none of it.
                Op(f"produce {name}", functools.partial(produce_formation_certificate, subject),
                   true_floor=False),
                Op(f"evaluate {name}",
                   functools.partial(mechanism.evaluate, binding, (subject, certificate))),
            ],
            floor_name="true floor (sha256 + orjson.loads of the subject, read the certificate)",
            rounds=args.rounds,
        )  # fmt: skip
        if name.startswith("(a)"):
            decided = session_decision(mechanism, binding, (subject, certificate))
            assert decided.outcome.value == "PASS", decided  # type: ignore[attr-defined]
            report.compare(
                f"session decision {name}",
                functools.partial(session_decision, mechanism, binding, (subject, certificate)),
                check,
                floor_name="check_formation of the same pair",
                goal=at_most(3.3),
                rounds=args.rounds,
            )
        report.compare(
            f"check_formation {name} (goal reference)",
            check,
            functools.partial(_reference, subject, certificate),
            floor_name="sha256 + json.loads of both",
            goal=goal,
            true_floor=False,
            rounds=args.rounds,
        )


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=41, help="interleaved rounds per pair")


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__, configure=_options))
