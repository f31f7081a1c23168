"""Batches over HTTP (``daemon/server/_batch.py``, ``docs/http.md``): a real daemon process, raw
requests. Each pair is its own decision with its own audit line, answered in order; a bad pair
is refused alone; the body is bounded before a byte of it is read."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_testkit import FORMATION, LiveDaemon, atom

from daemon import SyncClient
from daemon.audit._audit import verify_log
from daemon.server._batch import MAX_PAIRS
from session import NoOptions
from session._bytes_provider import PROVIDER

BATCH = "/v1/sessions/bytes/decisions:batch"


@pytest.fixture(scope="module")
def daemon() -> Iterator[LiveDaemon]:
    live = LiveDaemon(idle=5.0, header=2.0)
    yield live
    live.stop()
    live.cleanup()


def _pair(payload: bytes) -> dict[str, Any]:
    binding = PROVIDER.honest_binding([payload], NoOptions()).to_dict()
    return {"binding": binding, "evidence": [{"base64": base64.b64encode(payload).decode()}]}


def _batch(*pairs: Any) -> bytes:
    return json.dumps({"pairs": list(pairs)}).encode()


def test_each_pair_is_its_own_audited_decision_answered_in_order(daemon: LiveDaemon) -> None:
    payloads = [bytes([n]) * (n + 1) for n in range(5)]
    answer = daemon.post(BATCH, _batch(*(_pair(p) for p in payloads)))
    assert answer.status == 200, answer.body
    decisions = answer.json()["decisions"]
    assert [d["result"]["outcome"] for d in decisions] == ["PASS"] * 5
    assert [d["result"]["evidence_refs"] for d in decisions] == [
        _pair(p)["binding"]["evidence_refs"] for p in payloads
    ]
    lines = {line["decision_id"]: line for line in daemon.audit() if "decision_id" in line}
    seqs = [d["seq"] for d in decisions]
    assert len(set(seqs)) == 5 and len({d["decision_id"] for d in decisions}) == 5
    for decision in decisions:
        line = lines[decision["decision_id"]]
        assert (line["seq"], line["line_digest"]) == (decision["seq"], decision["line_digest"])
        assert line["event"] == "decision" and line["session"] == "bytes"
    assert verify_log(str(daemon.audit_path)).intact


def test_a_bad_pair_is_refused_alone_and_audited(daemon: LiveDaemon) -> None:
    good = _pair(b"good")
    forged = _pair(b"forged")
    forged["evidence"] = [{"base64": base64.b64encode(b"other bytes").decode()}]
    answer = daemon.post(BATCH, _batch(good, {"binding": "no", "evidence": []}, forged, good))
    assert answer.status == 200, answer.body
    first, refused, mismatched, last = answer.json()["decisions"]
    assert first["result"]["outcome"] == last["result"]["outcome"] == "PASS"
    assert refused["error"]["code"] == "BINDING_INVALID"
    assert mismatched["result"]["outcome"] != "PASS"  # decided, not refused: the pair lies
    refusal = [
        line
        for line in daemon.audit()
        if line.get("decision_id") == refused["error"]["decision_id"]
    ]
    assert (
        len(refusal) == 1 and refusal[0]["event"] == "refusal" and refusal[0]["session"] == "bytes"
    )


def test_a_batch_body_over_the_sessions_bounds_times_n_is_refused_before_it_is_read(
    daemon: LiveDaemon,
) -> None:
    head = (
        f"POST {BATCH} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        f"Content-Length: {10**9}\r\n\r\n"
    ).encode()
    answer = daemon.exchange(head)  # no body byte is ever sent
    assert answer.status == 413 and answer.error["code"] == "EVIDENCE_BYTES_EXCEEDED"


@pytest.mark.parametrize(
    "document",
    [{"pairs": []}, {"pairs": [_pair(b"x")] * (MAX_PAIRS + 1)}, {"pairs": {}}, {"items": []}],
    ids=["empty", "too many", "not an array", "wrong key"],
)
def test_a_malformed_batch_is_refused_whole(daemon: LiveDaemon, document: Any) -> None:
    before = len(daemon.audit())
    answer = daemon.post(BATCH, json.dumps(document).encode())
    assert answer.status == 400 and answer.error["code"] == "HEADER_INVALID"
    after = daemon.audit()
    assert [line["event"] for line in after[before:]] == ["refusal"]  # one line, no decision


def test_a_batch_is_posted_not_got(daemon: LiveDaemon) -> None:
    answer = daemon.get(BATCH)
    assert answer.status == 405 and answer.error["code"] == "UNKNOWN_KIND"


def test_a_pair_over_the_sessions_item_bound_is_that_pairs_refusal(daemon: LiveDaemon) -> None:
    too_many = _pair(b"a")
    too_many["evidence"] = [{"base64": base64.b64encode(b"a").decode()}] * 3  # admits 2
    answer = daemon.post(BATCH, _batch(_pair(b"a"), too_many))
    assert answer.status == 200
    ok, refused = answer.json()["decisions"]
    assert ok["result"]["outcome"] == "PASS"
    assert refused["error"]["code"] == "EVIDENCE_ITEMS_EXCEEDED"


# --------------------------------------------------------------------------- the CLI


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli", *argv], capture_output=True, text=True, timeout=120
    )


def test_submit_batch_file_over_http_is_one_request_per_64_pairs(
    daemon: LiveDaemon, tmp_path: Path
) -> None:
    files = []
    for n in range(3):
        path = tmp_path / f"artifact-{n}.bin"
        path.write_bytes(bytes([n]) * 10)
        files.append(path)
    listing = tmp_path / "batch.txt"
    listing.write_text("# one artifact per request\n" + "".join(f"{p}\n" for p in files))
    before = len(daemon.audit())
    done = _cli("submit", "--connect", daemon.base, "--session", "bytes", "--batch", str(listing))
    assert done.returncode == 0, done.stderr
    decisions = json.loads(done.stdout)["decisions"]
    assert [d["outcome"] for d in decisions] == ["PASS"] * 3
    new = [line for line in daemon.audit()[before:] if line["event"] == "decision"]
    assert sorted(line["decision_id"] for line in new) == sorted(
        d["decision_id"] for d in decisions
    )


@pytest.mark.parametrize("count", [MAX_PAIRS, MAX_PAIRS + 1])
@pytest.mark.parametrize("front", ["socket", "http"])
def test_submit_batch_of_64_formation_pairs_is_one_request_on_either_front_end(
    daemon: LiveDaemon, tmp_path: Path, front: str, count: int
) -> None:
    """As the README shows it (``--session formation --batch pairs.txt``): over the Unix
    socket 60 pairs failed whole (``HEADER_TOO_LARGE: declared header of 66490 bytes exceeds
    65536``). 64 pairs are one request on either front end; 65 are two (64 and 1)."""
    pair = f"{FORMATION / 'atom.subject.json'} {FORMATION / 'atom.certificate.json'}\n"
    listing = tmp_path / "pairs.txt"
    listing.write_text(pair * count)
    address = ["--socket", daemon.socket] if front == "socket" else ["--connect", daemon.base]
    before = len(daemon.audit())
    done = _cli("submit", *address, "--session", "formation", "--batch", str(listing))
    assert done.returncode == 0, done.stderr
    assert [d["outcome"] for d in json.loads(done.stdout)["decisions"]] == ["PASS"] * count
    new = [line for line in daemon.audit()[before:] if line["event"] == "decision"]
    per_request = Counter(line["request_id"] for line in new)
    assert sorted(per_request.values()) == ([MAX_PAIRS] if count == MAX_PAIRS else [1, MAX_PAIRS])


def test_submit_pairs_over_the_binary_protocol_are_one_batch_and_go_on_after_a_refusal(
    daemon: LiveDaemon, tmp_path: Path
) -> None:
    (tmp_path / "small").write_bytes(b"s" * 10)
    (tmp_path / "big").write_bytes(b"x" * 5000)  # over the bytes session's 4,096
    listing = tmp_path / "batch.txt"
    listing.write_text(f"{tmp_path / 'small'}\n{tmp_path / 'big'}\n{tmp_path / 'small'}\n")
    done = _cli("submit", "--socket", daemon.socket, "--session", "bytes", "--batch", str(listing))
    assert done.returncode == 65, done.stderr
    first, refused, last = json.loads(done.stdout)["decisions"]
    assert first["outcome"] == last["outcome"] == "PASS"
    assert refused["error"]["code"] == "EVIDENCE_BYTES_EXCEEDED"
    assert refused["error"]["decision_id"] is not None  # the refusal is audited
    # one submit_batch request: every line of it carries that request's id
    lines = [line for line in daemon.audit() if line["event"] in ("decision", "refusal")]
    assert len({line["request_id"] for line in lines[-3:]}) == 1


def test_submit_pair_builds_each_honest_binding(daemon: LiveDaemon, tmp_path: Path) -> None:
    subject, certificate, _ = atom()
    (tmp_path / "s.json").write_bytes(subject)
    (tmp_path / "c.json").write_bytes(certificate)
    pair = [str(tmp_path / "s.json"), str(tmp_path / "c.json")]
    done = _cli("submit", "--connect", daemon.base, "--session", "formation",
                "--pair", *pair, "--pair", *pair)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [d["outcome"] for d in json.loads(done.stdout)["decisions"]] == ["PASS", "PASS"]


def test_pairs_take_no_positional_files(daemon: LiveDaemon, tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"a")
    a = str(tmp_path / "a")
    done = _cli("submit", "--socket", daemon.socket, "--session", "bytes", "--pair", a, a, a)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "USAGE"


def test_a_batch_body_that_stalls_is_an_idle_timeout(daemon: LiveDaemon) -> None:
    head = (
        f"POST {BATCH} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n"
    ).encode()
    answer = daemon.exchange(head + b'{"pairs": [')  # and then nothing more
    assert answer.status == 408 and answer.error["code"] == "IDLE_TIMEOUT"


def test_an_http_batch_of_no_pairs_or_too_many_is_refused_before_it_is_sent() -> None:
    """The binary client refused 0 or 65 pairs locally; the HTTP client sent them for the
    server to refuse. Now no batch request of either is ever made (no server here): the
    client refuses 0 pairs, and an HTTP batch call of 65 cannot be built (the client splits
    65 pairs into batches of 64 first)."""
    from daemon.client import _http_calls

    with SyncClient("http://127.0.0.1:1") as client, pytest.raises(ValueError, match="one pair"):
        client.submit_batch("bytes", [])
    pairs: list[tuple[dict[str, Any], list[bytes]]] = [({}, [b"x"])] * 65
    with pytest.raises(ValueError, match="1 to 64 pairs"):
        _http_calls.submit_batch("bytes", pairs)
