"""Synthetic, chain-valid audit logs shaped like the daemon's (for demos, benchmarks and tests).

Rules (the contract):

1. Every line is rendered and sealed by :func:`daemon.audit._audit.render_line` with
   ``seq``/``prev``
   continuing the chain, so :func:`daemon.verify_log` reports the file ``INTACT``. The daemon
   never uses this module.
2. Lines follow docs/audit-log.md field for field (``decision``, ``refusal`` with ``BUSY`` and
   other codes, ``daemon_start``, ``daemon_stop``, ``audit_overflow``); evidence digests and
   sizes are those of the shipped formation/descriptor fixture pairs when given, else fixed.
3. Deterministic: the same ``seed``, ``start`` and counts give the same bytes.
4. Written in a stream (constant memory), one decision every ``spacing`` seconds on average,
   with a restart every ``restart_every`` lines and a busy burst and an overflow now and then.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from daemon.audit._audit import GENESIS, render_line
from session.canon import digest_bytes

__all__ = ["synthetic_lines", "write_synthetic_log"]

_FORMATION: Final = "vstd.typed_formation.checked.0.1"
_DESCRIPTOR: Final = "t81.experiment_descriptor.authorized.0.1"
_MECHANISM_DIGEST: Final = digest_bytes(b"synthetic mechanism")


def _evidence(rng: random.Random) -> list[dict[str, Any]]:
    return [
        {"digest": "sha256:" + rng.randbytes(32).hex(), "size": rng.randint(200, 4000)}
        for _ in range(2)
    ]


def _decision(rng: random.Random, number: int, slow: bool) -> dict[str, Any]:
    session = rng.choices(["formation", "descriptor", "formation-ci"], [6, 3, 1])[0]
    roll = rng.random()
    if session.startswith("formation"):
        if roll < 0.86:
            outcome, details, codes = "PASS", "", []
        elif roll < 0.96:
            outcome, details, codes = (
                "FAIL",
                "FORMATION_CHECK_INVALID",
                [
                    rng.choice(
                        [
                            "FORMATION_CERTIFICATE_BINDING_INVALID",
                            "FORMATION_RULE_INVALID",
                            "FORMATION_CERTIFICATE_STEP_INVALID",
                        ]
                    )
                ],
            )
        else:
            outcome, details, codes = (
                "UNKNOWN",
                "FORMATION_PROFILE_UNSUPPORTED",
                ["FORMATION_PROFILE_UNSUPPORTED"],
            )
        mechanism = _FORMATION
    else:
        if roll < 0.9:
            outcome, details, codes = "PASS", "", []
        else:
            outcome, details, codes = (
                "FAIL",
                "DESCRIPTOR_IDENTITY_MISMATCH",
                ["DESCRIPTOR_IDENTITY_MISMATCH"],
            )
        mechanism = _DESCRIPTOR
    evaluate = int(rng.lognormvariate(12.2 if session == "descriptor" else 11.5, 0.35))
    if slow:
        evaluate *= 6
    receive = int(rng.lognormvariate(10.5, 0.4))
    requester = (
        {
            "transport": "unix",
            "pid": rng.randint(1000, 9000),
            "uid": rng.choice([0, 1000, 1001]),
            "gid": 0,
        }
        if rng.random() < 0.7
        else {
            "transport": "tcp",
            "peer": f"127.0.0.{rng.randint(1, 4)}:{rng.randint(30000, 60000)}",
        }
    )
    return {
        "event": "decision",
        "decision_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "request_id": number,
        "session": session,
        "mechanism_id": mechanism,
        "mechanism_digest": _MECHANISM_DIGEST,
        "binding_digest": rng.randbytes(32).hex(),
        "evidence": _evidence(rng),
        "outcome": outcome,
        "details": details,
        "reason_codes": codes,
        "observed_evidence_bytes": rng.randint(400, 8000),
        "metrics": {
            "receive_ns": receive,
            "evaluate_ns": evaluate,
            "total_ns": receive + evaluate + int(rng.lognormvariate(10.0, 0.3)),
        },
        "requester": requester,
    }


def _refusal(rng: random.Random, code: str) -> dict[str, Any]:
    return {
        "event": "refusal",
        "decision_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "code": code,
        "fault": "service" if code == "BUSY" else "peer",
        "message": "64 requests in flight; retry later" if code == "BUSY" else code.lower(),
        "request_id": rng.randint(1, 1000),
        "requester": {"transport": "tcp", "peer": f"127.0.0.9:{rng.randint(30000, 60000)}"},
        "session": "formation",
    }


def synthetic_lines(
    count: int,
    *,
    start: datetime = datetime(2026, 11, 29, 8, 0, tzinfo=UTC),
    spacing: float = 1.5,
    restart_every: int = 4000,
    seed: int = 7,
) -> Iterator[bytes]:
    """``count`` sealed lines (each ending with ``\\n``), rules 1–4."""
    rng = random.Random(seed)
    seq, head = 0, GENESIS
    now = start
    busy_burst = 0

    def seal(fields: dict[str, Any]) -> bytes:
        nonlocal seq, head
        seq += 1
        fields = dict(fields, seq=seq, prev=head, timestamp=now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        line = render_line(fields)
        head = line[-73:-2].decode("ascii")
        return line + b"\n"

    while seq < count:
        if seq % restart_every == 0:
            if seq:
                yield seal({"event": "daemon_stop", "decisions": 0, "refusals": 0})
                now += timedelta(seconds=rng.uniform(20, 90))
            yield seal(
                {
                    "event": "daemon_start",
                    "server": "evidenced/0.1.0",
                    "pid": rng.randint(1000, 9000),
                    "listen": {"tcp": None, "unix": "/run/evidenced.sock"},
                    "sessions": [],
                    "durability": "fsync",
                }
            )
            continue
        now += timedelta(seconds=rng.expovariate(1 / spacing))
        if busy_burst == 0 and rng.random() < 0.002:
            busy_burst = rng.randint(5, 25)
        if busy_burst:
            busy_burst -= 1
            yield seal(_refusal(rng, "BUSY"))
            continue
        roll = rng.random()
        if roll < 0.0008:
            yield seal(
                {"event": "audit_overflow", "dropped": rng.randint(1, 40), "dropped_total": 0}
            )
        elif roll < 0.03:
            code = rng.choice(
                ["EVIDENCE_BYTES_EXCEEDED", "BINDING_INVALID", "UNKNOWN_SESSION", "IDLE_TIMEOUT"]
            )
            yield seal(_refusal(rng, code))
        else:
            yield seal(_decision(rng, seq, slow=now.hour % 6 == 3))


def write_synthetic_log(path: str | Path, count: int, **options: Any) -> int:
    """Write :func:`synthetic_lines` to ``path``; return the byte count."""
    written = 0
    with Path(path).open("wb") as handle:
        batch: list[bytes] = []
        for line in synthetic_lines(count, **options):
            batch.append(line)
            if len(batch) >= 4096:
                written += handle.write(b"".join(batch))
                batch.clear()
        written += handle.write(b"".join(batch))
    return written
