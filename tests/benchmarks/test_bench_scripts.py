"""Benchmark scripts that reach into a mechanism's internals keep up with them.

``bench_descriptor.py`` times the descriptor mechanism's stages by wrapping its stage methods
by name; when the pair pre-checks moved into one pipeline, two of those names disappeared and
the script failed only when someone ran ``make bench``. One evaluation through the wrappers
catches that at test time.
"""

from __future__ import annotations

import base64
import http.client
import json
from pathlib import Path

import bench_descriptor
import bench_http
import bench_stages
import bench_wire
import pytest

from mechanism.descriptor import (
    default_mechanism,
    descriptor_binding,
    encode_descriptor,
    tisc_fixture_bytes,
)


def test_descriptor_stage_names_still_name_the_mechanisms_stages() -> None:
    payload = tisc_fixture_bytes()
    descriptor = encode_descriptor(payload)
    mechanism = default_mechanism()
    binding = descriptor_binding(descriptor, payload, mechanism=mechanism)
    stages = bench_descriptor.stage_breakdown(mechanism, binding, (descriptor, payload), 1)
    assert all(ns > 0 for ns in stages.values()), stages
    assert mechanism.evaluate(binding, (descriptor, payload)).outcome.value == "PASS"


def test_every_stage_of_bench_stages_runs_on_the_daemons_code(tmp_path: Path) -> None:
    """``bench_stages.py`` calls the daemon's stage functions by name: one call of each, and
    its former implementations give what the current ones give."""
    job = bench_stages.Job(tmp_path)
    try:
        for transport in ("http", "evd1"):
            for name, call, _ in bench_stages.stages(job, transport):
                assert call() is not NotImplemented, name
        for arrangement in ("sequence", "alone", "head"):  # what an instruction counter runs
            bench_stages.repeat(job, arrangement, 2)
        assert bench_stages.http_head(job) == bench_stages.http_head_h11(job)
        assert bench_stages.binding(job) == bench_stages.binding_cattrs(job)
    finally:
        job.close()


def test_bench_wires_load_generator_is_answered_pass_over_both_transports(tmp_path: Path) -> None:
    """``bench_wire.py`` writes its own EVD1 frames and HTTP requests: the real daemon answers
    every one of them with a decision ``PASS`` (its load generator raises on anything else)."""
    process, urls = bench_http.start(tmp_path, "wire", bench_wire.SESSION)
    try:
        hello, frames = bench_wire.evd1_requests()
        http = bench_wire._address(urls["http"])
        loads = [
            bench_wire.Load(bench_wire._address(urls["binary"]), "binary", hello, frames),
            bench_wire.Load(http, "http", b"", bench_wire.http_requests("{}:{}".format(*http))),
        ]
        for load in loads:
            answered, latencies = load.run(3, 0.3)
            assert answered > 0 and len(latencies) == answered, load.transport
    finally:
        bench_http.stop(process)


@pytest.mark.parametrize("wait", ["none", "hop", "fsync"])
def test_bench_wires_bare_stages_server_decides_each_request_itself(
    tmp_path: Path, wait: str
) -> None:
    """The yardstick of ``bench_wire.py`` is answered ``PASS`` by its load generator's
    requests, and decides each pair on its own: evidence other than the bytes the binding
    names is answered ``UNKNOWN`` (the evidence is unavailable), not a canned ``PASS``."""
    process, (host, port) = bench_wire.start_bare(tmp_path, wait)
    try:
        requests = bench_wire.http_requests(f"{host}:{port}")
        load = bench_wire.Load((host, port), "http", b"", requests)
        answered, _ = load.run(3, 0.3)
        assert answered > 0
        document = json.loads(requests[0].partition(b"\r\n\r\n")[2])
        document["evidence"][0]["base64"] = base64.b64encode(b"\x01" * 64).decode()
        connection = http.client.HTTPConnection(host, port, timeout=30)
        connection.request(
            "POST",
            "/v1/sessions/bytes/decisions",
            body=json.dumps(document).encode(),
            headers={"Content-Type": "application/json"},
        )
        answer = json.loads(connection.getresponse().read())
        connection.close()
        assert answer["result"]["outcome"] == "UNKNOWN", answer["result"]
    finally:
        bench_http.stop(process)
