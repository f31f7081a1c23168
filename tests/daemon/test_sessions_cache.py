"""The submit command's kept ``sessions`` answer (``daemon/client/_sessions_cache.py``): what
it reads is exactly a fresh answer of the same address that hosts the session; anything else is
a miss, never an error, and it never makes a submit fail."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from daemon.client import _sessions_cache as cache

HOSTED = [{"name": "bytes", "mechanisms": [{"mechanism_id": "vstd.bytes.sha256"}]}]
ADDRESS = "http://127.0.0.1:7434"


def _kept(address: str, environ: dict[str, str]) -> Path:
    """The file that keeps ``address``'s answer under ``environ`` (which names a place)."""
    path = cache.cache_path(address, environ)
    assert path is not None
    return path


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    return {"EVIDENCED_CACHE_DIR": str(tmp_path / "cache")}


def test_a_fresh_answer_is_read_back_private_to_the_user(environ: dict[str, str]) -> None:
    cache.save(ADDRESS, HOSTED, 60, environ)
    assert cache.load(ADDRESS, "bytes", 60, environ) == HOSTED
    path = _kept(ADDRESS, environ)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_an_answer_older_than_the_ttl_is_asked_again(environ: dict[str, str]) -> None:
    cache.save(ADDRESS, HOSTED, 60, environ)
    path = _kept(ADDRESS, environ)
    document = json.loads(path.read_text())
    document["received"] = time.time() - 61
    path.write_text(json.dumps(document))
    assert cache.load(ADDRESS, "bytes", 60, environ) is None


def test_a_clock_stepped_back_makes_the_answer_stale_not_eternal(environ: dict[str, str]) -> None:
    cache.save(ADDRESS, HOSTED, 60, environ)
    path = _kept(ADDRESS, environ)
    document = json.loads(path.read_text())
    document["received"] = time.time() + 86_400  # written before the clock went back a day
    path.write_text(json.dumps(document))
    assert cache.load(ADDRESS, "bytes", 60, environ) is None


def test_another_servers_answer_is_never_used(environ: dict[str, str]) -> None:
    cache.save(ADDRESS, HOSTED, 60, environ)
    other = "http://127.0.0.1:7435"
    assert cache.load(other, "bytes", 60, environ) is None
    # a file planted under the other address's name, naming the first, is refused too
    os.replace(_kept(ADDRESS, environ), _kept(other, environ))
    assert cache.load(other, "bytes", 60, environ) is None


def test_a_session_the_answer_does_not_host_is_asked_of_the_server(
    environ: dict[str, str],
) -> None:
    cache.save(ADDRESS, HOSTED, 60, environ)
    assert cache.load(ADDRESS, "formation", 60, environ) is None


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b"[]", b'{"format": "evidenced-sessions-cache-v1"}', b"\xff\xfe"],
    ids=["empty", "garbage", "array", "no-fields", "binary"],
)
def test_a_damaged_cache_file_is_a_miss_not_an_error(
    environ: dict[str, str], content: bytes
) -> None:
    path = _kept(ADDRESS, environ)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert cache.load(ADDRESS, "bytes", 60, environ) is None


def test_a_forged_sessions_list_is_a_miss(environ: dict[str, str]) -> None:
    cache.save(ADDRESS, [{"name": "bytes", "mechanisms": "not-a-list"}], 60, environ)
    assert cache.load(ADDRESS, "bytes", 60, environ) is None


def test_ttl_zero_neither_reads_nor_writes(environ: dict[str, str]) -> None:
    cache.save(ADDRESS, HOSTED, 0, environ)
    assert not _kept(ADDRESS, environ).exists()
    cache.save(ADDRESS, HOSTED, 60, environ)
    assert cache.load(ADDRESS, "bytes", 0, environ) is None


def test_an_unwritable_cache_directory_is_skipped_without_a_word(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the directory should be")
    environ = {"EVIDENCED_CACHE_DIR": str(blocker / "cache")}
    cache.save(ADDRESS, HOSTED, 60, environ)  # no exception
    assert cache.load(ADDRESS, "bytes", 60, environ) is None


def test_the_default_place_follows_xdg_then_home(tmp_path: Path) -> None:
    xdg = cache.cache_path(ADDRESS, {"XDG_CACHE_HOME": str(tmp_path), "HOME": "/elsewhere"})
    assert xdg is not None and xdg.parent == tmp_path / "evidenced"
    home = cache.cache_path(ADDRESS, {"HOME": str(tmp_path)})
    assert home is not None and home.parent == tmp_path / ".cache" / "evidenced"


def test_no_cache_place_in_the_environment_keeps_nothing_and_every_submit_asks(
    tmp_path: Path,
) -> None:
    assert cache.cache_path(ADDRESS, {}) is None
    cache.save(ADDRESS, HOSTED, 60, {})  # no exception, nothing written
    assert cache.load(ADDRESS, "bytes", 60, {}) is None


def test_a_kept_answer_gone_stale_costs_one_decision_said_on_stderr(tmp_path: Path) -> None:
    """A server restarted with another mechanism behind the same session name: the binding
    built from the kept answer is decided UNKNOWN (digest mismatch). That submit asks again,
    keeps the new answer and says why on stderr; the next one is bound to it and passes."""
    import subprocess
    import sys

    from http_testkit import FORMATION, LiveDaemon

    live = LiveDaemon()
    try:
        environ = {**os.environ, "EVIDENCED_CACHE_DIR": str(tmp_path / "cache")}
        pair = [str(FORMATION / "atom.subject.json"), str(FORMATION / "atom.certificate.json")]

        def submit() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "daemon.cli", "submit", "--connect", live.base,
                 "--session", "formation", *pair],
                capture_output=True, text=True, env=environ, timeout=120, check=False,
            )  # fmt: skip

        first = submit()
        assert first.returncode == 0, first.stderr
        path = _kept(live.base, environ)
        kept = json.loads(path.read_text())
        [formation] = [item for item in kept["sessions"] if item["name"] == "formation"]
        formation["mechanisms"][0]["mechanism_digest"] = "sha256:" + "0" * 64  # the old one
        path.write_text(json.dumps(kept))

        stale = submit()
        assert json.loads(stale.stdout)["outcome"] == "UNKNOWN", stale.stdout
        assert "announced differently now" in stale.stderr
        assert "0" * 64 not in path.read_text()  # the server's answer is kept again

        again = submit()
        assert again.returncode == 0, again.stdout + again.stderr
        assert "announced differently" not in again.stderr
    finally:
        live.stop()
        live.cleanup()
