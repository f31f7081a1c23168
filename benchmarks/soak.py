"""Chaos soak: the daemon under load and scheduled faults, then proof from the log alone that
nothing acknowledged was lost (issues "hold under attack", second and third rounds; not part of
the test suite: it runs for minutes and its figures are printed, never asserted).

For ``--duration`` seconds (default 600) it runs ``evidenced serve`` (``--workers 2``; the
transparency log; ``retain = "all"`` into an ``fs:`` store for session ``b`` and into an
``s3://`` store for session ``s3``; HTTP with a bearer token, ``max_connections = 128`` a
process, ``trusted_proxies`` naming the soak's forwarding proxy; under libfaketime when it is
installed, ``make faketime``, its wall clock read from a file, its ``time.sleep`` the
:data:`SLEEP_SHIM`'s) as a child process, with every
file on a 1 GiB tmpfs when ``mount`` is allowed (else disk full is ``RLIMIT_FSIZE`` on the
parent, as ``tests/daemon/test_audit_disk_full.py`` does). The S3 store is moto's server (a
child process, a real S3 API on 127.0.0.1) reached through a fault-injecting TCP proxy the
soak runs (``_soak_net.S3Proxy``, real sockets: ``pass`` relays, ``stall`` accepts and never
answers, ``error`` answers ``503`` or resets). And it:

* drives load from several clients: binary protocol over the Unix socket and HTTP with the
  token, each a loop of submits of evidence from a pool (retained, so every one is
  replayable); and one of each to session ``s3``, every item new (an item stored less than a
  minute ago is not written again, and the point is to write through the proxy);
* injects faults round-robin on a schedule so that each kind happens at least three times:
  ``kill -9`` of a serving worker, ``kill -9`` of the parent (then a restart on the same
  files), disk full for a few seconds (then, when it stopped the transparency log, the
  operator's stop and start of docs/operations.md), a SIGHUP storm, slow clients (a byte
  every second), unauthenticated HTTP clients, a FIFO planted at an object's path, a symlink
  planted at a store directory (each planted item is submitted while planted, then removed
  and submitted again), a stuck S3 endpoint (the proxy stalls for the request deadline +
  3 s, so store operations outlive the deadline and are *stuck*) and an erroring one (4 s
  of ``503`` answers and resets); an S3 fault lasts until ``health`` no longer names the
  store (each worker clears it at its next successful write), at most 40 s; and the faults
  behind the connection core's guards:

  - ``audit_truncated``: the audit log truncated to 0 bytes while the daemon runs (a copy of
    it taken while its writer, the parent, is SIGSTOPped, so no line is committed between the
    copy and the cut); the daemon must notice at its next commit (``health`` degraded,
    ``/ready`` 503, every request ``AUDIT_FAILED``, no decision acknowledged into the cut
    file), and the soak plays the operator of docs/operations.md: stop (exit 70), ``audit
    verify --anchor`` the saved copy (the newest acknowledged decision's ``seq:line_digest``;
    the same anchor must refuse the cut file), put it back, start;
  - ``tile_planted``: a FIFO and a symlink to ``/etc/passwd`` at tiles and a symlink to an
    outside directory at a tile directory (far past the tree), 48 GETs of them at once
    (each ``404`` at once, not a byte of them served; the same GETs of the absent paths are
    the control), checkpoints still signed; then removed;
  - ``clock_step``: the running daemon's wall clock stepped back 100 days for 3 s
    (libfaketime's offset file; read again every second), then forward: ``health`` must
    count it (``audit.clock_steps_back``);
  - ``idle_flood``: 6 loopback addresses (127.0.0.2–7) x 48 idle keep-alive connections
    with the valid token, more than both processes' TCP slots, each reopened when the
    daemon closes it, for 10 s, while honest clients open new connections over HTTP and the
    Unix socket and submit (no retry);
  - ``proxied_bad_client``: through the soak's forwarding proxy (``ForwardingProxy``, which
    appends ``X-Forwarded-For`` and connects from 127.0.0.9, the trusted proxy), 80
    wrong-token requests from 127.0.0.66 while an honest client of the same proxy submits;
* watches ``health`` every 0.25 s next to a probe decision (session ``b``): health is *wrong*
  while it says ``serving`` and the probe is refused for a daemon-side reason (AUDIT_FAILED,
  BUSY, a broken connection), or says ``degraded`` while probes pass and no fault is active;
  the longest such stretch is printed, overall and for each fault kind. A fault is a fault
  window (health is expected to say ``degraded`` with the store ``stuck`` or ``failing``
  during an S3 fault, while ``b`` keeps passing, and ``degraded`` from a live truncation to
  the operator's restart); the S3 faults during which it did are counted. The honest
  clients' answers (load and probes) during each fault kind are counted, by outcome.

At the end it stops the daemon and proves, from the files alone: every acknowledged decision
is the log line at its ``seq`` (none lost), the hash chain verifies (``verify_log``), the
transparency tiles verify against the log and the signed checkpoint (``verify_directory``),
every acknowledged decision has an inclusion proof under that checkpoint (a receipt built
from the tiles and verified), every retained decision replays ``REPRODUCED`` (``evidenced
replay --all``, once per store: ``--session b`` from ``fs:``, ``--session s3`` from moto
directly; an S3 decision refused during a fault has no line and is a refusal, not a loss),
no process of the daemon outlived it and no descriptor leaked (the parent's
and workers' open descriptors at the start and just before the stop); and it counts the
timestamps that step back in the log, the proxied decisions' ``requester.client``, and the
daemon's ``audit_alarm``, ``audit_clock_step_back``, ``served_file_refused`` and
``transparency_failed`` warnings.

Run: ``python benchmarks/soak.py [--duration SECONDS] [--keep DIR] [--faults KIND,...]``
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import trio
from _soak_net import ForwardingProxy, S3Proxy, connect_from, read_answer, request

from daemon import ClientError, ClientTimeout, RejectedError, open_client, verify_log
from daemon.tlog import (
    TileDirectory,
    TileReader,
    VerifierKey,
    encode_receipt,
    inclusion_proof,
    make_receipt,
    open_checkpoint,
    verify_directory,
    verify_receipt,
)
from session import BoundProposition, BytesDigestMechanism, EvidenceBounds

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "daemon.cli"]
ORIGIN = "soak.example/evidenced"
POOL = 1500  # distinct evidence items in the load (bounded store size)
FAULTS = (
    "kill_worker",
    "s3_stuck",
    "audit_truncated",
    "fifo_in_store",
    "idle_flood",
    "sighup_storm",
    "tile_planted",
    "slow_clients",
    "s3_erroring",
    "clock_step",
    "unauthenticated",
    "proxied_bad_client",
    "symlink_in_store",
    "disk_full",
    "kill_parent",
)
S3_FAULTS = ("s3_stuck", "s3_erroring")
BUCKET = "soak"
S3_STORE = f"s3://{BUCKET}/evidence"
ERROR_SECONDS = 4.0  # s3_erroring: how long the proxy answers 503 or resets
STALL_PAST_DEADLINE = 3.0  # s3_stuck: the stall outlasts the request deadline by this much
REQUEST_DEADLINE = 10.0
#: Connections a serving process keeps (``[server] max_connections``; two processes): the idle
#: flood's 6 addresses x 48 connections hold every TCP slot of both.
MAX_CONNECTIONS = 128
FLOOD_ADDRESSES = tuple(f"127.0.0.{number}" for number in range(2, 8))
FLOOD_PER_ADDRESS = 48
FLOOD_SECONDS = 10.0
#: The forwarding proxy connects to the daemon from this address (``[http] trusted_proxies``);
#: its bad client comes from ``BAD_CLIENT``, its honest one from 127.0.0.1.
PROXY_SOURCE = "127.0.0.9"
BAD_CLIENT = "127.0.0.66"
BAD_REQUESTS = 80
#: The clock step: libfaketime's offset, read from a file every ``FAKETIME_CACHE`` seconds.
CLOCK_STEP = "-100d"
CLOCK_STEP_SECONDS = 3.0
FAKETIME_CACHE = 1
LIBFAKETIME = next(
    (
        path
        for pattern in (
            "/usr/lib/*/faketime/libfaketime.so.1",
            "/usr/lib/faketime/libfaketime.so.1",
        )
        for path in sorted(Path("/").glob(pattern.lstrip("/")))
    ),
    None,
)
#: libfaketime 0.9.10 under ``FAKETIME_DONT_FAKE_MONOTONIC`` fails
#: ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`` with ``EINVAL`` (wolfcw/libfaketime#426),
#: and that is Python 3.11's ``time.sleep``: every sleep of the daemon (the S3 SDK's retry
#: backoff, the line index's ``sleep(0)``) raised ``OSError`` (the S3 store's ``internal error:
#: OSError: [Errno 22]``). So the daemon's processes get this ``sitecustomize``, which sleeps in
#: ``select`` (libfaketime leaves its relative timeout alone), the same wait.
SLEEP_SHIM = """import select
import time


def _sleep(seconds):
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


time.sleep = _sleep
"""
#: A planted tile far past any soak's tree (index 5,000 of level 0: 1.28 million lines).
FAR_TILES = ("x005", "x006")
#: The clients whose decisions are the honest load (the figures per fault kind count them).
HONEST = ("evd1", "http", "s3-evd1", "s3-http", "probe")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def s3_environment(endpoint: str) -> dict[str, str]:
    """What points boto3 (the daemon's, the replay's, the soak's) at ``endpoint``."""
    return {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "2",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def _environment(endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ENDPOINT_URL", "AWS_PROFILE")}
    env.update(s3_environment(endpoint))
    return env


def bytes_binding(item: bytes) -> BoundProposition:
    """The honest ``vstd.bytes.sha256`` binding for one item."""
    ref = "sha256:" + hashlib.sha256(item).hexdigest()
    return BoundProposition(
        subject_id="item",
        predicate="bytes.sha256",
        expected=ref,
        mechanism_id=BytesDigestMechanism.mechanism_id,
        mechanism_digest=BytesDigestMechanism.mechanism_digest,
        evidence_refs=(ref,),
        trust_roots=("soak",),
        bounds=EvidenceBounds(1, 4096),
    )


class Soak:
    """One soak run (module docstring)."""

    def __init__(self, base: Path, duration: float, kinds: tuple[str, ...] = FAULTS) -> None:
        self.base = base
        self.duration = duration
        self.kinds = kinds
        self.data = base / "data"
        self.tmpfs = False
        self.process: subprocess.Popen[str] | None = None
        self.ready: dict[str, Any] = {}
        self.token = secrets.token_urlsafe(24)
        self.acknowledged: dict[str, tuple[int | None, str]] = {}  # id -> (seq, how)
        self.refusals: collections.Counter[str] = collections.Counter()
        self.faults: collections.Counter[str] = collections.Counter()
        self.fault_notes: collections.Counter[str] = collections.Counter()
        self.fault_active = 0
        self.seen_pids: set[int] = set()
        self.fds: dict[str, list[int]] = {"start": [], "end": []}
        self.wrong_longest = 0.0
        self.wrong_since: float | None = None
        self.wrong_what = ""
        self.wrong_longest_what = ""
        self.active_kinds: list[str] = []
        self.health_samples = 0
        self.restarts = 0
        self.stopping = False
        self.binding_cache: dict[bytes, BoundProposition] = {}
        self.moto: subprocess.Popen[bytes] | None = None
        self.moto_endpoint = ""
        self.proxy: S3Proxy | None = None
        self.env: dict[str, str] = dict(os.environ)
        self.s3_degraded: collections.Counter[str] = collections.Counter()
        self.s3_recovery_longest = 0.0
        self.s3_serial = 0
        self.forwarder: ForwardingProxy | None = None
        self.clock = base / "clock"  # libfaketime's offset for the daemon (clock_step)
        #: Per fault kind: the honest clients' answers while it was injected, and its figures.
        self.during: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.figures: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.maxima: dict[str, dict[str, float]] = collections.defaultdict(dict)
        self.wrong_by_kind: dict[str, float] = {}
        self.wrong_kinds: set[str] = set()
        self.last_anchor: str | None = None
        self.operator_restarts = 0
        self.load_averages: list[float] = []  # the machine's 1-minute load, at each sample

    # -- the daemon

    def prepare(self) -> None:
        self.data.mkdir(mode=0o700)
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1g,mode=0700", "tmpfs", str(self.data)],
            capture_output=True,
            text=True,
            check=False,
        )
        self.tmpfs = mounted.returncode == 0
        self.start_moto()
        key = self.base / "log.key"
        made = subprocess.run(
            [*CLI, "log", "keygen", "--origin", ORIGIN, "--out", str(key)],
            capture_output=True,
            text=True,
            check=True,
        )
        self.verifier = VerifierKey.parse(json.loads(made.stdout)["verifier_key"])
        tokens = self.base / "tokens"
        tokens.write_text(f"{hashlib.sha256(self.token.encode()).hexdigest()} soak\n")
        tokens.chmod(0o600)
        (self.base / "evidenced.toml").write_text(
            "[server]\n"
            'listen = ""\n'
            f'socket = "{self.data / "sock"}"\n'
            "workers = 2\nworker_processes = 1\nidle_timeout = 5.0\n"
            f"max_connections = {MAX_CONNECTIONS}\n"
            f"request_deadline = {REQUEST_DEADLINE}\n"
            "shutdown_grace = 5.0\n"
            f'[http]\nlisten = "127.0.0.1:0"\nheader_timeout = 3.0\ntokens_file = "{tokens}"\n'
            f'trusted_proxies = ["{PROXY_SOURCE}/32"]\n'
            f'[audit]\npath = "{self.data / "audit.jsonl"}"\ndurability = "fsync"\n'
            f'[transparency]\nkey_file = "{key}"\norigin = "{ORIGIN}"\n'
            "checkpoint_interval = 0.5\n"
            '[sessions.b]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
            f'retain = "all"\nstore = "fs:{self.data / "evidence"}"\n'
            '[sessions.s3]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
            f'retain = "all"\nstore = "{S3_STORE}"\n'
        )

    def start_moto(self) -> None:
        """moto's S3 server as a child process, and the bucket."""
        port = _free_port()
        self.moto = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=open(self.base / "moto.log", "ab"),  # noqa: SIM115 - the child's
            stderr=subprocess.STDOUT,
        )
        self.moto_endpoint = f"http://127.0.0.1:{port}"
        for _ in range(300):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.1)
        import boto3

        boto3.session.Session().client(
            "s3",
            endpoint_url=self.moto_endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)

    def start(self) -> None:
        """Start the daemon; a start refused because the log is held (exit 75: the old
        processes of a killed parent may still hold its lock for a moment) is noted and tried
        again; any other refusal (a log the start refuses) ends the soak at once."""
        for _ in range(60):
            process = subprocess.Popen(
                [*CLI, "serve", "--config", str(self.base / "evidenced.toml")],
                stdout=subprocess.PIPE,
                stderr=open(self.base / "daemon.stderr", "a"),  # noqa: SIM115 - the child's
                text=True,
                cwd=ROOT,
                env=self.env,
            )
            assert process.stdout is not None
            line = process.stdout.readline()
            with contextlib.suppress(ValueError):
                ready = json.loads(line) if line else {}
                if "http" in ready:
                    self.ready = ready
                    self.process = process
                    self.seen_pids.add(process.pid)
                    return
            if process.wait() != 75:
                raise SystemExit(
                    f"the daemon refused to start (exit {process.returncode}): {line.strip()}"
                )
            self.fault_notes[f"a start was refused: {line.strip()[:200]}"] += 1
            time.sleep(0.5)
        raise SystemExit(f"the daemon did not start; see {self.base / 'daemon.stderr'}")

    def faketime(self) -> dict[str, str]:
        """The daemon's environment for libfaketime (``LD_PRELOAD``), which reads its wall
        clock's offset from :attr:`clock` (``+0``; ``clock_step`` writes the step there and
        back) at most every ``FAKETIME_CACHE`` seconds, in every process of the daemon; the
        monotonic clock is left alone, as a real step leaves it; ``time.sleep`` is
        :data:`SLEEP_SHIM`'s. Nothing without it."""
        if LIBFAKETIME is None:
            return {}
        self.clock.write_text("+0\n")
        shim = self.base / "sleep-shim"
        shim.mkdir(mode=0o700, exist_ok=True)
        (shim / "sitecustomize.py").write_text(SLEEP_SHIM)
        path = os.pathsep.join(p for p in (str(shim), os.environ.get("PYTHONPATH", "")) if p)
        return {
            "PYTHONPATH": path,
            "LD_PRELOAD": str(LIBFAKETIME),
            "FAKETIME_TIMESTAMP_FILE": str(self.clock),
            "FAKETIME_CACHE_DURATION": str(FAKETIME_CACHE),
            "FAKETIME_DONT_RESET": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    @property
    def sock(self) -> str:
        return str(self.data / "sock")

    def http_address(self) -> tuple[str, int]:
        host, port = self.ready["http"].rsplit(":", 1)
        return host, int(port)

    @property
    def http(self) -> str:
        return f"http://{self.ready['http']}"

    def descendants(self) -> set[int]:
        """Every live process below the daemon's parent (serving workers, the spawner,
        evaluation workers)."""
        if self.process is None:
            return set()
        children: dict[int, list[int]] = collections.defaultdict(list)
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                children[int(fields[1])].append(int(entry))
        found, stack = set(), [self.process.pid]
        while stack:
            pid = stack.pop()
            for child in children.get(pid, []):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def fd_counts(self) -> list[int]:
        counts = []
        for pid in sorted({*(self.descendants()), *([self.process.pid] if self.process else [])}):
            with contextlib.suppress(OSError):
                counts.append(len(os.listdir(f"/proc/{pid}/fd")))
        return counts

    # -- load

    def item(self, n: int) -> bytes:
        return b"soak evidence %d" % (n % POOL)

    def bound(self, item: bytes) -> BoundProposition:
        found = self.binding_cache.get(item)
        if found is None:
            found = self.binding_cache[item] = bytes_binding(item)
        return found

    async def submit(self, client: Any, item: bytes, how: str, session: str = "b") -> str:
        """Submit; record the acknowledgement or the refusal; the outcome's kind."""
        binding = self.bound(item) if session == "b" else bytes_binding(item)
        try:
            answer = await client.submit(session, binding, [item])
        except RejectedError as error:
            self.refusals[error.code if session == "b" else f"{error.code} ({session})"] += 1
            self._honest(how, error.code)
            return error.code
        self.acknowledged[answer.decision_id] = (answer.seq, how)
        self.last_anchor = answer.anchor or self.last_anchor
        self._honest(how, "answered")
        return "acknowledged"

    def _honest(self, how: str, outcome: str) -> None:
        """An honest client's answer (or its refusal's code, or a broken connection),
        counted for every fault kind being injected."""
        if how in HONEST:
            for kind in self.active_kinds:
                self.during[kind][outcome] += 1

    def _figure(self, kind: str, name: str, value: float) -> None:
        """The largest ``value`` of figure ``name`` over ``kind``'s injections."""
        self.maxima[kind][name] = max(self.maxima[kind].get(name, value), value)

    async def load(self, number: int, http: bool, session: str = "b") -> None:
        """Submits in a loop; to ``s3`` every item is new, and the connection is opened
        anew every 20 submits (as clients come and go: each serving worker sees the store)."""
        n = number * 100_003
        how = ("http" if http else "evd1") if session == "b" else f"s3-{'http' if http else 'evd1'}"
        suffix = "" if session == "b" else " (s3)"
        while not self.stopping:
            try:
                target: dict[str, Any] = (
                    {"url": self.http, "token": self.token} if http else {"unix": self.sock}
                )
                async with open_client(**target, request_timeout=30) as client:
                    for _ in range(20 if session != "b" else 1 << 62):
                        if self.stopping:
                            break
                        n += 1
                        item = self.item(n) if session == "b" else b"soak s3 evidence %d" % n
                        code = await self.submit(client, item, how, session)
                        if code not in ("acknowledged",):
                            break  # an error answer closes the connection
            except ClientTimeout:
                self.refusals["CLIENT_TIMEOUT" + suffix] += 1
                self._honest(how, "CLIENT_TIMEOUT")
            except (ClientError, OSError):
                self.refusals["TRANSPORT" + suffix] += 1
                self._honest(how, "TRANSPORT")
                await trio.sleep(0.2)

    # -- health

    async def monitor(self) -> None:
        probe = 0
        while not self.stopping:
            await trio.sleep(0.25)
            status, reason, code = "unreachable", None, "-"
            probe_ok: bool | None = None
            try:
                with trio.move_on_after(5):
                    async with open_client(unix=self.sock, request_timeout=5) as client:
                        health = await client.health()
                        status, reason = health["status"], health.get("reason")
                    probe += 1
                    async with open_client(unix=self.sock, request_timeout=10) as client:
                        code = await self.submit(client, b"probe %d" % probe, "probe")
                    probe_ok = code == "acknowledged"
            except (ClientError, OSError) as error:
                probe_ok = False if status != "unreachable" else None
                code = type(error).__name__
                self._honest("probe", code)
            self.health_samples += 1
            self.load_averages.append(os.getloadavg()[0])
            wrong = (status == "serving" and probe_ok is False) or (
                status == "degraded" and probe_ok is True and not self.fault_active
            )
            now = time.monotonic()
            if wrong:
                if self.wrong_since is None:
                    self.wrong_since = now
                    self.wrong_kinds = set()
                    self.wrong_what = (
                        f"{status} ({(reason or '')[:100]}), probe {code}, during "
                        f"{sorted(self.active_kinds) or 'no fault'}"
                    )
                if now - self.wrong_since >= self.wrong_longest:
                    self.wrong_longest = now - self.wrong_since
                    self.wrong_longest_what = self.wrong_what
                self.wrong_kinds.update(self.active_kinds or ["(no fault)"])
                for kind in self.wrong_kinds:  # the stretch counts for every kind it spanned
                    self.wrong_by_kind[kind] = max(
                        self.wrong_by_kind.get(kind, 0.0), now - self.wrong_since
                    )
            else:
                self.wrong_since = None
            for pid in self.descendants():
                self.seen_pids.add(pid)

    # -- faults

    async def inject(self, kind: str) -> None:
        self.fault_active += 1
        self.active_kinds.append(kind)
        try:
            await getattr(self, kind)()
            self.faults[kind] += 1
        except Exception as error:  # a fault that could not be injected is counted apart
            self.fault_notes[f"{kind}: {type(error).__name__}: {error}"[:160]] += 1
        finally:
            self.fault_active -= 1
            self.active_kinds.remove(kind)

    async def _health(self) -> dict[str, Any]:
        async with open_client(unix=self.sock, request_timeout=5) as client:
            result: dict[str, Any] = await client.health()
            return result

    async def kill_worker(self) -> None:
        health = await self._health()
        victim = next(w for w in health["workers"] if w.get("alive"))
        os.kill(victim["pid"], signal.SIGKILL)
        for _ in range(400):  # until the slot serves again
            await trio.sleep(0.05)
            with contextlib.suppress(ClientError, OSError):
                again = await self._health()
                slot = [w for w in again["workers"] if w["index"] == victim["index"]]
                if slot and slot[0]["pid"] != victim["pid"] and slot[0].get("alive"):
                    return

    async def kill_parent(self) -> None:
        assert self.process is not None
        old = self.descendants() | {self.process.pid}
        self.process.kill()
        await trio.to_thread.run_sync(self.process.wait)
        await self._gone(old)
        starting = time.monotonic()
        await trio.to_thread.run_sync(self.start)
        self._figure("kill_parent", "seconds to start", time.monotonic() - starting)
        self.restarts += 1

    async def _gone(self, old: set[int]) -> None:
        """Until every process of a stopped daemon is gone (they follow the parent), 30 s at
        most."""
        for _ in range(600):
            if not any(_alive(pid) for pid in old):
                return
            await trio.sleep(0.05)

    async def disk_full(self) -> None:
        assert self.process is not None
        if self.tmpfs:
            filler = self.data / "filler"
            with filler.open("wb", buffering=0) as handle:
                with contextlib.suppress(OSError):
                    while True:
                        handle.write(b"\0" * (1 << 20))
                with contextlib.suppress(OSError):
                    while True:
                        handle.write(b"\0" * 4096)
            await trio.sleep(4)
            filler.unlink()
        else:
            pid = self.process.pid
            log = self.data / "audit.jsonl"
            _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (log.stat().st_size + 300, hard))
            await trio.sleep(4)
            with contextlib.suppress(ProcessLookupError):
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
        await trio.sleep(1)
        await self._transparency_after_disk_full()

    async def _transparency_after_disk_full(self) -> None:
        """The operator of docs/operations.md after disk full: when the transparency log
        stopped (its tiles or checkpoint could not be written: ``health``'s
        ``transparency.failed``; it signs nothing more until a start repairs the tiles from
        the lines), stop the daemon and start it."""
        assert self.process is not None
        figures = self.figures["disk_full"]
        transparency = (await self._health()).get("transparency") or {}
        if not transparency.get("failed"):
            figures["transparency log still signing after it"] += 1
            return
        figures["transparency log stopped by it (then stopped and started)"] += 1
        old = self.descendants() | {self.process.pid}
        self.process.send_signal(signal.SIGTERM)
        figures[f"stop exit {await trio.to_thread.run_sync(self.process.wait)}"] += 1
        await self._gone(old)
        starting = time.monotonic()
        await trio.to_thread.run_sync(self.start)
        self._figure("disk_full", "seconds to start", time.monotonic() - starting)
        self.operator_restarts += 1

    async def sighup_storm(self) -> None:
        assert self.process is not None
        for _ in range(50):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGHUP)
            await trio.sleep(0.01)

    async def slow_clients(self) -> None:
        async def slow(unix: bool) -> None:
            family = socket.AF_UNIX if unix else socket.AF_INET
            sock = trio.socket.socket(family, socket.SOCK_STREAM)
            try:
                if unix:
                    await sock.connect(self.sock)
                    data = b"EVD1"
                else:
                    host, port = self.ready["http"].rsplit(":", 1)
                    await sock.connect((host, int(port)))
                    data = b"POST /v1/sessions/b/decisions HTTP/1.1\r\n"
                with trio.move_on_after(20):
                    for byte in data:
                        await sock.send(bytes([byte]))
                        await trio.sleep(1)
                    while await sock.recv(4096):
                        pass
                    self.refusals["SLOW_CLIENT_CUT"] += 1
            except OSError:
                self.refusals["SLOW_CLIENT_CUT"] += 1
            finally:
                sock.close()

        async with trio.open_nursery() as nursery:
            for number in range(6):
                nursery.start_soon(slow, number % 2 == 0)

    async def unauthenticated(self) -> None:
        for number in range(10):
            item = b"unauthenticated %d" % number
            with contextlib.suppress(ClientError, OSError):
                async with open_client(self.http, request_timeout=10) as client:
                    await self.submit(client, item, "unauthenticated")
            with contextlib.suppress(ClientError, OSError):
                async with open_client(self.http, token="not-a-token", request_timeout=10) as c:
                    await self.submit(c, item, "unauthenticated")

    async def _names_s3(self) -> str | None:
        """``stuck`` or ``failing`` when ``health`` (of whichever worker answers) says
        ``degraded`` naming the S3 store; else None."""
        with contextlib.suppress(ClientError, OSError):
            health = await self._health()
            reason = health.get("reason") or ""
            if health["status"] == "degraded" and "s3://" in reason:
                return "stuck" if " stuck: " in reason else "failing"
        return None

    async def _s3_fault(self, kind: str, mode: str, seconds: float) -> None:
        assert self.proxy is not None
        self.proxy.switch(mode)
        seen: set[str] = set()
        until = trio.current_time() + seconds
        while trio.current_time() < until:
            seen.add(await self._names_s3() or "")
            await trio.sleep(0.25)
        self.proxy.switch("pass")
        recovered = trio.current_time()
        clean = 0
        while clean < 8 and trio.current_time() - recovered < 40:
            named = await self._names_s3()
            seen.add(named or "")
            clean = 0 if named else clean + 1
            await trio.sleep(0.25)
        took = trio.current_time() - recovered - clean * 0.25
        self.s3_recovery_longest = max(self.s3_recovery_longest, took)
        if clean < 8:
            self.fault_notes[
                f"{kind}: health still named the S3 store 40 s after it recovered"
            ] += 1
        for state in sorted(seen - {""}):
            self.s3_degraded[f"{kind} ({state})"] += 1

    async def s3_stuck(self) -> None:
        await self._s3_fault("s3_stuck", "stall", REQUEST_DEADLINE + STALL_PAST_DEADLINE)

    async def s3_erroring(self) -> None:
        await self._s3_fault("s3_erroring", "error", ERROR_SECONDS)

    def _object(self, item: bytes) -> Path:
        hexdigest = hashlib.sha256(item).hexdigest()
        return self.data / "evidence" / hexdigest[:2] / hexdigest[2:4] / hexdigest

    async def _planted(self, item: bytes, plant: Any, remove: Any) -> None:
        plant()
        try:
            async with open_client(unix=self.sock, request_timeout=30) as client:
                code = await self.submit(client, item, "planted")
            if code == "acknowledged":
                self.fault_notes["a planted item was acknowledged"] += 1
        finally:
            remove()
        for _ in range(20):  # the store recovers on the next write
            with contextlib.suppress(ClientError, OSError):
                async with open_client(unix=self.sock, request_timeout=30) as client:
                    if await self.submit(client, item, "after-planted") == "acknowledged":
                        return
            await trio.sleep(0.25)

    async def fifo_in_store(self) -> None:
        item = b"fifo victim %s" % secrets.token_hex(8).encode()
        path = self._object(item)

        def plant() -> None:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(path.parent.parent, 0o700)
            os.mkfifo(path, 0o600)

        await self._planted(item, plant, lambda: path.unlink())

    async def symlink_in_store(self) -> None:
        while True:
            item = b"symlink victim %s" % secrets.token_hex(8).encode()
            path = self._object(item)
            if not path.parent.exists():
                break
        elsewhere = self.base / f"elsewhere-{secrets.token_hex(4)}"
        elsewhere.mkdir(mode=0o700)

        def plant() -> None:
            path.parent.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.parent.symlink_to(elsewhere)

        def remove() -> None:
            path.parent.unlink()
            if any(elsewhere.iterdir()):
                self.fault_notes["something was written through the planted symlink"] += 1

        await self._planted(item, plant, remove)

    # -- faults of the third round: behind the connection core's guards

    async def _get(self, path: str, *, token: str | None = None) -> tuple[int, bytes, float]:
        """One HTTP ``GET`` on a new connection: the status, the body, the seconds it took."""
        began = time.monotonic()
        with trio.fail_after(10):
            stream = await connect_from("127.0.0.1", self.http_address())
            try:
                await stream.send_all(request("GET", path, token=token))
                status, body = await read_answer(stream)
            finally:
                await stream.aclose()
        return status, body, time.monotonic() - began

    async def _checkpoint_size(self) -> int:
        _, note, _ = await self._get("/checkpoint", token=self.token)
        return open_checkpoint(note, self.verifier).checkpoint.size

    async def _audit_status(self) -> dict[str, Any]:
        """``health``'s ``audit`` (a serving process that started a moment ago has not been
        told the sequencer's status yet: asked again)."""
        for _ in range(40):
            with contextlib.suppress(ClientError, OSError):
                audit: dict[str, Any] | None = (await self._health()).get("audit")
                if audit is not None:
                    return audit
            await trio.sleep(0.25)
        raise RuntimeError("health named no audit status for 10 s")

    async def audit_truncated(self) -> None:
        """The audit log truncated to 0 bytes while the daemon runs (``logrotate``'s
        ``copytruncate``), then the operator of docs/operations.md: stop the daemon (exit
        70), verify the saved file with an anchor (the newest acknowledged decision's
        ``seq:line_digest``), put it back, start. The intact file is copied while its
        writer (the parent, under ``--workers``) is stopped (SIGSTOP), so no line is
        committed between the copy and the cut; every decision acknowledged after the cut
        must be refused, none written into the cut file."""
        assert self.process is not None
        kind, figures = "audit_truncated", self.figures["audit_truncated"]
        log, saved = self.data / "audit.jsonl", self.base / "audit.jsonl.saved"
        anchor = self.last_anchor or (await self._audit_status())["anchor"]
        pid = self.process.pid
        old = self.descendants() | {pid}
        marked = len(self.acknowledged)
        os.kill(pid, signal.SIGSTOP)
        try:
            while _state(pid) not in ("T", "t", ""):
                await trio.sleep(0.001)
            shutil.copyfile(log, saved)
            os.truncate(log, 0)
        finally:
            os.kill(pid, signal.SIGCONT)
        cut = time.monotonic()
        saved_seq = json.loads(saved.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1])["seq"]
        noticed = None
        while noticed is None and time.monotonic() - cut < 10:
            with contextlib.suppress(ClientError, OSError):
                health = await self._health()
                reason = health.get("reason") or ""
                if health["status"] == "degraded" and "changed under the daemon" in reason:
                    noticed = time.monotonic() - cut
            await trio.sleep(0.05)
        if noticed is None:
            self.fault_notes[f"{kind}: health did not say the log changed within 10 s"] += 1
        else:
            self._figure(kind, "seconds from the cut to health degraded", noticed)
        with contextlib.suppress(OSError, trio.BrokenResourceError, trio.TooSlowError):
            figures[f"/ready answered {(await self._get('/ready'))[0]}"] += 1
        await trio.sleep(2)  # every request AUDIT_FAILED until the operator acts
        figures["acknowledged into the cut file"] += sum(
            (self.acknowledged[decision][0] or 0) > saved_seq
            for decision in list(self.acknowledged)[marked:]
        )
        stopping = time.monotonic()
        self.process.send_signal(signal.SIGTERM)  # 1. stop
        figures[f"stop exit {await trio.to_thread.run_sync(self.process.wait)}"] += 1
        self._figure(kind, "seconds to stop", time.monotonic() - stopping)
        await self._gone(old)
        self._figure(kind, "seconds until its processes were gone", time.monotonic() - stopping)
        figures["anchor verifies the saved file"] += await self._verify(saved, anchor)  # 2.
        figures["anchor refuses the cut file"] += not await self._verify(log, anchor)
        restoring = log.with_name(log.name + ".restoring")  # 3. put the intact file back
        shutil.copyfile(saved, restoring)
        with restoring.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(restoring, log)
        saved.unlink()
        starting = time.monotonic()
        await trio.to_thread.run_sync(self.start)  # 4. start
        self._figure(kind, "seconds to start", time.monotonic() - starting)
        self.operator_restarts += 1
        self._figure(kind, "seconds from the cut to serving again", time.monotonic() - cut)

    async def _verify(self, log: Path, anchor: str) -> bool:
        """``evidenced audit verify --anchor`` says ``log`` holds the chain to ``anchor``."""
        verified = await trio.to_thread.run_sync(
            lambda: subprocess.run(
                [*CLI, "audit", "verify", "--anchor", anchor, str(log)],
                capture_output=True,
                check=False,
                cwd=ROOT,
            )
        )
        return verified.returncode == 0

    async def tile_planted(self) -> None:
        """A FIFO and a symlink to ``/etc/passwd`` planted at tiles, and a symlink to a
        directory outside at a tile directory (far past the tree, so only GETs meet them);
        48 GETs of them at once (more than trio's 40 threads): each ``404`` at once, not a
        byte read through them, while decisions go on and checkpoints keep being signed;
        then removed."""
        kind, figures = "tile_planted", self.figures["tile_planted"]
        level = self.data / "audit.jsonl.tlog" / "tile" / "0"
        far, link = level / FAR_TILES[0], level / FAR_TILES[1]
        outside = self.base / "outside"
        outside.mkdir(mode=0o700, exist_ok=True)
        secret = b"outside the transparency directory"
        (outside / "000").write_bytes(secret)
        passwd = Path("/etc/passwd").read_bytes()[:16]
        paths = [f"/tile/0/{FAR_TILES[0]}/000", f"/tile/0/{FAR_TILES[0]}/001",
                 f"/tile/0/{FAR_TILES[1]}/000"]  # fmt: skip

        async def burst(planted: bool) -> None:
            """48 GETs at once; without ``planted``, of the same paths absent (the control)."""
            what = "planted" if planted else "absent (control)"

            async def get(path: str) -> None:
                try:
                    status, body, seconds = await self._get(path, token=self.token)
                except (OSError, trio.BrokenResourceError, trio.TooSlowError):
                    figures[f"GETs {what} unanswered in 10 s"] += 1
                    return
                refused = status == 404 and b"UNKNOWN_KIND" in body
                figures[f"GETs {what} {'404 UNKNOWN_KIND' if refused else status}"] += 1
                figures["GETs that served a planted file's bytes"] += secret in body or (
                    passwd in body
                )
                self._figure(kind, f"longest GET {what} (s)", seconds)

            async with trio.open_nursery() as nursery:
                for number in range(48):
                    nursery.start_soon(get, paths[number % len(paths)])

        await burst(planted=False)
        size = await self._checkpoint_size()
        far.mkdir(mode=0o700)
        try:
            os.mkfifo(far / "000", 0o600)
            os.symlink("/etc/passwd", far / "001")
            os.symlink(outside, link, target_is_directory=True)
            await burst(planted=True)
            for _ in range(50):  # the signer goes on
                if await self._checkpoint_size() > size:
                    figures["checkpoint signed while planted"] += 1
                    break
                await trio.sleep(0.1)
        finally:
            for planted in (link, far / "001", far / "000"):
                with contextlib.suppress(FileNotFoundError):
                    planted.unlink()
            far.rmdir()

    async def clock_step(self) -> None:
        """The daemon's wall clock stepped back 100 days under load (libfaketime: every
        process of the running daemon reads the offset within ``FAKETIME_CACHE`` s), held
        ``CLOCK_STEP_SECONDS``, then forward to the right time: ``health`` must count the
        step (``audit.clock_steps_back``), decisions go on; the chain verifies at the end."""
        if LIBFAKETIME is None:
            raise RuntimeError("libfaketime is not installed (make faketime)")
        kind = "clock_step"
        before = (await self._audit_status())["clock_steps_back"]
        self.clock.write_text(f"{CLOCK_STEP}\n")
        stepped = time.monotonic()
        counted: dict[str, Any] | None = None
        try:
            while counted is None and time.monotonic() - stepped < 10:
                status = await self._audit_status()
                if status["clock_steps_back"] > before:
                    counted = status
                    noticed = time.monotonic() - stepped
                    self._figure(kind, "seconds until health counted it", noticed)
                await trio.sleep(0.1)
            await trio.sleep(CLOCK_STEP_SECONDS)
        finally:
            self.clock.write_text("+0\n")
        await trio.sleep(FAKETIME_CACHE + 0.5)  # every process reads the right time again
        if counted is None:
            self.fault_notes[f"{kind}: health did not count the step within 10 s"] += 1
            return
        self.figures[kind]["steps counted by health"] += 1
        self._figure(
            kind, "largest step counted (days)", counted["clock_largest_step_back_s"] / 86400
        )

    async def idle_flood(self) -> None:
        """Idle keep-alive HTTP connections with the valid token from six loopback
        addresses, 48 each (more than both serving processes' TCP slots): each asks once
        and then holds its connection idle, and is opened again when the daemon closes it
        (evicted, or idle past ``idle_timeout``), for ``FLOOD_SECONDS``; meanwhile honest
        clients open new connections over HTTP and the Unix socket and submit (no retry:
        what the daemon answers is counted)."""
        kind, figures = "idle_flood", self.figures["idle_flood"]
        address = self.http_address()
        holding = 0
        evicted: dict[int, list[int]] = {}

        async def hold(source: str) -> None:
            nonlocal holding
            while True:
                try:
                    stream = await connect_from(source, address)
                except OSError:
                    figures["flood connections refused"] += 1
                    await trio.sleep(0.25)
                    continue
                figures["flood connections"] += 1
                try:
                    sessions = request("GET", "/v1/sessions", token=self.token, close=False)
                    await stream.send_all(sessions)
                    status, _ = await read_answer(stream)
                    figures[f"flood connections answered {status}"] += 1
                    holding += 1
                    self._figure(kind, "flood connections held at once", holding)
                    try:
                        while await stream.receive_some(4096):
                            pass
                    finally:
                        holding -= 1
                except (trio.BrokenResourceError, OSError):
                    figures["flood connections closed before an answer"] += 1
                finally:
                    with contextlib.suppress(trio.BrokenResourceError, OSError):
                        await stream.aclose()
                await trio.sleep(0.25)

        async def honest(unix: bool) -> None:
            name = "Unix socket" if unix else "HTTP"
            target: dict[str, Any] = (
                {"unix": self.sock} if unix else {"url": self.http, "token": self.token}
            )
            while True:
                try:
                    with trio.fail_after(15):
                        async with open_client(**target, request_timeout=10, retry=None) as c:
                            item = self.item(secrets.randbelow(POOL))
                            outcome = await self.submit(c, item, "flood-" + name.split()[0])
                except (ClientError, OSError, trio.TooSlowError) as error:
                    outcome = type(error).__name__
                figures[f"honest {name} submits (a new connection each)"] += 1
                figures[f"honest {name} submits {outcome}"] += 1
                await trio.sleep(0.1)

        async def watch() -> None:
            while True:
                with contextlib.suppress(ClientError, OSError):
                    health = await self._health()
                    self._figure(kind, "connections open (health, both processes)",
                                 health["connections"])  # fmt: skip
                    seen = evicted.setdefault(health["worker"], [health["evicted_connections"]])
                    seen.append(health["evicted_connections"])
                await trio.sleep(0.5)

        async with trio.open_nursery() as nursery:
            for source in FLOOD_ADDRESSES:
                for _ in range(FLOOD_PER_ADDRESS):
                    nursery.start_soon(hold, source)
            await trio.sleep(2)  # the flood holds the table
            nursery.start_soon(honest, False)
            nursery.start_soon(honest, True)
            nursery.start_soon(watch)
            await trio.sleep(FLOOD_SECONDS)
            nursery.cancel_scope.cancel()
        figures["evicted (health, at least)"] += sum(max(s) - min(s) for s in evicted.values())

    async def proxied_bad_client(self) -> None:
        """Through the soak's forwarding proxy (``X-Forwarded-For``; the daemon trusts the
        proxy's address), a bad client (``BAD_CLIENT``) sends ``BAD_REQUESTS`` wrong-token
        requests, a new connection each, while an honest client of the same proxy (from
        127.0.0.1) submits with the token, a new connection every five submits: the bad
        one is cut off by its own address (``401``, then ``429``), the honest one served."""
        assert self.forwarder is not None
        figures = self.figures["proxied_bad_client"]
        proxy, url = ("127.0.0.1", self.forwarder.port), self.forwarder.url
        done = trio.Event()

        async def bad() -> None:
            try:
                for _ in range(BAD_REQUESTS):
                    try:
                        with trio.fail_after(10):
                            stream = await connect_from(BAD_CLIENT, proxy)
                            try:
                                guess = request("GET", "/v1/sessions", token="not-a-token")
                                await stream.send_all(guess)
                                status, _ = await read_answer(stream)
                            finally:
                                await stream.aclose()
                        figures[f"bad client answered {status}"] += 1
                    except (OSError, trio.BrokenResourceError, trio.TooSlowError):
                        figures["bad client cut off"] += 1
                    await trio.sleep(0.05)
            finally:
                done.set()

        async def honest() -> None:
            while not done.is_set():
                try:
                    async with open_client(
                        url, token=self.token, request_timeout=10, retry=None
                    ) as c:
                        for _ in range(5):
                            figures["honest submits through the proxy"] += 1
                            item = self.item(secrets.randbelow(POOL))
                            outcome = await self.submit(c, item, "proxied")
                            figures[f"honest submits through the proxy {outcome}"] += 1
                            if outcome != "acknowledged":
                                break
                except (ClientError, OSError) as error:
                    figures[f"honest submits through the proxy {type(error).__name__}"] += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(bad)
            nursery.start_soon(honest)

    async def schedule(self) -> None:
        kinds = len(self.kinds)
        interval = max(3.0, self.duration / (3 * kinds + 1))
        started = time.monotonic()
        index = 0
        while (index + 1) * interval < self.duration - interval / 2:
            await trio.sleep_until(trio.current_time() + started + (index + 1) * interval
                                   - time.monotonic())  # fmt: skip
            kind = self.kinds[index % kinds]
            index += 1
            await self.inject(kind)
        await trio.sleep(max(0.0, started + self.duration - time.monotonic()))
        self.stopping = True

    async def run(self) -> None:
        host, port = self.moto_endpoint.removeprefix("http://").rsplit(":", 1)
        self.proxy = S3Proxy((host, int(port)))
        async with trio.open_nursery() as around:
            await around.start(self.proxy.serve)
            self.env = _environment(f"http://127.0.0.1:{self.proxy.port}")
            self.env.update(self.faketime())
            self.forwarder = ForwardingProxy(self.http_address, PROXY_SOURCE)
            await around.start(self.forwarder.serve)
            await trio.to_thread.run_sync(self.start)
            await trio.sleep(1)
            self.fds["start"] = self.fd_counts()
            async with trio.open_nursery() as nursery:
                for number in range(4):
                    nursery.start_soon(self.load, number, number % 2 == 1)
                for number in range(2):
                    nursery.start_soon(self.load, 4 + number, number == 1, "s3")
                nursery.start_soon(self.monitor)
                await self.schedule()
            await trio.sleep(1)
            self.fds["end"] = self.fd_counts()
            around.cancel_scope.cancel()


def _state(pid: int) -> str:
    """The process's state letter (``R``, ``S``, ``T``, ``Z``…), ``""`` when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _alive(pid: int) -> bool:
    return _state(pid) not in ("", "Z")


def prove(soak: Soak) -> dict[str, Any]:
    """The end: stop the daemon, then everything from the files alone."""
    process = soak.process
    assert process is not None
    pids = soak.seen_pids | soak.descendants() | {process.pid}
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=120)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    leaked = sorted(pid for pid in pids if _alive(pid))
    log = soak.data / "audit.jsonl"
    raw = log.read_bytes().split(b"\n")
    lines = [line for line in raw if line]
    by_id: dict[str, tuple[int, bytes]] = {}
    s3_retained = 0
    proxied = {d for d, (_, how) in soak.acknowledged.items() if how == "proxied"}
    named = collections.Counter[str]()
    previous, steps_back, largest_back = "", 0, 0.0
    for line in lines:
        fields = json.loads(line)
        stamp = fields["timestamp"]
        if stamp < previous:  # one fixed-width UTC form: text order is time order
            steps_back += 1
            largest_back = max(largest_back, _seconds(previous) - _seconds(stamp))
        previous = stamp
        if fields.get("event") == "decision":
            by_id[fields["decision_id"]] = (fields["seq"], line)
            s3_retained += fields.get("retained") is True and str(fields.get("store")).startswith(
                "s3://"
            )
            if fields["decision_id"] in proxied:
                requester = fields["requester"]
                named[
                    f"client {requester.get('client')}, peer "
                    f"{str(requester.get('peer')).rsplit(':', 1)[0]}"
                ] += 1
    stderr = (soak.base / "daemon.stderr").read_text(errors="replace")
    lost = [
        decision
        for decision, (seq, _) in soak.acknowledged.items()
        if decision not in by_id or (seq is not None and by_id[decision][0] != seq)
    ]
    chain = verify_log(log)
    tlog = soak.data / "audit.jsonl.tlog"
    tree = verify_directory(tlog, [log], soak.verifier)
    note = (tlog / "checkpoint").read_bytes()
    size = open_checkpoint(note, soak.verifier).checkpoint.size
    reader = TileReader(TileDirectory(tlog), size)
    unproved = beyond = 0
    for decision in soak.acknowledged:
        if decision not in by_id:
            unproved += 1
            continue
        seq, line = by_id[decision]
        if seq > size:  # the transparency log stopped and signed nothing more
            beyond += 1
            unproved += 1
            continue
        try:
            proof = inclusion_proof(reader.node, seq - 1, size)
            receipt = make_receipt(line, seq - 1, size, proof, note)
            unproved += not verify_receipt(encode_receipt(receipt), soak.verifier).verified
        except Exception:
            unproved += 1
    replayed = _replay(log, "b", f"fs:{soak.data / 'evidence'}", dict(os.environ))
    from_s3 = _replay(log, "s3", S3_STORE, _environment(soak.moto_endpoint))
    s3_acknowledged = sum(how.startswith("s3-") for _, how in soak.acknowledged.values())
    return {
        "lost": len(lost),
        "chain_intact": chain.intact,
        "tree_verified": tree.verified,
        "tree_code": tree.code,
        "checkpoint_size": size,
        "log_lines": len(lines),
        "unproved": unproved,
        "beyond_checkpoint": beyond,
        "replay_status": replayed.get("status"),
        "replay_counts": {k: v for k, v in replayed.get("counts", {}).items() if v},
        "s3_replay_status": from_s3.get("status"),
        "s3_replay_counts": {k: v for k, v in from_s3.get("counts", {}).items() if v},
        "s3_retained_lines": s3_retained,
        "s3_acknowledged": s3_acknowledged,
        "leaked_processes": leaked,
        "steps_back_in_log": steps_back,
        "largest_step_back_days": largest_back / 86400,
        "proxied_lines": dict(named),
        "warnings": {
            event: stderr.count(f"event={event}")
            for event in (
                "audit_alarm",
                "audit_clock_step_back",
                "served_file_refused",
                "transparency_failed",
            )
        },
    }


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _replay(log: Path, session: str, store: str, env: dict[str, str]) -> dict[str, Any]:
    """``evidenced replay --all`` of one session's decisions from its store."""
    replay = subprocess.run(
        [*CLI, "replay", "--log", str(log), "--store", store, "--all", "--session", session],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
    )
    result: dict[str, Any] = json.loads(replay.stdout) if replay.stdout.strip() else {}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--keep", default=None, help="keep the files in this new folder")
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help="the fault kinds, comma-separated, in schedule order (default: all)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="evsoak-"))
    base.mkdir(parents=True, exist_ok=True)
    kinds = tuple(args.faults.split(","))
    if unknown := set(kinds) - set(FAULTS):
        parser.error(f"unknown fault kinds {sorted(unknown)}; the kinds are {', '.join(FAULTS)}")
    soak = Soak(base, args.duration, kinds)
    began = time.monotonic()
    try:
        soak.prepare()
        trio.run(soak.run)
        proof = prove(soak)
    finally:
        if soak.process is not None and soak.process.poll() is None:
            soak.process.kill()
            soak.process.wait()
        if soak.moto is not None:
            soak.moto.terminate()
            soak.moto.wait()
        if soak.tmpfs:  # (--keep keeps the configuration and the daemon's stderr)
            subprocess.run(["umount", "-l", str(soak.data)], check=False)
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    _print(soak, proof, time.monotonic() - began)
    ok = (
        proof["lost"] == 0
        and proof["chain_intact"]
        and proof["tree_verified"]
        and proof["unproved"] == 0
        and proof["replay_status"] == "REPRODUCED"
        and proof["s3_replay_status"] == "REPRODUCED"
        and proof["s3_replay_counts"].get("REPRODUCED") == proof["s3_retained_lines"]
        and not proof["leaked_processes"]
    )
    return 0 if ok else 1


def _print(soak: Soak, proof: dict[str, Any], elapsed: float) -> None:
    by_how = collections.Counter(how for _, how in soak.acknowledged.values())
    print(f"soak: {elapsed:.0f} s (load + faults {soak.duration:.0f} s), disk full via "
          f"{'tmpfs' if soak.tmpfs else 'RLIMIT_FSIZE'}")  # fmt: skip
    print(f"decisions acknowledged: {len(soak.acknowledged):,} ({dict(sorted(by_how.items()))})")
    if soak.load_averages:
        loads = sorted(soak.load_averages)
        print(f"load average (1 min, {os.cpu_count()} CPUs) during the run: {loads[0]:.1f}–"
              f"{loads[-1]:.1f}, median {loads[len(loads) // 2]:.1f}")  # fmt: skip
    print(f"faults injected: {dict(sorted(soak.faults.items()))}")
    if soak.fault_notes:
        print(f"fault notes: {dict(soak.fault_notes)}")
    print(f"refusals by code: {dict(sorted(soak.refusals.items()))}")
    print(f"decisions lost: {proof['lost']}")
    began = f"; it began: {soak.wrong_longest_what}" if soak.wrong_longest_what else ""
    print(f"longest time health was wrong: {soak.wrong_longest:.2f} s "
          f"({soak.health_samples} samples){began}")  # fmt: skip
    print(f"audit chain intact: {proof['chain_intact']}; log lines: {proof['log_lines']:,}")
    print(f"transparency tree verified: {proof['tree_verified']} ({proof['tree_code']}); "
          f"signed checkpoint size {proof['checkpoint_size']:,}; acknowledged decisions "
          f"without a verified inclusion receipt: {proof['unproved']} (of them past the "
          f"signed checkpoint: {proof['beyond_checkpoint']})")  # fmt: skip
    print(f"replay: {proof['replay_status']} {proof['replay_counts']}")
    s3_refused = sum(v for k, v in soak.refusals.items() if k.endswith("(s3)"))
    print(
        f"replay of the S3-retained decisions (from moto): {proof['s3_replay_status']} "
        f"{proof['s3_replay_counts']}; retained S3 decision lines {proof['s3_retained_lines']:,}"
        f" (acknowledged {proof['s3_acknowledged']:,}; refusals and broken connections of the"
        f" s3 clients: {s3_refused:,})"
    )
    injected = {k: v for k, v in sorted(soak.faults.items()) if k in S3_FAULTS}
    connections = soak.proxy.connections if soak.proxy else 0
    print(
        f"S3 faults during which health said degraded naming the store (stuck / failing): "
        f"{dict(sorted(soak.s3_degraded.items()))} of {injected}; longest from the endpoint's "
        f"recovery to health no longer naming it: {soak.s3_recovery_longest:.2f} s (proxy "
        f"connections: {connections:,})"
    )
    print(f"daemon restarts after kill -9 of the parent: {soak.restarts}; by the operator "
          f"(after a live truncation, or disk full that stopped the transparency log): "
          f"{soak.operator_restarts}")  # fmt: skip
    print(f"timestamps stepping back in the log: {proof['steps_back_in_log']} (largest "
          f"{proof['largest_step_back_days']:.2f} days); proxied decision lines: "
          f"{proof['proxied_lines']}; the daemon's warnings: {proof['warnings']}")  # fmt: skip
    print("per fault kind: injected; the honest clients' answers while it was injected "
          "(load and probes: answered, else refused or broken, by code); longest time health "
          "was wrong during it; its own figures")  # fmt: skip
    for kind in soak.kinds:
        during = soak.during.get(kind, collections.Counter())
        answered = during.pop("answered", 0)
        figures = {
            **dict(sorted(soak.figures.get(kind, {}).items())),
            **{k: round(v, 2) for k, v in sorted(soak.maxima.get(kind, {}).items())},
        }
        print(f"  {kind}: {soak.faults[kind]}x; honest answered {answered:,}, not "
              f"{dict(sorted(during.items()))}; health wrong "
              f"{soak.wrong_by_kind.get(kind, 0.0):.2f} s"
              + (f"; {figures}" if figures else ""))  # fmt: skip
    print(f"  (no fault): health wrong {soak.wrong_by_kind.get('(no fault)', 0.0):.2f} s")
    print(f"processes left after the stop: {proof['leaked_processes'] or 'none'}")
    start, end = soak.fds["start"], soak.fds["end"]
    print(
        f"open descriptors of the daemon's processes (parent, spawner, workers): at the "
        f"start {start} (total {sum(start)}), just before the stop {end} (total {sum(end)})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
