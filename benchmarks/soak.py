"""Chaos soak: the daemon under load and scheduled faults, then proof from the log alone that
nothing acknowledged was lost (issue "hold under attack, second round"; not part of the test
suite: it runs for minutes and its figures are printed, never asserted).

For ``--duration`` seconds (default 600) it runs ``evidenced serve`` (``--workers 2``; the
transparency log; ``retain = "all"`` into an ``fs:`` store; HTTP with a bearer token) as a
child process, with every file on a 1 GiB tmpfs when ``mount`` is allowed (else disk full is
``RLIMIT_FSIZE`` on the parent, as ``tests/daemon/test_audit_disk_full.py`` does), and:

* drives load from several clients: binary protocol over the Unix socket and HTTP with the
  token, each a loop of submits of evidence from a pool (retained, so every one is replayable);
* injects faults round-robin on a schedule so that each kind happens at least three times:
  ``kill -9`` of a serving worker, ``kill -9`` of the parent (then a restart on the same files),
  disk full for a few seconds, a SIGHUP storm, slow clients (a byte every second), unauthenticated
  HTTP clients, a FIFO planted at an object's path, a symlink planted at a store directory
  (each planted item is submitted while planted, then removed and submitted again);
* watches ``health`` every 0.25 s next to a probe decision: health is *wrong* while it says
  ``serving`` and the probe is refused for a daemon-side reason (AUDIT_FAILED, BUSY, a broken
  connection), or says ``degraded`` while probes pass and no fault is active; the longest such
  stretch is printed.

At the end it stops the daemon and proves, from the files alone: every acknowledged decision
is the log line at its ``seq`` (none lost), the hash chain verifies (``verify_log``), the
transparency tiles verify against the log and the signed checkpoint (``verify_directory``),
every acknowledged decision has an inclusion proof under that checkpoint (a receipt built
from the tiles and verified), every retained decision replays ``REPRODUCED`` (``evidenced
replay --all``), no process of the daemon outlived it and no descriptor leaked (the parent's
and workers' open descriptors at the start and just before the stop).

Run: ``python benchmarks/soak.py [--duration SECONDS] [--keep DIR]``
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
from pathlib import Path
from typing import Any

import trio

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
    "fifo_in_store",
    "sighup_storm",
    "slow_clients",
    "unauthenticated",
    "symlink_in_store",
    "disk_full",
    "kill_parent",
)


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

    def __init__(self, base: Path, duration: float) -> None:
        self.base = base
        self.duration = duration
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
        self.health_samples = 0
        self.restarts = 0
        self.stopping = False
        self.binding_cache: dict[bytes, BoundProposition] = {}

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
            "workers = 2\nworker_processes = 1\nidle_timeout = 5.0\nrequest_deadline = 10.0\n"
            "shutdown_grace = 5.0\n"
            f'[http]\nlisten = "127.0.0.1:0"\nheader_timeout = 3.0\ntokens_file = "{tokens}"\n'
            f'[audit]\npath = "{self.data / "audit.jsonl"}"\ndurability = "fsync"\n'
            f'[transparency]\nkey_file = "{key}"\norigin = "{ORIGIN}"\n'
            "checkpoint_interval = 0.5\n"
            '[sessions.b]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
            f'retain = "all"\nstore = "fs:{self.data / "evidence"}"\n'
        )

    def start(self) -> None:
        """Start the daemon; a start that is refused (the old processes of a killed parent
        may still hold the log's lock for a moment) is noted and tried again."""
        for _ in range(60):
            process = subprocess.Popen(
                [*CLI, "serve", "--config", str(self.base / "evidenced.toml")],
                stdout=subprocess.PIPE,
                stderr=open(self.base / "daemon.stderr", "a"),  # noqa: SIM115 - the child's
                text=True,
                cwd=ROOT,
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
            process.wait()
            self.fault_notes[f"a start was refused: {line.strip()[:200]}"] += 1
            time.sleep(0.5)
        raise SystemExit(f"the daemon did not start; see {self.base / 'daemon.stderr'}")

    @property
    def sock(self) -> str:
        return str(self.data / "sock")

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

    async def submit(self, client: Any, item: bytes, how: str) -> str:
        """Submit; record the acknowledgement or the refusal; the outcome's kind."""
        try:
            answer = await client.submit("b", self.bound(item), [item])
        except RejectedError as error:
            self.refusals[error.code] += 1
            return error.code
        self.acknowledged[answer.decision_id] = (answer.seq, how)
        return "acknowledged"

    async def load(self, number: int, http: bool) -> None:
        n = number * 100_003
        while not self.stopping:
            try:
                target: dict[str, Any] = (
                    {"url": self.http, "token": self.token} if http else {"unix": self.sock}
                )
                async with open_client(**target, request_timeout=30) as client:
                    while not self.stopping:
                        n += 1
                        code = await self.submit(client, self.item(n), "http" if http else "evd1")
                        if code not in ("acknowledged",):
                            break  # an error answer closes the connection
            except ClientTimeout:
                self.refusals["CLIENT_TIMEOUT"] += 1
            except (ClientError, OSError):
                self.refusals["TRANSPORT"] += 1
                await trio.sleep(0.2)

    # -- health

    async def monitor(self) -> None:
        probe = 0
        while not self.stopping:
            await trio.sleep(0.25)
            status = "unreachable"
            probe_ok: bool | None = None
            try:
                with trio.move_on_after(5):
                    async with open_client(unix=self.sock, request_timeout=5) as client:
                        status = (await client.health())["status"]
                    probe += 1
                    async with open_client(unix=self.sock, request_timeout=10) as client:
                        code = await self.submit(client, b"probe %d" % probe, "probe")
                    probe_ok = code == "acknowledged"
            except (ClientError, OSError):
                probe_ok = False if status != "unreachable" else None
            self.health_samples += 1
            wrong = (status == "serving" and probe_ok is False) or (
                status == "degraded" and probe_ok is True and not self.fault_active
            )
            now = time.monotonic()
            if wrong:
                if self.wrong_since is None:
                    self.wrong_since = now
                self.wrong_longest = max(self.wrong_longest, now - self.wrong_since)
            else:
                self.wrong_since = None
            for pid in self.descendants():
                self.seen_pids.add(pid)

    # -- faults

    async def inject(self, kind: str) -> None:
        self.fault_active += 1
        try:
            await getattr(self, kind)()
            self.faults[kind] += 1
        except Exception as error:  # a fault that could not be injected is counted apart
            self.fault_notes[f"{kind}: {type(error).__name__}: {error}"[:160]] += 1
        finally:
            self.fault_active -= 1

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
        for _ in range(600):  # every process of the old daemon gone (they follow the parent)
            if not any(_alive(pid) for pid in old):
                break
            await trio.sleep(0.05)
        await trio.to_thread.run_sync(self.start)
        self.restarts += 1

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

    async def schedule(self) -> None:
        kinds = len(FAULTS)
        interval = max(3.0, self.duration / (3 * kinds + 1))
        started = time.monotonic()
        index = 0
        while (index + 1) * interval < self.duration - interval / 2:
            await trio.sleep_until(trio.current_time() + started + (index + 1) * interval
                                   - time.monotonic())  # fmt: skip
            kind = FAULTS[index % kinds]
            index += 1
            await self.inject(kind)
        await trio.sleep(max(0.0, started + self.duration - time.monotonic()))
        self.stopping = True

    async def run(self) -> None:
        await trio.sleep(1)
        self.fds["start"] = self.fd_counts()
        async with trio.open_nursery() as nursery:
            for number in range(4):
                nursery.start_soon(self.load, number, number % 2 == 1)
            nursery.start_soon(self.monitor)
            await self.schedule()
        await trio.sleep(1)
        self.fds["end"] = self.fd_counts()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


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
    for line in lines:
        fields = json.loads(line)
        if fields.get("event") == "decision":
            by_id[fields["decision_id"]] = (fields["seq"], line)
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
    unproved = 0
    for decision in soak.acknowledged:
        if decision not in by_id:
            unproved += 1
            continue
        seq, line = by_id[decision]
        try:
            proof = inclusion_proof(reader.node, seq - 1, size)
            receipt = make_receipt(line, seq - 1, size, proof, note)
            unproved += not verify_receipt(encode_receipt(receipt), soak.verifier).verified
        except Exception:
            unproved += 1
    replay = subprocess.run(
        [*CLI, "replay", "--log", str(log), "--store", f"fs:{soak.data / 'evidence'}", "--all"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    replayed = json.loads(replay.stdout) if replay.stdout.strip() else {}
    return {
        "lost": len(lost),
        "chain_intact": chain.intact,
        "tree_verified": tree.verified,
        "tree_code": tree.code,
        "checkpoint_size": size,
        "log_lines": len(lines),
        "unproved": unproved,
        "replay_status": replayed.get("status"),
        "replay_counts": {k: v for k, v in replayed.get("counts", {}).items() if v},
        "leaked_processes": leaked,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--keep", default=None, help="keep the files in this new folder")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="evsoak-"))
    base.mkdir(parents=True, exist_ok=True)
    soak = Soak(base, args.duration)
    began = time.monotonic()
    try:
        soak.prepare()
        soak.start()
        trio.run(soak.run)
        proof = prove(soak)
    finally:
        if soak.process is not None and soak.process.poll() is None:
            soak.process.kill()
            soak.process.wait()
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
        and not proof["leaked_processes"]
    )
    return 0 if ok else 1


def _print(soak: Soak, proof: dict[str, Any], elapsed: float) -> None:
    by_how = collections.Counter(how for _, how in soak.acknowledged.values())
    print(f"soak: {elapsed:.0f} s (load + faults {soak.duration:.0f} s), disk full via "
          f"{'tmpfs' if soak.tmpfs else 'RLIMIT_FSIZE'}")  # fmt: skip
    print(f"decisions acknowledged: {len(soak.acknowledged):,} ({dict(sorted(by_how.items()))})")
    print(f"faults injected: {dict(sorted(soak.faults.items()))}")
    if soak.fault_notes:
        print(f"fault notes: {dict(soak.fault_notes)}")
    print(f"refusals by code: {dict(sorted(soak.refusals.items()))}")
    print(f"decisions lost: {proof['lost']}")
    print(f"longest time health was wrong: {soak.wrong_longest:.2f} s "
          f"({soak.health_samples} samples)")  # fmt: skip
    print(f"audit chain intact: {proof['chain_intact']}; log lines: {proof['log_lines']:,}")
    print(f"transparency tree verified: {proof['tree_verified']} ({proof['tree_code']}); "
          f"signed checkpoint size {proof['checkpoint_size']:,}; acknowledged decisions "
          f"without a verified inclusion receipt: {proof['unproved']}")  # fmt: skip
    print(f"replay: {proof['replay_status']} {proof['replay_counts']}")
    print(f"daemon restarts after kill -9 of the parent: {soak.restarts}")
    print(f"processes left after the stop: {proof['leaked_processes'] or 'none'}")
    start, end = soak.fds["start"], soak.fds["end"]
    print(
        f"open descriptors of the daemon's processes (parent, spawner, workers): at the "
        f"start {start} (total {sum(start)}), just before the stop {end} (total {sum(end)})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
