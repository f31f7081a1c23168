"""One set of checks everywhere, and reload as a generation.

Every daemon here is a real ``evidenced serve`` process, signalled with real signals; the
listening socket of socket activation is a real socket passed as descriptor 3 with
``LISTEN_FDS``, as systemd passes it. Each test is named after the attack or fault it stops;
each failed on the code before this change:

* a token removed from ``tokens_file`` still worked after ``kill -HUP`` (reload re-read only
  the sessions), and a reload accepted a symlink to a 0666 tokens file a start refuses;
* an inherited non-loopback socket was served without TLS or authentication, and
  ``daemon_start`` said ``"insecure_listen": false``;
* ``config check`` and ``serve --check`` said valid (exit 0) for a listener ``serve`` refuses;
* a session added by SIGHUP had no ``/metrics`` series;
* 100 SIGHUPs at 20/s grew the process tree by two evaluation workers a reload, for a minute;
* SIGHUP under ``--workers 2`` was ignored with a message.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import clirun
import pytest
import trio
import trustme
from daemon_testkit import bytes_binding
from http_testkit import json_body, read_answer

from daemon import RejectedError, SyncClient, TransportError, open_client
from daemon.audit._audit import tail
from daemon.config._tokens import token_line
from session import EvidenceBounds

CLI = [sys.executable, "-m", "daemon.cli"]
OLD_TOKEN = "token-of-a-contractor-who-has-left-0123456789"
NEW_TOKEN = "token-of-the-ci-runner-which-stays-0123456789"


def _start(
    *args: str, cwd: Path, env: dict[str, str] | None = None, pass_fds: tuple[int, ...] = ()
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    process = subprocess.Popen(
        [*CLI, "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        pass_fds=pass_fds,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise AssertionError(f"serve did not start: {process.communicate(timeout=30)[1]!r}")
    return process, json.loads(line)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _events(path: Path, event: str) -> list[dict[str, Any]]:
    return [line for line in tail(str(path), 10_000) if line.get("event") == event]


def _stop(process: subprocess.Popen[bytes]) -> str:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return err.decode()


def _tokens(path: Path, *tokens: tuple[str, str]) -> None:
    path.write_text("".join(f"{token_line(token, name)}\n" for token, name in tokens))
    os.chmod(path, 0o600)


def _server_config(path: Path, *, server: str = "", sessions: str = "", http: str = "") -> None:
    path.write_text(
        f'[server]\nlisten = "127.0.0.1:0"\nworker_processes = 1\n{server}'
        '[audit]\npath = "audit.jsonl"\n'
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
        f"max_evidence_bytes = 64\n{sessions}{http}"
    )


# --------------------------------------------------------------------------- refusals


def test_a_reload_whose_configuration_file_is_gone_is_refused_not_a_crash(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    config = short_dir / "evidenced.toml"
    _server_config(config)
    process, ready = _start("--config", str(config), cwd=short_dir)
    processes.append(process)
    config.unlink()  # a deployment tool removed it, or a mount went away
    process.send_signal(signal.SIGHUP)
    audit = short_dir / "audit.jsonl"
    _wait_for(lambda: bool(_events(audit, "config_reload")), "config_reload")
    (refused,) = _events(audit, "config_reload")
    assert refused["status"] == "REFUSED" and "cannot read the configuration" in refused["reason"]

    async def names() -> list[str]:
        async with open_client(f"tcp://{ready['tcp']}") as client:
            return [item["name"] for item in await client.list_sessions()]

    assert trio.run(names) == ["bytes"]
    _stop(process)


# --------------------------------------------------------------------------- tokens


def test_a_revoked_token_stops_working_when_the_reload_is_applied(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    tokens, config = short_dir / "tokens", short_dir / "evidenced.toml"
    _tokens(tokens, (OLD_TOKEN, "contractor"), (NEW_TOKEN, "ci-runner"))
    _server_config(config, server='tokens_file = "tokens"\n')
    process, ready = _start("--config", str(config), cwd=short_dir)
    processes.append(process)
    target = f"tcp://{ready['tcp']}"

    async def health(token: str) -> str:
        async with open_client(target, token=token) as client:
            return str((await client.list_sessions())[0]["name"])

    assert trio.run(health, OLD_TOKEN) == "bytes"
    _tokens(tokens, (NEW_TOKEN, "ci-runner"))  # the contractor's token is revoked
    process.send_signal(signal.SIGHUP)
    audit = short_dir / "audit.jsonl"
    _wait_for(lambda: bool(_events(audit, "config_reload")), "config_reload")
    assert _events(audit, "config_reload")[-1]["status"] == "APPLIED"
    with pytest.raises(RejectedError) as refused:
        trio.run(health, OLD_TOKEN)
    assert refused.value.code == "UNAUTHENTICATED"
    assert trio.run(health, NEW_TOKEN) == "bytes"
    _stop(process)


def _revocable(short_dir: Path, *args: str) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """A daemon whose binary and HTTP listeners take the contractor's and the CI runner's
    tokens (``args``: more ``serve`` flags)."""
    tokens, config = short_dir / "tokens", short_dir / "evidenced.toml"
    _tokens(tokens, (OLD_TOKEN, "contractor"), (NEW_TOKEN, "ci-runner"))
    _server_config(
        config,
        server='tokens_file = "tokens"\n',
        http='[http]\nlisten = "127.0.0.1:0"\ntokens_file = "tokens"\n',
    )
    return _start("--config", str(config), *args, cwd=short_dir)


def _revoke(short_dir: Path, process: subprocess.Popen[bytes]) -> None:
    """The contractor's token removed, SIGHUP, and back once ``config_reload APPLIED`` is in
    the audit log."""
    _tokens(short_dir / "tokens", (NEW_TOKEN, "ci-runner"))
    process.send_signal(signal.SIGHUP)
    audit = short_dir / "audit.jsonl"
    _wait_for(lambda: bool(_events(audit, "config_reload")), "config_reload")
    assert [line["status"] for line in _events(audit, "config_reload")] == ["APPLIED"]


EVIDENCE = b"submitted on an old connection"
BINDING = bytes_binding(EVIDENCE, bounds=EvidenceBounds(1, 64))


def _http_submit(token: str) -> bytes:
    body = json_body(BINDING.to_dict(), EVIDENCE)
    return (
        f"POST /v1/sessions/bytes/decisions HTTP/1.1\r\nHost: t\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode() + body


@pytest.mark.parametrize("workers", ["1", "2"])
def test_revoked_token_refused_on_an_open_evd1_connection(
    short_dir: Path, processes: list[subprocess.Popen[bytes]], workers: str
) -> None:
    """The token was checked at ``hello`` only: an EVD1 connection opened before the token
    was removed kept submitting after the reload (4 more decisions in 12 s). Now its next
    request is refused ``UNAUTHENTICATED`` and the connection closed; nothing is decided."""
    process, ready = _revocable(short_dir, "--workers", workers)
    processes.append(process)

    async def scenario() -> None:
        async with open_client(f"tcp://{ready['tcp']}", token=OLD_TOKEN) as client:
            assert (await client.submit("bytes", BINDING, [EVIDENCE])).outcome == "PASS"
            await trio.to_thread.run_sync(_revoke, short_dir, process)
            with pytest.raises(RejectedError) as refused:
                await client.submit("bytes", BINDING, [EVIDENCE])
            assert refused.value.code == "UNAUTHENTICATED"
        async with open_client(f"tcp://{ready['tcp']}", token=NEW_TOKEN) as client:
            assert (await client.submit("bytes", BINDING, [EVIDENCE])).outcome == "PASS"

    trio.run(scenario)
    _stop(process)
    decided = [
        line["requester"].get("token") for line in _events(short_dir / "audit.jsonl", "decision")
    ]
    assert decided == ["contractor", "ci-runner"]  # nothing decided for the revoked token
    assert not _events(short_dir / "audit.jsonl", "refusal")  # a revoked token is noise


@pytest.mark.parametrize("workers", ["1", "2"])
def test_revoked_token_refused_on_an_open_http_keep_alive_connection(
    short_dir: Path, processes: list[subprocess.Popen[bytes]], workers: str
) -> None:
    """Under ``--workers 2`` a keep-alive request was accepted right after the ``APPLIED``
    line, by a worker still on the old generation. Now the line is written once every worker
    serves the new tokens, and the next request on the open connection is refused 401."""
    process, ready = _revocable(short_dir, "--workers", workers)
    processes.append(process)
    host, port = ready["http"].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(_http_submit(OLD_TOKEN))
        first = read_answer(sock)
        assert first.status == 200 and not first.closed
        _revoke(short_dir, process)
        sock.settimeout(30)  # read_answer left it at its short close probe
        sock.sendall(_http_submit(OLD_TOKEN))
        second = read_answer(sock)
    assert second.status == 401 and second.error["code"] == "UNAUTHENTICATED"
    assert second.closed
    _stop(process)
    decided = _events(short_dir / "audit.jsonl", "decision")
    assert [line["requester"]["token"] for line in decided] == ["contractor"]


def test_no_request_of_a_revoked_token_is_accepted_after_the_applied_line_under_two_workers(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """Clients keep submitting with the contractor's token on open connections (four HTTP
    keep-alive, two EVD1) while it is revoked. Each reads the audit log before each request:
    no request sent once ``config_reload APPLIED`` was in the log may be accepted (before, the
    parent wrote the line and then signalled the workers, which switched a moment later:
    EVD1 connections never did)."""
    process, ready = _revocable(short_dir, "--workers", "2")
    processes.append(process)
    audit = short_dir / "audit.jsonl"
    results: list[tuple[str, bool, bool]] = []  # (client, APPLIED seen before, accepted)
    started = threading.Barrier(7)

    def applied() -> bool:
        return b'"config_reload"' in audit.read_bytes()

    def http_client(name: str) -> None:
        host, port = ready["http"].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            for number in range(100_000):
                seen = applied()
                sock.settimeout(60)  # read_answer left it at its short close probe
                sock.sendall(_http_submit(OLD_TOKEN))
                answer = read_answer(sock)
                results.append((name, seen, answer.status == 200))
                if number == 0:
                    started.wait(60)
                if answer.status != 200 or answer.closed or (seen and number > 200):
                    return

    def evd1_client(name: str) -> None:
        # One kept connection, opened before the token is revoked (no retry: the daemon's answer).
        with SyncClient(f"tcp://{ready['tcp']}", token=OLD_TOKEN, retry=None) as client:
            for number in range(100_000):
                seen = applied()
                try:
                    accepted = client.submit("bytes", BINDING, [EVIDENCE]).outcome == "PASS"
                except (RejectedError, TransportError):
                    accepted = False
                results.append((name, seen, accepted))
                if number == 0:
                    started.wait(60)
                if not accepted or (seen and number > 200):
                    return

    threads = [threading.Thread(target=http_client, args=(f"http{n}",)) for n in range(4)]
    threads += [threading.Thread(target=evd1_client, args=(f"evd1{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    started.wait(60)  # every client has been served once: under load from here on
    _revoke(short_dir, process)
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    late = [(name, seen) for name, seen, accepted in results if seen and accepted]
    assert late == []
    for name in {name for name, _, _ in results}:  # every client was refused in the end
        assert [accepted for who, _, accepted in results if who == name][-1] is False
    _stop(process)


def test_a_stopped_worker_holds_the_applied_line_until_it_is_gone(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """A worker that cannot apply the new generation (here: stopped, so it never
    acknowledges) would go on serving the revoked token: the parent writes ``APPLIED`` only
    once it is gone (killed, its connections closed by the kernel) and its replacement starts
    on the new generation."""
    process, ready = _revocable(short_dir, "--workers", "2")
    processes.append(process)
    target = f"tcp://{ready['tcp']}"
    _wait_for(lambda: len(_health(target, NEW_TOKEN)["workers"]) == 2, "both workers serving")
    (victim,) = [w for w in _health(target, NEW_TOKEN)["workers"] if w["index"] == 0]
    os.kill(victim["pid"], signal.SIGSTOP)
    _revoke(short_dir, process)  # returns once APPLIED is in the log

    def replaced_on_generation_1() -> bool:
        entry = {w["index"]: w for w in _health(target, NEW_TOKEN)["workers"]}.get(0, {})
        return (
            entry.get("alive") is True
            and entry.get("pid") != victim["pid"]
            and (entry.get("generation") == 1)
        )

    _wait_for(replaced_on_generation_1, "worker 0 replaced on generation 1")
    err = _stop(process)
    killed = err.index(f"worker 0 (pid {victim['pid']}) silent for")
    assert killed < err.index("(2 workers)", err.index("SIGHUP: configuration reloaded from"))


def test_a_reload_refuses_a_symlink_to_a_world_writable_tokens_file_as_a_start_does(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    tokens, config = short_dir / "tokens", short_dir / "evidenced.toml"
    _tokens(tokens, (NEW_TOKEN, "ci-runner"))
    _server_config(config, server='tokens_file = "tokens"\n')
    process, ready = _start("--config", str(config), cwd=short_dir)
    processes.append(process)
    loose = short_dir / "loose"
    loose.write_text("garbage, and anyone may write here\n")
    os.chmod(loose, 0o666)
    tokens.unlink()
    tokens.symlink_to(loose)
    # The same reload also changes a bound: all of it is refused, or none.
    config.write_text(
        config.read_text().replace("max_evidence_bytes = 64", "max_evidence_bytes = 8")
    )
    process.send_signal(signal.SIGHUP)
    audit = short_dir / "audit.jsonl"
    _wait_for(lambda: bool(_events(audit, "config_reload")), "config_reload")
    reload = _events(audit, "config_reload")[-1]
    assert reload["status"] == "REFUSED"
    assert "writable by group or others" in reload["reason"]

    async def sessions() -> list[tuple[str, int]]:  # the old generation keeps serving
        async with open_client(f"tcp://{ready['tcp']}", token=NEW_TOKEN) as client:
            return [
                (item["name"], item["bounds"]["max_evidence_bytes"])
                for item in await client.list_sessions()
            ]

    assert trio.run(sessions) == [("bytes", 64)]
    assert "not reloaded" in _stop(process)


def _issue(ca: trustme.CA, folder: Path) -> None:
    """A server certificate for 127.0.0.1 from ``ca`` as ``folder``/cert.pem and key.pem."""
    issued = ca.issue_cert("127.0.0.1")
    (folder / "cert.pem").write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(folder / "key.pem"))


def test_a_reload_serves_the_renewed_tls_certificate_to_new_connections(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    config, tokens = short_dir / "evidenced.toml", short_dir / "tokens"
    old_ca, new_ca = trustme.CA(), trustme.CA()
    old_ca.cert_pem.write_to_path(str(short_dir / "old-ca.pem"))
    new_ca.cert_pem.write_to_path(str(short_dir / "new-ca.pem"))
    _issue(old_ca, short_dir)
    _tokens(tokens, (NEW_TOKEN, "ci-runner"))
    _server_config(
        config, server='tls_cert = "cert.pem"\ntls_key = "key.pem"\ntokens_file = "tokens"\n'
    )
    process, ready = _start("--config", str(config), cwd=short_dir)
    processes.append(process)

    async def names(ca: str) -> list[str]:
        async with open_client(
            f"tls://{ready['tcp']}", tls_ca=str(short_dir / ca), token=NEW_TOKEN
        ) as client:
            return [item["name"] for item in await client.list_sessions()]

    assert trio.run(names, "old-ca.pem") == ["bytes"]
    _issue(new_ca, short_dir)  # renewed in place, as certbot or a secret rotation does
    process.send_signal(signal.SIGHUP)
    audit = short_dir / "audit.jsonl"
    _wait_for(lambda: bool(_events(audit, "config_reload")), "config_reload")
    assert _events(audit, "config_reload")[-1]["status"] == "APPLIED"
    assert trio.run(names, "new-ca.pem") == ["bytes"]
    with pytest.raises(TransportError):
        trio.run(names, "old-ca.pem")
    _stop(process)


# --------------------------------------------------------------------------- exposure


def _activated(argv: list[str], listener: socket.socket, cwd: Path) -> subprocess.Popen[bytes]:
    """``evidenced serve`` with ``listener`` as systemd passes it: descriptor 3, LISTEN_FDS."""
    fd = listener.fileno()
    launcher = (
        "import os, sys\n"
        f"os.dup2({fd}, 3)\n"
        "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1')\n"
        f"os.execv(sys.executable, {[*CLI, 'serve', *argv]!r})\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", launcher],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        pass_fds=(fd,),
    )


def test_an_inherited_non_loopback_socket_without_tls_or_auth_is_refused(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    config = short_dir / "evidenced.toml"
    _server_config(config)  # configured: loopback; inherited: every address
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", 0))
    listener.listen(16)
    try:
        checked = _activated(["--config", str(config), "--check"], listener, short_dir)
        processes.append(checked)
        out, err = checked.communicate(timeout=60)
        assert checked.returncode == 65 and b"inherited socket" in err, err  # as serve will
        refused = _activated(["--config", str(config)], listener, short_dir)
        processes.append(refused)
        out, err = refused.communicate(timeout=60)
        assert refused.returncode == 65, err
        assert json.loads(out)["error"]["code"] == "CONFIG_INVALID"
        assert b"inherited socket" in err and b"0.0.0.0" in err
        assert not (short_dir / "audit.jsonl").exists()  # refused before anything opened
        # With --insecure-listen it serves, and daemon_start says so.
        allowed = _activated(["--config", str(config), "--insecure-listen"], listener, short_dir)
        processes.append(allowed)
        assert allowed.stdout is not None
        ready = json.loads(allowed.stdout.readline())
        assert ready["insecure_listen"] is True
        _stop(allowed)
    finally:
        listener.close()
    (start,) = _events(short_dir / "audit.jsonl", "daemon_start")
    assert start["insecure_listen"] is True


def test_an_inherited_loopback_socket_is_served_and_not_called_insecure(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    config = short_dir / "evidenced.toml"
    _server_config(config)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        served = _activated(["--config", str(config), "--insecure-listen"], listener, short_dir)
        processes.append(served)
        assert served.stdout is not None
        assert json.loads(served.stdout.readline())["insecure_listen"] is False
        _stop(served)
    finally:
        listener.close()
    (start,) = _events(short_dir / "audit.jsonl", "daemon_start")
    assert start["insecure_listen"] is False  # the flag was given; nothing is exposed


@pytest.mark.parametrize("command", ["config check", "serve --check"])
def test_config_check_and_serve_check_refuse_an_exposed_listener(
    short_dir: Path, command: str
) -> None:
    config = short_dir / "evidenced.toml"
    _server_config(config)
    config.write_text(config.read_text().replace("127.0.0.1:0", "0.0.0.0:0"))
    argv = {
        "config check": ["config", "check", str(config)],
        "serve --check": ["serve", "--check", "--config", str(config)],
    }[command]
    refused = clirun.in_process(argv)
    assert refused.returncode == 65, refused.err
    assert clirun.error_of(refused)["code"] == "CONFIG_INVALID"
    assert "0.0.0.0" in refused.err and "--insecure-listen" in refused.err
    allowed = clirun.in_process([*argv, "--insecure-listen"])
    assert allowed.returncode == 0, allowed.err
    document = json.loads(allowed.stdout)
    assert document["status"] == "VALID" and "0.0.0.0" in document["exposed"][0]


def test_config_check_reads_the_tokens_file_as_serve_does(short_dir: Path) -> None:
    config, tokens = short_dir / "evidenced.toml", short_dir / "tokens"
    _server_config(config, server='tokens_file = "tokens"\n')
    tokens.write_text("not a token line\n")
    os.chmod(tokens, 0o600)
    refused = clirun.in_process(["config", "check", str(config)])
    assert refused.returncode == 65, refused.err
    assert "line 1" in refused.err


# --------------------------------------------------------------------------- metrics


def test_a_session_added_by_sighup_has_metrics_series(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    config = short_dir / "evidenced.toml"
    http = '[http]\nlisten = "127.0.0.1:0"\n'
    _server_config(config, http=http)
    process, ready = _start("--config", str(config), cwd=short_dir)
    processes.append(process)

    def metrics() -> str:
        with urllib.request.urlopen(f"http://{ready['http']}/metrics", timeout=30) as answer:
            return str(answer.read().decode())

    assert 'session="added"' not in metrics()
    added = '[sessions.added]\nmechanisms = ["bytes-sha256"]\n'
    _server_config(config, sessions=added, http=http)
    process.send_signal(signal.SIGHUP)
    audit = short_dir / "audit.jsonl"
    _wait_for(lambda: bool(_events(audit, "config_reload")), "config_reload")
    assert _events(audit, "config_reload")[-1]["status"] == "APPLIED"
    exposition = metrics()
    for series in (
        'evidenced_decisions_total{outcome="PASS",session="added"} 0.0',
        'evidenced_evidence_received_bytes_total{session="added"} 0.0',
        'evidenced_request_stage_seconds_count{session="added",stage="total"} 0.0',
    ):
        assert series in exposition
    _stop(process)


# --------------------------------------------------------------------------- storms


def _descendants(pid: int) -> set[int]:
    """Every live process under ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    frontier = [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def test_a_storm_of_100_sighups_keeps_the_process_tree_bounded(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    config = short_dir / "evidenced.toml"
    _server_config(config)
    config.write_text(config.read_text().replace("worker_processes = 1", "worker_processes = 2"))
    process, ready = _start("--config", str(config), cwd=short_dir)
    processes.append(process)
    _wait_for(lambda: len(_descendants(process.pid)) >= 2, "the evaluation workers")
    stop, decided = threading.Event(), []

    def load() -> None:  # decisions all through the storm, on one connection
        evidence = b"under load"
        binding = bytes_binding(evidence, bounds=EvidenceBounds(1, 64))

        async def submit_until_stopped() -> None:
            async with open_client(f"tcp://{ready['tcp']}") as client:
                while not stop.is_set():
                    decided.append((await client.submit("bytes", binding, [evidence])).outcome)

        trio.run(submit_until_stopped)

    loader = threading.Thread(target=load)
    loader.start()
    most = 0
    try:
        for _ in range(100):
            process.send_signal(signal.SIGHUP)
            most = max(most, len(_descendants(process.pid)))
            time.sleep(0.05)  # 20 a second
    finally:
        stop.set()
        loader.join(timeout=60)
    assert decided and set(decided) == {"PASS"}  # served all through
    # The serving generation, at most one draining and the one being built: 3 x 2 workers
    # (before: two more for every reload, each pair kept for a minute).
    assert most <= 6, most
    audit = short_dir / "audit.jsonl"
    _wait_for(
        lambda: len(_descendants(process.pid)) <= 2 and bool(_events(audit, "config_reload")),
        "the old generations to drain",
    )
    reloads = _events(audit, "config_reload")
    assert reloads and all(line["status"] == "APPLIED" for line in reloads)
    _stop(process)


# --------------------------------------------------------------------------- workers


def _health(target: str, token: str | None = None) -> dict[str, Any]:
    async def ask() -> dict[str, Any]:
        async with open_client(target, token=token) as client:
            return await client.health()

    return trio.run(ask)


class _Workers:
    """``serve --workers 2`` on ``short_dir/evidenced.toml``; its health and the bytes bound."""

    def __init__(self, short_dir: Path, processes: list[subprocess.Popen[bytes]]) -> None:
        self.config = short_dir / "evidenced.toml"
        _server_config(self.config)
        self.process, ready = _start("--config", str(self.config), "--workers", "2", cwd=short_dir)
        processes.append(self.process)
        self.target = f"tcp://{ready['tcp']}"

    def health(self) -> dict[str, Any]:
        return _health(self.target)

    def bound(self) -> int:
        async def ask() -> int:
            async with open_client(self.target) as client:
                sessions = {s["name"]: s["bounds"] for s in await client.list_sessions()}
                return int(sessions["bytes"]["max_evidence_bytes"])

        return trio.run(ask)


def test_sighup_under_two_workers_reloads_every_worker_and_logs_once(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    daemon = _Workers(short_dir, processes)
    config, process = daemon.config, daemon.process

    _server_config(config)
    config.write_text(
        config.read_text().replace("max_evidence_bytes = 64", "max_evidence_bytes = 32")
    )
    process.send_signal(signal.SIGHUP)

    def every_worker_reloaded() -> bool:
        workers = daemon.health()["workers"]
        return len(workers) == 2 and all(w.get("generation") == 1 for w in workers)

    _wait_for(every_worker_reloaded, "both workers on generation 1")
    assert {daemon.bound() for _ in range(8)} == {32}
    # A worker that dies now is restarted on the generation the others serve.
    (victim,) = [w for w in daemon.health()["workers"] if w["index"] == 0]
    os.kill(victim["pid"], signal.SIGKILL)

    def restarted_on_generation_1() -> bool:
        workers = {w["index"]: w for w in daemon.health()["workers"]}
        entry = workers.get(0, {})
        return (
            entry.get("restarts") == 1
            and entry.get("alive") is True
            and entry.get("pid") != victim["pid"]
            and entry.get("generation") == 1
        )

    _wait_for(restarted_on_generation_1, "worker 0 restarted on generation 1")
    assert {daemon.bound() for _ in range(8)} == {32}
    err = _stop(process)
    reloads = _events(short_dir / "audit.jsonl", "config_reload")
    assert [line["status"] for line in reloads] == ["APPLIED"]  # one line for the daemon
    assert "not supported" not in err
    assert "worker 0: SIGHUP: configuration reloaded" in err
    assert "worker 1: SIGHUP: configuration reloaded" in err


def test_a_worker_starting_while_a_reload_is_applied_is_caught_up(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """A worker restarted just before a SIGHUP ignores the parent's SIGHUP until its own signal
    receiver opens, so it came up on the old generation and stayed there, serving the old
    bounds beside a reloaded worker. Now the parent sees the older generation it reports once
    it serves and sends it SIGHUP again."""
    daemon = _Workers(short_dir, processes)
    config, process = daemon.config, daemon.process

    _wait_for(lambda: len(daemon.health()["workers"]) == 2, "both workers serving")
    before = _descendants(process.pid)
    (victim,) = [w for w in daemon.health()["workers"] if w["index"] == 0]
    os.kill(victim["pid"], signal.SIGKILL)
    # The moment the spawner forks the replacement (a new process under the daemon), the
    # configuration changes and the parent is told: the new worker is still starting.
    _wait_for(lambda: bool(_descendants(process.pid) - before), "the replacement forked", 30)
    config.write_text(
        config.read_text().replace("max_evidence_bytes = 64", "max_evidence_bytes = 32")
    )
    process.send_signal(signal.SIGHUP)

    def every_worker_on_generation_1() -> bool:
        workers = daemon.health()["workers"]
        return len(workers) == 2 and all(w.get("generation") == 1 for w in workers)

    _wait_for(every_worker_on_generation_1, "both workers on generation 1")
    assert {daemon.bound() for _ in range(8)} == {32}
    _stop(process)


def test_a_refused_reload_under_workers_is_logged_once_and_changes_no_worker(
    short_dir: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    config = short_dir / "evidenced.toml"
    _server_config(config)
    process, _ = _start("--config", str(config), "--workers", "2", cwd=short_dir)
    processes.append(process)
    config.write_text(config.read_text().replace("worker_processes = 1", "worker_processes = 3"))
    process.send_signal(signal.SIGHUP)
    audit = short_dir / "audit.jsonl"
    _wait_for(lambda: bool(_events(audit, "config_reload")), "config_reload")
    (refused,) = _events(audit, "config_reload")
    assert refused["status"] == "REFUSED" and "worker_processes" in refused["reason"]
    err = _stop(process)
    assert "worker 0: SIGHUP" not in err and "worker 1: SIGHUP" not in err
