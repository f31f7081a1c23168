"""The daemon shipping its decision logs (``[[audit.sinks]]``, ``docs/audit-log.md``
"Shipping decision logs"; the machinery is :mod:`daemon.audit._shipper`).

Rules (the contract):

1. The process that writes the audit log ships it: the one server, or the parent (sequencer)
   of ``--workers N``. It starts the sinks once the log is open and the evaluation workers
   are forked, each in a thread of its own reading the log's files up to its durable
   ``seq``: never on the request path, never in the group commit.
2. Every event's labels: ``[audit] labels`` and the sink's own, ``id`` (default ``<host
   name>/<log tag>`` of the transparency origin, or of the default origin of the audit log's
   path) and ``version`` (:func:`daemon.audit._shipping_config.instance_labels`).
3. ``health``'s ``audit`` has ``sinks``: each sink's :meth:`~daemon.audit._shipper.Shipper.
   status` (``[]`` without sinks); under ``--workers`` the sequencer's, as every worker
   reports it. ``/metrics`` has their series (:mod:`daemon.server._metrics`).
4. At stop, after the audit log's last line is durable, each sink ships what is left within
   its ``timeout`` and writes its cursor (in a thread: the event loop is not blocked).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from daemon import __version__
from daemon.audit._audit import AuditLog
from daemon.audit._shipper import Shipping
from daemon.audit._shipping_config import SinkConfig, instance_labels
from daemon.config._hosting import ServerConfig
from daemon.tlog import default_origin

__all__ = ["shipping_status", "start_shipping", "stop_shipping"]

USER_AGENT = f"evidenced/{__version__}"


def start_shipping(config: ServerConfig, audit: AuditLog) -> Shipping | None:
    """Rule 1: the running sinks, or None when none is configured."""
    if not config.sinks:
        return None
    path = Path(config.audit_path)
    origin = (
        config.transparency.origin_for(path)
        if config.transparency is not None
        else default_origin(path)
    )

    def labels_of(sink: SinkConfig) -> dict[str, str]:
        return instance_labels(sink.labels, origin, __version__)

    return Shipping.start(config.sinks, path, lambda: audit.durable.seq, labels_of, USER_AGENT)


async def stop_shipping(shipping: Shipping | None) -> None:
    """Rule 4."""
    if shipping is not None:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(shipping.stop)


def shipping_status(
    audit: dict[str, Any] | None, shipping: Shipping | None
) -> dict[str, Any] | None:
    """Rule 3: the ``audit`` health member with ``sinks``."""
    if audit is None:
        return None
    return {**audit, "sinks": [] if shipping is None else shipping.status()}
