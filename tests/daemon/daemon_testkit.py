"""Shared parts for daemon tests: real mechanisms for odd behaviours, bindings, frames.

Imported as ``daemon_testkit`` (conftest puts this folder on the path).

Every server in these tests is a real trio server on 127.0.0.1 port 0 or a Unix socket in a
short temporary directory, talked to with the real client or a raw socket.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import select
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import testdata

from daemon.wire._protocol import MAGIC, encode_header
from session import (
    BoundProposition,
    BytesDigestMechanism,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
)

ROOT = testdata.REPO
FORMATION_FIXTURES = testdata.fixture("formation", directory=True)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def bytes_binding(
    evidence: bytes,
    *,
    expected: str | None = None,
    mechanism_digest: str | None = None,
    bounds: EvidenceBounds | None = None,
) -> BoundProposition:
    """The honest ``vstd.bytes.sha256`` binding for one item (or a lying ``expected``)."""
    ref = sha(evidence)
    return BoundProposition(
        subject_id="item",
        predicate="bytes.sha256",
        expected=ref if expected is None else expected,
        mechanism_id=BytesDigestMechanism.mechanism_id,
        mechanism_digest=mechanism_digest or BytesDigestMechanism.mechanism_digest,
        evidence_refs=(ref,),
        trust_roots=("test-root",),
        bounds=bounds or EvidenceBounds(1, 1 << 20),
    )


def process_gate() -> Any:
    """An event shared with forked evaluation workers (``set`` here, ``wait`` there)."""
    return multiprocessing.get_context("fork").Event()


class SlowMechanism:
    """PASSes after sleeping ``seconds`` or once ``gate`` (a :func:`process_gate`) opens.

    It runs in the server's forked worker processes, so its ``started`` count lives in shared
    memory and its gate is a process-shared event."""

    mechanism_id = "test.slow"
    mechanism_digest = sha(b"test.slow")

    def __init__(self, seconds: float = 0.0, gate: Any = None) -> None:
        self.seconds = seconds
        self.gate = gate
        self._started = multiprocessing.get_context("fork").Value("i", 0)

    @property
    def started(self) -> int:
        return int(self._started.value)

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        with self._started.get_lock():
            self._started.value += 1
        if self.gate is not None:
            self.gate.wait(30)
        if self.seconds:
            time.sleep(self.seconds)
        return MechanismDecision(MechanismOutcome.PASS, "slow but fine", {"slept": True})


class UnencodableMechanism:
    """Returns observations that cannot be put on the wire (a set)."""

    mechanism_id = "test.unencodable"
    mechanism_digest = sha(b"test.unencodable")

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        return MechanismDecision(MechanismOutcome.PASS, "", {"bad": {1, 2}})


class OffVocabularyMechanism:
    """Returns an outcome outside PASS/FAIL/UNKNOWN: the server's own code then fails."""

    mechanism_id = "test.off_vocabulary"
    mechanism_digest = sha(b"test.off_vocabulary")

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        return MechanismDecision("MAYBE", "")  # type: ignore[arg-type]


def binding_for(mechanism: Any, evidence: Sequence[bytes]) -> BoundProposition:
    refs = tuple(sha(item) for item in evidence)
    return BoundProposition(
        subject_id="subject",
        predicate="anything",
        expected=True,
        mechanism_id=mechanism.mechanism_id,
        mechanism_digest=mechanism.mechanism_digest,
        evidence_refs=refs,
        trust_roots=("test-root",),
        bounds=EvidenceBounds(len(refs), 1 << 20),
    )


def frame(header: dict[str, Any], payload: bytes = b"") -> bytes:
    raw = encode_header(header)
    return MAGIC + struct.pack(">I", len(raw)) + raw + payload


HELLO = frame({"kind": "hello", "versions": [1], "client": "raw-test"})


def formation_pair(name: str) -> tuple[bytes, bytes]:
    return (
        (FORMATION_FIXTURES / f"{name}.subject.json").read_bytes(),
        (FORMATION_FIXTURES / f"{name}.certificate.json").read_bytes(),
    )


def start_serve(*args: str, **popen: Any) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """``evidenced serve ARGS`` as a process (text pipes, from the repository root, and any
    other ``subprocess.Popen`` arguments), once it printed its readiness line (parsed)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        **popen,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        _, err = process.communicate(timeout=10)
        raise AssertionError(f"daemon did not start: {err}")
    return process, json.loads(line)


def read_stderr_until(process: subprocess.Popen[Any], pattern: bytes, seconds: float = 60) -> bytes:
    """The process's stderr, read straight from its pipe (so ``communicate`` later reads the
    rest), up to the end of the first line matching ``pattern``; AssertionError if none comes
    within ``seconds`` or the stream ends first.

    For a test that sends a daemon a signal and then another: two signals sent one after the
    other are not always handled in that order (the kernel may hand them to two threads of
    the daemon, the later one first), so the second waits for the line the first one caused."""
    assert process.stderr is not None
    descriptor = process.stderr.fileno()
    line = re.compile(pattern + rb"[^\n]*\n")
    seen = b""
    deadline = time.monotonic() + seconds
    while not line.search(seen):
        remaining = deadline - time.monotonic()
        readable, _, _ = select.select([descriptor], [], [], max(0.0, remaining))
        chunk = os.read(descriptor, 65536) if readable else b""
        if not chunk:
            raise AssertionError(f"no {pattern!r} line on stderr: {seen!r}")
        seen += chunk
    return seen
