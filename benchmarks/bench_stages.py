"""Per-stage CPU of one decision, in process: where the daemon's time per request goes.

Run: ``python benchmarks/bench_stages.py [--quick] [--json PATH] [--clock cpu|wall]``.

The job is the peer comparison's (a Go server doing the same work): a 64-byte payload
and the honest ``bytes-sha256`` binding of it, session ``bytes``. Each stage is the daemon's
own code for that stage, called directly with what the previous stage produced, in
interleaved rounds (benchmarks/_harness.py; the default clock here is this thread's CPU time,
steady on a busy machine):

==================  ==============================================================
stage               what is timed
==================  ==============================================================
head                HTTP: a fresh :class:`HttpServerCodec` fed the request head,
                    to its :class:`RequestHead` (routing and framing checks
                    included). EVD1: a fresh ``ServerConnection`` after its hello,
                    fed the submit frame's header, to its :class:`Submit`.
body                HTTP only: the JSON body parsed, base64 decoded
                    (``daemon.server._http_body``). EVD1: the raw items read back.
binding             ``binding_from_wire`` (stage 2 of the pipeline).
admission           the pipeline's bounds check and capacity slot taken and given
                    back (stages 1 and 3).
decision            ``evaluate_pair``: a fresh store and session, the mechanism.
audit render+chain  ``AuditLog._render`` of the decision line the pipeline writes
                    (timestamp, chain fields, sorted JSON, seal).
answer encode       the Decision event to the transport's bytes (HTTP: JSON body and
                    the framed answer; EVD1: the frame).
commit              write(2) + fsync(2) of the line, alone (c=1), and per line of a
                    64-line group commit (c=64).
send                the answer written to a socketpair and read back by the peer.
==================  ==============================================================

The row ``one request, in sequence`` runs the counted stages above (head to send, the commit
aside) one after the other, as one request does, in the same rounds. Each stage alone in a
loop runs with the interpreter's caches and the CPU's branch history all its own; one request
runs them in turn, and costs more than their sum (the figure ``in sequence / sum of its
stages``). That ratio is most of the gap between this table's sum and the CPU per decision of
the daemon on the wire.

For an instruction counter (timings differ with the caches, instructions do not),
``--repeat sequence N`` and ``--repeat alone N`` run the HTTP stages of N requests, one request
after the other or each stage N times in turn, and ``--repeat STAGE N`` one stage (a name of
the table, e.g. ``head``), and time nothing:
``valgrind --tool=cachegrind --cache-sim=no python benchmarks/bench_stages.py --repeat
sequence 3000`` against the same with 1000 gives the instructions of 2,000 requests.

Rows marked ``before:`` time the implementation a stage had before the per-stage cuts, in the
same rounds (the h11-only head, the cattrs binding, the binding digested by ``json.dumps``
alone, the structlog processor pipeline), so a cut is a ratio measured in one run; they are
not part of the sum.

What is *not* here: the event loop's scheduling, trio's checkpoints and the thread hop of the
group commit (the gap between the sum and the peer benchmark's CPU per decision is theirs).
Never asserts on time.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import structlog
import trio
from _harness import Report, _calibrate, _sampler, interleave, main

from daemon.audit._audit import AuditLog
from daemon.audit._audit_format import seal
from daemon.config._config import parse_config
from daemon.config._hosting import HostedSession
from daemon.server import _http_codec
from daemon.server._evaluation import evaluate_pair
from daemon.server._http_body import JSON_TYPE, body_parser
from daemon.server._http_codec import HttpServerCodec, RequestHead, _frame
from daemon.server._peers import PeerLedger
from daemon.server._pipeline import Pipeline, _Request
from daemon.tlog._names import DecisionIds
from daemon.wire._binding import binding_from_wire, binding_from_wire_structured
from daemon.wire._protocol import (
    Decision,
    Hello,
    ServerConnection,
    Submit,
    encode_frame,
    encode_header,
)
from session import BoundProposition, NoOptions
from session._bytes_provider import PROVIDER
from session.canon import core_digest

CONFIG = """
[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
max_evidence_bytes = 4096
"""
PAYLOAD = bytes(range(64))
GROUP = 64
HANDSHAKE = "(handshake)"
BEFORE = "before: "
SEQUENCE = "one request, in sequence"
#: The stages :func:`sequence` runs, in order (every counted stage but the commits).
IN_SEQUENCE = (
    "head",
    "body (JSON, base64)",
    "binding",
    "admission",
    "decision",
    "audit render+chain",
    "answer encode",
    "send",
)


class Job:
    """One request of the peer benchmark's job and what each stage needs to start from."""

    def __init__(self, directory: Path) -> None:
        config = parse_config(CONFIG, base=directory, source="bench")
        sessions, _ = config.build_sessions()
        self.session: HostedSession = sessions[0]
        self.wire = PROVIDER.honest_binding([PAYLOAD], NoOptions()).to_dict()
        self.binding = binding_from_wire(self.wire)
        self.items = (PAYLOAD,)
        self.body = encode_header(
            {"binding": self.wire, "evidence": [{"base64": base64.b64encode(PAYLOAD).decode()}]}
        )
        self.http_head = (
            b"POST /v1/sessions/bytes/decisions HTTP/1.1\r\nHost: 127.0.0.1:7434\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: " + str(len(self.body)).encode() + b"\r\n\r\n"
        )
        self.submit = Submit(1, "bytes", self.wire, (len(PAYLOAD),))
        self.hello = encode_frame(Hello(versions=(1,), client="bench").to_header())
        self.evd_frame = encode_frame(self.submit.to_header(), self.items)
        self.pipeline = Pipeline(
            sessions={"bytes": self.session},
            audit=Any,  # type: ignore[arg-type]  # stages 1 and 3 use neither
            transparency=None,
            evaluator=Any,  # type: ignore[arg-type]
            retention=Any,  # type: ignore[arg-type]
            capacity=trio.CapacityLimiter(512),
            peers=PeerLedger(connection_cap=64, in_flight_cap=64),
            counters=Counter(),
            session_list=[],
            health=dict,
        )
        self.evaluated = evaluate_pair(self.session, self.binding, self.items)
        self.log = AuditLog.open(directory / "audit.jsonl", durability="fsync")
        self.line = self.log._render("decision", self.fields())
        self.commit_fd = os.open(directory / "commit.jsonl", os.O_WRONLY | os.O_CREAT, 0o600)
        self.left, self.right = socket.socketpair()

    def close(self) -> None:
        self.log.close_sync()
        os.close(self.commit_fd)
        self.left.close()
        self.right.close()

    def fields(self, evaluated: Any = None) -> dict[str, Any]:
        """The decision line's fields, as the pipeline's stage 7 passes them (of ``evaluated``,
        an ``evaluate_pair`` result; default the job's own pair's)."""
        result, _, refs = self.evaluated if evaluated is None else evaluated
        wire_result = result.to_dict()
        return {
            "decision_id": DecisionIds(None)(),
            "request_id": 1,
            "session": "bytes",
            "mechanism_id": result.mechanism_id,
            "mechanism_digest": wire_result["mechanism_digest"],
            "binding_digest": result.binding_digest,
            "evidence": [{"digest": refs[0], "size": len(PAYLOAD)}],
            "outcome": wire_result["outcome"],
            "details": result.details,
            "reason_codes": [],
            "observed_evidence_bytes": result.observed_evidence_bytes,
            "metrics": {"receive_ns": 41_000, "evaluate_ns": 12_000, "total_ns": 97_000},
            "requester": {"transport": "http", "peer": "127.0.0.1:50000"},
        }

    def decision(self) -> Decision:
        result = self.evaluated[0]
        return Decision(1, DecisionIds(None)(), "bytes", result.to_dict(), 7, "sha256:" + "a" * 64)


# -------------------------------------------------------------------------- the stages


def http_head(job: Job) -> RequestHead:
    codec = HttpServerCodec()
    codec.receive_data(job.http_head)
    head = codec.next_event()
    assert isinstance(head, RequestHead)
    return head


def http_head_h11(job: Job) -> RequestHead:
    """Before: every head through h11 (the codec's llhttp path switched off)."""
    fast = _http_codec._parse_fast
    _http_codec._parse_fast = lambda head: None
    try:
        return http_head(job)
    finally:
        _http_codec._parse_fast = fast


def http_body(job: Job) -> object:
    parser = body_parser(JSON_TYPE, None, max_items=1, max_bytes=4096, max_binding_bytes=65536)
    parser.feed(job.body)
    return parser.finish()


def evd_hello(job: Job) -> ServerConnection:
    """A connection's handshake (measured to be subtracted from :func:`evd_head`)."""
    connection = ServerConnection()
    connection.receive_data(job.hello)
    connection.next_event()
    return connection


def evd_head(job: Job) -> Submit:
    connection = evd_hello(job)
    connection.receive_data(job.evd_frame)
    event = connection.next_event()
    assert isinstance(event, Submit)
    connection.accept_evidence()
    connection.next_event()  # the evidence
    return event


def binding(job: Job) -> object:
    return binding_from_wire(job.wire)


def binding_cattrs(job: Job) -> object:
    """Before: the binding structured by the cattrs converter."""
    return binding_from_wire_structured(job.wire)


_PIPELINE = (
    structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
    structlog.processors.JSONRenderer(serializer=orjson.dumps, option=orjson.OPT_SORT_KEYS),
)


def audit_render_pipeline(job: Job) -> bytes:
    """Before: the line through structlog's processors (stamper, chain fields, renderer,
    seal), as ``AuditLog._render`` ran them per line."""
    line: Any = dict(job.fields())
    line["event"] = "decision"
    line = _PIPELINE[0](None, "info", line)
    line["seq"] = 8
    line["prev"] = "sha256:" + "0" * 64
    body = _PIPELINE[1](None, "info", line)
    assert isinstance(body, bytes)
    sealed, _ = seal(body)
    return sealed + b"\n"


def admission(job: Job) -> None:
    request = _Request(job.submit, {}, "127.0.0.1:1")
    job.pipeline.bounds(request)
    job.pipeline.acquire_capacity(request)
    job.pipeline.release_capacity(request)


def decision(job: Job) -> object:
    return evaluate_pair(job.session, job.binding, job.items)


def decision_json_digest(job: Job) -> object:
    """Before: the binding digested through ``json.dumps`` only (``canon.core_digest``)."""
    fast = BoundProposition.digest
    BoundProposition.digest = _core_digest  # type: ignore[method-assign,assignment]
    try:
        return decision(job)
    finally:
        BoundProposition.digest = fast  # type: ignore[method-assign]


def _core_digest(binding: BoundProposition) -> str:
    return core_digest(binding.to_dict())


def audit_render(job: Job) -> bytes:
    return job.log._render("decision", job.fields())


def http_answer(job: Job) -> bytes:
    body = encode_header(job.decision().to_header())
    return _frame(200, body, "application/json", (), close=False)


def evd_answer(job: Job) -> bytes:
    return encode_frame(job.decision().to_header())


def commit_one(job: Job) -> None:
    os.write(job.commit_fd, job.line)
    os.fsync(job.commit_fd)


def commit_group(job: Job) -> None:
    os.write(job.commit_fd, job.line * GROUP)
    os.fsync(job.commit_fd)


def send(job: Job, answer: bytes) -> None:
    job.left.sendall(answer)
    remaining = len(answer)
    while remaining:
        remaining -= len(job.right.recv(65536))


def sequence(job: Job, transport: str) -> None:
    """One request's stages in turn (:data:`IN_SEQUENCE`), each on what the job holds."""
    if transport == "http":
        http_head(job)
        http_body(job)
    else:
        evd_head(job)
    binding(job)
    admission(job)
    decision(job)
    audit_render(job)
    send(job, http_answer(job) if transport == "http" else evd_answer(job))


# -------------------------------------------------------------------------- the table


def stages(job: Job, transport: str) -> list[tuple[str, Callable[[], object], int]]:
    """(stage, call, units per call): a group commit's cost is per line."""
    answer = http_answer(job) if transport == "http" else evd_answer(job)
    head = http_head if transport == "http" else evd_head
    encode = http_answer if transport == "http" else evd_answer
    table: list[tuple[str, Callable[[], object], int]] = [("head", lambda: head(job), 1)]
    if transport == "http":
        table.append(("body (JSON, base64)", lambda: http_body(job), 1))
    table += [
        ("binding", lambda: binding(job), 1),
        ("admission", lambda: admission(job), 1),
        ("decision", lambda: decision(job), 1),
        ("audit render+chain", lambda: audit_render(job), 1),
        ("answer encode", lambda: encode(job), 1),
        ("send", lambda: send(job, answer), 1),
        ("commit, per line of 64", lambda: commit_group(job), GROUP),
        ("commit, one line", lambda: commit_one(job), 1),
        (SEQUENCE, lambda: sequence(job, transport), 1),
    ]
    if transport == "http":
        table.insert(1, (BEFORE + "head (h11 only)", lambda: http_head_h11(job), 1))
    table += [
        (BEFORE + "binding (cattrs)", lambda: binding_cattrs(job), 1),
        (BEFORE + "decision (json.dumps digest)", lambda: decision_json_digest(job), 1),
        (BEFORE + "audit render (structlog pipeline)", lambda: audit_render_pipeline(job), 1),
    ]
    if transport == "evd1":  # the handshake, once per connection, is not the request's
        table.append((HANDSHAKE, lambda: evd_hello(job), 1))
    return table


def measure(report: Report, job: Job, transport: str) -> None:
    table = stages(job, transport)
    clock = report._clock
    rounds, seconds = (5, 2.0) if report.quick else (15, 8.0)
    samplers = []
    for _, call, _ in table:
        loops, _ = _calibrate(call, 0.004, clock)
        samplers.append(_sampler(call, loops, clock))
    samples = interleave(samplers, rounds=rounds, max_seconds=seconds)
    medians = {}
    handshake = [0.0] * len(samples[0])
    if table[-1][0] == HANDSHAKE:
        handshake = samples.pop()
        table.pop()
    for (name, _, units), values in zip(table, samples, strict=True):
        if name in ("head", SEQUENCE):  # per round: without the connection's handshake
            values = [v - h for v, h in zip(values, handshake, strict=True)]
        per = sorted(values)[len(values) // 2] / units
        medians[name] = per
        report.value(f"{transport}: {name}", per, "s", spread=[v / units for v in values])
    counted = {k: v for k, v in medians.items() if not k.startswith(BEFORE) and k != SEQUENCE}
    grouped = sum(v for k, v in counted.items() if k != "commit, one line")
    single = sum(v for k, v in counted.items() if k != "commit, per line of 64")
    report.value(f"{transport}: sum, group commit of 64", grouped, "s")
    report.value(f"{transport}: sum, commit alone", single, "s")
    parts = sum(v for k, v in medians.items() if k in IN_SEQUENCE)
    report.value(f"{transport}: in sequence / sum of its stages", medians[SEQUENCE] / parts, "x")
    print(f"\n{transport}: per-stage {report.clock} time per decision")
    for name, value in medians.items():
        counts = name in counted and name != "commit, one line"
        share = f"{value / grouped * 100:5.1f} %" if counts else ""
        print(f"  {name:<42} {value * 1e6:8.1f} µs  {share}")
    print(f"  {'sum (group commit)':<42} {grouped * 1e6:8.1f} µs")
    print(f"  {'in sequence / sum of its stages':<42} {medians[SEQUENCE] / parts:8.2f}×")


def repeat(job: Job, arrangement: str, count: int) -> None:
    """The HTTP stages of ``count`` requests (``--repeat``), untimed: ``sequence`` (one
    request after the other), ``alone`` (each stage ``count`` times in turn) or one stage of
    :data:`IN_SEQUENCE` by name."""
    if arrangement == "sequence":
        for _ in range(count):
            sequence(job, "http")
        return
    for name, call, _ in stages(job, "http"):
        if name in IN_SEQUENCE and arrangement in ("alone", name):
            for _ in range(count):
                call()


def run(report: Report, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as folder:
        job = Job(Path(folder))
        try:
            if args.repeat is not None:
                arrangement, count = args.repeat
                if arrangement not in ("sequence", "alone", *IN_SEQUENCE) or not count.isdigit():
                    raise SystemExit(
                        "--repeat takes sequence, alone or a stage "
                        f"({', '.join(IN_SEQUENCE)}), then a count"
                    )
                repeat(job, arrangement, int(count))
                return
            for transport in ("http", "evd1"):
                measure(report, job, transport)
        finally:
            job.close()


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repeat",
        nargs=2,
        metavar=("sequence|alone|STAGE", "N"),
        help="run the HTTP stages of N requests, in sequence, each stage alone or one stage, "
        "untimed (for an instruction counter)",
    )


if __name__ == "__main__":
    import sys

    if "--clock" not in sys.argv:
        sys.argv += ["--clock", "cpu"]
    raise SystemExit(main(run, __doc__, configure=options))
