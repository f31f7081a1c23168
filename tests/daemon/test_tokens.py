"""Bearer tokens: the file format, loose files, constant-time checks (daemon/_tokens)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from daemon.config._tokens import (
    TokenFileError,
    TokenStore,
    bearer_token,
    hash_token,
    new_token,
    token_line,
)

# Fixed tokens: test ids must be the same in every xdist worker.
ALICE = "Ysq1c6mQ8l0Zr3d3bXq0m2bH1V2u9Yk4nR7tW5eA1zE"
BOB = "b0b-T0ken-of-the-ci-runner-0000000000000000"


def store_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text, "utf-8")
    os.chmod(path, mode)
    return path


def test_the_file_names_tokens_by_their_hash(tmp_path: Path) -> None:
    text = f"# operators\n\n{token_line(ALICE, 'alice')}\n{hash_token(BOB)}\tci-runner@host\n"
    store = TokenStore.load(store_file(tmp_path, text))
    assert store.names == ("alice", "ci-runner@host")
    assert store.name_of(ALICE) == "alice"
    assert store.name_of(BOB) == "ci-runner@host"


def test_the_hash_is_what_sha256sum_prints() -> None:
    assert hash_token("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.parametrize(
    "token",
    [None, "", "wrong", ALICE[:-1], ALICE + "x", ALICE.upper(), "é" * 10, "a b", "x" * 5000],
)
def test_a_token_not_in_the_file_names_nobody(token: str | None) -> None:
    store = TokenStore.parse(token_line(ALICE, "alice"))
    assert store.name_of(token) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no token"),
        ("# only a comment\n", "no token"),
        ("abc alice\n", "line 1"),
        (f"{hash_token(ALICE).upper()} alice\n", "line 1"),
        (f"{hash_token(ALICE)}\n", "line 1"),
        (f"{hash_token(ALICE)} al ice\n", "line 1"),
        (f"{hash_token(ALICE)} {'n' * 65}\n", "line 1"),
        (f"{token_line(ALICE, 'a')}\n{token_line(BOB, 'a')}\n", "given twice"),
        (f"{token_line(ALICE, 'a')}\n{token_line(ALICE, 'b')}\n", "given twice"),
        (f"{ALICE} alice\n", "line 1"),  # a token pasted instead of its hash
    ],
)
def test_a_malformed_file_is_refused_whole(text: str, reason: str) -> None:
    with pytest.raises(TokenFileError, match=reason):
        TokenStore.parse(text)


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_file_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = store_file(tmp_path, token_line(ALICE, "alice"), mode)
    with pytest.raises(TokenFileError, match="writable by group or others"):
        TokenStore.load(path)


def test_a_directory_is_not_a_tokens_file(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="not a regular file"):
        TokenStore.load(tmp_path)


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer  abc", "abc"),
        ("BEARER abc ", "abc"),
        ("Basic YWxhZGRpbjpvcGVuc2VzYW1l", None),
        ("Bearer", None),
        ("Bearer a b", None),
        (None, None),
    ],
)
def test_bearer_token_is_taken_from_the_authorization_header(
    header: str | None, token: str | None
) -> None:
    assert bearer_token(header) == token


def test_new_tokens_are_long_and_distinct() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(len(token) == 43 for token in tokens)


def test_token_names_are_checked_when_written() -> None:
    with pytest.raises(ValueError, match="token name"):
        token_line(ALICE, "no spaces allowed")


def test_a_connection_is_checked_again_by_the_hash_it_presented() -> None:
    """A reload re-authorises an open connection by the hash of the token it presented (it
    keeps no token): removed is nobody, renamed is its new name, anything else nobody."""
    digest, name = TokenStore.parse(token_line(ALICE, "alice")).verify(ALICE)
    assert name == "alice" and digest == bytes.fromhex(hash_token(ALICE))
    assert TokenStore.parse(token_line(BOB, "bob")).name_of_digest(digest) is None
    renamed = TokenStore.parse(f"{token_line(BOB, 'bob')}\n{token_line(ALICE, 'alice-2')}")
    assert renamed.name_of_digest(digest) == "alice-2"
    assert renamed.name_of_digest(digest[:-1]) is None and renamed.name_of_digest(b"") is None
    assert TokenStore.parse(token_line(ALICE, "alice")).verify("wrong")[1] is None
