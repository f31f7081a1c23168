"""The command line's one-shot calls: ``submit``, ``sessions`` and ``health`` go through the
library's blocking client (``daemon/client/_sync.py``), whose binary-protocol transport is a
plain socket (``daemon/client/_blocking.py``), never an event loop.

What these tests guard: a one-shot call over a Unix socket (or ``tcp://``) loads no event
loop, no HTTP client and no numeric stack, and its answers are the HTTP API's answers through
the same client — the same decision fields, the same binding, the same exit code and refusal
code for a refused pair, an unknown session and an unreachable daemon. The daemon is a real
``evidenced serve`` process. Nothing here is timed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clirun
import pytest
from http_testkit import FORMATION, ROOT, LiveDaemon

from daemon import SyncClient

TOKEN = "one-shot-token-for-the-blocking-client-000000"

CONFIG = """
[server]
listen = "127.0.0.1:0"
socket = "s"
tokens_file = "{tokens}"
worker_processes = 1

[http]
listen = "127.0.0.1:0"

[audit]
path = "audit.jsonl"

[sessions.formation]
mechanisms = ["formation"]

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 2
max_evidence_bytes = 4096
"""

#: What differs between two decisions on the same pair: their identity and place in the log.
PER_DECISION = ("decision_id", "seq", "line_digest", "log_index")


@pytest.fixture(scope="module")
def daemon(module_short_dir: Path) -> Iterator[LiveDaemon]:
    tokens = module_short_dir / "tokens"
    tokens.write_text(f"{hashlib.sha256(TOKEN.encode()).hexdigest()} tester\n")
    os.chmod(tokens, 0o600)
    live = LiveDaemon(config_text=CONFIG.format(tokens=tokens))
    try:
        yield live
    finally:
        live.stop()
        live.cleanup()


@pytest.fixture(scope="module")
def files(module_short_dir: Path) -> dict[str, str]:
    small = module_short_dir / "small.bin"
    small.write_bytes(b"evidence-bound bytes\n")
    big = module_short_dir / "big.bin"
    big.write_bytes(b"z" * 5000)  # over the bytes session's 4096
    token = module_short_dir / "token"
    token.write_text(TOKEN + "\n")
    wrong = module_short_dir / "wrong-token"
    wrong.write_text("not-the-token\n")
    return {
        "small": str(small),
        "big": str(big),
        "token": str(token),
        "wrong": str(wrong),
        "subject": str(FORMATION / "atom.subject.json"),
        "certificate": str(FORMATION / "atom.certificate.json"),
    }


def _tcp(daemon: LiveDaemon) -> str:
    return f"tcp://{daemon.started['tcp']}"


def _over_http(argv: list[str], daemon: LiveDaemon) -> clirun.CliResult:
    """The same command line against the daemon's HTTP listener (no tokens file there)."""
    flag = argv.index("--socket")
    return clirun.in_process([*argv[:flag], "--connect", daemon.base, *argv[flag + 2 :]])


def _decision(result: clirun.CliResult) -> dict[str, Any]:
    document = result.document()
    assert isinstance(document, dict) and "outcome" in document, result.stdout
    return {key: value for key, value in document.items() if key not in PER_DECISION}


def _refusal(result: clirun.CliResult) -> tuple[int, dict[str, Any], str]:
    error = clirun.error_of(result)
    error.pop("decision_id", None)
    return result.returncode, error, result.err


def _modules_loaded_by(argv: list[str]) -> tuple[int, set[str]]:
    """``evidenced ARGV`` in a fresh interpreter: its exit code and every module it loaded."""
    probe = (
        "import json, sys\n"
        "from daemon.cli import main\n"
        f"code = main({argv!r})\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
        "raise SystemExit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    return done.returncode, set(json.loads(done.stderr.splitlines()[-1]))


def _under(modules: set[str], roots: tuple[str, ...]) -> set[str]:
    return {m for m in modules for root in roots if m == root or m.startswith(root + ".")}


NEVER_ONE_SHOT = (
    "trio",
    "h11",
    "numpy",
    "safetensors",
    "cryptography",
    "boto3",
    "ssl",
    "daemon.server",
    "daemon.config",
    "daemon.audit",
    "daemon.tlog",
    "anyio",
    "httpx",
    "httpcore",
    "daemon.client._client",
    "daemon.client._evd1_async",
    "daemon.client._http_transport",
    "importlib.metadata",  # the providers are found from the metadata files (session._entry_points)
)
#: The built-in provider packages a one-shot ``submit`` to a session of each mechanism never
#: imports: only its own mechanism's (session._plugins, BUILT_IN_MECHANISMS).
OTHER_MECHANISMS = {
    "bytes": ("mechanism.formation", "mechanism.descriptor"),
    "formation": ("mechanism.descriptor",),
}


@pytest.mark.parametrize("session", ["bytes", "formation"])
def test_submit_over_the_unix_socket_never_imports_trio(
    daemon: LiveDaemon, files: dict[str, str], session: str
) -> None:
    evidence = [files["small"]] if session == "bytes" else [files["subject"], files["certificate"]]
    argv = ["submit", "--socket", daemon.socket, "--session", session, *evidence]
    code, modules = _modules_loaded_by(argv)
    assert code == 0
    assert _under(modules, NEVER_ONE_SHOT) == set()
    assert _under(modules, OTHER_MECHANISMS[session]) == set()


@pytest.mark.parametrize("command", ["sessions", "health"])
def test_a_query_over_the_unix_socket_never_imports_trio(daemon: LiveDaemon, command: str) -> None:
    code, modules = _modules_loaded_by([command, "--socket", daemon.socket])
    assert code == 0
    assert _under(modules, NEVER_ONE_SHOT) == set()


def test_submit_over_http_loads_httpx_not_the_async_client(
    daemon: LiveDaemon, files: dict[str, str]
) -> None:
    """httpx's blocking client (httpcore imports trio and anyio when they are installed, for
    its async side: not ours to avoid); never the async client or its EVD1 transport."""
    argv = ["submit", "--connect", daemon.base, "--session", "bytes", files["small"]]
    code, modules = _modules_loaded_by(argv)
    assert code == 0
    assert {"httpx", "daemon.client._http_transport"} <= modules
    assert _under(modules, ("daemon.client._client", "daemon.client._evd1_async")) == set()


@pytest.mark.parametrize("session", ["bytes", "formation"])
def test_a_decision_is_the_same_over_the_socket_and_http(
    daemon: LiveDaemon, files: dict[str, str], session: str
) -> None:
    evidence = [files["small"]] if session == "bytes" else [files["subject"], files["certificate"]]
    argv = ["submit", "--socket", daemon.socket, "--session", session, *evidence]
    binary = clirun.in_process(argv)
    http = _over_http(argv, daemon)
    assert binary.returncode == http.returncode == 0, binary.err
    assert _decision(binary) == _decision(http)
    assert set(binary.document()) == set(http.document())
    assert binary.err.split(" (decision ")[0] == http.err.split(" (decision ")[0]


def test_the_binding_is_the_same_over_the_socket_and_http(
    daemon: LiveDaemon, files: dict[str, str]
) -> None:
    argv = ["submit", "--socket", daemon.socket, "--session", "formation", "--print-binding"]
    argv += [files["subject"], files["certificate"]]
    binary = clirun.in_process(argv)
    assert binary.returncode == 0, binary.err
    assert binary == _over_http(argv, daemon)


def _code(result: clirun.CliResult) -> tuple[int, str]:
    return result.returncode, clirun.error_of(result)["code"]


def test_a_refused_pair_is_refused_alike(daemon: LiveDaemon, files: dict[str, str]) -> None:
    argv = ["submit", "--socket", daemon.socket, "--session", "bytes", files["big"]]
    binary = clirun.in_process(argv)
    assert _code(binary) == _code(_over_http(argv, daemon)) == (65, "EVIDENCE_BYTES_EXCEEDED")


def test_an_unknown_session_is_refused_alike(daemon: LiveDaemon, files: dict[str, str]) -> None:
    argv = ["submit", "--socket", daemon.socket, "--session", "nobody", files["small"]]
    binary = clirun.in_process(argv)
    assert _code(binary) == _code(_over_http(argv, daemon)) == (65, "UNKNOWN_SESSION")
    assert binary == _over_http(argv, daemon)  # the client's own refusal: the same words


@pytest.mark.parametrize("token", ["wrong", None])
def test_a_wrong_or_missing_token_is_refused(
    daemon: LiveDaemon, files: dict[str, str], token: str | None
) -> None:
    argv = ["submit", "--connect", _tcp(daemon), "--session", "bytes", files["small"]]
    if token is not None:
        argv += ["--token-file", files[token]]
    assert _code(clirun.in_process(argv)) == (65, "UNAUTHENTICATED")


def test_the_right_token_is_accepted_over_tcp(daemon: LiveDaemon, files: dict[str, str]) -> None:
    argv = ["submit", "--connect", _tcp(daemon), "--session", "bytes", files["small"]]
    argv += ["--token-file", files["token"]]
    binary = clirun.in_process(argv)
    assert binary.returncode == 0, binary.err
    over_socket = ["submit", "--socket", daemon.socket, "--session", "bytes", files["small"]]
    assert _decision(binary) == _decision(clirun.in_process(over_socket))
    sessions = ["sessions", "--connect", _tcp(daemon), "--token-file", files["token"]]
    assert clirun.in_process(sessions) == clirun.in_process(["sessions", "--socket", daemon.socket])


def test_an_unreachable_daemon_is_unreachable_alike(module_short_dir: Path) -> None:
    targets = (
        ["--socket", str(module_short_dir / "nobody")],
        ["--connect", "127.0.0.1:1"],
        ["--connect", "http://127.0.0.1:1"],
    )
    for target in targets:
        answered = clirun.in_process(["health", *target])
        assert _code(answered) == (69, "UNREACHABLE"), answered.err


def test_the_library_clients_still_agree(daemon: LiveDaemon, files: dict[str, str]) -> None:
    """The library's ``SyncClient`` decision carries the one-shot CLI's fields."""
    small = Path(files["small"]).read_bytes()
    binding = clirun.in_process(
        [
            "submit",
            "--socket",
            daemon.socket,
            "--session",
            "bytes",
            "--print-binding",
            files["small"],
        ]
    ).document()
    result = SyncClient(unix=daemon.socket).submit("bytes", binding, [small])
    cli_side = clirun.in_process(
        ["submit", "--socket", daemon.socket, "--session", "bytes", files["small"]]
    )
    library = {k: v for k, v in result.to_dict().items() if k not in PER_DECISION}
    assert library == _decision(cli_side)
