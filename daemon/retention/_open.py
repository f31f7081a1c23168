"""Opening a retention store from its spec (``fs:PATH`` or ``s3://BUCKET/PREFIX``).

Rules: :func:`open_store` parses the spec (:func:`~daemon.retention._store.parse_spec`: a
malformed spec is ``ValueError``) and opens the backend, which checks what it can at once (the
filesystem root's safety; S3 only builds its client: the first request reaches the endpoint).
Failures are :class:`~daemon.retention._store.StoreError`.
"""

from __future__ import annotations

from pathlib import Path

from daemon.retention._store import RetentionStore, StoreSpec, parse_spec

__all__ = ["open_store"]


def open_store(
    spec: str | StoreSpec, *, base: Path | None = None, create: bool = True
) -> RetentionStore:
    """The store ``spec`` names (a relative ``fs:`` path resolves against ``base``); with
    ``create`` false an absent filesystem root is an error rather than created."""
    parsed = spec if isinstance(spec, StoreSpec) else parse_spec(spec, base=base)
    if parsed.kind == "fs":
        from daemon.retention._fs import FilesystemStore

        assert parsed.path is not None
        return FilesystemStore(parsed.path, create=create)
    from daemon.retention._s3 import S3Store

    return S3Store(parsed.bucket, parsed.prefix)
