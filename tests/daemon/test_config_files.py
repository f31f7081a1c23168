"""Option files, text that is a path, the state directory, and the ``config`` commands.

A file path given as ``policy`` used to be taken as policy text (every decision then FAILed);
it is now refused at start with the key named, and ``policy_file``/``allowlist_file`` read the
files. ``config check`` validates without starting; ``config default`` prints the embedded one.
"""

from __future__ import annotations

import json
from pathlib import Path

import clirun
import pytest

from daemon import ConfigError, load_config
from daemon.config._config import parse_config

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "descriptor"
POLICY = (FIXTURES / "policy-public-minimal.apl").read_text()


def _write(folder: Path, options: str) -> Path:
    path = folder / "evidenced.toml"
    path.write_text(
        '[sessions.d]\nmechanisms = ["descriptor"]\n[sessions.d.options.descriptor]\n' + options
    )
    return path


def test_a_file_path_given_as_policy_text_is_refused_with_the_key_named(tmp_path: Path) -> None:
    (tmp_path / "policy.apl").write_text(POLICY)
    with pytest.raises(ConfigError) as refused:
        load_config(_write(tmp_path, 'policy = "policy.apl"\n')).build_sessions()
    message = str(refused.value)
    assert "sessions.d.options.descriptor.policy" in message and "policy_file" in message


def test_a_file_path_given_as_allowlist_text_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sessions\.d\.options\.descriptor\.allowlist"):
        load_config(
            _write(tmp_path, 'allowlist = "/etc/evidenced/allowlist.json"\n')
        ).build_sessions()


def test_policy_file_is_read_relative_to_the_config_and_reaches_the_mechanism(
    tmp_path: Path,
) -> None:
    (tmp_path / "policy.apl").write_text(POLICY)
    config = load_config(_write(tmp_path, 'policy_file = "policy.apl"\n'))
    assert config.sessions[0].options["descriptor"] == {"policy": POLICY}
    hosted, _ = config.build_sessions()
    from mechanism.descriptor import DescriptorAuthorizationMechanism

    expected = DescriptorAuthorizationMechanism(POLICY).authorization_policy_digest
    assert hosted[0].mechanisms[0].authorization_policy_digest == expected  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ('policy = "(policy)"\npolicy_file = "p.apl"\n', "not both"),
        ('policy_file = "absent.apl"\n', "policy_file: cannot read absent.apl"),
        ("policy_file = 3\n", "policy_file: expected a file path"),
    ],
)
def test_unusable_option_files_are_refused(tmp_path: Path, options: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, options))


def test_the_default_audit_log_is_in_the_state_directory_under_systemd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", f"{tmp_path}/state:{tmp_path}/other")
    assert load_config(None).server.audit_path == f"{tmp_path}/state/evidenced-audit.jsonl"
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.chdir(tmp_path)
    assert load_config(None).server.audit_path == f"{tmp_path}/evidenced-audit.jsonl"


def test_config_check_validates_without_starting_and_prints_the_effective_config(
    tmp_path: Path,
) -> None:
    path = tmp_path / "evidenced.toml"
    path.write_text('[audit]\npath = "logs/a.jsonl"\n[sessions.b]\nmechanisms = ["bytes-sha256"]\n')
    result = clirun.in_process(["config", "check", path])
    assert result.returncode == 0, result.err
    document = result.document()
    assert document["status"] == "VALID" and document["sessions"] == ["b"]
    assert document["config"]["audit"]["path"] == str(tmp_path / "logs" / "a.jsonl")
    assert document["config"]["server"]["idle_timeout"] == 30.0
    assert not (tmp_path / "logs").exists()  # nothing started, nothing created


def test_config_check_of_an_invalid_file_names_the_key_and_exits_65(tmp_path: Path) -> None:
    path = tmp_path / "evidenced.toml"
    path.write_text('[sessions.formation]\nmechanisms = ["formation"]\nmax_evidence_bytes = true\n')
    result = clirun.in_process(["config", "check", path])
    error = clirun.error_of(result)
    assert result.returncode == 65 and error["code"] == "CONFIG_INVALID"
    assert "sessions.formation.max_evidence_bytes: expected int, got bool" in error["message"]


def test_config_check_of_a_missing_file_exits_66(tmp_path: Path) -> None:
    result = clirun.in_process(["config", "check", tmp_path / "absent.toml"])
    assert result.returncode == 66 and clirun.error_of(result)["code"] == "INPUT_UNREADABLE"


def test_config_check_builds_the_mechanisms_too(tmp_path: Path) -> None:
    path = tmp_path / "evidenced.toml"
    path.write_text(
        '[sessions.f]\nmechanisms = ["formation"]\n'
        "[sessions.f.options.formation]\nmax_nodes = 100000\n"
    )
    result = clirun.in_process(["config", "check", path])
    assert result.returncode == 65 and "not hosted" in clirun.error_of(result)["message"]


def test_config_default_prints_the_embedded_text_raw_only_when_asked(tmp_path: Path) -> None:
    from daemon.config._config import default_config_text

    result = clirun.in_process(["config", "default"])
    assert result.returncode == 0 and result.document()["text"] == default_config_text()
    raw = clirun.in_process(["config", "default", "--raw"])
    assert raw.stdout.decode() == default_config_text()
    out = tmp_path / "evidenced.toml"
    written = clirun.in_process(["config", "default", "--out", out])
    assert written.document()["written"] == str(out)
    assert parse_config(out.read_text(), base=tmp_path, source=str(out)).source == str(out)


def test_serve_check_applies_the_flags_and_does_not_start(tmp_path: Path) -> None:
    log = tmp_path / "new" / "audit.jsonl"
    result = clirun.in_process(
        ["serve", "--check", "--socket", tmp_path / "s.sock", "--audit-log", log]
    )
    assert result.returncode == 0, result.err
    config = result.document()["config"]
    assert config["server"]["listen"] == "" and config["audit"]["path"] == str(log)
    assert not log.parent.exists() and json.dumps(config)


def _transparency_config(folder: Path, key: Path) -> Path:
    path = folder / "evidenced.toml"
    path.write_text(
        f'[audit]\npath = "audit.jsonl"\n[transparency]\nkey_file = "{key.name}"\n'
        '[sessions.formation]\nmechanisms = ["formation"]\n'
    )
    return path


def test_config_check_refuses_a_key_named_for_another_origin_as_serve_does(
    tmp_path: Path,
) -> None:
    """``config check`` said VALID for a key whose name is not the log's origin, which
    ``serve`` refuses (``TRANSPARENCY_REFUSED``): a shipped manifest checked in CI then
    crash-looped. The check now runs serve's own key check; a key for the origin passes."""
    foreign = tmp_path / "foreign.key"
    made = clirun.in_process(
        ["log", "keygen", "--origin", "someone-else.example/log", "--out", foreign]
    )
    assert made.returncode == 0, made.stderr
    path = _transparency_config(tmp_path, foreign)
    checked = clirun.in_process(["config", "check", path])
    error = clirun.error_of(checked)
    assert checked.returncode == 65 and error["code"] == "CONFIG_INVALID"
    assert "someone-else.example/log" in error["message"] and "origin" in error["message"]
    served = clirun.in_process(["serve", "--config", path])
    assert served.returncode == 65
    assert clirun.error_of(served)["code"] == "TRANSPARENCY_REFUSED"

    own = tmp_path / "own.key"
    made = clirun.in_process(
        ["log", "keygen", "--audit-log", tmp_path / "audit.jsonl", "--out", own]
    )
    assert made.returncode == 0, made.stderr
    valid = clirun.in_process(["config", "check", _transparency_config(tmp_path, own)])
    assert valid.returncode == 0, valid.stdout + valid.stderr
