"""Decision logs shipped (``[[audit.sinks]]``, docs/audit-log.md "Shipping decision logs"):
real daemons (``evidenced serve``) shipping to a real HTTP receiver started by the test
(``sink_receiver``), and to stdout.

Each test is named after the fault it stops: decisions lost or duplicated across a sink
outage and a restart, a sink that delays decisions, a cursor that loses its place at a
rotation, stdout mixed with other output, a bad sink accepted by ``config check``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import clirun
import pytest
from daemon_testkit import ROOT, read_stderr_until
from http_testkit import LiveDaemon
from sink_receiver import Receiver

from daemon import SubmitResult, SyncClient, __version__
from daemon.audit._audit_format import parse_sealed
from daemon.audit._follow import read_cursor
from daemon.audit._transparency import audit_files


def _config(directory: Path, sinks: str, *, audit: str = "") -> str:
    return f"""
[server]
listen = ""
socket = "{directory / "s"}"
worker_processes = 1

[http]
listen = "127.0.0.1:0"

[audit]
path = "{directory / "audit.jsonl"}"
{audit}

{sinks}

[sessions.bytes]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
max_evidence_bytes = 4096
"""


def _http_sink(receiver: Receiver, extra: str = "", *, timeout: float = 5.0) -> str:
    return f"""
[[audit.sinks]]
name = "central"
type = "http"
url = "{receiver.url}"
flush_interval = 0.05
backoff_min = 0.05
backoff_max = 0.5
timeout = {timeout}
{extra}
"""


def _submit(socket: Path, first: int, count: int) -> int:
    """``count`` decisions of distinct evidence over the Unix socket; how many were PASS."""
    pairs = [(None, [f"decision {n}\n".encode()]) for n in range(first, first + count)]
    with SyncClient(unix=str(socket)) as client:
        results = client.submit_batch("bytes", pairs)
    return sum(isinstance(r, SubmitResult) and r.outcome == "PASS" for r in results)


def _health(socket: Path) -> dict[str, Any]:
    with SyncClient(unix=str(socket)) as client:
        return client.health()


def _sink(socket: Path, name: str = "central") -> dict[str, Any]:
    sinks: list[dict[str, Any]] = _health(socket)["audit"]["sinks"]
    (found,) = [sink for sink in sinks if sink["name"] == name]
    return found


def _audit_lines(directory: Path) -> list[bytes]:
    """Every line of the log and its rotated files, oldest first, without newlines."""
    lines: list[bytes] = []
    for path in audit_files(directory / "audit.jsonl"):
        lines += path.read_bytes().splitlines()
    return lines


def _stop(daemon: LiveDaemon) -> None:
    assert daemon.stop() == 0, daemon.stderr()


def test_ten_thousand_decisions_reach_the_receiver_across_an_outage_and_a_restart_none_lost(
    short_dir: Path,
) -> None:
    """Decision logs shipped, end to end: 10,000 decisions, a receiver that loses one
    acknowledgement and then is down, the daemon stopped and started again during the
    outage, the log rotated under the sink: every decision arrives; the only duplicates are
    the one batch whose acknowledgement was lost."""
    receiver = Receiver()
    token = short_dir / "token"
    token.write_text("s3cret-sink-token\n")
    text = _config(
        short_dir,
        _http_sink(
            receiver, f'token_file = "{token}"\nbatch_lines = 250\nlabels = {{ zone = "a" }}'
        ),
        audit='rotate_bytes = 1000000\nlabels = { team = "payments" }',
    )
    socket = short_dir / "s"
    try:
        daemon = LiveDaemon(config_text=text)
        try:
            assert _submit(socket, 0, 4000) == 4000
            receiver.wait_for(lambda r: len(r.decisions()) >= 4000)
            receiver.mode = "store_once_then_fail"  # one batch arrives, its answer is lost
            assert _submit(socket, 4000, 1000) == 1000
            receiver.wait_for(lambda r: r.failed_posts >= 2)
            # The outage: every decision is still answered, and the sink says it is behind.
            assert _submit(socket, 5000, 2000) == 2000
            sink = _sink(socket)
            assert sink["state"] == "retrying" and sink["failures"] >= 2
            assert sink["lag_lines"] >= 2000 and "HTTP 503" in sink["last_error"]
        finally:
            _stop(daemon)
        stopped_at = read_cursor(short_dir / "audit.jsonl.sink-central.cursor", "central")
        assert stopped_at is not None
        daemon = LiveDaemon(config_text=text)  # restarted during the outage
        try:
            assert _submit(socket, 7000, 3000) == 3000
            receiver.mode = "ok"
            receiver.wait_for(lambda r: len(r.decisions()) >= 10_000 + len(r.unacknowledged))
            receiver.wait_for(lambda r: _sink(socket)["lag_lines"] == 0)
        finally:
            _stop(daemon)
    finally:
        receiver.close()
    lines = _audit_lines(short_dir)
    by_seq = {json.loads(line)["seq"]: line for line in lines}
    logged = [json.loads(line) for line in lines if b'"event":"decision"' in line]
    assert len(logged) == 10_000
    received = receiver.decisions()
    ids = Counter(event["decision_id"] for event in received)
    assert set(ids) == {line["decision_id"] for line in logged}  # none lost
    duplicates = sorted(i for i, n in ids.items() for _ in range(n - 1))
    lost_answer = sorted(event["decision_id"] for event in receiver.unacknowledged)
    assert 0 < len(lost_answer) <= 250 and duplicates == lost_answer  # one batch, no more
    for event in received:  # the exact line, sealed, with the instance's labels
        assert event["line"].encode() == by_seq[event["seq"]]
        digest, fields, _ = parse_sealed(event["line"].encode())
        assert fields is not None and fields["line_digest"] == digest
        assert event["labels"]["team"] == "payments" and event["labels"]["zone"] == "a"
        assert event["labels"]["version"] == __version__ and event["labels"]["id"]
    assert {event["labels"]["id"] for event in received} == {received[0]["labels"]["id"]}
    assert receiver.authorizations == {"Bearer s3cret-sink-token"} and not receiver.problems
    assert len(list(short_dir.glob("audit.jsonl.0*"))) >= 3  # the cursor followed rotations
    final = read_cursor(short_dir / "audit.jsonl.sink-central.cursor", "central")
    assert final is not None and final.seq == max(by_seq) > stopped_at.seq


def test_a_stalled_receiver_never_delays_or_refuses_a_decision(short_dir: Path) -> None:
    """A receiver that accepts uploads and never answers: every decision is answered (the
    counts, not the time), the sink only falls behind, and health and /metrics say so."""
    receiver = Receiver()
    receiver.mode = "stall"
    socket = short_dir / "s"
    try:
        daemon = LiveDaemon(config_text=_config(short_dir, _http_sink(receiver, timeout=1.0)))
        try:
            assert _submit(socket, 0, 100) == 100
            receiver.wait_for(lambda r: r.stalled_posts >= 1)  # an upload is held open
            assert _submit(socket, 100, 200) == 200
            health = _health(socket)
            assert health["status"] == "serving" and health["outcomes"]["PASS"] == 300
            receiver.wait_for(lambda r: _sink(socket)["failures"] >= 1)
            sink = _sink(socket)
            assert sink["lag_lines"] >= 300 and sink["shipped"] == 0
            assert "ReadTimeout" in sink["last_error"] and sink["state"] == "retrying"
            metrics = daemon.get("/metrics").body.decode()
            assert 'evidenced_sink_failures_total{sink="central"}' in metrics
            lag = [
                line
                for line in metrics.splitlines()
                if line.startswith('evidenced_sink_lag_lines{sink="central"}')
            ]
            assert lag and float(lag[0].split()[-1]) >= 300
            receiver.mode = "ok"
            receiver.release()
            receiver.wait_for(lambda r: len(r.decisions()) >= 300)
            receiver.wait_for(lambda r: _sink(socket)["lag_lines"] == 0)
            assert _sink(socket)["state"] == "caught_up"
        finally:
            _stop(daemon)
        assert daemon.stderr().count("event=audit_sink_failed") == 1  # once per stretch
        assert "event=audit_sink_recovered" in daemon.stderr()
    finally:
        receiver.close()
    assert len({event["decision_id"] for event in receiver.decisions()}) == 300


def test_the_console_sink_prints_exactly_the_decisions_with_labels_and_nothing_else(
    short_dir: Path,
) -> None:
    """stdout is the sink's: no serving document, no other output, one event per decision
    carrying its exact line, in log order, each labelled."""
    config = short_dir / "d.toml"
    sink = '[[audit.sinks]]\nname = "out"\ntype = "console"\nflush_interval = 0.05\n'
    config.write_text(_config(short_dir, sink, audit='labels = { id = "replica-7" }'))
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        read_stderr_until(process, b"serving")
        assert _submit(short_dir / "s", 0, 40) == 40
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    lines = _audit_lines(short_dir)
    decisions = [line for line in lines if b'"event":"decision"' in line]
    printed = [json.loads(line) for line in out.splitlines()]
    assert [event["line"].encode() for event in printed] == decisions
    assert all(event["event"] == "decision" for event in printed)
    assert {json.dumps(event["labels"]) for event in printed} == {
        json.dumps({"id": "replica-7", "version": __version__})
    }


def test_the_cursor_resumes_inside_a_rotated_file_after_a_restart(short_dir: Path) -> None:
    """The sink is down while the log rotates several times; the daemon restarts with its
    cursor in a file that is now an archive: it continues there, one line after the other."""
    receiver = Receiver()
    socket = short_dir / "s"
    text = _config(
        short_dir, _http_sink(receiver, "batch_lines = 20"), audit="rotate_bytes = 20000"
    )
    try:
        daemon = LiveDaemon(config_text=text)
        try:
            assert _submit(socket, 0, 30) == 30
            receiver.wait_for(lambda r: len(r.decisions()) == 30)
            receiver.mode = "fail"
            assert _submit(socket, 30, 170) == 170
        finally:
            _stop(daemon)
        cursor = read_cursor(short_dir / "audit.jsonl.sink-central.cursor", "central")
        assert cursor is not None
        live_first = json.loads((short_dir / "audit.jsonl").read_bytes().split(b"\n")[0])["seq"]
        assert cursor.file < live_first  # its file is a rotated one now
        receiver.mode = "ok"
        daemon = LiveDaemon(config_text=text)
        try:
            receiver.wait_for(lambda r: len(r.decisions()) >= 200)
        finally:
            _stop(daemon)
    finally:
        receiver.close()
    seqs = [event["seq"] for event in receiver.decisions()]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs)) == 200


def test_a_damaged_cursor_stalls_the_sink_and_never_a_decision(short_dir: Path) -> None:
    """A cursor file edited between two runs: the sink ships nothing it cannot place, says
    why (health, stderr), and every decision is answered."""
    receiver = Receiver()
    socket = short_dir / "s"
    text = _config(short_dir, _http_sink(receiver))
    cursor = short_dir / "audit.jsonl.sink-central.cursor"
    try:
        daemon = LiveDaemon(config_text=text)
        try:
            assert _submit(socket, 0, 10) == 10
            receiver.wait_for(lambda r: len(r.decisions()) == 10)
        finally:
            _stop(daemon)
        cursor.write_bytes(cursor.read_bytes().replace(b'"offset":', b'"offset":1'))
        daemon = LiveDaemon(config_text=text)
        try:
            assert _submit(socket, 10, 20) == 20
            health = _health(socket)
            sink = _sink(socket)
            assert health["status"] == "serving" and sink["state"] == "stalled"
            assert "is damaged" in sink["last_error"] and sink["lag_lines"] >= 20
        finally:
            _stop(daemon)
        assert "event=audit_sink_stalled" in daemon.stderr()
    finally:
        receiver.close()
    assert len(receiver.decisions()) == 10


def test_workers_ship_from_the_sequencer_that_owns_the_log(short_dir: Path) -> None:
    receiver = Receiver()
    socket = short_dir / "s"
    text = _config(short_dir, _http_sink(receiver)).replace(
        "worker_processes = 1", "worker_processes = 1\nworkers = 2"
    )
    try:
        daemon = LiveDaemon(config_text=text)
        try:
            assert _submit(socket, 0, 200) == 200
            receiver.wait_for(lambda r: len(r.decisions()) >= 200)
            # What a worker reports is the sequencer's sink as of its last push (every
            # 0.25 s), and two requests may reach two workers: one snapshot is judged whole.
            seen: list[dict[str, Any]] = []

            def all_shipped(_: Receiver) -> bool:
                seen.append(_sink(socket))
                return bool(seen[-1]["shipped"] == 200)

            receiver.wait_for(all_shipped)
            assert seen[-1]["lag_lines"] == 0 and seen[-1]["state"] == "caught_up", seen[-1]
        finally:
            _stop(daemon)
    finally:
        receiver.close()
    assert len({event["decision_id"] for event in receiver.decisions()}) == 200


BAD_SINKS = [
    ('name = "a"\ntype = "kafka"', "audit.sinks[0].type must be one of"),
    ('name = "a"\ntype = "http"', "audit.sinks[0].url is required for an http sink"),
    ('name = "a"\ntype = "http"\nurl = "ftp://x/"', "audit.sinks[0].url 'ftp://x/' must be"),
    ('name = "a"\ntype = "http"\nurl = "https://u:p@x/"', "must not carry user information"),
    ('name = "../a"\ntype = "console"', "audit.sinks[0].name '../a' must be"),
    ('name = "a"\ntype = "console"\nurl = "http://x/"', "url is for an http sink"),
    ('name = "a"\ntype = "console"\nevents = ["decisions"]', "['decisions'] are not audit events"),
    ('name = "a"\ntype = "console"\nevents = ["*", "decision"]', '"*" (every line) stands alone'),
    ('name = "a"\ntype = "console"\nbatch_lines = 0', "batch_lines must be a positive integer"),
    ('name = "a"\ntype = "console"\ntimeout = true', "timeout: expected float, got bool"),
    ('name = "a"\ntype = "console"\nbackoff_min = 9.0\nbackoff_max = 1.0', "backoff_min must"),
    ('name = "a"\ntype = "console"\nlabels = { version = "9" }', "labels.version is the daemon"),
    ('name = "a"\ntype = "console"\nstart_at = "yesterday"', "start_at must be one of"),
    ('name = "a"\ntype = "console"\nspeed = 1', "audit.sinks[0]: unknown key 'speed'"),
    ('name = "a"\ntype = "http"\nurl = "https://x/"\ntoken_file = "nope"', "token_file: cannot"),
    ('name = "a"\ntype = "http"\nurl = "http://x/"\ntls_ca = "d.toml"', "tls_ca needs an https"),
    ('name = "a"\ntype = "http"\nurl = "https://x/"\ntls_ca = "d.toml"', "is not a CA bundle"),
    ('name = "a"\ntype = "console"\n[[audit.sinks]]\nname = "a"\ntype = "console"', "given twice"),
    ('name = "a"\ntype = "console"\n[[audit.sinks]]\nname = "b"\ntype = "console"', "at most one"),
]


@pytest.mark.parametrize(("sink", "message"), BAD_SINKS, ids=[m for _, m in BAD_SINKS])
def test_a_bad_sink_is_refused_by_config_check_and_by_serve(
    short_dir: Path, sink: str, message: str
) -> None:
    config = short_dir / "d.toml"
    config.write_text(_config(short_dir, "[[audit.sinks]]\n" + sink))
    for argv in (["config", "check", str(config)], ["serve", "--config", str(config)]):
        done = clirun.in_process(argv)  # serve refuses before it starts anything
        assert done.returncode == 65, (argv, done.stderr)
        error = done.document()["error"]
        assert error["code"] == "CONFIG_INVALID" and message in error["message"], error
    assert not (short_dir / "audit.jsonl").exists()  # serve refused before opening the log


def test_a_reload_that_changes_a_sink_is_refused_as_restart_only() -> None:
    from daemon.audit._shipping_config import SinkConfig
    from daemon.config._hosting import ServerConfig
    from daemon.server._reload import restart_keys

    running = ServerConfig(sinks=(SinkConfig("a", "console"),))
    assert restart_keys(running, ServerConfig(sinks=(SinkConfig("a", "console"),))) == []
    changed = ServerConfig(sinks=(SinkConfig("a", "console", labels={"team": "x"}),))
    assert restart_keys(running, changed) == ["sinks"]
