"""TLS, client certificates and bearer tokens on both TCP listeners, and the exposure rule."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import clirun
import pytest
import trio
import trustme
from daemon_testkit import read_stderr_until
from http_testkit import CURL, ROOT, atom, curl

from daemon import (
    RejectedError,
    Server,
    ServerConfig,
    TransportError,
    default_sessions,
    open_client,
    open_server,
)
from daemon.config._http_config import HttpConfig
from daemon.config._security import ExposureRefused, ListenerSecurity
from daemon.config._tls import TlsConfig
from daemon.config._tokens import token_line

TOKEN = "s3cret-token-of-the-ci-runner-0123456789ab"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def tls_files(ca: trustme.CA, directory: Path) -> dict[str, str]:
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.example", common_name="ci-runner")
    paths = {name: str(directory / f"{name}.pem") for name in ("ca", "cert", "key", "client")}
    ca.cert_pem.write_to_path(paths["ca"])
    server.private_key_pem.write_to_path(paths["key"])
    for blob in server.cert_chain_pems:
        blob.write_to_path(paths["cert"], append=True)
    client.private_key_and_cert_chain_pem.write_to_path(paths["client"])
    tokens = directory / "tokens"
    tokens.write_text(f"# who may submit\n{token_line(TOKEN, 'ci-runner')}\n")
    os.chmod(tokens, 0o600)
    paths["tokens"] = str(tokens)
    return paths


def audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@asynccontextmanager
async def secured(
    directory: Path, files: dict[str, str], *, client_ca: bool = False
) -> AsyncIterator[Server]:
    tls = TlsConfig(files["cert"], files["key"], files["ca"] if client_ca else None)
    security = ListenerSecurity(tls, files["tokens"])
    config = ServerConfig(
        tcp=("127.0.0.1", 0),
        unix=str(directory / "s"),
        audit_path=str(directory / "audit.jsonl"),
        worker_processes=1,
        security=security,
        http=HttpConfig(listen=("127.0.0.1", 0), security=security),
    )
    async with open_server(default_sessions(), config) as server:
        yield server


def url(scheme: str, address: tuple[str, int] | None) -> str:
    assert address is not None
    return f"{scheme}://{address[0]}:{address[1]}"


async def test_https_and_tls_submit_with_a_token_record_its_name_never_the_token(
    ca: trustme.CA, short_dir: Path
) -> None:
    files = tls_files(ca, short_dir)
    subject, certificate, binding = atom()
    async with secured(short_dir, files) as server:
        for target in (url("https", server.http_address), url("tls", server.tcp_address)):
            async with open_client(target, tls_ca=files["ca"], token=TOKEN) as client:
                result = await client.submit("formation", binding, [subject, certificate])
                assert result.outcome == "PASS"
    lines = audit(short_dir / "audit.jsonl")
    decisions = [line for line in lines if line["event"] == "decision"]
    assert [line["requester"]["token"] for line in decisions] == ["ci-runner", "ci-runner"]
    assert decisions[0]["requester"]["protocol"] == "http"
    assert TOKEN not in (short_dir / "audit.jsonl").read_text()
    start = lines[0]
    assert start["event"] == "daemon_start" and start["insecure_listen"] is False
    secured_listener = {"tls": True, "client_certificates": False, "tokens": True}
    assert start["security"] == {"tcp": secured_listener, "http": secured_listener}


@pytest.mark.parametrize("token", [None, "wrong-token"])
async def test_a_missing_or_wrong_token_is_unauthenticated_on_both_listeners(
    ca: trustme.CA, short_dir: Path, token: str | None
) -> None:
    files = tls_files(ca, short_dir)
    subject, certificate, binding = atom()
    async with secured(short_dir, files) as server:
        for target in (url("https", server.http_address), url("tls", server.tcp_address)):
            with pytest.raises(RejectedError) as caught:
                async with open_client(target, tls_ca=files["ca"], token=token) as client:
                    await client.submit("formation", binding, [subject, certificate])
            assert caught.value.code == "UNAUTHENTICATED"
            assert caught.value.decision_id is None  # noise: counted, not a line each
        async with open_client(url("https", server.http_address), tls_ca=files["ca"]) as client:
            # probes need no token, and learn the status only
            assert await client.health() == {"status": "serving"}
        async with open_client(
            url("https", server.http_address), tls_ca=files["ca"], token=TOKEN
        ) as client:
            health = await client.health()
        assert health["noise"]["pending"] == 2 and health["peers"]["auth_failures"] == 2
    lines = audit(short_dir / "audit.jsonl")
    assert not any(line["event"] in ("decision", "refusal") for line in lines)
    noise = [line for line in lines if line["event"] == "noise"]
    assert [line["count"] for line in noise] == [2]  # summarised before daemon_stop


async def test_the_unix_socket_keeps_peer_credentials_and_needs_no_token(
    ca: trustme.CA, short_dir: Path
) -> None:
    files = tls_files(ca, short_dir)
    subject, certificate, binding = atom()
    async with secured(short_dir, files) as server, open_client(unix=server.unix_path) as client:
        assert (await client.submit("formation", binding, [subject, certificate])).outcome == "PASS"
    assert oct(os.stat(short_dir / "audit.jsonl").st_mode & 0o777)  # the log exists
    decision = next(
        line for line in audit(short_dir / "audit.jsonl") if line["event"] == "decision"
    )
    assert decision["requester"]["transport"] == "unix"
    assert decision["requester"]["uid"] == os.getuid() and "token" not in decision["requester"]


async def test_a_client_certificate_is_required_and_recorded_with_a_client_ca(
    ca: trustme.CA, short_dir: Path
) -> None:
    files = tls_files(ca, short_dir)
    subject, certificate, binding = atom()
    async with secured(short_dir, files, client_ca=True) as server:
        for target in (url("https", server.http_address), url("tls", server.tcp_address)):
            with pytest.raises(TransportError):
                async with open_client(target, tls_ca=files["ca"], token=TOKEN) as client:
                    await client.submit("formation", binding, [subject, certificate])
            async with open_client(
                target, tls_ca=files["ca"], tls_cert=files["client"], token=TOKEN
            ) as client:
                assert (await client.list_sessions())[0]["name"] == "descriptor"
                result = await client.submit("formation", binding, [subject, certificate])
                assert result.outcome == "PASS"
        async with open_client(unix=server.unix_path) as client:  # still serving
            assert (await client.health())["status"] == "serving"
    decisions = [line for line in audit(short_dir / "audit.jsonl") if line["event"] == "decision"]
    assert [line["requester"]["tls_client"]["subject_cn"] for line in decisions] == [
        "ci-runner",
        "ci-runner",
    ]


async def test_plain_clients_cannot_talk_to_a_tls_listener(ca: trustme.CA, short_dir: Path) -> None:
    files = tls_files(ca, short_dir)
    async with secured(short_dir, files) as server:
        for target in (url("http", server.http_address), url("tcp", server.tcp_address)):
            with pytest.raises(TransportError):
                async with open_client(target, token=TOKEN, connect_timeout=3) as client:
                    await client.health()
        async with open_client(url("https", server.http_address), tls_ca=files["ca"]) as client:
            assert (await client.health())["status"] == "serving"


@pytest.mark.skipif(CURL is None, reason="curl is not installed (run make curl)")
async def test_curl_over_https_with_a_bearer_token(ca: trustme.CA, short_dir: Path) -> None:
    files = tls_files(ca, short_dir)
    async with secured(short_dir, files) as server:
        base = url("https", server.http_address)
        args = ("--cacert", files["ca"], "-w", "\n%{http_code}")
        with_token = await trio.to_thread.run_sync(
            lambda: curl(*args, "-H", f"Authorization: Bearer {TOKEN}", f"{base}/v1/sessions")
        )
        without = await trio.to_thread.run_sync(lambda: curl(*args, f"{base}/v1/sessions"))
    body, _, status = with_token.stdout.rpartition(b"\n")
    assert status == b"200" and json.loads(body)["kind"] == "sessions"
    body, _, status = without.stdout.rpartition(b"\n")
    assert status == b"401" and json.loads(body)["error"]["code"] == "UNAUTHENTICATED"


async def test_a_non_loopback_listener_without_tls_and_auth_is_refused(short_dir: Path) -> None:
    log = short_dir / "audit.jsonl"
    for options in (
        {"tcp": ("0.0.0.0", 0)},
        {"tcp": None, "unix": str(short_dir / "s"), "http": HttpConfig(listen=("0.0.0.0", 0))},
    ):
        config = ServerConfig(audit_path=str(log), worker_processes=1, **options)
        refused: list[ExposureRefused] = []
        try:
            async with open_server(default_sessions(), config):
                pass
        except* ExposureRefused as group:
            refused.extend(
                error for error in group.exceptions if isinstance(error, ExposureRefused)
            )
        assert len(refused) == 1 and "--insecure-listen" in str(refused[0])
    assert not log.exists()  # refused before anything was opened


async def test_insecure_listen_is_allowed_and_recorded(short_dir: Path) -> None:
    config = ServerConfig(
        tcp=("0.0.0.0", 0),
        audit_path=str(short_dir / "audit.jsonl"),
        worker_processes=1,
        insecure_listen=True,
    )
    async with open_server(default_sessions(), config) as server:
        assert server.tcp_address is not None
        async with open_client(tcp=("127.0.0.1", server.tcp_address[1])) as client:
            assert (await client.health())["status"] == "serving"
    start = audit(short_dir / "audit.jsonl")[0]
    assert start["insecure_listen"] is True
    assert start["security"]["tcp"] == {"tls": False, "client_certificates": False, "tokens": False}


def test_serve_refuses_an_exposed_listener_with_exit_65(short_dir: Path) -> None:
    done = clirun.in_process_text(
        ["serve", "--listen", "0.0.0.0:0", "--audit-log", str(short_dir / "audit.jsonl")]
    )
    assert done.returncode == 65, done.stderr
    assert "not a loopback address" in done.stderr and "--insecure-listen" in done.stderr
    error = json.loads(done.stdout)["error"]  # the CLI contract: one JSON document on stdout
    assert (error["code"], error["exit"]) == ("CONFIG_INVALID", 65)
    assert "--insecure-listen" in error["message"]


async def test_the_cli_connects_by_url_with_a_token_file(ca: trustme.CA, short_dir: Path) -> None:
    files = tls_files(ca, short_dir)
    token_file = short_dir / "token"
    token_file.write_text(TOKEN + "\n")
    async with secured(short_dir, files) as server:
        for target in (url("https", server.http_address), url("tls", server.tcp_address)):
            base = ["sessions", "--connect", target, "--tls-ca", files["ca"]]
            if target.startswith("https"):  # one real process: the entry point and its streams
                smoke = await trio.run_process(
                    [sys.executable, "-m", "daemon.cli", *base, "--token-file", str(token_file)],
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    cwd=ROOT,
                )
                assert smoke.returncode == 0, smoke.stderr
                assert "formation" in [s["name"] for s in json.loads(smoke.stdout)["sessions"]]
            good = await trio.to_thread.run_sync(
                clirun.in_process, [*base, "--token-file", str(token_file)]
            )
            assert good.returncode == 0, good.stderr
            assert "formation" in [s["name"] for s in json.loads(good.stdout)["sessions"]]
            bad = await trio.to_thread.run_sync(clirun.in_process, base)
            assert bad.returncode == 65
            assert json.loads(bad.stdout)["error"]["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_start_line_of_tls_listeners_names_the_urls_clients_take(
    ca: trustme.CA, short_dir: Path, workers: str
) -> None:
    """The start line of a TLS listener said ``serving … http://127.0.0.1:…``: a client that
    copied it spoke plain HTTP to a TLS listener. Each TCP listener is now named by the URL
    clients connect with: ``https://`` and ``tls://`` with TLS (``http://`` and ``tcp://``
    without)."""
    files = tls_files(ca, short_dir)
    config = short_dir / "tls.toml"
    tls = f'tls_cert = "{files["cert"]}"\ntls_key = "{files["key"]}"\n'
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:0"\nsocket = "s"\nworker_processes = 1\n{tls}'
        f'[http]\nlisten = "127.0.0.1:0"\n{tls}[audit]\npath = "audit.jsonl"\n'
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config), "--workers",
         workers, "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        seen = read_stderr_until(process, b'"event": "serving"')
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    serving = next(
        event
        for event in map(json.loads, seen.decode().splitlines())
        if event["event"] == "serving"
    )
    assert f"https://{ready['http']}" in serving["message"], serving["message"]
    assert f"tls://{ready['tcp']}" in serving["message"], serving["message"]
    assert "http://" not in serving["message"] and "tcp://" not in serving["message"]


def test_the_start_line_of_plain_listeners_names_http_and_tcp_urls(short_dir: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--listen", "127.0.0.1:0", "--http",
         "127.0.0.1:0", "--audit-log", str(short_dir / "audit.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        seen = read_stderr_until(process, b"event=serving").decode()
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert f"http://{ready['http']}" in seen and f"tcp://{ready['tcp']}" in seen, seen
