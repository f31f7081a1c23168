"""The HTTP API's OpenAPI 3.1 description (``docs/openapi.json``, ``GET /openapi.json``):
built from the route table so it cannot drift, valid by ``openapi-spec-validator``, served as
kept, and every answer of a live daemon conforming to it under ``schemathesis``'s
property-based run (no 5xx, every status, content type, header and body as described)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from http_testkit import LiveDaemon
from openapi_spec_validator import validate

from daemon.server import _http_codec, _openapi
from daemon.server._http_codec import ROUTES, Route

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "openapi.json"
CLI = [sys.executable, "-m", "daemon.cli"]
ORIGIN = "test.example/evidenced/openapi"


def schemathesis() -> str | None:
    """The ``st`` command: ``$EVIDENCED_SCHEMATHESIS``, the tool venv ``make schemathesis``
    builds (schemathesis pins a jsonschema-rs older than the daemon's), or the PATH's."""
    named = os.environ.get("EVIDENCED_SCHEMATHESIS")
    if named:
        return named
    local = ROOT / ".venv-schemathesis" / "bin" / "st"
    if local.exists():
        return str(local)
    return shutil.which("st")


def test_docs_openapi_json_is_what_the_code_builds() -> None:
    """A route added, removed or changed without ``make openapi`` fails here."""
    assert DOC.read_bytes() == _openapi.rendered()


def test_the_description_is_valid_openapi_3_1() -> None:
    document = json.loads(DOC.read_bytes())
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_every_route_is_described_and_every_description_is_a_route() -> None:
    described = {route for route, _ in _openapi.OPERATIONS.values()}
    assert described == {route for route, _ in ROUTES.values()} | {Route.SUBMIT, Route.TILE}
    for path, (route, operations) in _openapi.OPERATIONS.items():
        if path in ROUTES:
            assert ROUTES[path][0] is route
            assert set(operations) == {ROUTES[path][1].lower()}


def test_a_route_without_a_description_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(_openapi.OPERATIONS, "/health")
    with pytest.raises(KeyError, match="routes without a description"):
        _openapi._check_coverage()


def test_a_description_without_a_route_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_openapi.OPERATIONS, "/v1/ghost", (Route.HEALTH, {}))
    monkeypatch.delitem(_http_codec.ROUTES, "/health")
    with pytest.raises(KeyError, match="descriptions without a route"):
        _openapi._check_coverage()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDaemon]:
    keys = tmp_path_factory.mktemp("keys")
    subprocess.run(
        [*CLI, "log", "keygen", "--origin", ORIGIN, "--out", str(keys / "log.key")],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    live = LiveDaemon(
        http_extra=(
            f'\n[transparency]\nkey_file = "{keys / "log.key"}"\norigin = "{ORIGIN}"\n'
            "checkpoint_interval = 0.05\n"
        )
    )
    try:
        yield live
    finally:
        code = live.stop()
        stderr = live.stderr()
        live.cleanup()
        assert code == 0, stderr
        assert "failed" not in stderr, stderr  # no connection hit the catch-all


def test_the_daemon_serves_the_description_it_keeps(daemon: LiveDaemon) -> None:
    answer = daemon.get("/openapi.json")
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.body == DOC.read_bytes()


def test_schemathesis_finds_no_5xx_and_no_answer_off_the_description(
    daemon: LiveDaemon,
) -> None:
    """Every documented operation, property-based (the examples, coverage and fuzzing phases;
    the stateful phase has no links to follow here): no 5xx, and every status, content type,
    header and body as described."""
    st = schemathesis()
    if st is None:
        pytest.skip("schemathesis is not installed (make schemathesis)")
    done = subprocess.run(
        [
            st,
            "run",
            str(DOC),
            "--url",
            daemon.base,
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,"
            "response_headers_conformance,response_schema_conformance",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            "15",
            "--workers",
            "1",
            "--seed",
            "26",
            "--request-timeout",
            "20",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=daemon.directory,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "12 selected / 12 total" in done.stdout, done.stdout[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout.split("SUMMARY")[-1]
