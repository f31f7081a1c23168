"""Reloading the configuration on SIGHUP (``evidenced serve``; docs/operations.md).

Rules, in this order, for one reload:

1. The configuration file is read and checked exactly as at start (:func:`load_config`, the
   command line's overrides applied again), and every session's mechanisms are built. Any
   failure refuses the reload.
2. Only sessions reload. A change to anything else — ``[server]`` (addresses, limits, the
   worker count), ``[audit]``, ``[transparency]`` — needs a restart: the reload is refused
   naming the keys. So is a change of a session's retention (``retain``/``store``: the stores
   are opened at start).
3. The new sessions get a new pool of evaluation workers, forked before anything is swapped.
   Then, in one step of the event loop, the server's (and its pipeline's) sessions, session
   list and evaluator are replaced: a request admitted after the swap is checked against the
   new bounds and evaluated by the new mechanisms; one admitted before finishes on the old
   (the pipeline finds the evaluator of the generation its session belongs to). Connections
   are never closed by a reload. The old workers are closed once every request the old
   generation admitted has ended (after the idle timeout plus the request deadline, and its
   last job).
4. Both outcomes are one audit line, ``config_reload``: ``status`` ``APPLIED`` (with
   ``source``, the new ``sessions`` list and ``session_config``, as ``daemon_start`` has them)
   or ``REFUSED`` (with ``source`` and ``reason``); the message goes to stderr too, and the
   old configuration keeps serving after a refusal. ``sd_notify`` hears ``RELOADING=1`` then
   ``READY=1`` (systemd's ``Type=notify-reload``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import trio

from daemon.config._config import ConfigError, DaemonConfig
from daemon.config._describe import describe_sessions
from daemon.config._hosting import HostedSession, ServerConfig
from daemon.errors import PeerError
from daemon.server._evaluation import Evaluator, worker_job_handler
from daemon.server._pipeline import Pipeline
from daemon.server._server import Server, _remove_stale_snapshots
from daemon.server._workers import WorkerPool

__all__ = ["ReloadRefused", "Reloader"]


class ReloadRefused(PeerError):
    """The new configuration cannot be applied; the message says why."""


class Reloader:
    """``server.reloader`` for ``evidenced serve`` (module rules).

    ``load`` returns the new :class:`DaemonConfig` and its :class:`ServerConfig` with the
    command line's overrides applied (``ConfigError`` when invalid); ``say`` writes one stderr
    line; ``notify`` is the service manager's (``sd_notify``)."""

    def __init__(
        self,
        server: Server,
        load: Callable[[], tuple[DaemonConfig, ServerConfig]],
        *,
        source: str,
        say: Callable[[str], None],
        notify: Callable[[str], object],
    ) -> None:
        self.server = server
        self.load = load
        self.source = source
        self.say = say
        self.notify = notify
        self.applied = 0
        self.refused = 0
        self._nursery: trio.Nursery | None = None
        self._pools: list[WorkerPool] = []

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery where old worker pools are drained; install the reloader. When it
        is cancelled (the server stopped), every pool a reload forked is closed."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.server.reloader = self.reload
                task_status.started()
                await trio.sleep_forever()
        finally:
            self.server.reloader = None
            for pool in self._pools:
                pool.close()

    async def reload(self) -> None:
        """One reload (module rules); never raises."""
        self.notify("RELOADING=1")
        try:
            config, sessions, evaluator = self._prepare()
        except (ConfigError, ReloadRefused) as error:
            self.refused += 1
            self.say(f"SIGHUP: configuration not reloaded, the old one keeps serving: {error}")
            await self._record(status="REFUSED", reason=str(error))
            self.notify("READY=1")
            return
        server = self.server
        pipeline = server._pipeline
        old_sessions, old = server.sessions, server._evaluator
        new_sessions = {session.name: session for session in sessions}
        session_list = describe_sessions(new_sessions)
        # One step of the event loop: no request sees half of it (rule 3).
        server.sessions, server._session_list, server._evaluator = (
            new_sessions,
            session_list,
            evaluator,
        )
        if pipeline is not None:
            if old is not None:
                pipeline.previous.append((old_sessions, old))
            pipeline.sessions, pipeline.session_list, pipeline.evaluator = (
                new_sessions,
                session_list,
                evaluator,
            )
        self.applied += 1
        if old is not None and self._nursery is not None:
            settle = server.config.idle_timeout + server.config.request_deadline
            self._nursery.start_soon(_drain, old, pipeline, settle)
        self.say(f"SIGHUP: configuration reloaded from {config.source}: {sorted(server.sessions)}")
        await self._record(
            status="APPLIED",
            sessions=server._session_list,
            session_config={
                name: dict(session.recipe)
                for name, session in sorted(server.sessions.items())
                if session.recipe is not None
            },
        )
        self.notify("READY=1")

    def _prepare(self) -> tuple[DaemonConfig, list[HostedSession], Evaluator]:
        config, server_config = self.load()
        running = self.server.config
        changed = sorted(
            field.name
            for field in attrs.fields(ServerConfig)
            if getattr(server_config, field.name) != getattr(running, field.name)
        )
        if changed:
            raise ReloadRefused(f"{', '.join(changed)} changed: that takes a restart")
        sessions, _ = config.build_sessions()
        old = {name: session.retention for name, session in self.server.sessions.items()}
        for session in sessions:
            if session.retention != old.get(session.name):
                raise ReloadRefused(
                    f"session {session.name!r}: its retention changed: that takes a restart"
                )
        current = self.server._evaluator
        pool = WorkerPool(
            current.pool.size if current is not None else running.worker_count(),
            worker_job_handler({session.name: session for session in sessions}),
            on_reaped=lambda pid: _remove_stale_snapshots(pid),
        )
        self._pools.append(pool)
        pool.start()
        evaluator = Evaluator(
            pool, inline_max_bytes=running.inline_max_bytes, deadline=running.request_deadline
        )
        return config, sessions, evaluator

    async def _record(self, **fields: Any) -> None:
        audit = self.server.audit
        if audit is None:
            return
        try:
            await audit.record("config_reload", source=self.source, **fields)
        except Exception as error:  # the audit log's own fault handling reports it
            self.say(f"config_reload not recorded: {error}")


async def _drain(old: Evaluator, pipeline: Pipeline | None, settle: float) -> None:
    """Close the old generation's workers once every request it admitted has ended (rule 3):
    after ``settle`` seconds (the idle timeout for its evidence plus the request deadline for
    its evaluation bound any such request), and its last job has answered."""
    await trio.sleep(settle)
    while old.pool.busy:
        await trio.sleep(0.05)
    if pipeline is not None:
        pipeline.previous = [entry for entry in pipeline.previous if entry[1] is not old]
    old.pool.close()
