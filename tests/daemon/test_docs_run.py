"""Docs that run: every shell block of ``README.md`` and ``docs/*.md`` fenced as
```` ```bash run ```` is executed, through a real ``bash``, against a live daemon, and every
Python block fenced as ```` ```python run ```` by this Python (``docs/http.md`` "Examples that
run").

The rules of a runnable block:

* a file's runnable blocks run in order in one ``bash`` (``set -euo pipefail``), so a block
  may use what an earlier one wrote; any command that fails fails the test, named by file;
* the working directory is the live daemon's: its audit log ``audit.jsonl``, its transparency
  directory ``audit.jsonl.tlog``, ``verifier.key`` (the log's verifier key) and ``fixtures/``
  (the repository's example data);
* the daemon listens where the docs say: ``127.0.0.1:7434`` (HTTP), ``127.0.0.1:7433`` (the
  binary protocol) and ``/run/evidenced.sock`` in a block are replaced by the live daemon's
  addresses, and nothing else is changed: the quoting is the docs' own. It hosts
  ``formation`` and ``bytes``;
* each ``python run`` block is a whole program, run on its own (exit status 0 required);
  ``docs/client.md``'s run against a daemon of their own that admits at most four requests at
  once (``max_in_flight = 4``), so that a batch of eight pairs meets ``BUSY`` answers and the
  client's retry of them is shown, deterministically;
* ``evidenced``, ``curl``, ``jq`` and ``openssl`` are the real ones (the tests skip without curl
  or jq; a file whose blocks call ``openssl`` skips without it);
* a block may start a daemon of its own (``docs/http.md``'s TLS example does, on ports ``:0``,
  reading them from its JSON line) and must stop it (a ``trap … EXIT``).

The Kubernetes probes of ``docs/http.md`` (its ```` ```yaml ```` blocks with ``httpGet``) and of
``packaging/kubernetes/deployment.yaml`` are sent as the kubelet sends them (``scheme`` HTTP by
default; HTTPS without checking the certificate; success is a status from 200 to 399): a probe
with ``scheme: HTTPS`` to a TLS listener, one without to a plain listener.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml  # type: ignore[import-untyped]  # PyYAML, with kubernetes-validate
from http_testkit import CONFIG, CURL, LiveDaemon

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
ORIGIN = "docs.example/evidenced"
CLI = [sys.executable, "-m", "daemon.cli"]
#: A fenced block whose info string is ``bash run`` (and nothing else).
RUNNABLE = re.compile(r"^```bash run[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
PYTHON = re.compile(r"^```python run[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
HTTP_ADDRESS = "127.0.0.1:7434"
BINARY_ADDRESS = "127.0.0.1:7433"
SOCKET = "/run/evidenced.sock"


def runnable_blocks(path: Path) -> list[str]:
    return RUNNABLE.findall(path.read_text("utf-8"))


def python_blocks(path: Path) -> list[str]:
    return PYTHON.findall(path.read_text("utf-8"))


FILES = [path for path in DOCS if runnable_blocks(path)]
PYTHON_BLOCKS = [
    (path, number, block)
    for path in DOCS
    for number, block in enumerate(python_blocks(path), start=1)
]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDaemon]:
    if CURL is None or shutil.which("jq") is None:
        pytest.skip("the runnable docs need curl and jq (apt-get install curl jq)")
    keys = tmp_path_factory.mktemp("keys")
    made = subprocess.run(
        [*CLI, "log", "keygen", "--origin", ORIGIN, "--out", str(keys / "log.key")],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    live = LiveDaemon(
        http_extra=(
            f'\n[transparency]\nkey_file = "{keys / "log.key"}"\norigin = "{ORIGIN}"\n'
            "checkpoint_interval = 0.1\n"
        )
    )
    (live.directory / "verifier.key").write_text(json.loads(made.stdout)["verifier_key"] + "\n")
    (live.directory / "fixtures").symlink_to(ROOT / "fixtures")
    try:
        yield live
    finally:
        code = live.stop()
        stderr = live.stderr()
        live.cleanup()
        assert code == 0, stderr


#: The docs whose Python blocks need a daemon configured otherwise: its ``[server]`` keys.
BUSY_DOCS = {"client.md"}
BUSY_SERVER = "max_in_flight = 4\nmax_in_flight_per_peer = 4\n"


@pytest.fixture(scope="module")
def busy_daemon() -> Iterator[LiveDaemon]:
    """A daemon of four in-flight slots (``docs/client.md``'s examples retry its ``BUSY``)."""
    config = CONFIG.format(idle=5.0, header=2.0, http_extra="")
    live = LiveDaemon(config_text=config.replace("[server]\n", "[server]\n" + BUSY_SERVER, 1))
    (live.directory / "fixtures").symlink_to(ROOT / "fixtures")
    try:
        yield live
    finally:
        code = live.stop()
        stderr = live.stderr()
        live.cleanup()
        assert code == 0, stderr


def test_the_runner_finds_the_runnable_blocks() -> None:
    names = {path.name for path in FILES}
    assert {"README.md", "http.md", "transparency.md"} <= names
    assert {"protocol.md", "client.md"} <= {path.name for path, _, _ in PYTHON_BLOCKS}
    text = "".join(block for path in FILES for block in runnable_blocks(path))
    assert "-F 'binding=<binding.json'" in text  # the multipart example, quoted


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_the_runnable_blocks_of_a_doc_run(daemon: LiveDaemon, path: Path) -> None:
    script = "\n".join(runnable_blocks(path))
    if re.search(r"^\s*openssl\b", script, re.MULTILINE) and shutil.which("openssl") is None:
        pytest.skip(f"{path.name}'s blocks run openssl, which is not installed")
    done = run_bash(script, daemon)
    assert done.returncode == 0, f"{path.name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize(
    ("path", "number", "block"),
    PYTHON_BLOCKS,
    ids=[f"{path.name}-{number}" for path, number, _ in PYTHON_BLOCKS],
)
def test_the_runnable_python_of_a_doc_runs(
    request: pytest.FixtureRequest, path: Path, number: int, block: str
) -> None:
    """protocol.md §8's example once used a ``binding`` it never defined."""
    daemon: LiveDaemon = request.getfixturevalue(
        "busy_daemon" if path.name in BUSY_DOCS else "daemon"
    )
    done = subprocess.run(
        [sys.executable, "-c", substitute(block, daemon)],
        capture_output=True,
        text=True,
        cwd=daemon.directory,
        timeout=120,
    )
    assert done.returncode == 0, f"{path.name} block {number}:\n{done.stderr[-3000:]}"


def test_unquoted_multipart_binding_in_a_doc_is_caught(daemon: LiveDaemon) -> None:
    """The issue's row: ``-F binding=<binding.json`` unquoted is a shell redirection (curl's
    stdin becomes the file and it sends an empty ``binding`` part): the daemon answers 400
    ``HEADER_INVALID`` ("the binding part is not JSON"). The docs' curl examples fail on an
    HTTP error (``--fail-with-body``), so the runner sees it; quoted, it is a PASS."""
    setup = (
        "evidenced submit --connect http://127.0.0.1:7434 --session formation --print-binding"
        " fixtures/formation/atom.subject.json fixtures/formation/atom.certificate.json"
        " > binding.json\n"
    )
    command = (
        "curl -sS --fail-with-body http://127.0.0.1:7434/v1/sessions/formation/decisions \\\n"
        "  -F binding={binding} \\\n"
        "  -F evidence=@fixtures/formation/atom.subject.json \\\n"
        "  -F evidence=@fixtures/formation/atom.certificate.json | jq .result.outcome\n"
    )
    quoted = run_bash(setup + command.format(binding="'<binding.json'"), daemon)
    assert quoted.returncode == 0, quoted.stderr
    assert json.loads(quoted.stdout) == "PASS"
    unquoted = run_bash(setup + command.format(binding="<binding.json"), daemon)
    assert unquoted.returncode == 22, unquoted.stderr  # curl: the server answered an error
    assert "error: 400" in unquoted.stderr
    refusal = daemon.audit()[-1]
    assert (refusal["code"], refusal["requester"]["protocol"]) == ("HEADER_INVALID", "http")


def substitute(text: str, daemon: LiveDaemon) -> str:
    """The docs' addresses replaced by the live daemon's (and nothing else)."""
    text = text.replace(HTTP_ADDRESS, "{}:{}".format(*daemon.http))
    text = text.replace(BINARY_ADDRESS, daemon.started["tcp"])
    return text.replace(SOCKET, daemon.socket)


def run_bash(script: str, daemon: LiveDaemon) -> subprocess.CompletedProcess[str]:
    script = substitute(script, daemon)
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        capture_output=True,
        text=True,
        cwd=daemon.directory,
        env=env,
        timeout=120,
    )


# --------------------------------------------------------------------------- Kubernetes probes

YAML = re.compile(r"^```yaml[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
DOC_PORT = 7434


def doc_probes() -> list[dict[str, Any]]:
    """Every ``httpGet`` probe of docs/http.md's YAML blocks."""
    probes = []
    for block in YAML.findall((ROOT / "docs" / "http.md").read_text("utf-8")):
        document = yaml.safe_load(block)
        if isinstance(document, dict):
            probes += [v["httpGet"] for v in document.values() if "httpGet" in v]
    return probes


def manifest_probes() -> list[dict[str, Any]]:
    """The ``httpGet`` probes of the packaged Deployment, their named port resolved."""
    text = (ROOT / "packaging" / "kubernetes" / "deployment.yaml").read_text("utf-8")
    (deployment,) = list(yaml.safe_load_all(text))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    found = []
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = dict(container[key]["httpGet"])
        probe["port"] = ports.get(probe["port"], probe["port"])
        found.append(probe)
    return found


def kubelet_probe(probe: dict[str, Any], port: int) -> bool:
    """One ``httpGet`` probe as the kubelet runs it: HTTPS without checking the certificate
    (and presenting none), success a status from 200 to 399; any failure to talk is a failed
    probe."""
    if probe.get("scheme", "HTTP") == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=10, context=context
        )
    else:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", probe["path"], headers={"User-Agent": "kube-probe/1.30"})
        return 200 <= connection.getresponse().status < 400
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


@pytest.fixture(scope="module")
def tls_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDaemon]:
    """A daemon whose HTTP listener has TLS (a throwaway CA's certificate)."""
    folder = tmp_path_factory.mktemp("tls")
    issued = trustme.CA().issue_cert("127.0.0.1", "localhost")
    issued.private_key_pem.write_to_path(str(folder / "server.key"))
    for blob in issued.cert_chain_pems:
        blob.write_to_path(str(folder / "server.pem"), append=True)
    live = LiveDaemon(
        http_extra=f'tls_cert = "{folder / "server.pem"}"\ntls_key = "{folder / "server.key"}"\n'
    )
    try:
        yield live
    finally:
        live.stop()
        live.cleanup()


def test_the_kubernetes_probes_work_against_the_listener_they_are_written_for(
    daemon: LiveDaemon, tls_daemon: LiveDaemon
) -> None:
    """docs/http.md's probe snippet had no ``scheme: HTTPS``: against the documented TLS
    listener it spoke plain HTTP and failed. Each probe now passes against the listener it is
    written for, the packaged Deployment's too, and a plain probe fails against TLS."""
    probes, packaged = doc_probes(), manifest_probes()
    tls = [probe for probe in probes if probe.get("scheme") == "HTTPS"]
    plain = [probe for probe in probes if probe.get("scheme", "HTTP") == "HTTP"]
    assert tls and plain and len(tls) + len(plain) == len(probes)
    assert all(probe["port"] == DOC_PORT for probe in probes)
    assert all(probe.get("scheme") == "HTTPS" for probe in packaged)
    for probe in plain:
        assert kubelet_probe(probe, daemon.http[1]), probe
    for probe in tls + packaged:
        assert kubelet_probe(probe, tls_daemon.http[1]), probe
    for probe in plain:  # the old snippet, against a TLS listener
        assert not kubelet_probe(probe, tls_daemon.http[1]), probe
