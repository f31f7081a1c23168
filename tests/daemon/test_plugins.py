"""Third-party mechanisms: an installed plugin is listed, served from configuration alone, and
bound by a client that learns its mechanism only from the daemon.

The plugin is the example package ``examples/evidenced-sri`` (``make`` installs it as its own
distribution, entry point ``evidenced.mechanisms``: ``sri``). The daemon is a real
``evidenced serve`` process started from the example's shipped configuration; the clients run
in-process through ``daemon.cli.main`` (``submit`` without ``--binding``).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clirun
import pytest
import testdata

from daemon import ConfigError, load_config, verify_log
from session import load_provider

EXAMPLE = testdata.REPO / "examples" / "evidenced-sri"
RESOURCE = b"document.querySelector('main').dataset.bound = 'evidence';\n"


def _integrity(resource: bytes) -> bytes:
    from evidenced_sri import integrity_of

    return (integrity_of(resource, "sha384") + "\n").encode("ascii")


@pytest.fixture
def sri_daemon(short_dir: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``evidenced serve --config`` from a copy of the example's configuration."""
    config = short_dir / "evidenced-sri.toml"
    shutil.copyfile(EXAMPLE / "evidenced-sri.toml", config)
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    try:
        if not line:
            raise AssertionError(f"the daemon did not start: {process.communicate(timeout=10)}")
        yield short_dir, json.loads(line)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=30)


def test_installed_providers_are_listed_with_id_digest_version_and_distribution() -> None:
    result = clirun.in_process(["mechanisms"])
    assert result.returncode == 0, result.err
    listed = {item["name"]: item for item in result.document()["mechanisms"]}
    assert {"formation", "descriptor", "bytes-sha256", "sri"} <= set(listed)
    for name, item in listed.items():
        provider = load_provider(name)
        mechanism = provider.create(provider.default_options())
        assert item["mechanism_id"] == mechanism.mechanism_id
        assert item["mechanism_digest"] == mechanism.mechanism_digest
        assert item["version"] and item["distribution"] and ":" in item["value"]
    assert listed["sri"]["distribution"] == "evidenced-sri"
    assert listed["formation"]["distribution"] == "evidenced"


def test_a_plugin_session_is_served_from_configuration_and_bound_without_knowing_its_id(
    sri_daemon: tuple[Path, dict[str, Any]],
) -> None:
    folder, ready = sri_daemon
    assert ready["sessions"] == ["sri"] and ready["skipped"] == []
    socket = str(folder / "evidenced-sri.sock")
    resource, changed = folder / "app.js", folder / "app-changed.js"
    metadata = folder / "app.js.sri"
    resource.write_bytes(RESOURCE)
    changed.write_bytes(RESOURCE.replace(b"evidence", b"nothing"))
    metadata.write_bytes(_integrity(RESOURCE))

    passed = clirun.in_process(
        ["submit", "--socket", socket, "--session", "sri", resource, metadata]
    )
    assert passed.returncode == 0, passed.err
    decision = passed.document()
    assert decision["outcome"] == "PASS"
    assert decision["mechanism_id"] == "example.sri.integrity.0.1"
    assert decision["observations"]["algorithm"] == "sha384"

    refuted = clirun.in_process(
        ["submit", "--socket", socket, "--session", "sri", changed, metadata]
    )
    assert refuted.returncode == 1, refuted.err
    assert refuted.document()["details"] == "SRI_DIGEST_MISMATCH"

    # The session's host options apply: a sha256-only statement is below its minimum.
    weak = folder / "weak.sri"
    from evidenced_sri import integrity_of

    weak.write_text(integrity_of(RESOURCE, "sha256"))
    unknown = clirun.in_process(["submit", "--socket", socket, "--session", "sri", resource, weak])
    assert unknown.returncode == 3 and unknown.document()["details"] == "SRI_ALGORITHM_TOO_WEAK"
    report = verify_log(folder / "evidenced-sri-audit.jsonl")
    assert report.intact and report.lines >= 3


def test_a_mechanism_the_client_has_no_provider_for_is_refused() -> None:
    from daemon.client._honest import HonestBindingError, honest_binding

    with pytest.raises(
        HonestBindingError, match=r"no installed provider for mechanism 'nowhere\.0'"
    ):
        honest_binding(
            {"mechanism_id": "nowhere.0", "mechanism_digest": "sha256:" + "0" * 64}, [b"x"]
        )


def test_a_plugin_claiming_a_built_in_mechanism_id_makes_submit_refuse_to_guess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plugin whose provider makes ``vstd.bytes.sha256`` beside the built-in one: the honest
    binding is not built by whichever comes first (pass ``--binding``; a usage error, exit 2),
    though the client no longer imports built-in providers of other mechanisms."""
    from daemon.client._honest import HonestBindingError, honest_binding
    from daemon.commands import _client_cli
    from session import _plugins
    from session.cli import UsageError

    impostor = _plugins.ProviderEntry(
        "bytes-again", "session._bytes_provider:BytesDigestProvider", "impostor", "1"
    )
    installed = _plugins.provider_entries
    monkeypatch.setattr(_plugins, "provider_entries", lambda: (*installed(), impostor))
    announced = {"mechanism_id": "vstd.bytes.sha256", "mechanism_digest": "sha256:" + "0" * 64}
    with pytest.raises(
        HonestBindingError, match=r"several providers.*bytes-again \(impostor\)"
    ) as refused:
        honest_binding(announced, [b"x"])
    assert "bytes-sha256 (evidenced)" in str(refused.value)
    usage = _client_cli._binding_failure(refused.value)  # what the command line makes of it
    assert isinstance(usage, UsageError) and str(usage).endswith("pass --binding FILE")


def test_plugin_options_are_typed_and_the_refusal_names_the_key_path(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[server]\nlisten = ""\nsocket = "s"\n'
        '[sessions.s]\nmechanisms = ["sri"]\n'
        "[sessions.s.options.sri]\nmax_resource_bytes = true\n"
    )
    with pytest.raises(ConfigError) as refused:
        load_config(config).build_sessions()
    assert "sessions.s.options.sri.max_resource_bytes: expected int, got bool" in str(refused.value)
    served = clirun.in_process(["serve", "--config", config])
    assert served.returncode == 65
    assert "sessions.s.options.sri.max_resource_bytes: expected int, got bool" in served.err
    assert not (tmp_path / "s").exists()  # refused before listening


def test_an_option_the_constructor_refuses_names_its_key_path(tmp_path: Path) -> None:
    """Not "its mechanism is unavailable (ValueError: …)": a range rule the provider's
    constructor applies (a raised lower-only limit) is reported at the option's path."""
    config = tmp_path / "c.toml"
    config.write_text(
        '[server]\nlisten = ""\nsocket = "s"\n'
        '[sessions.s]\nmechanisms = ["sri"]\n'
        "[sessions.s.options.sri]\nmax_resource_bytes = 2000000\n"
    )
    with pytest.raises(ConfigError) as refused:
        load_config(config).build_sessions()
    assert str(refused.value) == (
        "session 's' not hosted: sessions.s.options.sri.max_resource_bytes: refused by the "
        "provider: CeilingError: max_resource_bytes may only be lowered: "
        "0 <= max_resource_bytes <= 1048576"
    )
