"""The HTTP/JSON API driven by the real curl binary against a live daemon (docs/http.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_testkit import bytes_binding, sha
from http_testkit import FORMATION, LiveDaemon, atom, curl, json_body, needs_curl
from prometheus_client.parser import text_string_to_metric_families

from daemon import SyncClient

pytestmark = needs_curl


@pytest.fixture(scope="module")
def daemon() -> Iterator[LiveDaemon]:
    live = LiveDaemon()
    try:
        yield live
    finally:
        code = live.stop()
        stderr = live.stderr()
        live.cleanup()
        assert code == 0, stderr
        assert "failed" not in stderr, stderr  # no connection hit the catch-all


@pytest.fixture(scope="module")
def files(daemon: LiveDaemon) -> dict[str, Path]:
    subject, certificate, binding = atom()
    paths = {"binding": daemon.directory / "binding.json", "body": daemon.directory / "body.json"}
    paths["binding"].write_text(json.dumps(binding))
    paths["body"].write_bytes(json_body(binding, subject, certificate))
    return paths


def audit_line(daemon: LiveDaemon, decision_id: object) -> dict[str, Any]:
    return next(item for item in daemon.audit() if item.get("decision_id") == decision_id)


def submitted(daemon: LiveDaemon, *args: str) -> dict[str, object]:
    done = curl("-w", "\n%{http_code}", *args, f"{daemon.base}/v1/sessions/formation/decisions")
    body, _, status = done.stdout.rpartition(b"\n")
    assert done.returncode == 0 and status == b"200", done
    document: dict[str, object] = json.loads(body)
    return document


def test_submit_json_body_is_the_binary_decision_document(
    daemon: LiveDaemon, files: dict[str, Path]
) -> None:
    document = submitted(
        daemon, "-H", "Content-Type: application/json", "--data-binary", f"@{files['body']}"
    )
    assert document["kind"] == "decision" and document["session"] == "formation"
    result = document["result"]
    assert isinstance(result, dict) and result["outcome"] == "PASS"
    line = next(
        item for item in daemon.audit() if item.get("decision_id") == document["decision_id"]
    )
    assert line["event"] == "decision" and line["seq"] == document["seq"]
    assert line["line_digest"] == document["line_digest"]
    assert line["requester"]["protocol"] == "http"


def test_submit_multipart_with_curl_form_files(daemon: LiveDaemon, files: dict[str, Path]) -> None:
    document = submitted(
        daemon,
        "-F",
        f"binding=<{files['binding']}",
        "-F",
        f"evidence=@{FORMATION / 'atom.subject.json'}",
        "-F",
        f"evidence=@{FORMATION / 'atom.certificate.json'}",
    )
    result = document["result"]
    assert isinstance(result, dict) and result["outcome"] == "PASS"
    subject, certificate, _ = atom()
    line = next(
        item for item in daemon.audit() if item.get("decision_id") == document["decision_id"]
    )
    assert [item["size"] for item in line["evidence"]] == [len(subject), len(certificate)]


def test_a_fail_is_a_200_answer(daemon: LiveDaemon) -> None:
    lying = bytes_binding(b"evidence", expected=sha(b"something else")).to_dict()
    body = daemon.directory / "lying.json"
    body.write_bytes(json_body(lying, b"evidence"))
    done = curl(
        "-w",
        "\n%{http_code}",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        f"@{body}",
        f"{daemon.base}/v1/sessions/bytes/decisions",
    )
    document, _, status = done.stdout.rpartition(b"\n")
    assert status == b"200", done
    assert json.loads(document)["result"]["outcome"] == "FAIL"


def test_sessions_is_the_binary_list_answer(daemon: LiveDaemon) -> None:
    done = curl("--fail", f"{daemon.base}/v1/sessions")
    assert done.returncode == 0, done
    document = json.loads(done.stdout)
    assert document["kind"] == "sessions"
    assert document["sessions"] == SyncClient(unix=daemon.socket).list_sessions()


def test_health_and_ready(daemon: LiveDaemon) -> None:
    health = curl("--fail", f"{daemon.base}/health")
    assert health.returncode == 0, health
    status = json.loads(health.stdout)["status"]
    assert status["status"] == "serving"
    assert any(sample["name"] == "evidenced_decisions_total" for sample in status["metrics"])
    ready = curl("--fail", f"{daemon.base}/ready")
    assert ready.returncode == 0 and json.loads(ready.stdout)["ready"] is True


def test_metrics_parse_and_count_what_the_health_answer_counts(
    daemon: LiveDaemon, files: dict[str, Path]
) -> None:
    submitted(daemon, "-H", "Content-Type: application/json", "--data-binary", f"@{files['body']}")
    done = curl("--fail", "-D", "-", f"{daemon.base}/metrics")
    assert done.returncode == 0, done
    head, _, text = done.stdout.decode().partition("\r\n\r\n")
    assert "content-type: text/plain; version=0.0.4" in head.lower()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    passed = samples[("evidenced_decisions_total", (("outcome", "PASS"), ("session", "formation")))]
    assert passed >= 1
    count = samples[
        ("evidenced_request_stage_seconds_count", (("session", "formation"), ("stage", "total")))
    ]
    assert count == sum(
        samples[("evidenced_decisions_total", (("outcome", o), ("session", "formation")))]
        for o in ("PASS", "FAIL", "UNKNOWN")
    )
    health = SyncClient(unix=daemon.socket).health()
    snapshot = {
        (item["name"], tuple(sorted(item["labels"].items()))): item["value"]
        for item in health["metrics"]
    }
    key = ("evidenced_decisions_total", (("outcome", "PASS"), ("session", "formation")))
    assert snapshot[key] == passed  # the same counter in both views


def test_unknown_path_and_method_are_json_errors(daemon: LiveDaemon) -> None:
    for args, status in (
        ((f"{daemon.base}/nothing",), 404),
        (("-X", "DELETE", f"{daemon.base}/health"), 405),
        (("-X", "PUT", f"{daemon.base}/v1/sessions/formation/decisions"), 405),
    ):
        done = curl("-w", "\n%{http_code}", *args)
        body, _, code = done.stdout.rpartition(b"\n")
        assert int(code) == status
        assert json.loads(body)["error"]["code"] == "UNKNOWN_KIND"
