"""The ``submit`` command's saved ``sessions`` answer, one file per server address (the
client room keeps it: the command line and any host of the blocking client may use it).

Without ``--binding`` a ``submit`` builds the honest binding from what the server announces
(``daemon.client._honest``). Asking for it on every invocation made each CLI submit two
requests, and behind a round-robin balancer the pairs lined up: every ``POST`` of ten submits
landed on the same replica. The answer is therefore kept between invocations, as the library
client keeps it within one (``announcement_ttl``).

Rules (the contract):

1. **Where**: ``$EVIDENCED_CACHE_DIR``, else ``$XDG_CACHE_HOME/evidenced``, else
   ``$HOME/.cache/evidenced`` (all read from the environment given; with none of them set
   nothing is kept, every submit asks); one file per address, ``sessions-<32 hex>.json``
   (a SHA-256 prefix of the address as given: ``--socket PATH`` or ``--connect URL``), the
   directory 0700 and the file 0600 (an announcement is not secret, but it is the user's).
2. **Fresh** for ``ttl`` seconds after it was received (``--sessions-ttl``, default
   :data:`DEFAULT_TTL`, the library client's ``announcement_ttl``): a file older than that, from
   a clock that stepped back (received in the future), naming another address, or malformed
   in any way, is a miss, never an error; so is an answer that does not host the session
   asked for. ``ttl`` 0 never reads nor writes.
3. **Written** atomically (a temporary file beside it, then ``rename``) after a fresh
   ``sessions`` answer; a cache that cannot be written is skipped without a word (the submit
   is what the user asked for).
4. What a stale answer can cost is one decision: after a restart or reload changed a
   session's mechanism or policy, a binding built from the old announcement is decided
   ``UNKNOWN`` (``registered mechanism digest does not match``) or ``FAIL``, recorded as any
   decision is. A single ``submit`` whose kept binding was not decided PASS therefore asks the
   server again, keeps its answer, and says on stderr when the session's announcement changed
   (submit again to bind to the new one); ``--sessions-ttl 0`` asks every time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

__all__ = ["DEFAULT_TTL", "cache_path", "load", "save", "sessions_list"]

DEFAULT_TTL: Final = 60.0
_FORMAT: Final = "evidenced-sessions-cache-v1"


def _directory(environ: Mapping[str, str]) -> Path | None:
    if explicit := environ.get("EVIDENCED_CACHE_DIR"):
        return Path(explicit)
    if xdg := environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "evidenced"
    if home := environ.get("HOME"):
        return Path(home) / ".cache" / "evidenced"
    return None


def cache_path(address: str, environ: Mapping[str, str] = os.environ) -> Path | None:
    """The file that keeps ``address``'s answer, ``None`` when there is no place (rule 1)."""
    directory = _directory(environ)
    if directory is None:
        return None
    name = hashlib.sha256(address.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return directory / f"sessions-{name}.json"


def sessions_list(document: Any) -> list[dict[str, Any]] | None:
    """The ``sessions`` list of a ``{"sessions": [...]}`` document, or ``None`` when it is not
    one (each item a mapping with a ``name`` and a list of mechanism mappings)."""
    hosted = document.get("sessions") if isinstance(document, dict) else None
    if not isinstance(hosted, list) or not all(
        isinstance(item, dict)
        and isinstance(item.get("name"), str)
        and isinstance(item.get("mechanisms"), list)
        and all(isinstance(mechanism, dict) for mechanism in item["mechanisms"])
        for item in hosted
    ):
        return None
    return hosted


def load(
    address: str, session: str, ttl: float, environ: Mapping[str, str] = os.environ
) -> list[dict[str, Any]] | None:
    """The kept answer for ``address`` when it is fresh and hosts ``session`` (rule 2)."""
    path = cache_path(address, environ)
    if ttl <= 0 or path is None:
        return None
    try:
        document = json.loads(path.read_bytes())
        received = float(document["received"])
        if document.get("format") != _FORMAT or document.get("address") != address:
            return None
    except (OSError, ValueError, TypeError, KeyError):
        return None
    age = time.time() - received
    if not 0 <= age <= ttl:
        return None
    hosted = sessions_list(document)
    if hosted is None or not any(item["name"] == session for item in hosted):
        return None
    return hosted


def save(
    address: str,
    hosted: list[dict[str, Any]],
    ttl: float,
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Keep ``hosted`` as ``address``'s answer (rule 3); a failure is skipped."""
    path = cache_path(address, environ)
    if ttl <= 0 or path is None:
        return
    document = {"address": address, "format": _FORMAT, "received": time.time(), "sessions": hosted}
    with contextlib.suppress(OSError, TypeError, ValueError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=".sessions-", dir=path.parent)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(document, handle, sort_keys=True, separators=(",", ":"))
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
