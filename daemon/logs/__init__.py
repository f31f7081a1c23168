"""Room ``logs``: the daemon's and the CLI's operational messages, through one structlog
configuration (docs/operations.md lists every event).

May import: nothing of the project (every room, and the ``evidenced`` dispatcher, may import
it). The audit log is not an operational log and does not pass through here.
"""

from ._logs import (
    FORMATS,
    LEVELS,
    LogSettings,
    configure,
    debug,
    error,
    info,
    log,
    settings,
    warning,
)

__all__ = [
    "FORMATS",
    "LEVELS",
    "LogSettings",
    "configure",
    "debug",
    "error",
    "info",
    "log",
    "settings",
    "warning",
]
