"""The command line's one-shot client: ``submit``, ``sessions`` and ``health`` over the binary
protocol use the blocking-socket client (``daemon/client/_blocking.py``), never trio.

What these tests guard: a one-shot call over a Unix socket (or ``tcp://``) loads no event
loop and no numeric stack, and its answers are the trio client's answers — the same decision
fields, the same refusal document and exit code for a refused pair and for a wrong token.
The daemon is a real ``evidenced serve`` process; the trio side is the same command line with
its one-shot path turned off (so both print through the same code). Nothing here is timed.
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
from daemon.commands import _client_cli

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


def _trio_cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> clirun.CliResult:
    """The same command line with its one-shot path off: the trio client answers."""
    with monkeypatch.context() as patch:
        patch.setattr(_client_cli, "_one_shot", lambda target: None)
        return clirun.in_process(argv)


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
    "daemon.client._client",
    "daemon.client._connect",
    "daemon.client._http_client",
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


def test_submit_over_http_still_uses_the_trio_client(
    daemon: LiveDaemon, files: dict[str, str]
) -> None:
    argv = ["submit", "--connect", daemon.base, "--session", "bytes", files["small"]]
    code, modules = _modules_loaded_by(argv)
    assert code == 0
    assert {"trio", "daemon.client._http_client"} <= modules


@pytest.mark.parametrize("session", ["bytes", "formation"])
def test_the_one_shot_decision_is_the_trio_clients(
    daemon: LiveDaemon, files: dict[str, str], session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    evidence = [files["small"]] if session == "bytes" else [files["subject"], files["certificate"]]
    argv = ["submit", "--socket", daemon.socket, "--session", session, *evidence]
    blocking = clirun.in_process(argv)
    trio_side = _trio_cli(argv, monkeypatch)
    assert blocking.returncode == trio_side.returncode == 0, blocking.err
    assert _decision(blocking) == _decision(trio_side)
    assert set(blocking.document()) == set(trio_side.document())
    assert blocking.err.split(" (decision ")[0] == trio_side.err.split(" (decision ")[0]


def test_the_one_shot_binding_is_the_trio_clients(
    daemon: LiveDaemon, files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["submit", "--socket", daemon.socket, "--session", "formation", "--print-binding"]
    argv += [files["subject"], files["certificate"]]
    blocking = clirun.in_process(argv)
    assert blocking.returncode == 0, blocking.err
    assert blocking == _trio_cli(argv, monkeypatch)


def test_a_refused_pair_is_refused_alike(
    daemon: LiveDaemon, files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["submit", "--socket", daemon.socket, "--session", "bytes", files["big"]]
    blocking = _refusal(clirun.in_process(argv))
    assert blocking == _refusal(_trio_cli(argv, monkeypatch))
    assert blocking[0] == 65 and blocking[1]["code"] == "EVIDENCE_BYTES_EXCEEDED"


def test_an_unknown_session_is_refused_alike(
    daemon: LiveDaemon, files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["submit", "--socket", daemon.socket, "--session", "nobody", files["small"]]
    blocking = _refusal(clirun.in_process(argv))
    assert blocking == _refusal(_trio_cli(argv, monkeypatch))
    assert blocking[1]["code"] == "UNKNOWN_SESSION"


@pytest.mark.parametrize("token", ["wrong", None])
def test_a_wrong_or_missing_token_is_refused_alike(
    daemon: LiveDaemon, files: dict[str, str], token: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["submit", "--connect", _tcp(daemon), "--session", "bytes", files["small"]]
    if token is not None:
        argv += ["--token-file", files[token]]
    blocking = _refusal(clirun.in_process(argv))
    assert blocking == _refusal(_trio_cli(argv, monkeypatch))
    assert blocking[0] == 65 and blocking[1]["code"] == "UNAUTHENTICATED"


def test_the_right_token_is_accepted_over_tcp(
    daemon: LiveDaemon, files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["submit", "--connect", _tcp(daemon), "--session", "bytes", files["small"]]
    argv += ["--token-file", files["token"]]
    blocking = clirun.in_process(argv)
    assert blocking.returncode == 0, blocking.err
    assert _decision(blocking) == _decision(_trio_cli(argv, monkeypatch))
    sessions = ["sessions", "--connect", _tcp(daemon), "--token-file", files["token"]]
    assert clirun.in_process(sessions) == _trio_cli(sessions, monkeypatch)


def test_an_unreachable_daemon_is_unreachable_alike(
    module_short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for target in (["--socket", str(module_short_dir / "nobody")], ["--connect", "127.0.0.1:1"]):
        argv = ["health", *target]
        blocking = clirun.in_process(argv)
        assert blocking.returncode == 69
        assert blocking == _trio_cli(argv, monkeypatch)


def test_the_library_clients_still_agree(daemon: LiveDaemon, files: dict[str, str]) -> None:
    """``SyncClient`` (trio) is unchanged: its decision carries the one-shot CLI's fields."""
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
