"""The retention stores keep their contract (daemon/retention/_store.py), on both backends:
the filesystem store in a temporary directory and the S3 store against moto's real S3 API over
HTTP. Each attack or fault test checks that nothing changed in the store."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from retention_kit import moto_server, raw_s3_client, use_s3

from daemon.retention import (
    FilesystemStore,
    ObjectCorrupt,
    ObjectMissing,
    RetentionStore,
    S3Store,
    StoreError,
    name_of,
    open_store,
    parse_spec,
)

DATA = b'{"evidence":"bytes"}'
OTHER = b'{"evidence":"other"}'


@pytest.fixture(scope="module")
def moto() -> Iterator[Any]:
    with moto_server() as server:
        yield server


def _bucket() -> str:
    return f"ev-{uuid.uuid4().hex[:16]}"


@pytest.fixture(params=["fs", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: Any) -> Iterator[Any]:
    if request.param == "fs":
        opened: RetentionStore = FilesystemStore(tmp_path / "store")
    else:
        spec = use_s3(monkeypatch, request.getfixturevalue("moto"), _bucket())
        opened = open_store(spec)
    try:
        yield opened
    finally:
        opened.close()


def _tamper(store: Any, name: str, data: bytes) -> None:
    """Replace an object's bytes behind the store's back (disk rot, an intruder)."""
    hexdigest = name.removeprefix("sha256:")
    if isinstance(store, FilesystemStore):
        path = store.root / hexdigest[:2] / hexdigest[2:4] / hexdigest
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(data)
        path.chmod(0o600)
    else:
        client = raw_s3_client()
        client.put_object(Bucket=store.bucket, Key=store.prefix + hexdigest, Body=data)
        client.close()


def _listing(store: Any) -> dict[str, int]:
    return {item.name: item.size for item in store.objects()}


# -- the contract, on both backends


def test_put_then_get_returns_the_exact_bytes(store: Any) -> None:
    put = store.put(DATA)
    assert (put.name, put.size, put.created) == (name_of(DATA), len(DATA), True)
    assert store.get(put.name, len(DATA)) == DATA
    assert store.get(put.name) == DATA
    assert _listing(store) == {put.name: len(DATA)}


def test_second_put_of_the_same_bytes_is_verified_never_rewritten(store: Any) -> None:
    first = store.put(DATA)
    before = _listing(store)
    second = store.put(DATA)
    assert second.created is False and second.name == first.name
    assert _listing(store) == before
    assert store.get(first.name) == DATA


def test_corrupted_object_is_never_returned(store: Any) -> None:
    name = store.put(DATA).name
    _tamper(store, name, OTHER)
    with pytest.raises(ObjectCorrupt, match="corrupt"):
        store.get(name, len(DATA))
    with pytest.raises(ObjectCorrupt, match="corrupt"):
        store.get(name)


def test_put_over_a_corrupted_object_fails_and_leaves_it_as_evidence(store: Any) -> None:
    name = name_of(DATA)
    _tamper(store, name, OTHER)
    with pytest.raises(ObjectCorrupt, match="never rewritten"):
        store.put(DATA)
    with pytest.raises(ObjectCorrupt):
        store.get(name)
    assert _listing(store) == {name: len(OTHER)}


def test_object_of_another_length_is_corrupt_before_it_is_read(store: Any) -> None:
    name = store.put(DATA).name
    with pytest.raises(ObjectCorrupt, match="the log says"):
        store.get(name, len(DATA) + 1)


def test_absent_object_is_missing(store: Any) -> None:
    with pytest.raises(ObjectMissing):
        store.get(name_of(b"never stored"), 12)


@pytest.mark.parametrize(
    "name", ["sha256:" + "A" * 64, "sha256:abc", "ab" * 32, "sha256:../../../etc/passwd"]
)
def test_malformed_object_name_is_refused(store: Any, name: str) -> None:
    with pytest.raises(ValueError):
        store.get(name)
    with pytest.raises(ValueError):
        store.delete(name)


def test_delete_removes_only_the_named_object(store: Any) -> None:
    keep = store.put(DATA).name
    gone = store.put(OTHER).name
    assert store.delete(gone) is True
    assert _listing(store) == {keep: len(DATA)}
    with pytest.raises(ObjectMissing):
        store.get(gone)


def test_concurrent_puts_of_the_same_bytes_store_one_object(store: Any) -> None:
    data = os.urandom(64 * 1024)
    results: list[Any] = []
    errors: list[BaseException] = []

    def put() -> None:
        try:
            results.append(store.put(data))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=put) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 8 and sum(result.created for result in results) >= 1
    assert _listing(store) == {name_of(data): len(data)}
    assert store.get(name_of(data)) == data


# -- specs


@pytest.mark.parametrize(
    "spec",
    ["", "fs:", "file:/tmp/x", "s3://", "s3://UPPER/x", "s3://a/x", "s3://bucket//x", "http://x"],
)
def test_malformed_store_spec_is_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_spec(spec)


def test_spec_ids_are_canonical(tmp_path: Path) -> None:
    assert parse_spec("fs:store", base=tmp_path).id == f"fs:{tmp_path}/store"
    assert parse_spec("s3://bucket/some/prefix").id == "s3://bucket/some/prefix/"
    assert parse_spec("s3://bucket").id == "s3://bucket/"


# -- the filesystem backend


def test_files_are_0600_in_a_0700_tree(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        store = FilesystemStore(tmp_path / "store")
        name = store.put(DATA).name
    finally:
        os.umask(old)
    hexdigest = name.removeprefix("sha256:")
    path = store.root / hexdigest[:2] / hexdigest[2:4] / hexdigest
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for directory in (store.root, path.parent, path.parent.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    store.close()


@pytest.mark.parametrize("mode", [0o750, 0o705, 0o777])
def test_root_open_to_group_or_others_is_refused(tmp_path: Path, mode: int) -> None:
    root = tmp_path / "store"
    root.mkdir()
    root.chmod(mode)
    with pytest.raises(StoreError, match="chmod 0700"):
        FilesystemStore(root)
    assert list(root.iterdir()) == []


def test_symbolic_link_root_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "store").symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        FilesystemStore(tmp_path / "store")
    assert list(target.iterdir()) == []


def test_absent_root_is_not_created_for_reading(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        open_store(f"fs:{tmp_path}/absent", create=False)
    assert not (tmp_path / "absent").exists()


def test_symbolic_link_in_an_object_place_is_corrupt(tmp_path: Path) -> None:
    store = FilesystemStore(tmp_path / "store")
    outside = tmp_path / "outside"
    outside.write_bytes(DATA)
    hexdigest = name_of(DATA).removeprefix("sha256:")
    folder = store.root / hexdigest[:2] / hexdigest[2:4]
    folder.mkdir(parents=True, mode=0o700)
    (folder / hexdigest).symlink_to(outside)
    with pytest.raises(ObjectCorrupt, match="symbolic link"):
        store.get(name_of(DATA))
    with pytest.raises(ObjectCorrupt, match="symbolic link"):
        store.put(DATA)
    assert (folder / hexdigest).is_symlink() and outside.read_bytes() == DATA
    store.close()


def test_renaming_the_root_after_open_redirects_nothing(tmp_path: Path) -> None:
    store = FilesystemStore(tmp_path / "store")
    (tmp_path / "store").rename(tmp_path / "moved")
    (tmp_path / "store").mkdir(mode=0o700)
    name = store.put(DATA).name
    assert list((tmp_path / "store").iterdir()) == []
    assert FilesystemStore(tmp_path / "moved").get(name) == DATA
    store.close()


def test_write_cut_short_by_the_file_size_limit_leaves_no_object(tmp_path: Path) -> None:
    """A write that fails midway (here EFBIG under RLIMIT_FSIZE, as a full disk would) leaves
    neither the object nor its temporary file, and says why."""
    root = tmp_path / "store"
    FilesystemStore(root).close()
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))\n"
        "from daemon.retention import FilesystemStore, StoreError\n"
        f"store = FilesystemStore({str(root)!r})\n"
        "try:\n"
        "    store.put(b'x' * 1048576)\n"
        "except StoreError as error:\n"
        "    print(error)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    assert "cannot store" in done.stdout and "EFBIG" in done.stdout
    store = FilesystemStore(root)
    assert list(store.objects()) == [] and list(store.temporaries()) == []
    store.close()


def test_temporary_files_of_interrupted_writes_are_listed_and_removable(tmp_path: Path) -> None:
    store = FilesystemStore(tmp_path / "store")
    name = store.put(DATA).name
    hexdigest = name.removeprefix("sha256:")
    leftover = store.root / hexdigest[:2] / hexdigest[2:4] / ".tmp-0123456789abcdef"
    leftover.write_bytes(b"partial")
    assert [path for path, _ in store.temporaries()] == [
        f"{hexdigest[:2]}/{hexdigest[2:4]}/.tmp-0123456789abcdef"
    ]
    assert _listing(store) == {name: len(DATA)}
    with pytest.raises(ValueError):
        store.remove_temporary(f"{hexdigest[:2]}/{hexdigest[2:4]}/{hexdigest}")
    store.remove_temporary(f"{hexdigest[:2]}/{hexdigest[2:4]}/.tmp-0123456789abcdef")
    assert not leftover.exists() and store.get(name) == DATA
    store.close()


def test_stray_files_in_the_tree_are_not_objects(tmp_path: Path) -> None:
    store = FilesystemStore(tmp_path / "store")
    name = store.put(DATA).name
    (store.root / "README").write_text("not an object")
    (store.root / "zz").mkdir()
    hexdigest = name.removeprefix("sha256:")
    (store.root / hexdigest[:2] / hexdigest[2:4] / ("0" * 64)).write_bytes(b"misplaced")
    assert _listing(store) == {name: len(DATA)}
    store.close()


# -- the S3 backend


def test_s3_object_is_written_with_its_sha256_checksum(moto: Any, monkeypatch: Any) -> None:
    bucket = _bucket()
    store = open_store(use_s3(monkeypatch, moto, bucket))
    assert isinstance(store, S3Store)
    name = store.put(DATA).name
    client = raw_s3_client()
    head = client.head_object(
        Bucket=bucket, Key="evidence/" + name.removeprefix("sha256:"), ChecksumMode="ENABLED"
    )
    import base64
    import hashlib

    assert head["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(DATA).digest()).decode()
    client.close()
    store.close()


def test_s3_present_object_without_checksum_is_verified_by_its_bytes(
    moto: Any, monkeypatch: Any
) -> None:
    bucket = _bucket()
    store = open_store(use_s3(monkeypatch, moto, bucket))
    client = raw_s3_client()
    client.put_object(Bucket=bucket, Key="evidence/" + name_of(DATA)[7:], Body=DATA)
    client.close()
    assert store.put(DATA).created is False
    store.close()


def test_s3_missing_bucket_is_a_store_error_naming_it(moto: Any, monkeypatch: Any) -> None:
    use_s3(monkeypatch, moto, _bucket())
    store = open_store("s3://no-such-bucket-here/x")
    with pytest.raises(StoreError, match="NoSuchBucket"):
        store.put(DATA)
    store.close()


def test_s3_unreachable_endpoint_fails_after_the_sdk_retries(moto: Any, monkeypatch: Any) -> None:
    """A closed port: the SDK's standard retry mode tries AWS_MAX_ATTEMPTS (2) times with its
    bounded backoff, then the store says the endpoint cannot be reached."""
    spec = use_s3(monkeypatch, moto, _bucket())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{port}")
    store = open_store(spec)
    assert isinstance(store, S3Store)
    attempts: list[str] = []
    store._client.meta.events.register(
        "before-send.s3.PutObject", lambda **kwargs: attempts.append("put")
    )
    with pytest.raises(StoreError, match="EndpointConnectionError"):
        store.put(DATA)
    assert attempts == ["put", "put"]
    store.close()


def test_s3_access_denied_is_a_store_error_without_retries(moto: Any, monkeypatch: Any) -> None:
    """403: moto checks IAM (its own switch, as for AWS's accounts), and these keys are unknown
    to it. Not transient, so the SDK does not retry it; the store names the code and status."""
    from moto.core.authorization import enable_iam_authentication

    store = open_store(use_s3(monkeypatch, moto, _bucket()))
    assert isinstance(store, S3Store)
    attempts: list[str] = []
    store._client.meta.events.register(
        "before-send.s3.PutObject", lambda **kwargs: attempts.append("put")
    )
    with enable_iam_authentication(), pytest.raises(StoreError, match=r"HTTP 403"):
        store.put(DATA)
    assert attempts == ["put"]
    assert list(store.objects()) == []
    store.close()
