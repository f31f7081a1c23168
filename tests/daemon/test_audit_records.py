"""The typed audit-line model against what the daemon really writes, and against damage.

Every line kind is produced for real: decisions and refusals by a real daemon over TCP and a
Unix socket, its start and stop; the log's own lines by the real writer (a rotation, a torn
tail moved aside, the drop policy, an outage on a disk that fills up). Each line must read back
as its model and re-render to its exact bytes; a damaged line is refused naming the key path.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from daemon_testkit import HELLO, bytes_binding, frame, sha
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon import AuditLog, HostedSession, RejectedError, open_client, open_server
from daemon.audit._audit import FileOps
from daemon.audit._audit_format import parse_sealed, render_line
from daemon.audit._audit_records import (
    LINE_KINDS,
    AuditRecordError,
    AuditRotatedLine,
    ConfigReloadLine,
    DaemonStartLine,
    DecisionLine,
    NoiseLine,
    RefusalLine,
    TcpRequester,
    UnixRequester,
    read_record,
    record_fields,
)
from daemon.config._config import parse_config
from daemon.server._reload import Reloader
from session import BytesDigestMechanism


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _read_back(raw: bytes) -> Any:
    """The line's record; its fields re-rendered must be the line, byte for byte."""
    fields = parse_sealed(raw)[1]
    assert fields is not None
    record = read_record(fields)
    again = record_fields(record)
    assert again == fields
    body = {key: value for key, value in again.items() if key != "line_digest"}
    assert render_line(body) == raw
    return record


class _FullDisk(FileOps):
    """Writes for real until ``full`` is set, then fails as a full disk does."""

    full = False

    def write(self, fd: int, data: memoryview) -> int:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.write(fd, data)


async def _daemon_lines(folder: Path) -> Path:
    """A real daemon's log: start, decisions (TCP, Unix), refusals of every shape, stop."""
    audit = folder / "daemon.jsonl"
    sessions = [HostedSession("bytes", (BytesDigestMechanism(),))]
    unix = str(folder / "s")
    async with open_server(
        sessions, tcp=("127.0.0.1", 0), unix=unix, audit_path=str(audit)
    ) as server:
        assert server.tcp_address is not None
        async with open_client(tcp=server.tcp_address) as client:
            await client.submit("bytes", bytes_binding(b"a"), [b"a"])
        async with open_client(unix=unix) as client:
            await client.submit("bytes", bytes_binding(b"b", expected=sha(b"c")), [b"b"])
        async with open_client(unix=unix) as client:
            with pytest.raises(RejectedError):
                await client.submit("nowhere", bytes_binding(b"a"), [b"a"])
        submit = {
            "kind": "submit",
            "request_id": 5,
            "session": "bytes",
            "binding": bytes_binding(b"a").to_dict(),
            "items": [1],
        }
        for data in (
            HELLO + frame(submit),  # binding parsed, evidence never sent: TRUNCATED_FRAME
            b"NOPE" + b"\0" * 8,  # refused before any request: request_id null
        ):
            stream = await trio.open_tcp_stream(*server.tcp_address)
            async with stream:
                await stream.send_all(data)
                await stream.send_eof()
                while await stream.receive_some(4096):
                    pass
    return audit


async def _retaining_daemon_lines(folder: Path) -> Path:
    """A daemon built from configuration whose session retains evidence: the decision lines
    carry what replay needs, ``daemon_start`` says how the session was built; then two
    reloads, one applied (a new bound) and one refused (retention changed)."""
    audit = folder / "retaining.jsonl"
    text = (
        f'[server]\nlisten = ""\nsocket = "{folder}/r"\n[audit]\npath = "{audit}"\n'
        '[sessions.kept]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
        'retain = "all"\nstore = "fs:evidence"\n'
    )
    config = parse_config(text, base=folder, source="test.toml")
    sessions, _ = config.build_sessions()
    versions = iter(
        (
            text.replace("max_evidence_items = 1", "max_evidence_items = 2"),
            text.replace('retain = "all"\nstore = "fs:evidence"\n', ""),
        )
    )

    def load() -> tuple[Any, Any]:
        again = parse_config(next(versions), base=folder, source="test.toml")
        return again, server.config  # the running server's settings: only sessions change

    async with open_server(sessions, config.server) as server:
        async with open_client(unix=server.unix_path) as client:
            await client.submit("kept", bytes_binding(b"k"), [b"k"])
        reloader = Reloader(
            server, load, source="test.toml", say=lambda *_: None, notify=lambda _: None
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(reloader.run)
            await reloader.reload()
            await reloader.reload()
            nursery.cancel_scope.cancel()
        assert (reloader.applied, reloader.refused) == (1, 1)
    return audit


async def _writer_lines(folder: Path) -> list[Path]:
    """The log's own lines: overflow (drop), recovery after an outage, rotation, torn tail."""
    stop = {"decisions": 0, "refusals": 0}
    dropped = folder / "dropped.jsonl"
    log = AuditLog.open(dropped, durability="none", overflow="drop", max_pending=1)
    for _ in range(3):
        await log.record("daemon_stop", **stop)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        with trio.fail_after(10):
            while log.pending:  # the queued line is written: room for the overflow line
                await trio.sleep(0.01)
        await log.record("daemon_stop", **stop)
        await log.close()

    recovered, disk = folder / "recovered.jsonl", _FullDisk()
    log = AuditLog.open(recovered, file_ops=disk, retry_initial=0.01, retry_max=0.02)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await log.record("daemon_stop", **stop)
        disk.full = True
        with pytest.raises(Exception, match="space"):
            await log.record("daemon_stop", **stop)
        disk.full = False
        with trio.fail_after(10):
            while log.failure_reason is not None:
                await trio.sleep(0.01)
        await log.record("daemon_stop", **stop)
        await log.close()

    rotated = folder / "rotated.jsonl"
    log = AuditLog.open(rotated)
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await log.record("daemon_stop", **stop)
        assert log.rotate()
        await log.record("daemon_stop", **stop)
        await log.close()
    rotated.write_bytes(rotated.read_bytes() + b'{"event":"dae')  # a torn tail
    log = AuditLog.open(rotated)  # moves it aside and records it
    async with trio.open_nursery() as nursery:
        await nursery.start(log.run)
        await log.close()
    return [dropped, recovered, rotated]


async def test_every_line_kind_the_daemon_writes_reads_back_byte_for_byte(
    short_dir: Path,
) -> None:
    files = [
        await _daemon_lines(short_dir),
        await _retaining_daemon_lines(short_dir),
        *await _writer_lines(short_dir),
    ]
    records = [_read_back(raw) for path in files for raw in _lines(path)]
    assert {record.EVENT for record in records} == set(LINE_KINDS)
    requesters = {type(r.requester) for r in records if isinstance(r, DecisionLine)}
    assert requesters == {TcpRequester, UnixRequester}
    refusals = [r for r in records if isinstance(r, RefusalLine)]
    assert [r.code for r in refusals] == ["UNKNOWN_SESSION", "TRUNCATED_FRAME"]
    assert refusals[0].session == "nowhere" and refusals[0].binding_digest is None
    assert refusals[1].binding_digest is not None and refusals[1].mechanism_id is not None
    (noise,) = [r for r in records if isinstance(r, NoiseLine)]  # BAD_MAGIC: counted, no line
    assert noise.count == 1 and list(noise.peers.values()) == [1]
    reloads = [r for r in records if isinstance(r, ConfigReloadLine)]
    assert [r.status for r in reloads] == ["APPLIED", "REFUSED"]
    assert reloads[0].sessions is not None and reloads[0].session_config is not None
    assert reloads[1].reason is not None and "retention" in reloads[1].reason
    (kept,) = [r for r in records if isinstance(r, DecisionLine) and r.binding is not None]
    assert kept.retained is True and kept.store is not None and kept.result_digest is not None
    assert kept.binding is not None and kept.binding.digest() == kept.binding_digest
    starts = [r for r in records if isinstance(r, DaemonStartLine)]
    assert [sorted(start.session_config or {}) for start in starts] == [[], ["kept"]]
    rotated = [r for r in records if isinstance(r, AuditRotatedLine)]
    assert len(rotated) == 1 and rotated[0].previous_seq == rotated[0].seq - 1


def _decision_fields() -> dict[str, Any]:
    fields: dict[str, Any] = {
        "binding_digest": "db" * 32,
        "decision_id": "ab7d9e45-feb2-40b1-9d76-94b705e3647a",
        "details": "",
        "event": "decision",
        "evidence": [{"digest": "sha256:" + "b2" * 32, "size": 478}],
        "mechanism_digest": "sha256:" + "56" * 32,
        "mechanism_id": "vstd.bytes.sha256",
        "metrics": {"evaluate_ns": 657092, "receive_ns": 186777, "total_ns": 893993},
        "observed_evidence_bytes": 478,
        "outcome": "PASS",
        "prev": "sha256:" + "7a" * 32,
        "reason_codes": [],
        "request_id": 2,
        "requester": {"gid": 0, "pid": 5883, "transport": "unix", "uid": 0},
        "seq": 2,
        "session": "bytes",
        "timestamp": "2026-11-29T20:56:22.690552Z",
    }
    fields["line_digest"] = parse_sealed(render_line(fields))[0]
    return fields


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    fields = _decision_fields()
    target: Any = fields
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return fields


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (_with(("metrics", "total_ns"), True), "metrics.total_ns must be an integer >= 0"),
        (_with(("evidence", 0, "size"), -1), "evidence[0].size must be an integer >= 0"),
        (
            _with(("evidence", 0), {"digest": "sha256:" + "b2" * 32, "bytes": "..."}),
            "evidence[0]: unexpected keys ['bytes'], missing keys ['size']",
        ),
        (_with(("evidence",), {}), "evidence must be an array"),
        (_with(("evidence", 0), "sha256:x"), "evidence[0] must be an object"),
        (
            _with(("requester", "transport"), "ipx"),
            "requester.transport must be one of ['tcp', 'unix', 'unknown']",
        ),
        (_with(("requester", "uid"), "0"), "requester.uid must be an integer >= 0"),
        (
            _with(("outcome",), "MAYBE"),
            "outcome must be one of ['FAIL', 'PASS', 'UNKNOWN']",
        ),
        (_with(("seq",), 0), "seq must be an integer >= 1"),
        (_with(("prev",), "sha256:" + "7A" * 32), "prev must be sha256:<64 hex>"),
        (_with(("reason_codes",), ["A", 1]), "reason_codes must be an array of strings"),
        (_with(("bytes",), "..."), "line: unexpected keys ['bytes'], missing keys []"),
        (_with(("event",), "decisions"), "event must be one of ['audit_overflow', "
         "'audit_recovered', 'audit_rotated', 'config_reload', 'daemon_start', 'daemon_stop', "
         "'decision', 'noise', 'refusal', 'torn_tail_removed'], not 'decisions'"),
    ],
)  # fmt: skip
def test_a_damaged_line_is_refused_naming_the_key_path(
    fields: dict[str, Any], message: str
) -> None:
    before = json.dumps(fields, sort_keys=True)
    with pytest.raises(AuditRecordError) as refused:
        read_record(fields)
    assert str(refused.value) == message
    assert json.dumps(fields, sort_keys=True) == before


def test_a_missing_key_is_named() -> None:
    fields = _decision_fields()
    del fields["metrics"]
    with pytest.raises(AuditRecordError, match=r"missing keys \['metrics'\]"):
        read_record(fields)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_value_in_any_field_is_read_exactly_or_refused(data: st.DataObject) -> None:
    fields = _decision_fields()
    key = data.draw(st.sampled_from(sorted(fields)))
    fields[key] = data.draw(_json)
    try:
        record = read_record(fields)
    except AuditRecordError as error:
        assert str(error)
    else:
        assert record_fields(record) == fields
