"""Terminal-hostile code points never reach a line or a terminal raw
(``daemon/audit/_audit_format.py`` rule 5, ``cli/_contract.py`` rules 1-2).

U+2028, U+2029, NEL (U+0085), CSI (U+009B), RLO (U+202E), the other C1 controls, DEL and the
bidirectional controls in a client's binding used to be written raw into audit lines and
printed raw by ``audit tail``. Now every rendering escapes them (``\\u2028``): the same JSON
value, so the verifier, replay, receipts and the transparency leaf still agree, and lines
written raw before still verify.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import clirun
import orjson
import pytest
from daemon_testkit import bytes_binding
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon import AuditLog, open_client, open_server, verify_log
from daemon.audit._audit_format import (
    GENESIS,
    HOSTILE,
    escape_hostile,
    parse_sealed,
    render_line,
    seal,
)
from daemon.client._receipts import fetch_receipt
from daemon.config._config import parse_config
from daemon.retention import FilesystemStore
from daemon.tlog import SignerKey, encode_receipt, verify_receipt, write_key_file
from session import cli
from session.cli import _contract

#: Every code point the rule escapes, and a string of them (with a C0 escape among them).
ESCAPED = frozenset(code for first, last in HOSTILE for code in range(first, last + 1))
NASTY = "\u2028\u2029\x85\x9b[31m\u202eevil\u202c\x7f\u061c\u2066\u200f\x1b[0m"
ALL_CODE_POINTS = "".join(
    chr(code) for code in range(sys.maxunicode + 1) if not 0xD800 <= code <= 0xDFFF
)


def _raw_hostile(data: bytes) -> set[int]:
    return {ord(char) for char in data.decode("utf-8")} & ESCAPED


def test_the_escaped_set_is_exactly_the_documented_one_over_every_code_point() -> None:
    rendered = orjson.dumps(ALL_CODE_POINTS)
    escaped = escape_hostile(rendered)
    assert orjson.loads(escaped) == ALL_CODE_POINTS  # the same value
    assert _raw_hostile(escaped) == set()
    # exactly those: each escaped one is \uXXXX, nothing else changed
    expected = "".join(
        f"\\u{ord(char):04x}" if ord(char) in ESCAPED else char for char in rendered.decode("utf-8")
    )
    assert escaped.decode("utf-8") == expected
    assert {0x85, 0x9B, 0x2028, 0x2029, 0x202E} <= ESCAPED  # the ones the issue named


def test_the_command_line_escapes_the_same_code_points_as_the_audit_log() -> None:
    assert _contract.HOSTILE == HOSTILE
    printed = _contract.encode({"all": ALL_CODE_POINTS}, pretty=False)
    assert json.loads(printed)["all"] == ALL_CODE_POINTS
    assert _raw_hostile(printed) == set()
    plain = json.dumps({"all": ALL_CODE_POINTS}, ensure_ascii=False, separators=(",", ":"))
    expected = "".join(f"\\u{ord(char):04x}" if ord(char) in ESCAPED else char for char in plain)
    assert printed == expected.encode("utf-8") + b"\n"


_fields = st.dictionaries(
    st.text(min_size=1, max_size=12).filter(
        lambda key: key not in {"event", "seq", "prev", "line_digest", "timestamp"}
    ),
    st.text() | st.lists(st.text(), max_size=3),
    max_size=5,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(fields=_fields, hostile=st.sampled_from(sorted(ESCAPED)))
def test_any_string_round_trips_and_no_rendered_line_holds_a_hostile_code_point(
    tmp_path_factory: Any, fields: dict[str, Any], hostile: int
) -> None:
    fields = {**fields, "details": f"x{chr(hostile)}y"}
    path = tmp_path_factory.mktemp("escape") / "audit.jsonl"
    log = AuditLog.open(path, durability="none")
    try:
        line = log._render("decision", fields)  # the writer's one rendering
    finally:
        log.close_sync()
    assert _raw_hostile(line) == set()
    parsed = orjson.loads(line)
    assert {key: parsed[key] for key in fields} == fields
    digest, checked, reason = parse_sealed(line[:-1])
    assert reason is None and checked == parsed and digest == parsed["line_digest"]
    # the tools' rendering is the same bytes as the writer's
    assert render_line({k: v for k, v in parsed.items() if k != "line_digest"}) == line[:-1]
    path.write_bytes(line)
    assert verify_log(path).intact


def _legacy_log(path: Path, details: list[str]) -> None:
    """A log as the writer wrote it before rule 5: the hostile code points raw."""
    head, lines = GENESIS, []
    for seq, text in enumerate(details, 1):
        body = orjson.dumps(
            {"event": "decision", "details": text, "prev": head, "seq": seq},
            option=orjson.OPT_SORT_KEYS,
        )
        line, head = seal(body)
        lines.append(line + b"\n")
    path.write_bytes(b"".join(lines))


async def test_a_log_written_raw_before_the_rule_still_verifies_and_continues(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    _legacy_log(path, [NASTY, "plain", NASTY])
    assert _raw_hostile(path.read_bytes())  # raw, as old lines are
    assert verify_log(path).intact
    log = AuditLog.open(path)  # the start verifies it too, and the chain continues
    log._append_now("decision", {"details": NASTY})
    log.close_sync()
    report = verify_log(path)
    assert report.intact and report.last_seq == 4
    assert _raw_hostile(path.read_bytes().splitlines()[-1]) == set()


def test_a_line_with_some_code_points_escaped_and_some_raw_is_not_canonical() -> None:
    raw = orjson.dumps({"a": "\u2028", "b": "\u2029", "seq": 1}, option=orjson.OPT_SORT_KEYS)
    mixed = raw.replace("\u2028".encode(), b"\\u2028")
    assert parse_sealed(seal(raw)[0])[2] is None  # none escaped: the old form
    assert parse_sealed(seal(escape_hostile(raw))[0])[2] is None  # all escaped: the new form
    assert "canonical" in (parse_sealed(seal(mixed)[0])[2] or "")


def test_the_command_lines_messages_escape_them_too(capsys: pytest.CaptureFixture[str]) -> None:
    cli.say(f"refused: {NASTY}")
    err = capsys.readouterr().err
    assert not {ord(char) for char in err} & ESCAPED
    assert "\\u202e" in err and "\\u009b" in err


# --------------------------------------------------------------------------- the daemon

ORIGIN = "test.example/evidenced/escape"
CONFIG = f"""
[server]
listen = ""
socket = "sock"

[audit]
path = "audit.jsonl"

[transparency]
key_file = "log.key"
origin = "{ORIGIN}"
checkpoint_interval = 0.05

[sessions.b]
mechanisms = ["bytes-sha256"]
max_evidence_items = 1
retain = "all"
store = "fs:evidence"
"""


async def test_hostile_code_points_in_a_retained_binding_are_escaped_and_every_check_agrees(
    short_dir: Path,
) -> None:
    key = SignerKey.generate(ORIGIN)
    write_key_file(short_dir / "log.key", key)
    config = parse_config(CONFIG, base=short_dir, source=str(short_dir / "daemon.toml"))
    sessions, _ = config.build_sessions()
    binding = bytes_binding(b"evidence").to_dict()
    binding["subject_id"] = f"item {NASTY}"
    async with (
        open_server(sessions, config.server),
        open_client(unix=str(short_dir / "sock")) as client,
    ):
        answer = await client.submit("b", binding, [b"evidence"])
        receipt = await fetch_receipt(client, answer, log_key=key.verifier())
    log = short_dir / "audit.jsonl"
    on_disk = log.read_bytes()
    assert _raw_hostile(on_disk) == set()  # used to be written raw
    assert answer.seq is not None
    line = on_disk.splitlines()[answer.seq - 1]
    assert orjson.loads(line)["binding"]["subject_id"] == f"item {NASTY}"
    # the answer's line, the receipt's leaf and the file are the same bytes
    assert answer.audit_line is not None and answer.audit_line.encode() == line
    assert receipt["line"].encode() == line
    assert verify_receipt(encode_receipt(receipt), key.verifier()).verified
    assert clirun.in_process(["audit", "verify", log]).returncode == 0
    verified = clirun.in_process(
        ["log", "verify", short_dir / "audit.jsonl.tlog", "--key", key.verifier().encode()]
    )
    assert verified.returncode == 0, verified.err
    store = FilesystemStore(short_dir / "evidence")
    replayed = clirun.in_process(["replay", "--log", log, "--store", store.id, str(answer.seq)])
    assert replayed.returncode == 0, replayed.err
    # audit tail prints the same value with nothing a terminal acts on (it printed them raw)
    tail = clirun.in_process(["audit", "tail", log, "-n", "50"])
    assert tail.returncode == 0 and _raw_hostile(tail.stdout) == set()
    shown = next(record for record in tail.document() if record.get("seq") == answer.seq)
    assert shown["binding"]["subject_id"] == f"item {NASTY}"
    report = clirun.in_process(["audit", "report", log, "--format", "html"])
    assert report.returncode == 0 and _raw_hostile(report.stdout) == set()
