"""What a decision-log sink is configured with (``[[audit.sinks]]``; ``docs/audit-log.md``
"Shipping decision logs"), and the instance labels of every event it ships.

Rules (the contract):

1. A :class:`SinkConfig` is checked when built (``ValueError`` naming the key): ``name`` is 1
   to 64 of ``A-Z a-z 0-9 _ - .``, not starting with ``.`` or ``-`` (it names the cursor file
   and a metric label); ``type`` is ``http`` or ``console``; an ``http`` sink has a ``url``
   that is ``http://`` or ``https://`` with a host and without user information (secrets go in
   ``token_file``), a ``tls_ca`` only for ``https://``; a ``console`` sink has none of
   ``url``, ``token_file``, ``tls_ca``; ``events`` is a non-empty list of distinct audit
   events (:data:`SHIPPABLE`) or exactly ``["*"]``; each number within its range rule,
   ``backoff_min <= backoff_max``; ``start_at`` is ``oldest`` or ``now``; labels are strings
   to strings, names of 1 to 64 characters, and never ``version`` (always the daemon's).
   Every default and range rule is the schema's ``[[audit.sinks]]`` key of the same name
   (:class:`~daemon.schema._tables.SinkTable`), read from it, never restated here.
2. :func:`check_sinks` checks a daemon's sinks together: distinct names, at most one
   ``console`` sink (stdout is one stream).
3. :func:`check_sink_files` reads what an ``http`` sink's files must hold, as ``config check``,
   ``serve`` and a reload do: the token file's first line is not empty, the CA bundle loads
   (``ValueError`` naming the key and the file). The token is read again for every upload, so
   replacing the file rotates it without a restart.
4. :func:`instance_labels`: every shipped event's ``labels`` are ``id``, ``version`` (the
   daemon's) and the configured ones (``[audit] labels``, then the sink's own over them). ``id``
   is the configured one, else ``<host name>/<log tag>``: the tag of the audit log's
   transparency origin (:func:`daemon.tlog._names.log_tag`; without a transparency log, the
   default origin of the log's absolute path), so two daemons on one host differ and a
   daemon keeps its id across restarts.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import attrs

from daemon.audit._audit import REQUEST_EVENTS
from daemon.schema._tables import RULE, SinkTable, check_ranges, choices_of, default_of

__all__ = [
    "SHIPPABLE",
    "SinkConfig",
    "check_sink_files",
    "check_sinks",
    "instance_labels",
]

#: The ``event`` of every line the daemon writes (``docs/audit-log.md`` §1).
SHIPPABLE: Final = frozenset(
    {
        *REQUEST_EVENTS,
        "daemon_start",
        "daemon_stop",
        "config_reload",
        "noise",
        "audit_overflow",
        "audit_recovered",
        "torn_tail_removed",
        "audit_rotated",
    }
)
ALL: Final = "*"
TYPES: Final = choices_of(SinkTable, "type")
START_AT: Final = choices_of(SinkTable, "start_at")
_NAME: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")


#: The fields that are sink keys with a range rule (checked by the schema's rule).
_RANGED: Final = tuple(
    field.name for field in attrs.fields(SinkTable) if field.metadata.get(RULE) is not None
)


def _default(key: str) -> Any:
    return default_of(SinkTable, key)


def _check_labels(where: str, labels: Mapping[str, str]) -> None:
    for key, value in labels.items():
        if type(key) is not str or not 0 < len(key) <= 64:
            raise ValueError(f"{where}: a label name is 1 to 64 characters")
        if type(value) is not str:
            raise ValueError(f"{where}.{key} must be a string")
        if key == "version":
            raise ValueError(f"{where}.version is the daemon's version: it cannot be set")


@attrs.frozen
class SinkConfig:
    """One ``[[audit.sinks]]`` table, paths resolved (rule 1). ``labels`` are the configured
    ones, ``[audit] labels`` merged under the sink's own."""

    name: str
    type: str
    url: str | None = None
    token_file: str | None = None
    tls_ca: str | None = None
    timeout: float = _default("timeout")
    events: tuple[str, ...] = _default("events")
    batch_lines: int = _default("batch_lines")
    batch_bytes: int = _default("batch_bytes")
    flush_interval: float = _default("flush_interval")
    backoff_min: float = _default("backoff_min")
    backoff_max: float = _default("backoff_max")
    start_at: str = _default("start_at")
    labels: Mapping[str, str] = attrs.field(factory=dict, hash=False)

    def __attrs_post_init__(self) -> None:
        if type(self.name) is not str or not _NAME.match(self.name):
            raise ValueError(
                f"name {self.name!r} must be 1 to 64 letters, digits, '_', '-' or '.' "
                "(not starting with '.' or '-')"
            )
        if self.type not in TYPES:
            raise ValueError(f"type must be one of {list(TYPES)}, not {self.type!r}")
        if self.type == "http":
            self._check_url()
        else:
            for key in ("url", "token_file", "tls_ca"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} is for an http sink, not a console one")
        events = self.events
        if not events or len(set(events)) != len(events) or type(events) is not tuple:
            raise ValueError('events must be a non-empty array of distinct events, or ["*"]')
        if ALL in events and events != (ALL,):
            raise ValueError('events: "*" (every line) stands alone')
        unknown = sorted(set(events) - SHIPPABLE - {ALL})
        if unknown:
            raise ValueError(f"events: {unknown} are not audit events ({sorted(SHIPPABLE)})")
        check_ranges(SinkTable, self, _RANGED)
        if self.backoff_min > self.backoff_max:
            raise ValueError("backoff_min must not exceed backoff_max")
        if self.start_at not in START_AT:
            raise ValueError(f"start_at must be one of {list(START_AT)}, not {self.start_at!r}")
        _check_labels("labels", self.labels)

    def _check_url(self) -> None:
        if not self.url:
            raise ValueError("url is required for an http sink")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url {self.url!r} must be http://HOST/… or https://HOST/…")
        if parts.username is not None or parts.password is not None:
            raise ValueError("url must not carry user information: put a token in token_file")
        if self.tls_ca is not None and parts.scheme != "https":
            raise ValueError("tls_ca needs an https:// url")

    @property
    def ships_everything(self) -> bool:
        return self.events == (ALL,)

    @property
    def target(self) -> str:
        """Where it ships, for ``health`` and messages: ``stdout``, or the URL without its
        query (which may carry a secret)."""
        if self.url is None:
            return "stdout"
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}{parts.path}"

    def cursor_path(self, log: Path) -> Path:
        """``LOG.sink-<name>.cursor``, beside the audit log."""
        return log.with_name(f"{log.name}.sink-{self.name}.cursor")


def check_sinks(sinks: Sequence[SinkConfig]) -> None:
    """Rule 2."""
    names = [sink.name for sink in sinks]
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise ValueError(f"sink names must be distinct: {doubled} given twice")
    if sum(sink.type == "console" for sink in sinks) > 1:
        raise ValueError("at most one console sink (stdout is one stream)")


def read_token(path: str) -> str:
    """The first line of ``path``, stripped; ``ValueError`` when empty, ``OSError`` when it
    cannot be read."""
    with open(path, "rb") as handle:
        first = handle.readline(4096)
    token = first.decode("utf-8", "replace").strip()
    if not token:
        raise ValueError(f"{path}: no token on its first line")
    return token


def check_sink_files(sink: SinkConfig) -> None:
    """Rule 3."""
    if sink.token_file is not None:
        try:
            read_token(sink.token_file)
        except OSError as error:
            raise ValueError(
                f"token_file: cannot read {sink.token_file}: {error.strerror or error}"
            ) from None
        except ValueError as error:
            raise ValueError(f"token_file: {error}") from None
    if sink.tls_ca is not None:
        try:
            ssl.create_default_context(cafile=sink.tls_ca)
        except (OSError, ssl.SSLError) as error:
            raise ValueError(f"tls_ca: {sink.tls_ca} is not a CA bundle: {error}") from None


def instance_labels(labels: Mapping[str, str], origin: str, version: str) -> dict[str, str]:
    """Rule 4: the labels of a sink's events (``origin``: the log's transparency origin)."""
    from daemon.tlog._names import log_tag

    found: dict[str, Any] = {"id": f"{socket.gethostname()}/{log_tag(origin)}", **labels}
    found["version"] = version
    return dict(sorted(found.items()))
