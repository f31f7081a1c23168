"""The daemon publishing its own transparency log (``[transparency] publish``,
``docs/transparency.md`` §6).

Rules (the contract):

1. With ``publish`` set, the process that writes the log's tiles (the one server, or the
   sequencer of ``--workers N``) runs a :class:`daemon.retention._publish.PublishLoop` beside
   it from the start: a pass whenever the local checkpoint changed (polled every
   ``checkpoint_interval``, at most every 5 s), each new full tile uploaded once, the
   checkpoint last. It runs in a thread of its own and never blocks or fails a decision: the
   local log is the truth, a failed pass is retried with backoff.
2. Its state is part of ``health`` (``transparency.publish``: target, published and local
   sizes, lag, failures, the last error) and of ``/metrics``.
3. At stop, after the audit log's last checkpoint is signed, one last pass publishes it (a
   failure is logged, never fatal): a cleanly stopped replica's bucket holds all its log.
"""

from __future__ import annotations

from typing import Any

from daemon.audit._transparency import TransparencyConfig
from daemon.retention._publish import Publisher, PublishError, PublishLoop, open_target
from daemon.tlog import TransparencyLog
from daemon.wire import _logs as logs

__all__ = ["publish_status", "start_publishing", "stop_publishing"]

MAX_INTERVAL = 5.0


def start_publishing(
    config: TransparencyConfig | None, log: TransparencyLog | None
) -> PublishLoop | None:
    """Rule 1: the running loop, or None when the log is not published."""
    if config is None or log is None or config.publish is None:
        return None
    try:
        target = open_target(config.publish)
    except PublishError as error:  # a spec the configuration already checked; the S3 client
        logs.error("publish_failed", f"publishing disabled: {error}", target=config.publish)
        return None
    loop = PublishLoop(
        Publisher(log.directory, target, entry_bundles=config.entry_bundles),
        interval=min(config.checkpoint_interval, MAX_INTERVAL),
    )
    loop.start()
    return loop


def stop_publishing(loop: PublishLoop | None) -> None:
    """Rule 3: stop the loop, then one last pass."""
    if loop is None:
        return
    loop.stop()
    if not loop.pass_once():
        status = loop.status()
        logs.error(
            "publish_failed",
            f"the last checkpoint was not published to {status.target}: {status.last_error}",
            target=status.target,
            error=status.last_error,
        )


def publish_status(
    transparency: dict[str, Any] | None, loop: PublishLoop | None
) -> dict[str, Any] | None:
    """Rule 2: the ``transparency`` health member, with ``publish`` when published."""
    if transparency is None or loop is None:
        return transparency
    return {**transparency, "publish": loop.status().to_dict()}
