"""Three replicas behind a real nginx, one S3 bucket (moto's server) for evidence and tiles
(``docs/deployment.md``).

Each replica is a real ``evidenced serve`` process with its own audit log and its own
transparency log (own key and origin), retaining evidence in the shared bucket. A burst of
decisions goes through nginx; one replica is killed with SIGKILL mid-burst (nginx moves on to
the others; the client retries a request nginx could not place). Each replica publishes its
own log to the bucket (``[transparency] publish``). Then, **from the bucket alone**: every
acknowledged decision has a receipt that verifies against its replica's published
checkpoint, the fleet monitor finds every log consistent, and ``replay --fleet`` reproduces
every decision. Bounded: 120 decisions, about half a minute."""

from __future__ import annotations

import base64
import concurrent.futures
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from daemon_testkit import bytes_binding
from retention_kit import moto_server, raw_s3_client, s3_environment

from daemon.config._tokens import token_line
from daemon.fleet._fleet import decision_receipts, fleet_key_for_receipt, load_fleet
from daemon.tlog import encode_receipt, verify_receipt
from daemon.tlog._names import log_tag, tag_of

NGINX = shutil.which("nginx") or next(
    (path for path in ("/usr/sbin/nginx",) if os.access(path, os.X_OK)), None
)
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (run make nginx)")

ROOT = Path(__file__).resolve().parents[2]
REPLICAS = 3
DECISIONS = 120
BUCKET = "fleet"

REPLICA_CONFIG = """
[server]
socket = "s"
listen = "127.0.0.1:0"

[http]
listen = "127.0.0.1:0"

[audit]
path = "audit.jsonl"

[transparency]
key_file = "log.key"
origin = "{origin}"
checkpoint_interval = 0.2
entry_bundles = true
publish = "s3://{bucket}/tlog/{origin}/"

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
max_evidence_bytes = 4096
retain = "all"
store = "s3://{bucket}/evidence/"
"""

NGINX_CONFIG = """
{user}
worker_processes 1;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream replicas {{
{servers}
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_connect_timeout 1s;
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_tries 3;
        }}
    }}
}}
"""


class Replica:
    def __init__(self, directory: Path, number: int, env: dict[str, str]) -> None:
        self.directory = directory
        self.origin = f"replica-{number}.test/evidenced"
        self.env = env
        directory.mkdir()
        (directory / "daemon.toml").write_text(
            REPLICA_CONFIG.format(bucket=BUCKET, origin=self.origin)
        )
        made = self._cli("log", "keygen", "--origin", self.origin, "--out", "log.key")
        self.verifier_key: str = json.loads(made.stdout)["verifier_key"]
        self.process: subprocess.Popen[str] | None = None
        self.http = ""

    def _cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "daemon.cli", *argv],
            cwd=self.directory,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )

    def start(self) -> None:
        with (self.directory / "stderr.txt").open("ab") as stderr:
            self._spawn(stderr)

    def _spawn(self, stderr: Any) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "serve", "--config", "daemon.toml"],
            cwd=self.directory,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        started = json.loads(line) if line else {}
        assert "http" in started, (line, (self.directory / "stderr.txt").read_text())
        self.http = started["http"]

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(30)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return self.process.returncode

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)
        assert self.process.stdout is not None
        self.process.stdout.close()


TOKEN_REPLICA_CONFIG = """
[server]
listen = ""
socket = "s"

[http]
listen = "127.0.0.1:0"
tokens_file = "tokens"
trusted_proxies = ["127.0.0.1/32"]   # nginx, as docs/deployment.md says

[audit]
path = "audit.jsonl"

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
max_evidence_bytes = 4096
"""
GOOD_TOKEN = "the-good-clients-token-behind-nginx-0123456789"


class TokenReplica(Replica):
    """A replica whose HTTP listener takes a token and trusts nginx's address."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.directory = directory
        self.env = env
        self.process = None
        self.http = ""
        directory.mkdir()
        (directory / "daemon.toml").write_text(TOKEN_REPLICA_CONFIG)
        (directory / "tokens").write_text(token_line(GOOD_TOKEN, "good") + "\n")
        os.chmod(directory / "tokens", 0o600)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def bucket_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with moto_server() as server:
        environment = s3_environment(server)
        for key, value in environment.items():
            monkeypatch.setenv(key, value)
        for key in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_RETRY_MODE"):
            monkeypatch.delenv(key, raising=False)
        raw_s3_client().create_bucket(Bucket=BUCKET)
        yield {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _nginx(prefix: Path, replicas: Sequence[Replica]) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    servers = "\n".join(f"        server {r.http} max_fails=1 fail_timeout=30s;" for r in replicas)
    for folder in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / folder).mkdir(mode=0o777)
    user = "user root;" if os.geteuid() == 0 else ""
    conf = prefix / "nginx.conf"
    conf.write_text(NGINX_CONFIG.format(user=user, prefix=prefix, servers=servers, port=port))
    assert NGINX is not None
    with (prefix / "nginx.stderr").open("wb") as stderr:
        process = subprocess.Popen(
            [NGINX, "-p", str(prefix), "-c", str(conf), "-g", "daemon off;"], stderr=stderr
        )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise AssertionError((prefix / "error.log").read_text())


def _submit(port: int, number: int) -> dict[str, Any]:
    """One decision through nginx; retried (as a client would) when nginx has no replica to
    give it to (502/503) or the connection drops."""
    item = f"artifact {number:05d}".encode().ljust(64, b".")
    body = json.dumps(
        {
            "binding": bytes_binding(item).to_dict(),
            "evidence": [{"base64": base64.b64encode(item).decode()}],
        }
    ).encode()
    for _ in range(5):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            connection.request(
                "POST",
                "/v1/sessions/bytes/decisions",
                body,
                {"Content-Type": "application/json"},
            )
            answer = connection.getresponse()
            data = answer.read()
        except OSError:
            time.sleep(0.2)
            continue
        finally:
            connection.close()
        if answer.status in (502, 503):
            time.sleep(0.2)
            continue
        assert answer.status == 200, data
        decided: dict[str, Any] = json.loads(data)
        return decided
    raise AssertionError(f"decision {number} was never acknowledged")


def test_replicas_behind_nginx_survive_a_killed_replica_and_prove_every_decision_from_the_bucket(
    bucket_env: dict[str, str],
) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="evfleet", dir="/tmp"))
    replicas = [Replica(scratch / f"r{n}", n, bucket_env) for n in range(REPLICAS)]
    nginx: subprocess.Popen[bytes] | None = None
    try:
        for replica in replicas:
            replica.start()
        nginx, port = _nginx(scratch, replicas)
        victim = replicas[1]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(_submit, port, n) for n in range(DECISIONS)]
            while sum(f.done() for f in futures) < DECISIONS // 3:
                time.sleep(0.01)
            victim.kill()  # mid-burst
            acknowledged = [future.result(timeout=120) for future in futures]
        assert all(answer["result"]["outcome"] == "PASS" for answer in acknowledged)
        # The killed replica comes back (its start-up recovers the log and signs its tree), and
        # every replica stops cleanly, publishing its last checkpoint to the bucket.
        victim.start()
        for replica in replicas:
            assert replica.stop() == 0
        served = {r.origin: 0 for r in replicas}
        fleet_file = scratch / "fleet.toml"
        fleet_file.write_text(
            "".join(
                f'[[log]]\nkey = "{r.verifier_key}"\ntiles = "s3://{BUCKET}/tlog/{r.origin}/"\n\n'
                for r in replicas
            )
        )
        for replica in replicas:
            shutil.rmtree(replica.directory)  # from the bucket alone from here on
        fleet = load_fleet(fleet_file)
        receipts = decision_receipts(fleet)
        for answer in acknowledged:
            receipt = encode_receipt(receipts[answer["decision_id"]])
            key = fleet_key_for_receipt(receipt, fleet)
            assert key is not None
            report = verify_receipt(receipt, key)
            assert report.verified, report
            assert report.line is not None and report.line["decision_id"] == answer["decision_id"]
            served[key.name] += 1
            # the id alone named the replica whose log proves it (replica-aware ids)
            assert tag_of(answer["decision_id"]) == log_tag(key.name)
        (scratch / "receipt.json").write_bytes(receipt)  # one through the CLI, as a user would
        checked = _cli(
            bucket_env,
            "log",
            "verify-receipt",
            str(scratch / "receipt.json"),
            "--fleet",
            str(fleet_file),
        )
        assert json.loads(checked.stdout)["status"] == "VERIFIED"
        assert sum(served.values()) == DECISIONS
        assert served[victim.origin] > 0 and all(served.values())
        monitored = _cli(
            bucket_env,
            "log",
            "monitor",
            "--fleet",
            str(fleet_file),
            "--state",
            str(scratch / "state"),
            "--evidence",
            str(scratch / "evidence"),
            "--count",
            "1",
        )
        assert json.loads(monitored.stdout)["status"] == "CONSISTENT"
        replayed = _cli(
            bucket_env,
            "replay",
            "--fleet",
            str(fleet_file),
            "--store",
            f"s3://{BUCKET}/evidence/",
            "--all",
        )
        summary = json.loads(replayed.stdout)
        assert summary["status"] == "REPRODUCED"
        assert summary["decisions"] >= DECISIONS  # a retried request may have been decided twice
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait(10)
        for replica in replicas:
            if replica.process is not None and replica.process.poll() is None:
                replica.process.kill()
                replica.process.wait(10)
        shutil.rmtree(scratch, ignore_errors=True)


def _cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "daemon.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done


def _through(port: int, source: str, token: str, number: int) -> int:
    """One decision through nginx from ``source``: the status nginx answers."""
    item = f"client {source} {number:05d}".encode()
    body = json.dumps(
        {
            "binding": bytes_binding(item).to_dict(),
            "evidence": [{"base64": base64.b64encode(item).decode()}],
        }
    ).encode()
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=30, source_address=(source, 0)
    )
    try:
        connection.request(
            "POST",
            "/v1/sessions/bytes/decisions",
            body,
            {"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        connection.close()


def test_one_bad_client_behind_nginx_locks_out_no_good_one() -> None:
    """Behind nginx every client shared nginx's address: one client's wrong tokens cut that
    address off, on every replica (``proxy_next_upstream http_503`` spreads it), and
    every other client was refused. Now each replica trusts nginx's ``X-Forwarded-For``
    (``[http] trusted_proxies``, docs/deployment.md): the bad client is cut off by its own
    address, the good one is served 10/10, and so is a probe of ``/ready`` through nginx."""
    scratch = Path(tempfile.mkdtemp(prefix="evngx", dir="/tmp"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    replicas = [TokenReplica(scratch / f"r{n}", env) for n in range(2)]
    nginx: subprocess.Popen[bytes] | None = None
    try:
        for replica in replicas:
            replica.start()
        nginx, port = _nginx(scratch, replicas)
        # Enough wrong tokens for each replica to count 32 strikes (nginx spreads them).
        bad = [_through(port, "127.0.0.5", "a-guess", n) for n in range(100)]
        assert set(bad[:20]) == {401} and bad[-1] == 429, str(bad)  # cut off, by its own address
        good = [_through(port, "127.0.0.6", GOOD_TOKEN, n) for n in range(10)]
        assert good == [200] * 10
        ready = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        ready.request("GET", "/ready")
        assert ready.getresponse().status == 200
        ready.close()
        for replica in replicas:
            assert replica.stop() == 0
        noise: dict[str, int] = {}
        for replica in replicas:
            for line in (replica.directory / "audit.jsonl").read_text().splitlines():
                record = json.loads(line)
                if record["event"] == "noise":
                    for peer, count in record["peers"].items():
                        noise[peer] = noise.get(peer, 0) + count
                if record["event"] == "decision":
                    assert record["requester"]["client"] == "127.0.0.6"
        assert set(noise) == {"tcp:127.0.0.5"}  # nginx's own address was never the peer
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait(10)
        for replica in replicas:
            if replica.process is not None and replica.process.poll() is None:
                replica.process.kill()
                replica.process.wait(10)
        shutil.rmtree(scratch, ignore_errors=True)


def test_ten_cli_submits_through_nginx_spread_over_two_replicas(tmp_path: Path) -> None:
    """Every ``submit`` asked ``GET /v1/sessions`` and then ``POST``ed, so under round-robin
    the two paired up and all decisions landed on one replica. A submit is
    now one request per pair: with a saved ``sessions`` answer (``--sessions``), ten submits
    through the documented nginx are five decisions on each replica."""
    import clirun
    from http_testkit import FORMATION, LiveDaemon

    replicas = [LiveDaemon(), LiveDaemon()]
    nginx: subprocess.Popen[bytes] | None = None
    try:
        upstreams = [Replica.__new__(Replica) for _ in replicas]  # only .http is read
        for upstream, replica in zip(upstreams, replicas, strict=True):
            upstream.http = "{}:{}".format(*replica.http)
        nginx, port = _nginx(tmp_path, upstreams)
        url = f"http://127.0.0.1:{port}"
        saved = tmp_path / "sessions.json"
        saved.write_bytes(clirun.in_process(["sessions", "--connect", url]).stdout)
        files = [str(FORMATION / "atom.subject.json"), str(FORMATION / "atom.certificate.json")]
        for _ in range(10):
            argv = ["submit", "--connect", url, "--session", "formation", "--sessions", str(saved)]
            done = clirun.in_process([*argv, *files])
            assert done.returncode == 0, done.err
        decided = [
            sum(1 for line in replica.audit() if line.get("event") == "decision")
            for replica in replicas
        ]
        assert decided == [5, 5]
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait(10)
        for replica in replicas:
            replica.stop()
            replica.cleanup()


def test_ten_cli_submits_behind_nginx_spread_over_both_replicas(tmp_path: Path) -> None:
    """Each ``evidenced submit`` asked ``GET /v1/sessions`` before its ``POST``: under nginx's
    round-robin the pairs lined up and all 10 decisions landed on one replica. The sessions
    answer is now kept between invocations (``daemon/client/_sessions_cache.py``): after
    the first submit each is one request, and the decisions spread 5/5."""
    scratch = Path(tempfile.mkdtemp(prefix="evngx", dir="/tmp"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    replicas = [TokenReplica(scratch / f"r{n}", env) for n in range(2)]
    nginx: subprocess.Popen[bytes] | None = None
    token, evidence = tmp_path / "token", tmp_path / "evidence.bin"
    token.write_text(GOOD_TOKEN + "\n")
    evidence.write_bytes(b"one evidence item")
    client_env = {**env, "EVIDENCED_CACHE_DIR": str(tmp_path / "cache")}
    try:
        for replica in replicas:
            replica.start()
        nginx, port = _nginx(scratch, replicas)
        for _ in range(10):
            submit = subprocess.run(
                [sys.executable, "-m", "daemon.cli", "submit", "--connect",
                 f"http://127.0.0.1:{port}", "--token-file", str(token),
                 "--session", "bytes", str(evidence)],
                capture_output=True, text=True, env=client_env, timeout=60, check=False,
            )  # fmt: skip
            assert submit.returncode == 0, submit.stdout + submit.stderr
            assert json.loads(submit.stdout)["outcome"] == "PASS"
        for replica in replicas:
            assert replica.stop() == 0
        decided = [
            sum(
                json.loads(line)["event"] == "decision"
                for line in (replica.directory / "audit.jsonl").read_text().splitlines()
            )
            for replica in replicas
        ]
        assert sorted(decided) == [5, 5]
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait(10)
        for replica in replicas:
            if replica.process is not None and replica.process.poll() is None:
                replica.process.kill()
                replica.process.wait(10)
        shutil.rmtree(scratch, ignore_errors=True)
