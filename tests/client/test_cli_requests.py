"""What ``evidenced submit`` sends, counted by a real forwarder in front of a real daemon's
HTTP listener (issue: behind a round-robin balancer every submit's ``GET /v1/sessions`` and
``POST`` paired up, so all decisions landed on one replica).

``submit`` makes one request per pair or per batch, through the library's client: one
``sessions`` request when it builds the honest binding from the server's answer, none with
``--binding`` or with a saved answer (``--sessions FILE``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import clirun
import pytest
from forwarder import forwarding
from http_testkit import FORMATION, LiveDaemon

SUBJECT = str(FORMATION / "atom.subject.json")
CERTIFICATE = str(FORMATION / "atom.certificate.json")
DECISIONS = ("POST", "/v1/sessions/formation/decisions")
SESSIONS = ("GET", "/v1/sessions")


@pytest.fixture(scope="module")
def daemon() -> Iterator[LiveDaemon]:
    live = LiveDaemon()
    try:
        yield live
    finally:
        live.stop()
        live.cleanup()


def submit(url: str, *extra: str) -> clirun.CliResult:
    done = clirun.in_process(["submit", "--connect", url, "--session", "formation", *extra])
    assert done.returncode == 0, done.err
    return done


def test_an_honest_submit_asks_the_sessions_once_and_decides_once(daemon: LiveDaemon) -> None:
    with forwarding(daemon.http) as seen:
        submit(seen.url, SUBJECT, CERTIFICATE)
    assert seen.requests == [SESSIONS, DECISIONS]
    assert seen.connections == 1  # one kept connection for both


def test_a_submit_with_its_binding_is_one_request(daemon: LiveDaemon, tmp_path: Path) -> None:
    binding = tmp_path / "binding.json"
    printed = submit(daemon.base, "--print-binding", SUBJECT, CERTIFICATE)
    binding.write_bytes(printed.stdout)
    with forwarding(daemon.http) as seen:
        submit(seen.url, "--binding", str(binding), SUBJECT, CERTIFICATE)
    assert seen.requests == [DECISIONS]


def test_a_submit_with_a_saved_sessions_answer_is_one_request(
    daemon: LiveDaemon, tmp_path: Path
) -> None:
    saved = tmp_path / "sessions.json"
    listed = clirun.in_process(["sessions", "--connect", daemon.base])
    saved.write_bytes(listed.stdout)
    with forwarding(daemon.http) as seen:
        for _ in range(3):
            decided = submit(seen.url, "--sessions", str(saved), SUBJECT, CERTIFICATE)
            assert decided.document()["outcome"] == "PASS"
    assert seen.requests == [DECISIONS] * 3


def test_many_pairs_are_one_sessions_request_and_one_batch(daemon: LiveDaemon) -> None:
    pairs = ["--pair", SUBJECT, CERTIFICATE] * 3
    with forwarding(daemon.http) as seen:
        done = submit(seen.url, *pairs)
    assert [d["outcome"] for d in done.document()["decisions"]] == ["PASS"] * 3
    assert seen.requests == [SESSIONS, ("POST", "/v1/sessions/formation/decisions:batch")]


def test_a_saved_answer_that_is_not_a_sessions_answer_is_refused_unsent(
    daemon: LiveDaemon, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"sessions": "formation"}))
    with forwarding(daemon.http) as seen:
        argv = ["submit", "--connect", seen.url, "--session", "formation"]
        done = clirun.in_process([*argv, "--sessions", str(wrong), SUBJECT, CERTIFICATE])
    assert done.returncode == 65 and "not a sessions answer" in done.err
    assert seen.requests == []
