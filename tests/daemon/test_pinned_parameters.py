"""A session's host-configured parameters are announced, and ``submit`` pins them.

A descriptor session served with a non-default policy used to answer ``evidenced submit``
UNKNOWN ``DESCRIPTOR_AUTHORIZATION_POLICY_UNSUPPORTED``: the command pinned the built-in policy
digest and ``sessions`` did not say the server's. The provider now announces what a client
must pin (``pinned`` in the session list) and pins it (real daemon process, real client).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clirun
import pytest
from daemon_testkit import ROOT

from mechanism.descriptor import DescriptorAuthorizationMechanism, descriptor_binding
from mechanism.descriptor._defaults import DEFAULT_POLICY
from mechanism.formation import PROFILE_DIGEST

FIXTURES = ROOT / "fixtures" / "descriptor"
DESCRIPTOR = FIXTURES / "descriptor-tisc.txt"
PAYLOAD = FIXTURES / "tisc-fixture.bin"
# The default policy's meaning with other bytes: another host configuration, another digest.
POLICY = DEFAULT_POLICY.decode("utf-8") + "\n"


@pytest.fixture(scope="module")
def daemon(module_short_dir: Path) -> Iterator[dict[str, Any]]:
    """One daemon for the module: both tests only read from it (sessions, submits)."""
    short_dir = module_short_dir
    (short_dir / "policy.apl").write_text(POLICY)
    config = short_dir / "evidenced.toml"
    config.write_text(
        '[server]\nlisten = ""\nsocket = "s"\n[audit]\npath = "audit.jsonl"\n'
        '[sessions.formation]\nmechanisms = ["formation"]\n'
        '[sessions.descriptor]\nmechanisms = ["descriptor"]\nmax_evidence_bytes = 1052672\n'
        '[sessions.descriptor.options.descriptor]\npolicy_file = "policy.apl"\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=short_dir,
    )
    assert process.stdout is not None
    ready = json.loads(process.stdout.readline())
    try:
        yield ready
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def test_sessions_announce_what_a_client_must_pin(daemon: dict[str, Any]) -> None:
    listed = clirun.in_process(["sessions", "--socket", daemon["unix"]]).document()
    by_name = {item["name"]: item["mechanisms"][0] for item in listed["sessions"]}
    host = DescriptorAuthorizationMechanism(POLICY)
    pinned = by_name["descriptor"]["pinned"]
    assert pinned["authorization_policy"] == host.authorization_policy_digest
    assert pinned["policy_digest"] == host.authorization.record["axion_policy"]
    assert pinned["allowlist_digest"] == host.authorization.record["allowlist"]
    assert by_name["formation"]["pinned"] == {"profile_digest": PROFILE_DIGEST}


def test_submit_pins_the_announced_policy_and_passes(
    daemon: dict[str, Any], short_dir: Path
) -> None:
    socket = daemon["unix"]
    result = clirun.in_process(
        ["submit", "--socket", socket, "--session", "descriptor", DESCRIPTOR, PAYLOAD]
    )
    assert result.returncode == 0, result.err
    assert result.document()["outcome"] == "PASS"
    # What the command used to send: the built-in policy's digest, which this host refuses.
    unpinned = short_dir / "binding.json"
    binding = descriptor_binding(DESCRIPTOR.read_bytes(), PAYLOAD.read_bytes())
    unpinned.write_text(json.dumps(binding.to_dict()))
    refused = clirun.in_process(
        ["submit", "--socket", socket, "--session", "descriptor", "--binding", unpinned,
         DESCRIPTOR, PAYLOAD]
    )  # fmt: skip
    assert refused.returncode == 3
    assert refused.document()["details"] == "DESCRIPTOR_AUTHORIZATION_POLICY_UNSUPPORTED"


def test_print_binding_gives_an_http_client_the_pinned_binding(
    daemon: dict[str, Any], short_dir: Path
) -> None:
    """A client without this CLI's submit (curl against the HTTP API) needs the binding the
    session pins: ``submit --print-binding`` prints it and submits nothing."""
    socket = daemon["unix"]
    printed = clirun.in_process(
        ["submit", "--socket", socket, "--session", "descriptor", "--print-binding",
         DESCRIPTOR, PAYLOAD]
    )  # fmt: skip
    assert printed.returncode == 0, printed.err
    binding = printed.document()
    host = DescriptorAuthorizationMechanism(POLICY)
    assert binding["parameters"]["authorization_policy"] == host.authorization_policy_digest
    saved = short_dir / "printed.json"
    saved.write_text(json.dumps(binding))
    passed = clirun.in_process(
        ["submit", "--socket", socket, "--session", "descriptor", "--binding", saved,
         DESCRIPTOR, PAYLOAD]
    )  # fmt: skip
    assert passed.returncode == 0 and passed.document()["outcome"] == "PASS"
    both = clirun.in_process(
        ["submit", "--socket", socket, "--session", "descriptor", "--print-binding",
         "--binding", saved, DESCRIPTOR, PAYLOAD]
    )  # fmt: skip
    assert both.returncode == 2 and both.document()["error"]["code"] == "USAGE"
