"""Installable as a service: the systemd unit of a pip/pipx install, keys through
``LoadCredential=``, Kubernetes manifests validated offline, shell completion, and the build
folders ignored by git. Real processes, real files; ``systemd-analyze`` when it is there."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML, with kubernetes-validate
from daemon_testkit import ROOT

from daemon.config._systemd_unit import DEFAULT_CONFIG, render_unit
from daemon.tlog import SignerKey, write_key_file

CLI = [sys.executable, "-m", "daemon.cli"]
ORIGIN = "test.example/evidenced/credential"
KUBERNETES = ROOT / "packaging" / "kubernetes"


def _run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Any:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def _settings(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key, []).append(value)
    return found


def _credential_config(folder: Path) -> Path:
    config = folder / "evidenced.toml"
    config.write_text(
        '[server]\nlisten = ""\nsocket = "s"\n[audit]\npath = "audit.jsonl"\n'
        f'[transparency]\nkey_file = "credential:transparency.key"\norigin = "{ORIGIN}"\n'
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
    )
    return config


def test_the_systemd_unit_runs_the_installed_evidenced_not_usr_bin(tmp_path: Path) -> None:
    """``ExecStart=/usr/bin/evidenced``, which no pip or pipx install creates
    (``systemd-analyze verify``: "not executable"). ``config systemd-unit`` writes the unit
    with the real path of the running ``evidenced`` and a ``LoadCredential=`` per credential
    the configuration names; the packaged unit is its rendering for ``/usr/local/bin``."""
    config = _credential_config(tmp_path)
    done = _run("config", "systemd-unit", "--config", str(config))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    unit = _settings(document["unit"])
    command = unit["ExecStart"][0].split()
    assert command[0] != "/usr/bin/evidenced" and Path(command[0]).is_absolute()
    assert os.access(command[0], os.X_OK) and command[1:] == ["serve", "--config", str(config)]
    assert unit["LoadCredential"] == [f"transparency.key:{tmp_path / 'transparency.key'}"]
    assert unit["DynamicUser"] == ["yes"] and unit["Type"] == ["notify"]
    packaged = (ROOT / "packaging" / "evidenced.service").read_text()
    assert packaged == render_unit(["/usr/local/bin/evidenced"], DEFAULT_CONFIG)
    assert "/usr/bin/evidenced" not in packaged
    # --raw is the unit text itself; --out writes it
    raw = _run("config", "systemd-unit", "--config", str(config), "--raw")
    assert raw.stdout == document["unit"]
    out = tmp_path / "evidenced.service"
    written = _run("config", "systemd-unit", "--config", str(config), "--out", str(out))
    assert written.returncode == 0 and out.read_text() == document["unit"]


def test_systemd_analyze_verifies_the_written_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here")
    config = _credential_config(tmp_path)
    unit = tmp_path / "evidenced.service"
    done = _run("config", "systemd-unit", "--config", str(config), "--out", str(unit))
    assert done.returncode == 0, done.stderr
    shutil.copy(ROOT / "packaging" / "evidenced.socket", tmp_path / "evidenced.socket")
    verify = subprocess.run(
        [analyze, "verify", str(unit), str(tmp_path / "evidenced.socket")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stderr
    assert "not executable" not in verify.stderr


def test_a_key_passed_with_load_credential_is_read_from_the_credentials_directory(
    short_dir: Path,
) -> None:
    """With ``DynamicUser=yes`` a root-owned 0600 key in ``/etc/evidenced`` is
    unreadable to the service. ``credential:NAME`` reads ``$CREDENTIALS_DIRECTORY/NAME``,
    where systemd puts the ``LoadCredential=`` copy (mode 0400, the service's own)."""
    config = _credential_config(short_dir)
    credentials = short_dir / "credentials"
    credentials.mkdir(mode=0o700)
    key = SignerKey.generate(ORIGIN)
    write_key_file(credentials / "transparency.key", key)
    (credentials / "transparency.key").chmod(stat.S_IRUSR)  # what systemd leaves: 0400
    env = {**os.environ, "CREDENTIALS_DIRECTORY": str(credentials)}
    env.pop("JOURNAL_STREAM", None)
    process = subprocess.Popen(
        [*CLI, "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=short_dir,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.communicate(timeout=30)[1]
        ready = json.loads(line)
        assert ready["transparency"]["verifier_key"] == key.verifier().encode()
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert process.returncode == 0
    # Outside the service manager the same configuration says what is missing (exit 65).
    del env["CREDENTIALS_DIRECTORY"]
    refused = _run("config", "check", str(config), env=env)
    assert refused.returncode == 65, refused.stderr
    assert "CREDENTIALS_DIRECTORY" in json.loads(refused.stdout)["error"]["message"]


@pytest.mark.parametrize("value", ["credential:", "credential:../key", "credential:a/b"])
def test_a_credential_name_cannot_leave_the_credentials_directory(
    tmp_path: Path, value: str
) -> None:
    config = tmp_path / "evidenced.toml"
    config.write_text(
        f'[transparency]\nkey_file = "{value}"\n[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
    )
    env = {**os.environ, "CREDENTIALS_DIRECTORY": str(tmp_path)}
    refused = _run("config", "check", str(config), env=env)
    assert refused.returncode == 65 and "one file name" in refused.stdout


def _manifests() -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found[document["kind"]] = document
    return found


def test_kubernetes_manifests_validate_offline() -> None:
    import kubernetes_validate  # type: ignore[import-untyped]

    manifests = _manifests()
    assert set(manifests) == {
        "ConfigMap",
        "Deployment",
        "PersistentVolumeClaim",
        "Secret",
        "Service",
    }
    for document in manifests.values():
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(), strict=True)
    pod = manifests["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert (
        volumes["audit"]["persistentVolumeClaim"]["claimName"]
        == (manifests["PersistentVolumeClaim"]["metadata"]["name"])
    )
    assert volumes["secrets"]["secret"]["secretName"] == manifests["Secret"]["metadata"]["name"]
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    assert mounts["audit"] == "/var/lib/evidenced"


def _secret_keygen_arguments() -> list[str]:
    """The ``evidenced log keygen`` arguments the Secret's comment tells an operator to run
    (``--out`` last, the file name only)."""
    text = (KUBERNETES / "secret.yaml").read_text()
    line = next(line for line in text.splitlines() if "evidenced log keygen" in line)
    arguments = line.split("evidenced", 1)[1].split()
    assert arguments[-2] == "--out", line
    return arguments


def test_the_kubernetes_configuration_is_valid(tmp_path: Path) -> None:
    """The ConfigMap's configuration passes ``config check``, which reads the TLS, token and
    transparency key files it names: real ones stand in for the Secret the init container
    copies, the key made by the command the Secret's comment gives (only the folder of the
    secrets changes). A key named for a derived origin (the pod's host name) would be refused
    as ``serve`` refuses it."""
    import trustme

    from daemon.config._tokens import token_line

    secrets = tmp_path / "secrets"
    secrets.mkdir()
    certificate = trustme.CA().issue_cert("evidenced.example")
    certificate.private_key_pem.write_to_path(str(secrets / "tls.key"))
    for blob in certificate.cert_chain_pems:
        blob.write_to_path(str(secrets / "tls.crt"), append=True)
    (secrets / "tokens").write_text(token_line("a-long-random-token-for-the-test", "ci") + "\n")
    keygen = _secret_keygen_arguments()
    made = _run(*keygen[:-1], str(secrets / keygen[-1]))
    assert made.returncode == 0, made.stderr
    for name in ("tls.key", "tokens"):
        os.chmod(secrets / name, 0o400)
    text = _manifests()["ConfigMap"]["data"]["evidenced.toml"]
    config = tmp_path / "evidenced.toml"
    config.write_text(text.replace("/run/evidenced-secrets", str(secrets)))
    done = _run("config", "check", str(config))
    assert done.returncode == 0, done.stderr
    checked = json.loads(done.stdout)["config"]
    assert checked["audit"]["path"] == "/var/lib/evidenced/audit.jsonl"
    assert checked["http"]["listen"] == "0.0.0.0:7434" and checked["http"]["tls_key"]


def test_bash_completion_knows_every_command(tmp_path: Path) -> None:
    done = _run("completion", "bash")
    assert done.returncode == 0, done.stderr
    script = tmp_path / "evidenced.bash"
    script.write_text(done.stdout)
    for word in ("serve", "replay", "systemd-unit", "--log-format", "completion", "report"):
        assert word in done.stdout, word
    bash = shutil.which("bash")
    assert bash is not None
    loaded = subprocess.run(
        [bash, "-c", f"source {script} && complete -p evidenced"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert loaded.returncode == 0 and "evidenced" in loaded.stdout, loaded.stderr


def test_fish_completion_completes_commands_in_a_real_fish(tmp_path: Path) -> None:
    """``evidenced completion fish`` was a usage error though shtab writes fish scripts."""
    done = _run("completion", "fish")
    assert done.returncode == 0, done.stderr
    fish = shutil.which("fish")
    if fish is None:
        pytest.skip("fish is not installed (make shells installs it)")
    script = tmp_path / "evidenced.fish"
    script.write_text(done.stdout)
    completed = subprocess.run(
        [fish, "--no-config", "-c", f"source {script}; complete -C 'evidenced ser'; "
         "complete -C 'evidenced audit re'"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    words = {line.split("\t")[0] for line in completed.stdout.splitlines()}
    assert {"serve", "report"} <= words, completed.stdout


def test_a_shell_shtab_cannot_write_for_is_a_usage_error_naming_those_it_can() -> None:
    done = _run("completion", "ksh")
    assert done.returncode == 2
    message = json.loads(done.stdout)["error"]["message"]
    assert all(f"'{shell}'" in message for shell in ("bash", "zsh", "tcsh", "fish")), message
    help_text = _run("completion", "--help").stdout
    assert "{bash,zsh,tcsh,fish}" in help_text


def test_dist_and_build_are_ignored_by_git() -> None:
    """``dist/`` was not ignored by git (a wheel build left it untracked)."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(
        [git, "check-ignore", "--no-index", "dist/evidenced-1.0.whl", "build/lib/x.py"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.stdout.split() == ["dist/evidenced-1.0.whl", "build/lib/x.py"], done.stderr


def _installs_from_the_index(text: str) -> list[str]:
    """Every ``pip install``/``pipx install`` of ``text`` that names the distribution
    ``evidenced`` (or ``evidenced[extra]``) as a package-index requirement."""
    found = []
    for line in text.splitlines():
        for match in re.finditer(r"\bpipx? install\b([^`#\n]*)", line):
            words = match.group(1).replace("'", " ").replace('"', " ").split()
            if any(re.fullmatch(r"evidenced(\[[\w,]+\])?", word) for word in words):
                found.append(line.strip())
    return found


def test_no_doc_installs_evidenced_from_the_package_index() -> None:
    """docs/operations.md said ``pipx install evidenced`` and ``pip install evidenced``: no
    such distribution is on the index. The docs install the wheel built from the repository
    (or the checkout), as the README does."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    docs += sorted((ROOT / "packaging").rglob("*.*"))
    found = {
        str(path.relative_to(ROOT)): lines
        for path in docs
        if path.is_file() and (lines := _installs_from_the_index(path.read_text("utf-8")))
    }
    assert found == {}
    assert _installs_from_the_index("pipx install evidenced  # or: pip install 'evidenced[s3]'")
    assert not _installs_from_the_index(
        "pip install dist/evidenced-*.whl -e examples/evidenced-sri"
    )
