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
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
import testdata

import holdout
from daemon import __version__
from daemon.server._server import SERVER_NAME

REPO: Final = testdata.REPO
PYPROJECT: Final = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
CODE_PACKAGES: Final = ("canon", "cli", "session", "mechanism", "catalog", "daemon", "holdout")
PROJECT_FILES: Final = ("pyproject.toml", "README.md", "LICENSE")


@attrs.frozen
class Installed:
    wheel: Path
    venv: Path
    workdir: Path
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "evidenced"), *args],
            capture_output=True,
            text=True,
            cwd=self.workdir,
            env=self.env,
            timeout=120,
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


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("wheel")
    source, dist, venv, workdir = (root / name for name in ("src", "dist", "venv", "work"))
    for folder in (source, workdir):
        folder.mkdir()
    _copy_project(source)
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input")
    build = ("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--check-build-dependencies")
    _run(*pip, *build, "--wheel-dir", dist, source)
    [wheel] = dist.glob("evidenced-*.whl")
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    install = ("install", "--quiet", "--no-deps", "--no-index")
    _run(*pip, "--python", venv / "bin" / "python", *install, wheel)
    # Third-party dependencies only: this venv's site-packages, appended after the wheel's.
    [site_packages] = (venv / "lib").glob("python3.*/site-packages")
    dependencies = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    (site_packages / "zz-evidenced-test-dependencies.pth").write_text(
        "".join(f"{path}\n" for path in sorted(dependencies))
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    }
    yield Installed(wheel, venv, workdir, env)


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
        corpus = _data_files(REPO / "holdout" / "corpus")
        assert shipped("holdout/corpus/") == corpus and len(corpus) > 1
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
    corpus_index = (REPO / "holdout" / "corpus" / "INDEX.json").read_bytes()
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
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input")
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
