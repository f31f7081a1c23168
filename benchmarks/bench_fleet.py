"""Replicas behind nginx, publishing to one bucket: throughput, CPU per decision, publish lag.

Starts a real S3 API (moto's server, its own process), then for 1, 2 and 3 replicas of
``evidenced serve`` (HTTP, fsync'd audit, a transparency log with entry bundles and
``publish = "s3://…"``) behind a real nginx, drives them with a closed loop of ``--conc``
keep-alive HTTP clients (``--procs`` processes) for ``--seconds``, and prints per setup:
decisions/s, the replicas' CPU per decision (``/proc/<pid>/stat``), the load average, and the
publish lag: for each decision (nginx says which replica answered, ``X-Upstream``), the time
from its answer until a checkpoint covering its ``log_index`` is in the bucket (p50/p99,
polled every 50 ms). Then, for one replica, publishing on against off in interleaved rounds:
CPU per decision, the ratio (goal: publishing costs <= 10 % of a replica's CPU per decision).

Two cores cap it all (nginx, the replicas, moto and the load generator share them): read the
CPU per decision, not only the rate. Never asserts on time.

Usage: ``python benchmarks/bench_fleet.py [--seconds 8] [--conc 16] [--procs 4] [--rounds 2]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.client
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUCKET = "fleet"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
MECHANISM_ID = "vstd.bytes.sha256"

REPLICA = """
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
checkpoint_interval = 0.5
entry_bundles = true
{publish}

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
max_evidence_bytes = 4096
"""

NGINX_CONF = """
{user}
worker_processes 1;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream replicas {{
{servers}
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its live children (the replica's evaluation workers)."""
    total = _cpu_seconds(pid)
    for child in Path(f"/proc/{pid}/task").glob("*/children"):
        for text in child.read_text().split():
            try:
                total += _cpu_seconds(int(text))
            except (FileNotFoundError, ProcessLookupError):
                continue
    return total


class Replica:
    def __init__(self, root: Path, number: int, env: dict[str, str], publish: bool) -> None:
        self.directory = root / f"r{number}"
        self.directory.mkdir()
        self.origin = f"replica-{number}.bench/evidenced"
        target = f'publish = "s3://{BUCKET}/tlog/{self.origin}/"' if publish else ""
        (self.directory / "daemon.toml").write_text(
            REPLICA.format(origin=self.origin, publish=target)
        )
        keygen = ["log", "keygen", "--origin", self.origin, "--out", "log.key"]
        subprocess.run(
            [sys.executable, "-m", "daemon.cli", *keygen],
            cwd=self.directory,
            env=env,
            check=True,
            capture_output=True,
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daemon.cli", "serve", "--config", "daemon.toml"],
            cwd=self.directory,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        self.http = json.loads(self.process.stdout.readline())["http"]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _nginx(prefix: Path, replicas: list[Replica]) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    for folder in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / folder).mkdir(mode=0o777, exist_ok=True)
    servers = "\n".join(f"        server {r.http};" for r in replicas)
    conf = prefix / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(NGINX_CONF.format(user=user, prefix=prefix, servers=servers, port=port))
    process = subprocess.Popen(
        [NGINX, "-p", str(prefix), "-c", str(conf), "-g", "daemon off;"],
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not start")


def _body(number: int, digest: str) -> bytes:
    from session import BoundProposition, EvidenceBounds

    item = f"artifact {number:09d}".encode().ljust(64, b".")
    ref = "sha256:" + hashlib.sha256(item).hexdigest()
    binding = BoundProposition(
        subject_id="item",
        predicate="bytes.sha256",
        expected=ref,
        mechanism_id=MECHANISM_ID,
        mechanism_digest=digest,
        evidence_refs=(ref,),
        trust_roots=("bench-root",),
        bounds=EvidenceBounds(1, 4096),
    )
    evidence = [{"base64": base64.b64encode(item).decode()}]
    return json.dumps({"binding": binding.to_dict(), "evidence": evidence}).encode()


def _client(port: int, until: float, offset: int, digest: str, out: Any) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    number = offset
    records = []
    while time.monotonic() < until:
        number += 1
        try:
            connection.request(
                "POST",
                "/v1/sessions/bytes/decisions",
                _body(number, digest),
                {"Content-Type": "application/json"},
            )
            answer = connection.getresponse()
            data = answer.read()
        except OSError:
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        if answer.status == 200:
            records.append(
                (time.time(), answer.getheader("X-Upstream"), json.loads(data)["log_index"])
            )
    connection.close()
    out.put(records)


def _worker(port: int, until: float, offset: int, threads: int, digest: str, out: Any) -> None:
    import queue

    results: queue.Queue[Any] = queue.Queue()
    started = [
        threading.Thread(target=_client, args=(port, until, offset + i * 10**7, digest, results))
        for i in range(threads)
    ]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    merged = []
    while not results.empty():
        merged.extend(results.get())
    out.put(merged)


def _drive(port: int, seconds: float, conc: int, procs: int, digest: str) -> list[Any]:
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    until = time.monotonic() + seconds
    workers = [
        context.Process(
            target=_worker, args=(port, until, p * 10**9, max(1, conc // procs), digest, out)
        )
        for p in range(procs)
    ]
    for worker in workers:
        worker.start()
    records: list[Any] = []
    for _ in workers:
        records.extend(out.get())
    for worker in workers:
        worker.join()
    return records


class LagWatch:
    """Polls each replica's published checkpoint; when each size first appeared."""

    def __init__(self, replicas: list[Replica]) -> None:
        import boto3

        self.client = boto3.client("s3")
        self.replicas = replicas
        self.seen: dict[str, list[tuple[float, int]]] = {r.origin: [] for r in replicas}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for replica in self.replicas:
                try:
                    body = self.client.get_object(
                        Bucket=BUCKET, Key=f"tlog/{replica.origin}/checkpoint"
                    )["Body"].read()
                except Exception:  # not published yet
                    continue
                size = int(body.split(b"\n")[1])
                history = self.seen[replica.origin]
                if not history or history[-1][1] != size:
                    history.append((time.time(), size))
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def lag(self, origin: str, answered: float, index: int) -> float | None:
        for seen_at, size in self.seen[origin]:
            if size > index:
                return max(0.0, seen_at - answered)
        return None


def _setup(
    root: Path, count: int, env: dict[str, str], publish: bool
) -> tuple[list[Replica], subprocess.Popen[bytes], int]:
    replicas = [Replica(root, n, env, publish) for n in range(count)]
    nginx, port = _nginx(root, replicas)
    return replicas, nginx, port


def _teardown(replicas: list[Replica], nginx: subprocess.Popen[bytes]) -> None:
    nginx.terminate()
    nginx.wait(10)
    for replica in replicas:
        replica.stop()


def _run_once(
    count: int, env: dict[str, str], args: argparse.Namespace, publish: bool, digest: str
) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="evbench-fleet-", dir="/tmp"))
    replicas, nginx, port = _setup(root, count, env, publish)
    try:
        _drive(port, 1.0, args.conc, args.procs, digest)  # warm up
        watch = LagWatch(replicas) if publish else None
        cpu_before = sum(_tree_cpu(r.process.pid) for r in replicas)
        started = time.monotonic()
        records = _drive(port, args.seconds, args.conc, args.procs, digest)
        elapsed = time.monotonic() - started
        cpu = sum(_tree_cpu(r.process.pid) for r in replicas) - cpu_before
        lags: list[float] = []
        if watch is not None:
            time.sleep(6.0)  # let the last checkpoints reach the bucket
            watch.stop()
            by_address = {r.http: r.origin for r in replicas}
            for answered, upstream, index in records:
                origin = by_address.get(upstream or "")
                found = watch.lag(origin, answered, index) if origin else None
                if found is not None:
                    lags.append(found)
        return {
            "replicas": count,
            "publish": publish,
            "decisions": len(records),
            "rate": len(records) / elapsed,
            "cpu_us": 1e6 * cpu / max(1, len(records)),
            "lag_p50": statistics.median(lags) if lags else None,
            "lag_p99": sorted(lags)[int(0.99 * (len(lags) - 1))] if lags else None,
            "lag_measured": len(lags),
            "load": os.getloadavg()[0],
        }
    finally:
        _teardown(replicas, nginx)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--conc", type=int, default=16)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if not os.access(NGINX, os.X_OK):
        raise SystemExit("bench_fleet: nginx is not installed (make nginx)")
    from session import BytesDigestMechanism

    digest = BytesDigestMechanism.mechanism_digest
    moto_port = _free_port()
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(moto_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{moto_port}",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    os.environ.update(env)
    try:
        import boto3

        for _ in range(100):
            try:
                boto3.client("s3").create_bucket(Bucket=BUCKET)
                break
            except Exception:
                time.sleep(0.1)
        print(f"bench_fleet: {args.seconds:g} s per setup, c={args.conc} ({args.procs} procs)")
        print("replicas  decisions/s  CPU us/decision  publish lag p50 / p99 s  load")
        for count in (1, 2, 3):
            row = _run_once(count, env, args, True, digest)
            print(
                f"{count:8d}  {row['rate']:11.0f}  {row['cpu_us']:15.0f}  "
                f"{row['lag_p50']:.2f} / {row['lag_p99']:.2f} ({row['lag_measured']} decisions)"
                f"  {row['load']:.1f}"
            )
        on, off = [], []
        for _ in range(args.rounds):  # interleaved: publishing on, then off
            on.append(_run_once(1, env, args, True, digest)["cpu_us"])
            off.append(_run_once(1, env, args, False, digest)["cpu_us"])
        ratio = statistics.median(a / b for a, b in zip(on, off, strict=True))
        print(
            f"one replica, CPU per decision: publishing on {statistics.median(on):.0f} us, "
            f"off {statistics.median(off):.0f} us; on/off {ratio:.2f} (goal <= 1.10: "
            f"{'met' if ratio <= 1.10 else 'missed'})"
        )
    finally:
        moto.terminate()
        moto.wait(10)


if __name__ == "__main__":
    main()
