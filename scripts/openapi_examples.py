"""Capture the HTTP API description's examples from a real daemon (``make openapi-examples``).

The examples of ``/openapi.json`` (``daemon/server/openapi-examples.json``, which
:mod:`daemon.server._openapi` reads) are real answers, never written by hand: this script starts
``evidenced serve`` (an HTTP listener, a transparency log, the sessions ``formation``, ``bytes``
and ``descriptor``, the shipped mechanisms), binds each case's evidence as a client does
(``evidenced submit --print-binding``), submits it over HTTP and writes every request and its
answer. Rules:

* the cases are a PASS, a FAIL and an UNKNOWN of each shipped mechanism, from the packaged
  fixtures (a bytes FAIL pins another digest, a bytes UNKNOWN another predicate; a descriptor
  UNKNOWN names a descriptor schema version this mechanism does not support), and one batch
  of the formation session: a PASS and a pair whose binding repeats an evidence reference
  (its element is the refusal);
* the file is JSON with sorted keys, two-space indentation and a final newline; an answer that
  is not 200 stops the script (exit 1) and writes nothing.

Per-run fields (``decision_id``, ``seq``, ``audit_line``...) change with every capture;
``tests/daemon/test_openapi.py`` submits every captured request to a live daemon and holds
each answer's ``result`` equal to the captured one, so the examples cannot go stale: when a
mechanism changes, that test says to run ``make openapi-examples`` (then ``make openapi``).
"""

from __future__ import annotations

import base64
import http.client
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "daemon" / "server" / "openapi-examples.json"
FIXTURES = ROOT / "fixtures"
CLI = [sys.executable, "-m", "daemon.cli"]
ORIGIN = "evidenced.example/openapi"

#: The sessions of the capture; tests/daemon/test_openapi.py's daemon hosts the same.
SESSIONS = """
[sessions.formation]
mechanisms = ["formation"]

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 2
max_evidence_bytes = 4096

[sessions.descriptor]
mechanisms = ["descriptor"]
"""


def _fixture(*parts: str) -> bytes:
    return FIXTURES.joinpath(*parts).read_bytes()


def _pair(name: str) -> list[bytes]:
    return [_fixture("formation", f"{name}.{role}.json") for role in ("subject", "certificate")]


def _cases() -> list[tuple[str, str, str, list[bytes], dict[str, Any]]]:
    """(name, summary, session, evidence, changes to the honest binding) of every submit."""
    tisc = _fixture("descriptor", "descriptor-tisc.txt")
    program = _fixture("descriptor", "tisc-fixture.bin")
    item = b"evidence-bound bytes"
    other = "sha256:" + "0" * 64
    return [
        ("formation-pass", "formation: a checked COMPOSE certificate", "formation",
         _pair("compose"), {}),
        ("formation-fail", "formation: a tampered certificate (INVALID)", "formation",
         _pair("tampered"), {}),
        ("formation-unknown", "formation: a subject of another profile", "formation",
         _pair("unsupported-profile"), {}),
        ("bytes-pass", "bytes-sha256: the item hashes to the pinned digest", "bytes", [item], {}),
        ("bytes-fail", "bytes-sha256: another digest pinned", "bytes", [item], {"expected": other}),
        ("bytes-unknown", "bytes-sha256: a proposition of another predicate", "bytes", [item],
         {"predicate": "bytes.sha512"}),
        ("descriptor-pass", "descriptor: the TISC program, authorized and run", "descriptor",
         [tisc, program], {}),
        ("descriptor-fail", "descriptor: the TISC program re-described as native weights",
         "descriptor", [tisc.replace(b"\nt81vm\n", b"\nnative-weights\n"), program], {}),
        ("descriptor-unknown", "descriptor: a descriptor schema version not supported",
         "descriptor", [tisc.replace(b".v1\n", b".v2\n", 1), program], {}),
    ]  # fmt: skip


def _binding(base: str, session: str, evidence: list[bytes], work: Path) -> Any:
    files = []
    for number, data in enumerate(evidence):
        path = work / f"item-{session}-{number}"
        path.write_bytes(data)
        files.append(str(path))
    done = subprocess.run(
        [*CLI, "submit", "--connect", base, "--session", session, "--print-binding", *files],
        capture_output=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout)


def _body(binding: Any, evidence: list[bytes]) -> dict[str, Any]:
    return {
        "binding": binding,
        "evidence": [{"base64": base64.b64encode(item).decode("ascii")} for item in evidence],
    }


def _post(address: tuple[str, int], path: str, document: Any) -> Any:
    connection = http.client.HTTPConnection(*address, timeout=30)
    try:
        body = json.dumps(document).encode()
        connection.request("POST", path, body, {"Content-Type": "application/json"})
        answer = connection.getresponse()
        data = answer.read()
    finally:
        connection.close()
    if answer.status != 200:
        raise SystemExit(f"{path}: {answer.status} {data[:300]!r}")
    return json.loads(data)


def capture(work: Path) -> dict[str, Any]:
    """Every case's request and answer, from a daemon started in ``work``."""
    subprocess.run(
        [*CLI, "log", "keygen", "--origin", ORIGIN, "--out", str(work / "log.key")],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    config = work / "daemon.toml"
    config.write_text(
        '[server]\nlisten = "127.0.0.1:0"\nworker_processes = 1\n'
        '[http]\nlisten = "127.0.0.1:0"\n'
        f'[audit]\npath = "{work / "audit.jsonl"}"\n'
        f'[transparency]\nkey_file = "{work / "log.key"}"\norigin = "{ORIGIN}"\n' + SESSIONS
    )
    with (work / "stderr.txt").open("wb") as stderr:
        daemon = subprocess.Popen(
            [*CLI, "serve", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
            text=True,
        )
        try:
            assert daemon.stdout is not None
            line = daemon.stdout.readline()
            if not line:
                raise SystemExit(f"the daemon did not start: {(work / 'stderr.txt').read_text()}")
            started = json.loads(line)
            if started.get("http") is None:
                raise SystemExit(f"the daemon did not serve HTTP: {line}")
            host, port = started["http"].rsplit(":", 1)
            address, base = (host, int(port)), f"http://{host}:{port}"
            decisions = []
            bodies: dict[str, dict[str, Any]] = {}
            for name, summary, session, evidence, changes in _cases():
                binding = {**_binding(base, session, evidence, work), **changes}
                request = bodies[name] = _body(binding, evidence)
                answer = _post(address, f"/v1/sessions/{session}/decisions", request)
                decisions.append(
                    {"name": name, "summary": summary, "request": request, "answer": answer}
                )
            honest = bodies["formation-pass"]
            refs = honest["binding"]["evidence_refs"]
            repeated = {**honest["binding"], "evidence_refs": [refs[0], refs[0]]}
            pairs = [honest, {"binding": repeated, "evidence": honest["evidence"]}]
            batch = {
                "name": "formation-batch",
                "summary": "formation: a PASS, and a pair whose binding repeats a reference",
                "request": {"pairs": pairs},
                "answer": _post(
                    address, "/v1/sessions/formation/decisions:batch", {"pairs": pairs}
                ),
            }
        finally:
            daemon.terminate()
            daemon.wait(30)
            if daemon.stdout is not None:
                daemon.stdout.close()
    return {
        "about": "Real answers of evidenced serve, captured by scripts/openapi_examples.py "
        "(make openapi-examples); tests/daemon/test_openapi.py holds every result current.",
        "decisions": decisions,
        "batch": batch,
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="evidenced-openapi-") as directory:
        captured = capture(Path(directory))
    TARGET.write_text(json.dumps(captured, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}: {len(captured['decisions'])} decisions, a batch")


if __name__ == "__main__":
    main()
