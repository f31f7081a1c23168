"""Structuring and unstructuring on the decision path, against the JSON work they must do.

Figures, each a ratio to a true floor measured in the same interleaved rounds
(benchmarks/_harness.py; ``--clock cpu`` is steadier on a busy machine):

* decision answer decode: a real decision frame (the minimal formation pair's result) fed to a
  :class:`ClientConnection` until it yields the :class:`Decision` (canonical check, then the
  header model), against ``orjson.loads`` of its header (the decoder must parse it);
* submit decode: a submit frame fed to a :class:`ServerConnection` until it yields the
  :class:`Submit`, then the binding admitted as a :class:`BoundProposition`
  (:func:`binding_from_wire`), against ``orjson.loads`` of the header;
* decision answer encode: the :class:`Decision` event to frame bytes
  (:meth:`ServerConnection.send`), against ``orjson.dumps`` of its header with sorted keys;
* audit line read: one sealed ``decision`` line checked (:func:`parse_sealed`: seal, JSON,
  canonical form), against ``orjson.loads`` of the line; and the same line read on as its
  typed record (:func:`read_record`: exact keys and types of every member);
* receipt read: a decision receipt's JSON read as its typed :class:`Receipt` (exact keys and
  types, ``daemon.tlog._receipt._parse``: the first step of ``evidenced log verify-receipt``),
  against ``json.loads`` of the same bytes;
* holdout corpus index read: the packaged ``INDEX.json`` read as its cases
  (:meth:`holdout._corpus.Corpus.from_index`: the strict reader, then each case through its
  converter), against the strict reader alone (``holdout._reader.read_json``);
* catalog load: the reference registry read back from its canonical dict
  (:meth:`ComponentRegistry.from_dict`), against ``json.loads`` of its canonical JSON.

Run: ``python benchmarks/bench_models.py [--quick] [--clock cpu] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import orjson
from _harness import Report, main

from catalog import ComponentRegistry, reference_registry
from daemon.audit._audit_format import parse_sealed, render_line
from daemon.audit._audit_records import read_record
from daemon.tlog import encode_receipt, make_receipt
from daemon.tlog._receipt import _parse as read_receipt_bytes
from daemon.wire._binding import binding_from_wire
from daemon.wire._protocol import ClientConnection, Decision, ServerConnection, Submit, encode_frame
from mechanism.formation import FormationPathCertificateMechanism, formation_binding
from mechanism.holdout._commitment import corpus_dir
from mechanism.holdout._corpus import Corpus
from mechanism.holdout._reader import read_json
from session import EvidenceStore, VerificationSession

ROOT = Path(__file__).resolve().parents[1]
HELLO = {"kind": "hello", "versions": [1], "client": "bench"}


def decision_event() -> tuple[Decision, list[bytes], dict[str, object]]:
    """The minimal formation pair's real decision, its evidence and its binding's wire form."""
    folder = ROOT / "fixtures" / "formation"
    subject = (folder / "atom.subject.json").read_bytes()
    certificate = (folder / "atom.certificate.json").read_bytes()
    mechanism = FormationPathCertificateMechanism()
    binding = formation_binding(subject, certificate, mechanism_digest=mechanism.mechanism_digest)
    store = EvidenceStore()
    for item in (subject, certificate):
        store.add(item)
    session = VerificationSession(store)
    session.register(mechanism)
    result = session.evaluate(binding).to_dict()
    decision = Decision(7, "0f" * 16, "formation", result, 12, "sha256:" + "ab" * 32)
    return decision, [subject, certificate], binding.to_dict()


def run(report: Report, args: argparse.Namespace) -> None:
    decision, items, wire = decision_event()
    decision_frame = ServerConnection.send(decision)
    header_fields = decision.to_header()
    decision_header = orjson.dumps(header_fields, option=orjson.OPT_SORT_KEYS)
    submit = Submit(7, "formation", wire, tuple(len(item) for item in items))
    submit_header = orjson.dumps(submit.to_header(), option=orjson.OPT_SORT_KEYS)
    submit_frame = encode_frame(submit.to_header())  # the header only: evidence is not parsed
    hello_frame = encode_frame(HELLO)
    print(f"decision header: {len(decision_header)} bytes, submit header: {len(submit_header)}")

    def decode_decision() -> object:
        connection = ClientConnection()
        connection.handshake_done = True
        connection.receive_data(decision_frame)
        return connection.next_event()

    def decode_submit() -> object:
        connection = ServerConnection()
        connection.receive_data(hello_frame)
        connection.next_event()
        connection.receive_data(submit_frame)
        event = connection.next_event()
        assert isinstance(event, Submit)
        return binding_from_wire(event.binding)

    decision_fields = {
        "binding_digest": decision.result["binding_digest"],
        "decision_id": decision.decision_id,
        "details": "",
        "evidence": [{"digest": ref, "size": len(item)} for ref, item in zip(
            wire["evidence_refs"], items, strict=True)],  # type: ignore[call-overload]
        "event": "decision",
        "mechanism_digest": decision.result["mechanism_digest"],
        "mechanism_id": decision.result["mechanism_id"],
        "metrics": {"evaluate_ns": 657092, "receive_ns": 186777, "total_ns": 893993},
        "observed_evidence_bytes": decision.result["observed_evidence_bytes"],
        "outcome": decision.result["outcome"],
        "prev": "sha256:" + "7a" * 32,
        "reason_codes": [],
        "request_id": 2,
        "requester": {"gid": 0, "pid": 5883, "transport": "unix", "uid": 0},
        "seq": 2,
        "session": "formation",
        "timestamp": "2026-11-29T20:56:22.690552Z",
    }  # fmt: skip
    line = render_line(decision_fields)
    assert parse_sealed(line)[1] is not None
    receipt = encode_receipt(
        make_receipt(line.rstrip(b"\n"), 1, 9, [b"\x17" * 32] * 4, b"origin\n9\nroot\n\n- sig\n")
    )
    corpus_folder = corpus_dir()
    corpus_index = (corpus_folder / "INDEX.json").read_bytes()
    registry = reference_registry().canonical_dict()
    registry_json = json.dumps(registry)

    report.compare(
        "decision answer decode",
        decode_decision,
        lambda: orjson.loads(decision_header),
        floor_name="orjson.loads of the header",
        rounds=31,
    )
    report.compare(
        "submit decode + binding admission",
        decode_submit,
        lambda: orjson.loads(submit_header),
        floor_name="orjson.loads of the header",
        rounds=31,
    )
    report.compare(
        "decision answer encode",
        lambda: ServerConnection.send(decision),
        lambda: orjson.dumps(header_fields, option=orjson.OPT_SORT_KEYS),
        floor_name="orjson.dumps of the header",
        rounds=31,
    )
    report.compare(
        "audit decision line read",
        lambda: parse_sealed(line),
        lambda: orjson.loads(line),
        floor_name="orjson.loads of the line",
        rounds=31,
    )
    report.compare(
        "audit decision line read as a typed record",
        lambda: read_record(parse_sealed(line)[1]),  # type: ignore[arg-type]
        lambda: orjson.loads(line),
        floor_name="orjson.loads of the line",
        rounds=31,
    )
    report.compare(
        "receipt read",
        lambda: read_receipt_bytes(receipt),
        lambda: json.loads(receipt),
        floor_name="json.loads of its JSON",
        rounds=31,
    )
    report.compare(
        "holdout corpus index read",
        lambda: Corpus.from_index(corpus_folder, corpus_index),
        lambda: read_json(corpus_index),
        floor_name="the strict reader alone",
        rounds=31,
    )
    report.compare(
        "reference registry load",
        lambda: ComponentRegistry.from_dict(json.loads(registry_json)),
        lambda: json.loads(registry_json),
        floor_name="json.loads of its JSON",
        rounds=31,
    )


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
