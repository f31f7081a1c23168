"""The installed wheel is the product: built from the project's own files, it runs outside the
checkout and finds its data as package data.

Rules checked, in this order:

1. ``pyproject.toml`` lists every import package of the tree (a package left out would be
   missing from the wheel) and maps ``fixtures/`` to the data-only package
   ``evidenced_fixtures``.
2. The version has one source: the installed metadata, ``daemon.__version__`` and the server's
   ``SERVER_NAME`` agree.
3. One wheel per run, built from a copy of the project's own files (``pyproject.toml``,
   ``README.md``, ``LICENSE``, the packages and ``fixtures/``) in a temporary folder with
   ``pip wheel --no-build-isolation --check-build-dependencies`` (this venv's pinned
   setuptools, so the build floor is checked and nothing is fetched). It carries the license,
   every user fixture and the holdout corpus, byte-identical to the checkout: one copy.
4. It is installed (``--no-deps``) into a fresh venv in a temporary folder. The product's code
   comes only from the wheel; its third-party dependencies come from this venv through a
   ``.pth`` line, which keeps the test fast and offline. From a working directory outside the
   checkout: ``evidenced --version`` prints the metadata version, ``evidenced demo`` passes
   reading the installed fixtures, ``evidenced holdout release`` prints the same release id as
   the checkout, and ``evidenced formation check`` checks a packaged example pair.
5. The example third-party mechanism (``examples/evidenced-sri``), built as its own wheel and
   installed into that venv, is served by ``evidenced serve`` from a configuration that only
   names it, and ``evidenced submit`` gets PASS and FAIL from it without being told its
   mechanism id.
6. The core (ADR 0020): the same wheel installed **without extras** into another fresh venv,
   its dependencies resolved by pip (``--no-index``, no configuration, no find-links) from
   nothing but the distributions the core requires — those of this venv, linked in one by one
   (:func:`distributions.closure` of ``Requires-Dist`` without an extra; offline, a few
   seconds) — so a core requirement left out of ``pyproject.toml`` fails the install, and an
   extra's library is simply not there. There ``evidenced serve`` answers formation and
   bytes-sha256 decisions, the embedded default configuration serves ``formation`` and skips
   ``descriptor`` with the one line naming its extra, and every feature of an extra
   (``mechanisms``, ``config check``, ``serve``, ``descriptor check``, ``holdout``,
   ``formation explain --layout grandalf``) says that line, with exit 69 ``EXTRA_MISSING``
   where the command cannot do its work, never a traceback; ``demo`` passes, its
   descriptor cases skipped.
7. python-daemon (which installs the same ``daemon/__init__.py``) installed over the wheel
   in a fresh venv: every command says in one line which distribution replaced the package,
   exit 70 ``PACKAGE_REPLACED``; after uninstalling it, that the file is missing; a forced
   reinstall of the wheel repairs it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
import testdata
from distributions import closure, top_level

from daemon import __version__
from daemon.server._server import SERVER_NAME
from mechanism import holdout

REPO: Final = testdata.REPO
PYPROJECT: Final = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
CODE_PACKAGES: Final = ("session", "mechanism", "catalog", "daemon")
PROJECT_FILES: Final = ("pyproject.toml", "README.md", "LICENSE")


@attrs.frozen
class Installed:
    wheel: Path
    venv: Path
    workdir: Path
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self._run([str(self.venv / "bin" / "evidenced"), *args], timeout=120)

    def python(self, code: str, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``code`` run by the installation's interpreter, from outside the checkout."""
        return self._run([str(self.venv / "bin" / "python"), "-c", code], timeout=timeout)

    def _run(self, command: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            cwd=self.workdir,
            env=self.env,
            timeout=timeout,
            check=False,
        )


def _run(*command: str | Path, cwd: Path | None = None) -> None:
    completed = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def _copy_project(destination: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, destination / name)
    for name in (*CODE_PACKAGES, "fixtures"):
        shutil.copytree(REPO / name, destination / name, ignore=ignore)


PIP: Final = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input")


def _clean_env() -> dict[str, str]:
    return {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    source, dist = root / "src", root / "dist"
    source.mkdir()
    _copy_project(source)
    build = ("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--check-build-dependencies")
    _run(*PIP, *build, "--wheel-dir", dist, source)
    [built] = dist.glob("evidenced-*.whl")
    return built


INSTALL_OFFLINE: Final = ("install", "--quiet", "--no-deps", "--no-index")


def _fresh_install(wheel: Path, root: Path) -> Installed:
    """The wheel in a fresh venv under ``root``, its third-party dependencies from this venv."""
    venv, workdir = root / "venv", root / "work"
    workdir.mkdir()
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    _run(*PIP, "--python", venv / "bin" / "python", *INSTALL_OFFLINE, wheel)
    # Third-party dependencies only: this venv's site-packages, appended after the wheel's.
    [site_packages] = (venv / "lib").glob("python3.*/site-packages")
    dependencies = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    (site_packages / "zz-evidenced-test-dependencies.pth").write_text(
        "".join(f"{path}\n" for path in sorted(dependencies))
    )
    return Installed(wheel, venv, workdir, _clean_env())


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    yield _fresh_install(wheel, tmp_path_factory.mktemp("installed"))


# ---- 1. and 2.: packaging metadata -----------------------------------------------------------


def test_every_package_of_the_tree_is_in_the_wheel_list() -> None:
    settings = PYPROJECT["tool"]["setuptools"]
    in_tree = {
        ".".join(path.parent.relative_to(REPO).parts)
        for name in CODE_PACKAGES
        for path in (REPO / name).rglob("__init__.py")
    }
    assert set(settings["packages"]) == in_tree | {"evidenced_fixtures"}
    assert settings["package-dir"] == {"evidenced_fixtures": "fixtures"}
    assert (REPO / "fixtures" / "__init__.py").is_file()


def test_server_name_and_metadata_carry_the_one_version() -> None:
    assert importlib.metadata.version("evidenced") == __version__
    assert SERVER_NAME.split("/") == ["evidenced", __version__]
    assert PYPROJECT["project"]["dynamic"] == ["version"]


# ---- 3. the wheel's contents -----------------------------------------------------------------


def _data_files(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def test_the_wheel_installs_the_four_packages_and_the_fixtures_and_no_other_top_level_name(
    wheel: Path,
) -> None:
    """A top-level ``canon``, ``cli`` or ``holdout`` would collide with other distributions
    (``cli`` is among the most common names on PyPI): the installed top level is the layout's
    four code packages and the fixtures data package, nothing else."""
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {
        *CODE_PACKAGES,
        "evidenced_fixtures",
    }


def test_wheel_ships_the_license_and_one_copy_of_every_fixture(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())

        def shipped(prefix: str) -> dict[str, bytes]:
            return {
                name.removeprefix(prefix): wheel.read(name)
                for name in sorted(names)
                if name.startswith(prefix)
            }

        fixtures = {  # the generator scripts stay in the checkout
            name: data
            for name, data in _data_files(REPO / "fixtures").items()
            if name == "__init__.py" or not name.endswith(".py")
        }
        assert shipped("evidenced_fixtures/") == fixtures
        corpus = _data_files(REPO / "mechanism" / "holdout" / "corpus")
        assert shipped("mechanism/holdout/corpus/") == corpus and len(corpus) > 1
        [license_name] = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
        assert wheel.read(license_name) == (REPO / "LICENSE").read_bytes()
        metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
        assert b"License-Expression: Apache-2.0" in wheel.read(metadata)
    assert b"Apache License" in (REPO / "LICENSE").read_bytes()


# ---- 4. the installed product, run from outside the checkout -------------------------------


def test_installed_version_is_the_metadata_version(installed: Installed) -> None:
    completed = installed.run("--version")
    assert (completed.returncode, completed.stdout) == (0, f"evidenced {__version__}\n")


def _installed_fixtures(installed: Installed) -> Path:
    completed = installed.run("demo")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # stdout: the one JSON document; the human report is on stderr (docs/cli.md)
    assert json.loads(completed.stdout)["status"] == "OK"
    assert "demo OK: every answer is the expected one" in completed.stderr
    line = next(x for x in completed.stderr.splitlines() if x.startswith("example data: "))
    fixtures = Path(line.removeprefix("example data: "))
    assert fixtures.is_relative_to(installed.venv) and not fixtures.is_relative_to(REPO)
    return fixtures


def test_installed_demo_release_and_check_run_on_packaged_data(installed: Installed) -> None:
    fixtures = _installed_fixtures(installed)

    release = installed.run("holdout", "release")
    assert release.returncode == 0, release.stderr
    document: dict[str, Any] = json.loads(release.stdout)
    assert document["spec_release_id"] == holdout.release_id()
    corpus_index = (REPO / "mechanism" / "holdout" / "corpus" / "INDEX.json").read_bytes()
    assert document["files"]["corpus/INDEX.json"] == hashlib.sha256(corpus_index).hexdigest()

    pair = [
        str(fixtures / "formation" / f"quote-read.{role}.json")
        for role in ("subject", "certificate")
    ]
    check = installed.run("formation", "check", *pair)
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["status"] == "CHECKED"


def test_a_plugin_wheel_in_the_fresh_venv_is_served_and_bound_from_configuration_alone(
    installed: Installed, tmp_path: Path
) -> None:
    """The example third-party mechanism, built as its own wheel and installed beside the
    product: served from a configuration that only names it, and bound by ``evidenced submit``
    from the two files (PASS, then FAIL for a changed resource)."""
    pip = PIP
    source, dist = tmp_path / "src", tmp_path / "dist"
    shutil.copytree(
        REPO / "examples" / "evidenced-sri",
        source,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build"),
    )
    build = ("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", dist)
    _run(*pip, *build, source)
    [plugin] = dist.glob("evidenced_sri-*.whl")
    python = installed.venv / "bin" / "python"
    _run(*pip, "--python", python, "install", "--quiet", "--no-deps", "--no-index", plugin)

    folder = Path(tempfile.mkdtemp(prefix="evw", dir="/tmp"))  # a short Unix socket path
    try:
        shutil.copyfile(
            REPO / "examples" / "evidenced-sri" / "evidenced-sri.toml", folder / "c.toml"
        )
        resource = b"export const bound = true;\n"
        digest = base64.b64encode(hashlib.sha384(resource).digest()).decode()
        (folder / "app.js").write_bytes(resource)
        (folder / "changed.js").write_bytes(resource.replace(b"true", b"false"))
        (folder / "app.js.sri").write_text(f"sha384-{digest}\n")
        serve = subprocess.Popen(
            [str(installed.venv / "bin" / "evidenced"), "serve", "--config", "c.toml"],
            cwd=folder,
            env=installed.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert serve.stdout is not None
            ready = json.loads(serve.stdout.readline() or "{}")
            assert ready.get("sessions") == ["sri"], serve.stderr
            socket = str(folder / "evidenced-sri.sock")
            answers = [
                installed.run(
                    "submit",
                    "--socket",
                    socket,
                    "--session",
                    "sri",
                    name,
                    str(folder / "app.js.sri"),
                )
                for name in (str(folder / "app.js"), str(folder / "changed.js"))
            ]
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.communicate(timeout=30)
        assert [answer.returncode for answer in answers] == [0, 1], [a.stderr for a in answers]
        assert [json.loads(answer.stdout)["outcome"] for answer in answers] == ["PASS", "FAIL"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---- 6. the core, installed without extras ---------------------------------------------------

#: The one line each missing extra is said with (session/_extras.py rule 3).
NEEDS_DESCRIPTOR: Final = (
    "the T81 descriptor mechanism needs the 'descriptor' extra: pip install 'evidenced[descriptor]'"
)
EXTRA_MODULES: Final = (
    "numpy",
    "safetensors",
    "grandalf",
    "jsonschema",
    "jsonschema_rs",
    "rfc8785",
    "referencing",
    "boto3",
)


@pytest.fixture(scope="module")
def core(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("core")
    venv, workdir = root / "venv", root / "work"
    workdir.mkdir()
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    [site_packages] = (venv / "lib").glob("python3.*/site-packages")
    required = closure("evidenced")
    del required["evidenced"]
    for distribution in required.values():
        for path in top_level(distribution):
            (site_packages / path.name).symlink_to(path)
    # pip resolves the wheel's requirements against what is linked, and nothing else.
    env = {key: value for key, value in _clean_env().items() if not key.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    install = subprocess.run(
        [*PIP, "--python", str(venv / "bin" / "python"), "install", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return Installed(wheel, venv, workdir, _clean_env())


def _document(completed: subprocess.CompletedProcess[str]) -> Any:
    assert "Traceback" not in completed.stderr, completed.stderr
    return json.loads(completed.stdout)


def _error_lines(completed: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in completed.stderr.splitlines() if line.strip()]


def test_an_install_without_extras_has_none_of_their_libraries(core: Installed) -> None:
    probe = (
        "import importlib.util, json; "
        f"print(json.dumps([n for n in {list(EXTRA_MODULES)!r} if importlib.util.find_spec(n)]))"
    )
    found = core.python(probe)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == []
    assert core.run("--version").stdout == f"evidenced {__version__}\n"


def _serve(core: Installed, folder: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(core.venv / "bin" / "evidenced"), "serve", *args],
        cwd=folder,
        env=core.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(serve: subprocess.Popen[str]) -> str:
    serve.send_signal(signal.SIGTERM)
    _, stderr = serve.communicate(timeout=30)
    return stderr


def test_an_install_without_extras_serves_formation_and_bytes_decisions(core: Installed) -> None:
    """The issue's "done when": the core wheel serves the formation and bytes sessions."""
    folder = Path(tempfile.mkdtemp(prefix="evc", dir="/tmp"))  # a short Unix socket path
    try:
        (folder / "c.toml").write_text(
            '[server]\nlisten = ""\nsocket = "s"\n[audit]\npath = "audit.jsonl"\n'
            '[sessions.formation]\nmechanisms = ["formation"]\n'
            '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
        )
        (folder / "item").write_bytes(b"any bytes at all\n")
        serve = _serve(core, folder, "--config", "c.toml")
        try:
            assert serve.stdout is not None
            ready = json.loads(serve.stdout.readline() or "{}")
            assert (ready.get("sessions"), ready.get("skipped")) == (["bytes", "formation"], [])
            fixtures = core.venv / "lib"
            [formation] = fixtures.glob("python3.*/site-packages/evidenced_fixtures/formation")
            pairs = {
                name: [
                    str(formation / f"{name}.{role}.json") for role in ("subject", "certificate")
                ]
                for name in ("compose", "tampered")
            }
            socket = ("--socket", str(folder / "s"))
            answers = [
                core.run("submit", *socket, "--session", "formation", *pairs["compose"]),
                core.run("submit", *socket, "--session", "formation", *pairs["tampered"]),
                core.run("submit", *socket, "--session", "bytes", str(folder / "item")),
            ]
        finally:
            _stop(serve)
        assert [a.returncode for a in answers] == [0, 1, 0], [a.stderr for a in answers]
        outcomes = [_document(answer)["outcome"] for answer in answers]
        assert outcomes == ["PASS", "FAIL", "PASS"]
        verify = core.run("audit", "verify", str(folder / "audit.jsonl"))
        assert verify.returncode == 0, verify.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_default_configuration_on_a_core_install_serves_formation_and_says_why_not_descriptor(
    core: Installed,
) -> None:
    """``evidenced serve`` right after installing the core just works: the embedded default
    hosts ``descriptor`` as optional, so it is skipped with the one line, on stdout's
    document and on stderr; ``config check`` says the same and finds the default valid."""
    check = core.run("config", "check")
    assert check.returncode == 0, check.stderr
    document = _document(check)
    skipped = f"session 'descriptor' not hosted: {NEEDS_DESCRIPTOR}"
    assert (document["status"], document["sessions"], document["skipped"]) == (
        "VALID",
        ["formation"],
        [skipped],
    )
    assert f"evidenced config check: {skipped}" in _error_lines(check)

    folder = Path(tempfile.mkdtemp(prefix="evd", dir="/tmp"))
    try:
        serve = _serve(core, folder, "--socket", str(folder / "s"), "--audit-log", "a.jsonl")
        assert serve.stdout is not None
        ready = json.loads(serve.stdout.readline() or "{}")
        stderr = _stop(serve)
        assert (ready.get("sessions"), ready.get("skipped")) == (["formation"], [skipped])
        assert f"evidenced serve: {skipped}" in stderr.splitlines()
        assert "Traceback" not in stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_session_that_needs_a_missing_extra_refuses_check_and_start_in_one_line(
    core: Installed,
) -> None:
    """A configuration whose ``descriptor`` session is not optional is valid, but not on
    this installation: ``config check`` and ``serve`` exit 69 ``EXTRA_MISSING`` naming the
    install command, and ``serve`` never listens."""
    config = core.workdir / "descriptor.toml"
    config.write_text(
        '[server]\nlisten = ""\nsocket = "s"\n[audit]\npath = "audit.jsonl"\n'
        '[sessions.descriptor]\nmechanisms = ["descriptor"]\n'
    )
    message = f"{config}: session 'descriptor' not hosted: {NEEDS_DESCRIPTOR}"
    commands = {
        "config check": ("config", "check", str(config)),
        "serve": ("serve", "--config", str(config)),
    }
    for path, command in commands.items():
        done = core.run(*command)
        error = _document(done)["error"]
        assert (done.returncode, error) == (
            69,
            {"code": "EXTRA_MISSING", "exit": 69, "message": message},
        )
        assert _error_lines(done) == [f"evidenced {path}: {message}"]
    assert not (core.workdir / "s").exists() and not (core.workdir / "audit.jsonl").exists()


def test_mechanisms_on_a_core_install_names_the_descriptor_extra_instead_of_a_traceback(
    core: Installed,
) -> None:
    listed = core.run("mechanisms")
    assert listed.returncode == 0, listed.stderr
    by_name = {item["name"]: item for item in _document(listed)["mechanisms"]}
    assert sorted(by_name) == ["bytes-sha256", "descriptor", "formation"]
    descriptor = by_name["descriptor"]
    assert (descriptor["unavailable"], descriptor["extra"]) == (NEEDS_DESCRIPTOR, "descriptor")
    assert descriptor["mechanism_id"] == "t81.experiment_descriptor.authorized.0.1"
    assert "mechanism_digest" not in descriptor and "error" not in descriptor
    for name in ("bytes-sha256", "formation"):
        assert by_name[name]["mechanism_digest"].startswith("sha256:")
    assert _error_lines(listed) == [
        f"evidenced mechanisms: mechanism provider 'descriptor': {NEEDS_DESCRIPTOR}"
    ]


@pytest.mark.parametrize(
    ("command", "extra", "feature"),
    [
        (
            ("descriptor", "check", "D", "P", "--operation", "inspect"),
            "descriptor",
            "the T81 descriptor mechanism",
        ),
        (("holdout", "release"), "holdout", "the holdout instrument"),
        (("holdout", "score", "--challenges", "C", "--observations", "O"), "holdout", None),
        (
            ("formation", "explain", "S", "C", "--format", "svg", "--layout", "grandalf"),
            "explain",
            "formation explain's grandalf layout (svg, html without Graphviz)",
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else None,
)
def test_a_command_whose_extra_is_missing_says_the_install_command_in_one_line(
    core: Installed, command: tuple[str, ...], extra: str, feature: str | None
) -> None:
    """Exit 69 ``EXTRA_MISSING``, the error document and one stderr line naming ``pip install
    'evidenced[EXTRA]'`` — before any file is read (the files named here do not exist)."""
    fixtures = core.venv / "lib"
    [formation] = fixtures.glob("python3.*/site-packages/evidenced_fixtures/formation")
    arguments = [  # explain needs a real pair: its layout comes after the check
        str(formation / f"tampered.{'subject' if word == 'S' else 'certificate'}.json")
        if command[0] == "formation" and word in ("S", "C")
        else word
        for word in command
    ]
    done = core.run(*arguments)
    error = _document(done)["error"]
    assert (done.returncode, error["code"], error["exit"]) == (69, "EXTRA_MISSING", 69)
    install = f"pip install 'evidenced[{extra}]'"
    assert error["message"].endswith(f"needs the {extra!r} extra: {install}")
    if feature is not None:
        assert error["message"] == f"{feature} needs the {extra!r} extra: {install}"
    assert _error_lines(done) == [f"evidenced {' '.join(command[:2])}: {error['message']}"]


def test_the_features_of_the_core_work_without_any_extra(core: Installed) -> None:
    """What needs no extra keeps working: the full parser (completion scripts), the
    descriptor tools that run no weights, explain's own renderings, the conformance kit's
    library without pytest (not a dependency), and the demo (its descriptor cases skipped,
    saying why)."""
    completion = core.run("completion", "bash")
    assert completion.returncode == 0 and "holdout" in completion.stdout, completion.stderr
    [descriptor] = (core.venv / "lib").glob("python3.*/site-packages/evidenced_fixtures/descriptor")
    make = core.run("descriptor", "make", str(descriptor / "tisc-fixture.bin"))
    assert make.returncode == 0 and _document(make)["size"] > 0, make.stderr
    [formation] = (core.venv / "lib").glob("python3.*/site-packages/evidenced_fixtures/formation")
    pair = [str(formation / f"tampered.{role}.json") for role in ("subject", "certificate")]
    for layout in ("json", "text", "dot"):
        explained = core.run("formation", "explain", *pair, "--format", layout)
        assert explained.returncode == 1 and explained.stdout, explained.stderr
    kit = core.python(
        "import importlib.util, daemon.conformance as kit\n"
        "assert importlib.util.find_spec('pytest') is None\n"
        "print(kit.check_mechanism('bytes-sha256').passed)",
        timeout=300,
    )
    assert (kit.returncode, kit.stdout) == (0, "True\n"), kit.stderr
    demo = core.run("demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    cases = {case["number"]: case["answer"] for case in _document(demo)["cases"]}
    assert [cases[n] for n in (5, 6, 7)] == ["SKIPPED"] * 3
    assert [cases[n] for n in (1, 2, 3, 4)] == ["PASS", "FAIL", "UNKNOWN", "REFUSED"]
    assert f"session 'descriptor' not hosted: {NEEDS_DESCRIPTOR}" in demo.stderr


def _line_with(serve: subprocess.Popen[str], text: str) -> str:
    """The first line of ``serve``'s stderr holding ``text`` ('' if it ends first; a daemon
    silent for 60 s is killed so the test ends: a hang guard, never a timing assertion)."""
    assert serve.stderr is not None
    guard = threading.Timer(60, serve.kill)
    guard.start()
    try:
        for line in serve.stderr:
            if text in line:
                return line
        return ""
    finally:
        guard.cancel()


def test_a_reload_into_a_session_whose_extra_is_missing_is_refused_and_the_old_one_serves(
    core: Installed,
) -> None:
    """SIGHUP after the configuration gained a ``descriptor`` session that is not optional:
    the reload is refused with the one line (it is no invalid file, and the reloader once
    caught only those), and the sessions it had keep answering."""
    folder = Path(tempfile.mkdtemp(prefix="evr", dir="/tmp"))
    try:
        head = '[server]\nlisten = ""\nsocket = "s"\n[audit]\npath = "audit.jsonl"\n'
        config = folder / "c.toml"
        config.write_text(head + '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n')
        (folder / "item").write_bytes(b"kept\n")
        serve = _serve(core, folder, "--config", "c.toml")
        try:
            assert serve.stdout is not None and serve.stderr is not None
            assert json.loads(serve.stdout.readline() or "{}").get("sessions") == ["bytes"]
            config.write_text(
                head
                + '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
                + '[sessions.descriptor]\nmechanisms = ["descriptor"]\n'
            )
            serve.send_signal(signal.SIGHUP)
            refused = _line_with(serve, "not reloaded")
            socket = str(folder / "s")
            answer = core.run(
                "submit", "--socket", socket, "--session", "bytes", str(folder / "item")
            )
            assert serve.poll() is None
        finally:
            _stop(serve)
        assert NEEDS_DESCRIPTOR in refused and "the old one keeps serving" in refused, refused
        assert (answer.returncode, _document(answer)["outcome"]) == (0, "PASS"), answer.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_session_retaining_in_s3_without_boto3_is_refused_in_one_line_not_an_internal_error(
    core: Installed,
) -> None:
    """``serve`` opened the store and died on botocore's ModuleNotFoundError (exit 70,
    "internal error"), after ``config check`` had called the file valid."""
    config = core.workdir / "s3.toml"
    config.write_text(
        '[server]\nlisten = ""\nsocket = "s3.sock"\n[audit]\npath = "s3-audit.jsonl"\n'
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nretain = "all"\n'
        'store = "s3://bucket/prefix/"\n'
    )
    message = (
        f"{config}: session 'bytes' not hosted: the s3:// evidence store needs the 's3' "
        "extra: pip install 'evidenced[s3]'"
    )
    for path, command in {
        "config check": ("config", "check", str(config)),
        "serve": ("serve", "--config", str(config)),
    }.items():
        done = core.run(*command)
        error = _document(done)["error"]
        assert (done.returncode, error) == (
            69,
            {"code": "EXTRA_MISSING", "exit": 69, "message": message},
        )
        assert _error_lines(done) == [f"evidenced {path}: {message}"]


# ---- 7. python-daemon beside evidenced -------------------------------------------------------

#: The wheels ``make python-daemon`` downloads (python-daemon and its lockfile).
PYTHON_DAEMON_WHEELS: Final = REPO / ".wheels" / "python-daemon"


def _python_daemon_wheels() -> list[Path]:
    wheels = sorted(PYTHON_DAEMON_WHEELS.glob("*.whl"))
    if not any(path.name.startswith("python_daemon-") for path in wheels):
        pytest.skip("python-daemon's wheel is absent: run `make python-daemon`")
    return wheels


def _replaced_failure(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 70, completed.stdout + completed.stderr
    assert "Traceback" not in completed.stderr, completed.stderr
    error = _document(completed)["error"]
    assert error["code"] == "PACKAGE_REPLACED"
    assert error["exit"] == 70
    [line] = _error_lines(completed)
    assert error["message"] in line
    message: str = error["message"]
    return message


def test_python_daemon_installed_over_evidenced_is_named_in_one_line_not_a_traceback(
    wheel: Path, tmp_path: Path
) -> None:
    """pip installs python-daemon's ``daemon/__init__.py`` over evidenced's without a word
    (``pip check`` passes): every command, ``--version`` included, then says which
    distribution replaced the package and how to recover, exit 70; uninstalling it leaves the
    file missing, said the same way; reinstalling evidenced repairs it."""
    wheels = _python_daemon_wheels()
    beside = _fresh_install(wheel, tmp_path)
    python = beside.venv / "bin" / "python"
    _run(*PIP, "--python", python, *INSTALL_OFFLINE, *wheels)
    check = subprocess.run(
        [*PIP, "--python", str(python), "check"], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout  # pip sees nothing wrong: the attack's premise

    for command in (["--version"], ["mechanisms"], ["demo"], ["serve", "--help"]):
        message = _replaced_failure(beside.run(*command))
        assert "python-daemon 3.1.2" in message
        assert "environment of its own" in message

    _run(*PIP, "--python", python, "uninstall", "--quiet", "--yes", "python-daemon")
    message = _replaced_failure(beside.run("mechanisms"))
    assert "daemon/__init__.py is missing" in message

    _run(*PIP, "--python", python, *INSTALL_OFFLINE, "--force-reinstall", wheel)
    repaired = beside.run("--version")
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stdout.strip() == f"evidenced {__version__}"
