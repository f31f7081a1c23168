"""Source identity: a mechanism digest that is the hash of the mechanism's own source files.

Rules:

* :func:`file_digest` is ``sha256:`` + hex SHA-256 of a file's raw bytes.
* A :class:`SourceIdentity` is a schema version, named pins (other digests the identity binds,
  e.g. a compiled profile's) and an ordered inventory of ``(path, digest)`` pairs. Its
  :meth:`~SourceIdentity.document` is ``{"schema_version": …, <pins>…, "sources": [{"path",
  "digest"}, …]}`` in inventory order, and its :attr:`~SourceIdentity.digest` is ``sha256:``
  + the SHA-256 of that document's canonical encoding. Every member is ASCII (refused
  otherwise), so the core and the network encodings of the document are the same bytes.
* :meth:`SourceIdentity.read` reads each file once (at the caller's import time) and labels it
  with the inventory path the caller chooses.

This is source-file identity, not loaded-code attestation: it names the files a mechanism
declares, read from where they are installed, and changes exactly when one of their bytes does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from session.canon import core_json, digest_bytes

__all__ = ["SourceIdentity", "file_digest"]


def file_digest(path: str | Path) -> str:
    """``sha256:<hex>`` of the file's raw bytes."""
    return digest_bytes(Path(path).read_bytes())


def _ascii(text: str, what: str) -> str:
    if type(text) is not str or not text.isascii():
        raise ValueError(f"source identity {what} must be an ASCII string: {text!r}")
    return text


@attrs.frozen
class SourceIdentity:
    """A source-identity document (module rules)."""

    schema_version: str
    pins: tuple[tuple[str, str], ...]
    sources: tuple[tuple[str, str], ...]

    @classmethod
    def read(
        cls,
        schema_version: str,
        files: Iterable[tuple[str, str | Path]],
        pins: Mapping[str, str] | None = None,
    ) -> SourceIdentity:
        """Read ``(inventory path, file)`` pairs, in order, into an identity."""
        return cls(
            _ascii(schema_version, "schema_version"),
            tuple((_ascii(k, "pin"), _ascii(v, "pin")) for k, v in (pins or {}).items()),
            tuple((_ascii(label, "path"), file_digest(file)) for label, file in files),
        )

    def document(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            **dict(self.pins),
            "sources": [{"path": path, "digest": digest} for path, digest in self.sources],
        }

    @property
    def digest(self) -> str:
        return digest_bytes(core_json(self.document()))
