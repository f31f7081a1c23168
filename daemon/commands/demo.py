"""``evidenced demo`` (``make demo``): the daemon end to end, through a real socket.

It starts ``evidenced serve`` as a child process on a Unix socket in a temporary directory
(also its working directory: nothing is read from or written to the caller's folder),
submits seven evidence pairs with the real client, prints a table of the decisions, verifies
the audit log's hash chain, stops the daemon with SIGTERM, and verifies the chain again.

Cases (expected answer):

1. formation, a valid pair ............................... PASS
2. formation, a tampered certificate ..................... FAIL   FORMATION_CHECK_INVALID
3. formation, a subject naming an unsupported profile .... UNKNOWN FORMATION_PROFILE_UNSUPPORTED
4. formation, 2 x 300 KiB (over the session's 512 KiB) ... refused EVIDENCE_BYTES_EXCEEDED,
   before the daemon reads a single evidence byte
5. descriptor, the TISC program for t81vm ................ PASS
6. descriptor, the safetensors weights for native-weights  PASS
7. descriptor, a forged descriptor (the TISC payload re-described as native-weights, every
   hash freshly consistent) ............................. FAIL

Exit 0 when every answer is the expected one and both chain checks pass, else 1 (also when
the daemon does not start). If the descriptor mechanism is not installed, the daemon skips that
session (it says why) and the demo marks cases 5-7 as skipped instead of failing.

``evidenced demo --retain`` (``make demo-retain``) runs the same cases with evidence retention
on (``retain = "all"`` into a filesystem store in the temporary directory,
``docs/retention.md``), then replays every decision the daemon made from the audit log and the
store (``evidenced replay --all``): it passes only when every one is ``REPRODUCED``.

The pairs are the installed package data ``evidenced_fixtures`` (the checkout's ``fixtures/``),
found with ``importlib.resources``, so the demo runs the same from a wheel as from a checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from importlib.resources import files
from pathlib import Path
from typing import Any

import attrs
import trio

from daemon.audit._audit import verify_log
from daemon.client._client import open_client
from daemon.client._outcomes import ClientError, RejectedError
from session import load_provider

FIXTURES = files("evidenced_fixtures")
FORMATION = FIXTURES / "formation"
DESCRIPTOR = FIXTURES / "descriptor"


def _case(
    number: int, session: str, title: str, expect: str, evidence: list[bytes], build: str
) -> dict[str, Any]:
    return {
        "number": number,
        "session": session,
        "title": title,
        "expect": expect,
        "evidence": evidence,
        "build": build,
    }


def _cases() -> list[dict[str, Any]]:
    def pair(name: str) -> list[bytes]:
        return [
            (FORMATION / f"{name}.subject.json").read_bytes(),
            (FORMATION / f"{name}.certificate.json").read_bytes(),
        ]

    tisc = (DESCRIPTOR / "descriptor-tisc.txt").read_bytes()
    tisc_payload = (DESCRIPTOR / "tisc-fixture.bin").read_bytes()
    weights = (DESCRIPTOR / "descriptor-safetensors.txt").read_bytes()
    weights_payload = (DESCRIPTOR / "safetensors-fixture.bin").read_bytes()
    forged = tisc.replace(b"\nt81vm\n", b"\nnative-weights\n")
    big = [b"x" * (300 * 1024), b"y" * (300 * 1024)]
    return [
        _case(1, "formation", "valid pair (compose)", "PASS", pair("compose"), "formation"),
        _case(2, "formation", "tampered certificate", "FAIL", pair("tampered"), "formation"),
        _case(
            3,
            "formation",
            "unsupported profile",
            "UNKNOWN",
            pair("unsupported-profile"),
            "formation",
        ),
        _case(4, "formation", "2 x 300 KiB, refused unread", "REFUSED", big, "oversize"),
        _case(5, "descriptor", "TISC program / t81vm", "PASS", [tisc, tisc_payload], "descriptor"),
        _case(
            6,
            "descriptor",
            "safetensors / native-weights",
            "PASS",
            [weights, weights_payload],
            "descriptor",
        ),
        _case(
            7,
            "descriptor",
            "forged descriptor (TISC as weights)",
            "FAIL",
            [forged, tisc_payload],
            "descriptor",
        ),
    ]


def _binding(case: dict[str, Any], digest: str, formation_digest: str) -> Any:
    """The honest binding, built by the session's provider (``formation``/``descriptor``), with
    the digest the daemon announced. The oversize case binds the small ``atom`` pair and then
    sends 2 x 300 KiB under it: the daemon refuses the declared sizes before reading them."""
    evidence = case["evidence"]
    if case["build"] == "oversize":
        digest = formation_digest
        evidence = [
            (FORMATION / "atom.subject.json").read_bytes(),
            (FORMATION / "atom.certificate.json").read_bytes(),
        ]
    provider = load_provider(case["session"])
    binding = provider.honest_binding(evidence, provider.default_options())
    return attrs.evolve(binding, mechanism_digest=digest)


async def _run_cases(socket_path: str) -> list[dict[str, Any]]:
    rows = []
    async with open_client(unix=socket_path) as client:
        sessions = {s["name"]: s for s in await client.list_sessions()}
    digests = {name: s["mechanisms"][0]["mechanism_digest"] for name, s in sessions.items()}
    for case in _cases():
        row = {key: case[key] for key in ("number", "session", "title", "expect")}
        if case["session"] not in sessions:
            rows.append({**row, "answer": "SKIPPED", "why": "session not hosted", "id": ""})
            continue
        binding = _binding(case, digests[case["session"]], digests["formation"])
        try:
            async with open_client(unix=socket_path) as client:
                decision = await client.submit(case["session"], binding, case["evidence"])
            answer, why, ident = (
                str(decision.outcome),
                decision.result["details"],
                decision.decision_id,
            )
        except RejectedError as error:
            answer, why, ident = "REFUSED", error.code, error.decision_id or ""
        rows.append({**row, "answer": answer, "why": why or "-", "id": ident})
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    header = ("#", "session", "case", "expected", "answer", "details / code", "decision")
    body = [
        (
            str(r["number"]),
            r["session"],
            r["title"],
            r["expect"],
            r["answer"],
            r["why"],
            r["id"][:8],
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        for line in [header, *body]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


_RETAINING_CONFIG = """\
[server]
listen = ""
socket = "evidenced.sock"
[sessions.formation]
mechanisms = ["formation"]
max_evidence_items = 2
max_evidence_bytes = 524288
retain = "all"
store = "fs:evidence"
[sessions.descriptor]
mechanisms = ["descriptor"]
max_evidence_items = 2
max_evidence_bytes = 1052672
optional = true
retain = "all"
store = "fs:evidence"
"""


def _start(directory: Path, retain: bool) -> tuple[subprocess.Popen[str], dict[str, Any]] | None:
    socket_path = directory / "evidenced.sock"
    audit_path = directory / "audit.jsonl"
    config: list[str] = []
    if retain:
        (directory / "evidenced.toml").write_text(_RETAINING_CONFIG)
        config = ["--config", str(directory / "evidenced.toml")]
        print(f"$ cat {directory / 'evidenced.toml'}\n{_RETAINING_CONFIG}")
    command = [
        sys.executable,
        "-m",
        "daemon.cli",
        "serve",
        *config,
        "--socket",
        str(socket_path),
        "--audit-log",
        str(audit_path),
    ]
    shown = " ".join(["evidenced serve", *config[:1], *[Path(c).name for c in config[1:]]])
    print(f"$ {shown} --socket {socket_path} --audit-log {audit_path}")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=directory)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.stdout.close()
        print(f"demo failed: the daemon did not start (exit {process.wait()})", file=sys.stderr)
        return None
    ready: dict[str, Any] = json.loads(line)
    return process, ready


def _replay(directory: Path, audit_path: str) -> bool:
    """``evidenced replay --all`` over what the daemon logged and retained: all REPRODUCED?"""
    store = f"fs:{directory / 'evidence'}"
    print(f"\n$ evidenced replay --log {audit_path} --store {store} --all")
    replay = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "replay", "--log", audit_path, "--store", store,
         "--all"],
        capture_output=True,
        text=True,
        cwd=directory,
    )  # fmt: skip
    try:
        summary = json.loads(replay.stdout)
    except ValueError:
        print(f"replay failed (exit {replay.returncode}): {replay.stderr.strip()}")
        return False
    counts = ", ".join(f"{key} {value}" for key, value in summary.get("counts", {}).items())
    print(
        f"{summary.get('status')}: {summary.get('decisions')} decisions replayed from the "
        f"log and the store ({counts}) (exit {replay.returncode})"
    )
    return replay.returncode == 0 and summary.get("status") == "REPRODUCED"


def main(retain: bool = False, summary: dict[str, Any] | None = None) -> int:
    """Run the demo, printing the human report on stdout; ``summary`` (when given) receives
    the machine-readable result: ``cases`` (number, session, expect, answer, details), the
    two chain checks and, with ``retain``, whether every decision was reproduced."""
    if summary is None:
        summary = {}
    with tempfile.TemporaryDirectory(prefix="evidenced-demo-") as name:
        directory = Path(name)
        print(f"example data: {FIXTURES}")
        started_daemon = _start(directory, retain)
        if started_daemon is None:
            return 1
        process, ready = started_daemon
        with process:  # closes the daemon's pipe and reaps it on every path
            try:
                print(f"daemon ready: sessions {ready['sessions']} on {ready['unix']}\n")
                started = time.perf_counter()
                rows = trio.run(_run_cases, ready["unix"])
                elapsed = time.perf_counter() - started
            except ClientError as error:
                process.send_signal(signal.SIGTERM)
                process.wait(30)
                print(f"demo failed: {error}", file=sys.stderr)
                return 1
            except BaseException:
                process.kill()
                raise
            return _conclude(process, ready, rows, elapsed, directory, retain, summary)


def _conclude(
    process: subprocess.Popen[str],
    ready: dict[str, Any],
    rows: list[dict[str, Any]],
    elapsed: float,
    directory: Path,
    retain: bool,
    summary: dict[str, Any],
) -> int:
    """After the cases: the table, both chain checks around the SIGTERM stop, the CLI's own
    verify, the replay with ``retain``; fills ``summary`` and answers the exit code."""
    print(_table(rows))
    print(f"\n{len(rows)} submissions in {elapsed * 1000:.0f} ms through {ready['unix']}")
    audit_path = ready["audit_log"]
    live, final, code, verify = _checks(process, audit_path, len(rows), directory)
    replayed = _replay(directory, audit_path) if retain else None
    ok = _summarise(summary, rows, live.intact, final.intact, code, verify.returncode, replayed)
    done = "every answer is the expected one" + (", every decision reproduced" if retain else "")
    print("\ndemo " + (f"OK: {done}" if ok else "FAILED"))
    if os.environ.get("EVIDENCED_DEMO_KEEP"):
        print(Path(audit_path).read_text())
    return 0 if ok else 1


def _summarise(
    summary: dict[str, Any],
    rows: list[dict[str, Any]],
    live: bool,
    final: bool,
    code: int,
    verified: int,
    replayed: bool | None,
) -> bool:
    """Whether the demo is OK (every answer expected, both chains intact, exits 0, every
    decision reproduced when replayed); ``summary`` receives the machine-readable result."""
    expected = all(r["answer"] in (r["expect"], "SKIPPED") for r in rows)
    ok = expected and live and final and code == 0 and verified == 0 and replayed is not False
    summary.update(
        status="OK" if ok else "FAILED",
        cases=[
            {key: r[key] for key in ("number", "session", "expect", "answer", "why")} for r in rows
        ],
        chain_while_serving="INTACT" if live else "BROKEN",
        chain_after_shutdown="INTACT" if final else "BROKEN",
        daemon_exit=code,
        replayed=replayed,
    )
    return ok


def _checks(
    process: subprocess.Popen[str], audit_path: str, answers: int, directory: Path
) -> tuple[Any, Any, int, subprocess.CompletedProcess[str]]:
    """The chain while serving, the SIGTERM stop, the chain after it and ``audit verify``'s
    own answer, each printed as it is known."""
    live = verify_log(audit_path)
    print(
        f"audit chain while serving: {'INTACT' if live.intact else 'BROKEN'}, "
        f"{live.lines} lines, head {live.head[:23]}…"
    )
    process.send_signal(signal.SIGTERM)
    code = process.wait(30)
    final = verify_log(audit_path)
    print(f"daemon stopped with SIGTERM: exit {code}")
    print(
        f"audit chain after shutdown: {'INTACT' if final.intact else 'BROKEN'}, "
        f"{final.lines} lines (daemon_start, {answers} answers, daemon_stop)"
    )
    verify = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "audit", "verify", audit_path],
        capture_output=True,
        text=True,
        cwd=directory,
    )
    print(f"$ evidenced audit verify {audit_path}\n{verify.stdout.strip()}")
    print(f"(exit {verify.returncode})")
    return live, final, code, verify


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo", help="start a daemon, submit seven example pairs, verify the audit chain"
    )
    parser.add_argument(
        "--retain",
        action="store_true",
        help="retain the evidence, then replay every decision (all must be REPRODUCED)",
    )
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    """``evidenced demo``: the human report on stderr, ``{"status", "cases", ...}`` on stdout
    (exit 0 OK, 1 FAILED)."""
    import contextlib

    from session import cli

    summary: dict[str, Any] = {}
    with contextlib.redirect_stdout(sys.stderr):
        code = main(args.retain, summary)
    if not summary:
        raise cli.CliError("the demo could not run (see the messages above)", exit=cli.Exit.FAIL)
    cli.emit(summary)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
