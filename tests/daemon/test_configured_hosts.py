"""``evidenced submit`` against hosts with non-default options, lowered limits included.

A host that lowered a limit (``max_resource_bytes`` of the SRI example, ``max_item_bytes`` of
the descriptor) used to answer every ``submit`` client UNKNOWN ``…_BOUNDS_UNSUPPORTED``: the
command built the binding from the provider's default options, which declare the default
bound. Now the provider receives what the session announces (``client_binding`` over the
mechanism's ``accepted_bounds``, ``pinned`` and digest) and the answer is PASS, on both shipped
mechanisms and the SRI example. One real daemon process for the module; real clients.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs
import clirun
import pytest
from daemon_testkit import ROOT

from mechanism.descriptor._defaults import DEFAULT_POLICY
from session import load_provider

FIXTURES: Final = ROOT / "fixtures"
DESCRIPTOR: Final = FIXTURES / "descriptor" / "descriptor-tisc.txt"
PAYLOAD: Final = FIXTURES / "descriptor" / "tisc-fixture.bin"
SUBJECT: Final = FIXTURES / "formation" / "compose.subject.json"
CERTIFICATE: Final = FIXTURES / "formation" / "compose.certificate.json"
RESOURCE: Final = b"document.body.dataset.host = 'configured';\n"

CONFIG: Final = """\
[server]
listen = ""
socket = "s"
[audit]
path = "audit.jsonl"

[sessions.sri]
mechanisms = ["sri"]
[sessions.sri.options.sri]
max_resource_bytes = 4096
minimum_algorithm = "sha384"

[sessions.descriptor]
mechanisms = ["descriptor"]
[sessions.descriptor.options.descriptor]
max_item_bytes = 1024
max_steps = 512
policy_file = "policy.apl"

[sessions.formation]
mechanisms = ["formation"]
[sessions.formation.options.formation]
max_nodes = 256
max_depth = 32
max_path_steps = 1024
"""


@pytest.fixture(scope="module")
def host(module_short_dir: Path) -> Iterator[dict[str, Any]]:
    folder = module_short_dir
    (folder / "policy.apl").write_text(DEFAULT_POLICY.decode("utf-8") + "\n")  # another digest
    (folder / "evidenced.toml").write_text(CONFIG)
    pytest.importorskip("evidenced_sri")
    from evidenced_sri import integrity_of

    (folder / "app.js").write_bytes(RESOURCE)
    (folder / "app.js.sri").write_text(integrity_of(RESOURCE, "sha384") + "\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", "evidenced.toml"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=folder,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    try:
        if not line:
            raise AssertionError(f"the daemon did not start: {process.communicate(timeout=10)}")
        yield {"socket": str(folder / "s"), "folder": folder, **json.loads(line)}
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def _files(host: dict[str, Any], session: str) -> list[Path]:
    folder = host["folder"]
    return {
        "sri": [folder / "app.js", folder / "app.js.sri"],
        "descriptor": [DESCRIPTOR, PAYLOAD],
        "formation": [SUBJECT, CERTIFICATE],
    }[session]


@pytest.mark.parametrize("session", ["sri", "descriptor", "formation"])
def test_submit_passes_on_a_host_that_lowered_its_limits(
    host: dict[str, Any], session: str
) -> None:
    result = clirun.in_process(
        ["submit", "--socket", host["socket"], "--session", session, *_files(host, session)]
    )
    assert result.returncode == 0, result.err
    assert result.document()["outcome"] == "PASS", result.document()


@pytest.mark.parametrize(
    ("session", "code"),
    [("sri", "SRI_BOUNDS_UNSUPPORTED"), ("descriptor", "DESCRIPTOR_BOUNDS_UNSUPPORTED")],
)
def test_the_default_options_binding_is_what_a_lowered_host_refuses(
    host: dict[str, Any], session: str, code: str
) -> None:
    """What ``submit`` used to send: the default options' binding, pinned and re-digested but
    declaring the default bound; the lowered host refuses it."""
    listed = clirun.in_process(["sessions", "--socket", host["socket"]]).document()
    (announced,) = next(s for s in listed["sessions"] if s["name"] == session)["mechanisms"]
    provider = load_provider(session)
    files = [path.read_bytes() for path in _files(host, session)]
    binding = provider.pin(
        provider.honest_binding(files, provider.default_options()), announced["pinned"]
    )
    binding = attrs.evolve(binding, mechanism_digest=announced["mechanism_digest"])
    saved = host["folder"] / f"{session}-default.json"
    saved.write_text(json.dumps(binding.to_dict()))
    refused = clirun.in_process(
        ["submit", "--socket", host["socket"], "--session", session, "--binding", saved,
         *_files(host, session)]
    )  # fmt: skip
    assert refused.returncode == 3, refused.err
    assert refused.document()["details"] == code


@pytest.mark.parametrize("session", ["sri", "descriptor"])
def test_the_printed_binding_declares_what_the_session_announces_it_accepts(
    host: dict[str, Any], session: str
) -> None:
    listed = clirun.in_process(["sessions", "--socket", host["socket"]]).document()
    (announced,) = next(s for s in listed["sessions"] if s["name"] == session)["mechanisms"]
    printed = clirun.in_process(
        ["submit", "--socket", host["socket"], "--session", session, "--print-binding",
         *_files(host, session)]
    )  # fmt: skip
    assert printed.returncode == 0, printed.err
    binding = printed.document()
    assert binding["bounds"] == announced["accepted_bounds"]
    assert binding["mechanism_digest"] == announced["mechanism_digest"]
    for name, value in announced["pinned"].items():
        if name in binding["parameters"]:
            assert binding["parameters"][name] == value
