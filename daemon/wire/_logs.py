"""One structlog configuration for every operational message (docs/operations.md).

Rules:

1. **One event, one line on stderr.** Every event has a stable snake_case name (``event``), the
   sentence a human reads (``message``), ``level``, ``timestamp`` (RFC 3339, UTC), ``logger``
   (``"evidenced"``), ``pid``, and its own fields (``worker``, ``listener``, ``session``,
   ``error``, ...). Names and fields are a contract: docs/operations.md lists them.
2. **Two renderings.** ``json``: one JSON object per line, keys sorted, any value JSON cannot
   hold written as its ``str``. ``console``: structlog's ``ConsoleRenderer`` (timestamp,
   level, ``[evidenced]``, the message, then ``key=value`` fields including ``event=``);
   colours only when stderr is a terminal and ``$NO_COLOR`` is unset or empty
   (https://no-color.org); a control character in a value is escaped, so a peer's text can
   never forge a second line.
3. **Which rendering.** :func:`configure`'s ``format`` beats ``$EVIDENCED_LOG_FORMAT``, which
   beats ``$JOURNAL_STREAM`` (set by systemd for a service whose stderr is the journal, and
   honoured only while stderr is still that stream: ``json``); otherwise ``console``. The
   level (``debug``, ``info``, ``warning``, ``error``; default ``info``) comes the same way
   from ``level`` or ``$EVIDENCED_LOG_LEVEL``; an event below it is dropped before anything
   is formatted.
4. **Worker processes inherit it**: they are forked from the process that configured it. A
   call of :func:`configure` replaces the whole choice (``None`` falls back to the
   environment), so one in-process ``evidenced`` invocation never leaks into the next.
5. **Never raises, never blocks the caller on a broken stderr**: a closed stderr or an
   unrenderable field loses that line, not the daemon. ``sys.stderr`` is looked up at each
   line (a redirected or captured stderr is honoured).
6. **structlog's global configuration is not touched**: a program that embeds the daemon keeps
   its own structlog set-up; the audit log never passes through here (it has its own chain).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Final, NamedTuple

FORMATS: Final = ("console", "json")
LEVELS: Final = ("debug", "info", "warning", "error")
_LEVEL_NUMBERS: Final = {"debug": 10, "info": 20, "warning": 30, "error": 40}
FORMAT_VARIABLE: Final = "EVIDENCED_LOG_FORMAT"
LEVEL_VARIABLE: Final = "EVIDENCED_LOG_LEVEL"


class LogSettings(NamedTuple):
    """The rendering and the threshold in force (rule 3)."""

    format: str
    level: str


class _Stderr:
    """structlog's logger at the end of the chain: one rendered line to the current stderr."""

    def msg(self, line: str) -> None:
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):  # rule 5
            pass

    debug = info = warning = error = msg


_current: LogSettings | None = None
_logger: Any = None


def _stderr_is_the_journal() -> bool:
    """systemd's test (sd_journal_stream_fd(3)): ``$JOURNAL_STREAM`` is ``DEVICE:INODE`` of
    the journal stream it connected, and stderr is still that stream (a shell started from a
    service inherits the variable, not the stream)."""
    device, _, inode = os.environ.get("JOURNAL_STREAM", "").partition(":")
    try:
        info = os.fstat(2)
        return (info.st_dev, info.st_ino) == (int(device), int(inode))
    except (OSError, ValueError):
        return False


def _from_environment(format: str | None, level: str | None) -> LogSettings:
    chosen = format or os.environ.get(FORMAT_VARIABLE, "").strip().lower() or None
    if chosen not in FORMATS:
        chosen = "json" if _stderr_is_the_journal() else "console"
    threshold = level or os.environ.get(LEVEL_VARIABLE, "").strip().lower() or "info"
    if threshold not in LEVELS:
        threshold = "info"
    return LogSettings(format=chosen, level=threshold)


def configure(format: str | None = None, level: str | None = None) -> LogSettings:
    """Choose the rendering and the level (rule 3); ``None`` takes what the environment says.
    Raises ``ValueError`` for a name not in :data:`FORMATS` or :data:`LEVELS`."""
    global _current, _logger
    if format is not None and format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {format!r}")
    if level is not None and level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    _current = _from_environment(format, level)
    _logger = None
    return _current


def settings() -> LogSettings:
    """The settings in force (from the environment until :func:`configure` is called)."""
    global _current
    if _current is None:
        _current = _from_environment(None, None)
    return _current


def _escape_controls(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Console only (rule 2): no value may carry a newline or another control character."""
    for key, value in event.items():
        if isinstance(value, str) and not value.isprintable():
            event[key] = value.encode("unicode_escape", "backslashreplace").decode("ascii")
    return event


def _build() -> Any:
    import structlog

    chosen = settings()
    processors: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if chosen.format == "json":
        processors.append(structlog.processors.JSONRenderer(sort_keys=True, default=str))
    else:
        try:
            colors = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
        except (AttributeError, ValueError):
            colors = False
        processors += [
            _escape_controls,
            structlog.dev.ConsoleRenderer(
                colors=colors,
                event_key="message",
                pad_event_to=0,
                exception_formatter=structlog.dev.plain_traceback,
            ),
        ]
    return structlog.wrap_logger(
        _Stderr(),
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVEL_NUMBERS[chosen.level]),
        context_class=dict,
        cache_logger_on_first_use=False,
    )


def log(level: str, event: str, message: str, **fields: Any) -> None:
    """Write one event (rule 1) at ``level`` if the threshold lets it through."""
    global _logger
    if _LEVEL_NUMBERS.get(level, 40) < _LEVEL_NUMBERS[settings().level]:
        return
    try:
        if _logger is None:
            _logger = _build()
        getattr(_logger, level if level in _LEVEL_NUMBERS else "error")(
            event, message=message, logger="evidenced", pid=os.getpid(), **fields
        )
    except Exception:  # rule 5: a field that does not render loses its line only
        pass


def debug(event: str, message: str, **fields: Any) -> None:
    """:func:`log` at ``debug``."""
    log("debug", event, message, **fields)


def info(event: str, message: str, **fields: Any) -> None:
    """:func:`log` at ``info``."""
    log("info", event, message, **fields)


def warning(event: str, message: str, **fields: Any) -> None:
    """:func:`log` at ``warning``."""
    log("warning", event, message, **fields)


def error(event: str, message: str, **fields: Any) -> None:
    """:func:`log` at ``error``."""
    log("error", event, message, **fields)
