"""Bearer tokens: the ``tokens_file`` format, and checking a presented token against it.

Rules (the contract):

1. The file holds one token per line as ``<sha256 hex of the token> <name>``: 64 lowercase
   hex digits (the SHA-256 of the token's UTF-8 bytes, exactly what ``printf %s "$TOKEN" |
   sha256sum`` prints), whitespace, then the token's name: 1 to 64 characters of
   ``A-Z a-z 0-9 . _ - @``. Blank lines and lines starting with ``#`` are ignored. Anything
   else — a malformed line, a name or a hash given twice, no token at all — refuses the
   whole file (:class:`TokenFileError`, naming the line), so a typo never silently locks
   someone out or lets someone in. The file is read with :func:`session.read_capped`.
2. The file must not be writable by group or others (whoever can write it can let anyone
   in): such a file is refused, like ssh refuses a loose ``authorized_keys``. The tokens
   themselves are never stored, only their hashes.
3. :meth:`TokenStore.name_of` hashes the presented token once and compares the hash with
   *every* stored hash with :func:`hmac.compare_digest` (no early exit), so the time taken
   does not depend on which entry, or how much of one, matched. It returns the token's
   name or None. Presented tokens are 1 to 4,096 printable ASCII characters; anything else
   matches nothing (and is compared all the same). :meth:`TokenStore.verify` is the same
   check returning the presented token's hash with its name, and
   :meth:`TokenStore.name_of_digest` checks such a hash again against the (reloaded) store the
   same way: a connection that presented a token keeps its hash, never the token, so a reload
   can re-authorise it (:mod:`daemon.server._connection` rule 3).
4. The name, never the token nor its hash, is what the server records (the audit line's
   ``requester.token``) and prints.
5. :func:`bearer_token` takes the token from an HTTP ``Authorization`` value: the scheme
   ``Bearer`` (any case), one space or more, the token; anything else is None.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Final

import attrs

from daemon.wire._errors import PeerError
from session import read_capped

__all__ = [
    "MAX_TOKEN_LENGTH",
    "TokenFileError",
    "TokenStore",
    "bearer_token",
    "hash_token",
    "new_token",
    "token_line",
]

MAX_TOKEN_LENGTH: Final = 4096
_LINE: Final = re.compile(r"([0-9a-f]{64})[ \t]+([A-Za-z0-9._@-]{1,64})\Z")
_TOKEN: Final = re.compile(r"[\x21-\x7e]{1,4096}\Z")
_BEARER: Final = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(\S+)\Z")
#: Compared against when no entry exists, so the work per call is the same.
_NOTHING: Final = bytes(32)


class TokenFileError(PeerError, ValueError):
    """The tokens file is unusable; the message names the file and the line."""


def hash_token(token: str) -> str:
    """The hex SHA-256 of ``token``'s UTF-8 bytes (rule 1)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh token: 256 random bits, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def token_line(token: str, name: str) -> str:
    """The tokens-file line for ``token`` named ``name`` (rule 1), without a newline."""
    line = f"{hash_token(token)} {name}"
    if _LINE.match(line) is None:
        raise ValueError(f"token name {name!r} is not 1-64 of A-Z a-z 0-9 . _ - @")
    return line


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value (rule 5), else None."""
    if authorization is None:
        return None
    match = _BEARER.match(authorization.strip())
    return None if match is None else match.group(1)


@attrs.frozen
class TokenStore:
    """Named token hashes (rule 1); :meth:`name_of` checks a presented token (rule 3)."""

    entries: tuple[tuple[bytes, str], ...]
    source: str = "<tokens>"

    @classmethod
    def parse(cls, text: str, *, source: str = "<tokens>") -> TokenStore:
        entries: list[tuple[bytes, str]] = []
        names: set[str] = set()
        hashes: set[bytes] = set()
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            match = _LINE.match(line)
            if match is None:
                raise TokenFileError(
                    f"{source} line {number}: expected '<sha256 hex> <name>' (64 lowercase hex "
                    "digits, then a name of 1-64 of A-Z a-z 0-9 . _ - @)"
                )
            digest, name = bytes.fromhex(match.group(1)), match.group(2)
            if name in names:
                raise TokenFileError(f"{source} line {number}: name {name!r} given twice")
            if digest in hashes:
                raise TokenFileError(f"{source} line {number}: the same token hash given twice")
            names.add(name)
            hashes.add(digest)
            entries.append((digest, name))
        if not entries:
            raise TokenFileError(f"{source}: no token in the file")
        return cls(tuple(entries), source)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TokenStore:
        """Read and check the tokens file (rules 1-2)."""
        target = Path(path)
        mode = os.stat(target).st_mode
        if not stat.S_ISREG(mode):
            raise TokenFileError(f"{target}: not a regular file")
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise TokenFileError(
                f"{target}: writable by group or others (mode {stat.S_IMODE(mode):04o}); "
                "chmod go-w it"
            )
        try:
            text = read_capped(target).decode("utf-8")
        except UnicodeDecodeError as error:
            raise TokenFileError(f"{target}: not UTF-8 text: {error}") from None
        return cls.parse(text, source=str(target))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.entries)

    def name_of(self, token: str | None) -> str | None:
        """The name of ``token`` when it is in the store, else None (rule 3)."""
        return self.verify(token)[1]

    def verify(self, token: str | None) -> tuple[bytes, str | None]:
        """``token``'s SHA-256 and its name when it is in the store, else None (rule 3)."""
        valid = token is not None and _TOKEN.match(token) is not None
        digest = hashlib.sha256(token.encode("utf-8") if valid and token else b"").digest()
        return digest, self._find(digest, valid)

    def name_of_digest(self, digest: bytes) -> str | None:
        """The name of the token whose SHA-256 is ``digest``, else None (rule 3)."""
        return self._find(digest, len(digest) == len(_NOTHING))

    def _find(self, digest: bytes, valid: bool) -> str | None:
        """Every stored hash compared with ``digest``, no early exit (rule 3)."""
        found: str | None = None
        for stored, name in self.entries or ((_NOTHING, ""),):
            if hmac.compare_digest(stored, digest) and valid:
                found = name
        return found
