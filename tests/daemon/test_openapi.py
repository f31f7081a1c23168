"""The HTTP API's OpenAPI 3.1 description (``docs/openapi.json``, ``GET /openapi.json``):
built from the one route table so it cannot drift, valid by ``openapi-spec-validator``, served
as kept; every route of the table answered by a live daemon and every other path refused;
results described per mechanism and real answers of each (PASS, FAIL, UNKNOWN) conforming to
that description; examples that a daemon answers again; and every operation, batch included,
conforming under ``schemathesis``'s property-based run (no 5xx, every status, content type,
header and body as described)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
from http_testkit import LiveDaemon, matches, off_table_paths
from openapi_spec_validator import validate

from daemon.server import _openapi
from daemon.server._routes import TABLE, Auth, Operation
from mechanism.descriptor import canonfs_hash, descriptor_binding
from session import (
    BoundProposition,
    EvidenceStore,
    MechanismProvider,
    VerificationSession,
    load_provider,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "openapi.json"
CLI = [sys.executable, "-m", "daemon.cli"]
ORIGIN = "test.example/evidenced/openapi"
FIXTURES = ROOT / "fixtures"
EXAMPLES = _openapi.examples()
FORMATION_ID = "vstd.typed_formation.checked.0.1"
DESCRIPTOR_ID = "t81.experiment_descriptor.authorized.0.1"
BYTES_ID = "vstd.bytes.sha256"
STALE = "a mechanism changed: run make openapi-examples, then make openapi"


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


def validator(name: str, document: dict[str, Any] | None = None) -> jsonschema.Validator:
    """A draft 2020-12 validator of ``components/schemas/<name>`` of ``document`` (the kept
    description by default)."""
    described = document if document is not None else json.loads(DOC.read_bytes())
    schema = {"$ref": f"#/components/schemas/{name}", "components": described["components"]}
    return jsonschema.Draft202012Validator(schema)


def conforms(name: str, instance: Any, document: dict[str, Any] | None = None) -> bool:
    return bool(validator(name, document).is_valid(instance))


# -- the document


def test_docs_openapi_json_is_what_the_code_builds() -> None:
    """A route, schema or example changed without ``make openapi`` fails here."""
    assert DOC.read_bytes() == _openapi.rendered()


def test_the_description_is_valid_openapi_3_1() -> None:
    document = json.loads(DOC.read_bytes())
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_every_operation_of_the_table_is_described_and_nothing_else() -> None:
    """The batch route was served and missing from the description; now every operation of
    the table is there, with its operationId, tag and auth, and no other."""
    paths = json.loads(DOC.read_bytes())["paths"]
    described = {
        (method.upper(), path, operation["operationId"], operation["tags"][0])
        for path, operations in paths.items()
        for method, operation in operations.items()
    }
    assert described == {(op.method, op.path, op.operation_id, op.tag) for op in TABLE}
    assert ("POST", "/v1/sessions/{name}/decisions:batch") in {(m, p) for m, p, *_ in described}
    for operation in TABLE:
        found = paths[operation.path][operation.method.lower()]
        assert found["x-evidenced-auth"] == operation.auth.value
        assert ("401" in found["responses"]) == (operation.auth is Auth.TOKEN)
        assert set(found["responses"]) == set(operation.answers)


def test_the_tags_are_declared_once_each() -> None:
    document = json.loads(DOC.read_bytes())
    declared = [tag["name"] for tag in document["tags"]]
    assert len(declared) == len(set(declared))
    assert {operation.tag for operation in TABLE} == set(declared)


def test_every_example_in_the_description_conforms_to_its_schema() -> None:
    document = json.loads(DOC.read_bytes())
    seen = 0
    for path, operations in document["paths"].items():
        for operation in operations.values():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            answer = operation["responses"]["200"]["content"].get("application/json")
            for media in (body, answer):
                for name, example in (media or {}).get("examples", {}).items():
                    schema = media["schema"]["$ref"].rsplit("/", 1)[1]
                    assert conforms(schema, example["value"], document), (path, name)
                    seen += 1
    for name, schema in document["components"]["schemas"].items():
        for example in schema.get("examples", []):
            assert conforms("Result", example, document), name
            assert conforms(name, example, document), name
            seen += 1
    assert seen >= 3 + 3 + 2 + 9  # submit requests and answers, the batch, 9 results


# -- results per mechanism (in process, many real evaluations)


def _evaluate(
    provider: MechanismProvider[Any],
    options: dict[str, Any],
    evidence: Sequence[bytes],
    binding: dict[str, Any] | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """The result a session gives for ``evidence`` under ``provider`` configured by
    ``options``, its honest binding (or ``binding``) changed by ``changes``."""
    mechanism = provider.configure(options)
    if binding is None:
        binding = provider.honest_binding(evidence, provider.structure_options(options)).to_dict()
    binding = {**binding, **changes}
    store = EvidenceStore()
    for item in evidence:
        store.add(item)
    session = VerificationSession(store)
    session.register(mechanism)
    return session.evaluate(BoundProposition.from_dict(binding)).to_dict()


def _fixture(*parts: str) -> bytes:
    return FIXTURES.joinpath(*parts).read_bytes()


def _pair(name: str) -> list[bytes]:
    return [_fixture("formation", f"{name}.{role}.json") for role in ("subject", "certificate")]


def _bounds(items: int, size: int) -> dict[str, int]:
    return {"max_evidence_items": items, "max_evidence_bytes": size}


def _real_results() -> list[dict[str, Any]]:
    """Results of every shipped mechanism over the fixtures, host configurations and bindings
    that reach its outcomes and stages."""
    formation = load_provider("formation")
    index = json.loads(_fixture("formation", "index.json"))
    results = [_evaluate(formation, {}, _pair(pair["name"])) for pair in index["pairs"]]
    results += [
        _evaluate(formation, {}, _pair("atom"), bounds=_bounds(2, 1)),
        _evaluate(formation, {}, _pair("atom"), subject_id="sha256:" + "1" * 64),
        _evaluate(formation, {}, _pair("atom"), expected="PASS"),
        _evaluate(formation, {}, _pair("atom"), mechanism_digest="sha256:" + "2" * 64),
        _evaluate(formation, {"max_depth": 1}, _pair("compose")),
    ]
    descriptor = load_provider("descriptor")
    tisc = _fixture("descriptor", "descriptor-tisc.txt")
    program = _fixture("descriptor", "tisc-fixture.bin")
    weights = [
        _fixture("descriptor", "descriptor-safetensors.txt"),
        _fixture("descriptor", "safetensors-fixture.bin"),
    ]
    pairs = [
        [tisc, program],
        weights,
        [tisc.replace(b"\nt81vm\n", b"\nnative-weights\n"), program],
        [tisc.replace(b".v1\n", b".v2\n", 1), program],
        [tisc.replace(b"\nrun\n", b"\nrun,run\n"), program],
    ]
    hosts: list[dict[str, Any]] = [{}, {"max_steps": 3}]
    for policy in ("deny-at-halt", "max-instructions-3", "unknown-clause", "wrong-payload"):
        hosts.append({"policy": _fixture("descriptor", f"policy-{policy}.apl").decode()})
    for allowlist in ("missing-weights", "wildcard"):
        hosts.append({"allowlist": _fixture("descriptor", f"allowlist-{allowlist}.json").decode()})
    results += [_evaluate(descriptor, host, pair) for host in hosts for pair in pairs]
    results.append(_evaluate(descriptor, {}, weights, bounds=_bounds(3, 1 << 30)))
    # A payload that is no fixture, declared by its own descriptor: refused at discovery.
    changed = program + b"\x00"
    declared = tisc.replace(canonfs_hash(program).encode(), canonfs_hash(changed).encode())
    honest = descriptor_binding(declared, changed, operation="run").to_dict()
    results.append(_evaluate(descriptor, {}, [declared, changed], honest))
    digests = load_provider("bytes-sha256")
    item = [b"evidence-bound bytes"]
    results += [
        _evaluate(digests, {}, item),
        _evaluate(digests, {}, item, expected="sha256:" + "0" * 64),
        _evaluate(digests, {}, item, expected="not a digest"),
        _evaluate(digests, {}, item, predicate="bytes.sha512"),
    ]
    return results


REAL = _real_results()


def test_the_sweep_reaches_every_outcome_of_every_shipped_mechanism() -> None:
    """Not vacuous: PASS, FAIL and UNKNOWN of each mechanism, and the host's own UNKNOWN."""
    reached = {(result["mechanism_id"], result["outcome"]) for result in REAL}
    for identifier in (FORMATION_ID, DESCRIPTOR_ID, BYTES_ID):
        assert {o for i, o in reached if i == identifier} == {"PASS", "FAIL", "UNKNOWN"}
    assert any(not result["observations"] for result in REAL)
    stages = {
        result["observations"].get("failed_stage")
        for result in REAL
        if result["mechanism_id"] == DESCRIPTOR_ID
    }
    assert stages >= {None, "binding", "descriptor", "discovery", "authorization", "provider"}


@pytest.mark.parametrize("number", range(len(REAL)))
def test_a_real_result_conforms_to_its_mechanism_branch(number: int) -> None:
    result = REAL[number]
    errors = list(validator("Result").iter_errors(result))
    assert not errors, (result["mechanism_id"], result["details"], errors[0].message[:300])


def _first(identifier: str, outcome: str) -> dict[str, Any]:
    found = next(r for r in REAL if r["mechanism_id"] == identifier and r["outcome"] == outcome)
    copied: dict[str, Any] = json.loads(json.dumps(found))
    return copied


def test_a_formation_result_without_its_report_is_off_the_description() -> None:
    result = _first(FORMATION_ID, "PASS")
    del result["observations"]["formation_report"]
    assert not conforms("Result", result)


def test_a_pass_carrying_a_reason_code_is_off_the_description() -> None:
    for identifier in (FORMATION_ID, DESCRIPTOR_ID):
        result = _first(identifier, "PASS")
        result["observations"]["reason_codes"] = [result["observations"]["reason_codes"] or "X"]
        assert not conforms("Result", result), identifier


def test_a_fail_with_an_unknown_status_is_off_the_description() -> None:
    for identifier in (FORMATION_ID, DESCRIPTOR_ID):
        result = _first(identifier, "FAIL")
        result["observations"]["status"] = "UNKNOWN"
        assert not conforms("Result", result), identifier


def test_one_mechanisms_observations_under_another_id_are_off_the_description() -> None:
    """Observations are described per mechanism_id: a descriptor report passed off as a
    formation (or bytes) result does not conform."""
    for identifier in (FORMATION_ID, BYTES_ID):
        result = _first(DESCRIPTOR_ID, "PASS")
        result["mechanism_id"] = identifier
        assert not conforms("Result", result), identifier


def test_a_mechanism_pass_with_empty_observations_is_off_the_description() -> None:
    """Empty observations are the host's UNKNOWN only: a PASS without them is no decision of
    a shipped mechanism."""
    for identifier in (FORMATION_ID, DESCRIPTOR_ID, BYTES_ID):
        result = {**_first(identifier, "PASS"), "observations": {}}
        assert not conforms("Result", result), identifier


def test_a_third_party_result_is_described_by_the_open_branch() -> None:
    result = {**_first(BYTES_ID, "PASS"), "mechanism_id": "example.other.0.1"}
    result["observations"] = {"anything": ["the mechanism's own"]}
    assert conforms("Result", result)
    assert not conforms("Result", {**result, "observations": []})


def test_a_hosted_third_party_provider_describes_its_results() -> None:
    """A daemon whose sessions name a third-party provider with a decision schema serves a
    description that holds its branch; a result of it conforms and a forged one does not."""
    sri = load_provider("sri")
    document = _openapi.document(("sri",))
    validate(document)
    assert f"Result.{sri.mechanism_id}" in document["components"]["schemas"]
    metadata = _fixture_sri()
    result = _evaluate(sri, {}, metadata)
    assert result["outcome"] == "PASS"
    assert conforms("Result", result, document)
    forged = {**result, "observations": {**result["observations"], "status": "INVALID"}}
    assert not conforms("Result", forged, document)
    assert conforms("Result", forged)  # the kept description holds no schema of it


def _fixture_sri() -> list[bytes]:
    sample = next(
        s for s in load_provider("sri").conformance_samples() if s.expected.value == "PASS"
    )
    return list(sample.evidence)


def test_a_provider_schema_that_refers_outside_itself_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``$ref`` in a provider's schema would resolve against the API description (its
    components): such a schema is not embedded, its mechanism is described as any other."""
    sri = load_provider("sri")
    monkeypatch.setattr(
        type(sri), "decision_schema", lambda self: {"$ref": "#/components/schemas/Error"}
    )
    schemas = _openapi.document(("sri",))["components"]["schemas"]
    assert f"Result.{sri.mechanism_id}" not in schemas


def test_hosted_providers_are_the_third_party_ones_a_session_was_built_with() -> None:
    from daemon.config._config import parse_config

    config = parse_config(
        '[sessions.web]\nmechanisms = ["sri"]\n[sessions.formation]\nmechanisms = ["formation"]\n',
        base=ROOT,
        source="test",
    )
    sessions, _ = config.build_sessions()
    assert _openapi.hosted_providers(sessions) == ("sri",)


# -- a live daemon

DESCRIPTOR_SESSION = '\n[sessions.descriptor]\nmechanisms = ["descriptor"]\n'


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
            "checkpoint_interval = 0.05\n" + DESCRIPTOR_SESSION
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


def _unknown_route(answer: Any) -> bool:
    """The dispatcher's answer to a path no operation matches (daemon.server._http_codec)."""
    if answer.status != 404:
        return False
    error = answer.error
    return bool(error["code"] == "UNKNOWN_KIND" and error["message"].startswith("no resource at"))


def _ask(daemon: LiveDaemon, operation: Operation) -> Any:
    if operation.method == "GET":
        return daemon.get(operation.sample)
    request = EXAMPLES["decisions"][0]["request"]
    if operation.operation_id == "submitBatch":
        request = {"pairs": [request]}
    return daemon.post(operation.sample, json.dumps(request).encode())


@pytest.mark.parametrize("operation", TABLE, ids=lambda op: op.operation_id)
def test_every_operation_of_the_table_is_served_by_a_live_daemon(
    daemon: LiveDaemon, operation: Operation
) -> None:
    """Asked as the table declares it, each operation is answered by its route (a status it
    describes), never by the dispatcher's unknown-route refusal."""
    answer = _ask(daemon, operation)
    assert not _unknown_route(answer), (operation.sample, answer.status, answer.body[:200])
    assert str(answer.status) in operation.answers, (operation.sample, answer.status)


def test_a_path_off_the_table_is_refused_by_a_live_daemon(daemon: LiveDaemon) -> None:
    """The same walk the codec's test makes, against the real server: each path is the
    unknown-route 404, so nothing the table does not declare is served."""
    for path in off_table_paths():
        answer = daemon.get(path)
        assert _unknown_route(answer), (path, answer.status, answer.body[:200])


def test_every_captured_example_is_answered_again_with_its_result(daemon: LiveDaemon) -> None:
    """The description's examples are real: each captured request, submitted again, gets the
    captured result exactly (only the per-run fields differ), and every answer conforms."""
    for entry in EXAMPLES["decisions"]:
        captured = entry["answer"]
        answer = daemon.post(
            f"/v1/sessions/{captured['session']}/decisions", json.dumps(entry["request"]).encode()
        )
        assert answer.status == 200, answer.body[:300]
        document = answer.json()
        assert document["result"] == captured["result"], f"{entry['name']}: {STALE}"
        assert set(document) == set(captured)
        assert conforms("Decision", document), entry["name"]
    batch = EXAMPLES["batch"]
    answer = daemon.post(
        "/v1/sessions/formation/decisions:batch", json.dumps(batch["request"]).encode()
    )
    assert answer.status == 200
    elements = answer.json()["decisions"]
    for got, kept in zip(elements, batch["answer"]["decisions"], strict=True):
        assert got.get("result") == kept.get("result"), STALE
        assert ("error" in got) == ("error" in kept)
        assert got.get("error", {}).get("code") == kept.get("error", {}).get("code")
    assert conforms("Batch", answer.json())


def test_real_answers_of_every_mechanism_and_outcome_conform(daemon: LiveDaemon) -> None:
    """Beyond the examples: a host UNKNOWN (a digest this daemon does not host) and a refused
    submit, as the daemon writes them."""
    entry = EXAMPLES["decisions"][0]
    binding = {**entry["request"]["binding"], "mechanism_digest": "sha256:" + "3" * 64}
    answer = daemon.post(
        "/v1/sessions/formation/decisions",
        json.dumps({**entry["request"], "binding": binding}).encode(),
    )
    document = answer.json()
    assert document["result"]["outcome"] == "UNKNOWN"
    assert document["result"]["observations"] == {}
    assert conforms("Decision", document)
    refused = daemon.post("/v1/sessions/formation/decisions", b'{"binding": {}, "evidence": []}')
    assert refused.status == 422
    assert conforms("Error", refused.json())


def _asked(har: Path) -> dict[str, set[int]]:
    """operationId → the statuses answered, from schemathesis's HAR record of its requests."""
    statuses: dict[str, set[int]] = {op.operation_id: set() for op in TABLE}
    for entry in json.loads(har.read_bytes())["log"]["entries"]:
        path = urlsplit(entry["request"]["url"]).path
        method = entry["request"]["method"]
        for operation in TABLE:
            if operation.method == method and matches(operation, path):
                statuses[operation.operation_id].add(entry["response"]["status"])
    return statuses


def test_schemathesis_finds_no_5xx_and_no_answer_off_the_description(
    daemon: LiveDaemon,
) -> None:
    """Every described operation, batch included, property-based (the examples, coverage and
    fuzzing phases; the stateful phase has no links to follow here): no 5xx, and every
    status, content type, header and body as described. Its record of the requests shows each
    operation asked, and a submit and a batch decided (200), not only refused."""
    st = schemathesis()
    if st is None:
        pytest.skip("schemathesis is not installed (make schemathesis)")
    har = daemon.directory / "schemathesis.har"
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
            "--report",
            "har",
            "--report-har-path",
            str(har),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=daemon.directory,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert f"{len(TABLE)} selected / {len(TABLE)} total" in done.stdout, done.stdout[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout.split("SUMMARY")[-1]
    asked = _asked(har)
    assert all(asked.values()), {name: found for name, found in asked.items() if not found}
    assert 200 in asked["submitDecision"] and 200 in asked["submitBatch"], asked
    assert not any(status >= 500 for found in asked.values() for status in found), asked
