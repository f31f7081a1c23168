"""Reloading the configuration on SIGHUP: a new *generation* (``evidenced serve``;
docs/operations.md).

Rules, in this order, for one reload:

1. Requests coalesce (:meth:`Reloader.request`): a SIGHUP while no reload runs starts one; a
   SIGHUP while one is being built or applied marks one more as pending, and any number of
   further SIGHUPs collapse into that one. At most one reload is built at a time.
2. The configuration file is read and checked exactly as at start (the command line's
   overrides applied again; in a worker thread, so the event loop keeps serving): the shape
   and every value, every session's mechanisms built (mechanism options included), and the
   listener checks of :mod:`daemon.config._checks`
   (exposure, inherited sockets included; the TLS certificates and the tokens file read and
   checked again: a missing, malformed or loose file — a symlink to a 0666 file — refuses the
   reload as it refuses a start). Any failure refuses the whole reload: nothing of it is
   applied.
3. What a reload changes: the sessions (their mechanisms, options and bounds), the tokens
   and the TLS certificates of both listeners (file contents; their paths are ``[server]``
   keys), and the ``/metrics`` session series. A change to anything else — ``[server]``
   (addresses, limits, the worker count, file paths), ``[http]``, ``[audit]``,
   ``[transparency]`` — needs a restart: the reload is refused naming the keys. So is a
   change of a session's retention (``retain``/``store``: the stores are opened at start).
4. The new sessions get a new pool of evaluation workers, forked before anything is swapped.
   Then, in one step of the event loop, the sessions, session list, evaluator, security and
   metric series are replaced: a request admitted after the swap is checked against the new
   bounds and tokens and evaluated by the new mechanisms; one admitted before finishes on
   the generation that admitted it (the pipeline finds the evaluator of the generation its
   session belongs to). Connections are never closed by a reload.
5. An old generation's workers are closed as soon as every request it admitted has ended
   (they are the capacity borrowers at the swap) and its last job answered — at the latest
   after the idle timeout plus the request deadline. While :data:`MAX_DRAINING` old
   generations still drain, the next reload waits for one to finish before forking, so the
   process count stays bounded whatever the rate of SIGHUPs.
6. Both outcomes are one audit line, ``config_reload``: ``status`` ``APPLIED`` (with
   ``source``, the new ``sessions`` list and ``session_config``, as ``daemon_start`` has them)
   or ``REFUSED`` (with ``source`` and ``reason``); the message goes to stderr too, and the
   old configuration keeps serving after a refusal. A worker of a multi-process daemon
   (``record=False``) writes no line: its parent wrote the one line for all of them.
   ``sd_notify`` hears ``RELOADING=1`` then ``READY=1`` (systemd's ``Type=notify-reload``).
7. Generations. One process numbers its generations itself (each applied reload adds one).
   A worker of a multi-process daemon is asked for the parent's generation
   (:meth:`Reloader.request` with ``generation``, from its link): once applied it serves that
   number, and either outcome is reported back (``report``: the generation it serves, the
   status, the reason), the acknowledgement the parent waits for before it writes its line
   (:mod:`daemon.server._supervisor` rule 3a).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import attrs
import trio

from daemon.config._checks import Checked, check_listeners
from daemon.config._config import ConfigError, DaemonConfig
from daemon.config._describe import describe_sessions
from daemon.config._hosting import HostedSession, ServerConfig
from daemon.config._security import ExposureRefused
from daemon.config._tls import TlsConfigError
from daemon.config._tokens import TokenFileError
from daemon.server._evaluation import Evaluator, worker_job_handler
from daemon.server._pipeline import Pipeline
from daemon.server._server import Server, _remove_stale_snapshots
from daemon.server._workers import WorkerPool
from daemon.wire._errors import PeerError

__all__ = [
    "MAX_DRAINING",
    "ReloadRefused",
    "Reloader",
    "prepare",
    "reload_fields",
    "restart_keys",
]

#: Old generations whose workers may drain at once (rule 5).
MAX_DRAINING: Final = 1
_POLL: Final = 0.02


class ReloadRefused(PeerError):
    """The new configuration cannot be applied; the message says why."""


def restart_keys(running: ServerConfig, new: ServerConfig) -> list[str]:
    """The :class:`ServerConfig` fields that differ: a reload cannot apply them (rule 3)."""
    return sorted(
        field.name
        for field in attrs.fields(ServerConfig)
        if getattr(new, field.name) != getattr(running, field.name)
    )


def prepare(
    load: Callable[[], tuple[DaemonConfig, ServerConfig]],
    running: ServerConfig,
    sessions: Mapping[str, HostedSession],
    check: Callable[[ServerConfig], Checked],
) -> tuple[DaemonConfig, list[HostedSession], Checked]:
    """Rules 2-3 without forking: the new configuration read and checked against the
    ``running`` one and its ``sessions``; ``check`` runs the listener checks. Raises
    :class:`ConfigError` or :class:`ReloadRefused` naming what is wrong."""
    try:
        config, server_config = load()
    except OSError as error:  # the file is gone or unreadable: refused, never a crash
        raise ReloadRefused(f"cannot read the configuration: {error.strerror or error}") from None
    except ValueError as error:  # ConfigError, or a command-line override it refuses
        raise ReloadRefused(str(error)) from None
    changed = restart_keys(running, server_config)
    if changed:
        raise ReloadRefused(f"{', '.join(changed)} changed: that takes a restart")
    try:
        checked = check(server_config)
    except (ExposureRefused, TlsConfigError, TokenFileError) as error:
        raise ReloadRefused(str(error)) from None
    built, _ = config.build_sessions()
    old = {name: session.retention for name, session in sessions.items()}
    for session in built:
        if session.retention != old.get(session.name):
            raise ReloadRefused(
                f"session {session.name!r}: its retention changed: that takes a restart"
            )
    return config, built, checked


def reload_fields(sessions: Sequence[HostedSession]) -> dict[str, Any]:
    """An applied ``config_reload`` line's ``sessions`` and ``session_config`` (rule 6)."""
    hosted = {session.name: session for session in sessions}
    return {
        "sessions": describe_sessions(hosted),
        "session_config": {
            name: dict(session.recipe)
            for name, session in sorted(hosted.items())
            if session.recipe is not None
        },
    }


@attrs.frozen
class _Generation:
    config: DaemonConfig
    sessions: list[HostedSession]
    evaluator: Evaluator
    checked: Checked


class Reloader:
    """The reloads of one serving process (module rules); the service assembly
    (:mod:`daemon.server._service`) runs it and calls :meth:`request` on SIGHUP.

    ``load`` returns the new :class:`DaemonConfig` and its :class:`ServerConfig` with the
    command line's overrides applied (``ConfigError`` when invalid); ``say(level, status,
    line)`` writes the ``config_reload`` event: ``info`` for an ``APPLIED`` reload,
    ``warning`` for a ``REFUSED`` one, ``error`` when its audit line could not be written;
    ``notify`` is the service manager's (``sd_notify``); ``record``: write the
    ``config_reload`` line (rule 6)."""

    def __init__(
        self,
        server: Server,
        load: Callable[[], tuple[DaemonConfig, ServerConfig]],
        *,
        source: str,
        say: Callable[[str, str, str], None],
        notify: Callable[[str], object],
        record: bool = True,
        report: Callable[[int, str, str | None], Awaitable[object]] | None = None,
    ) -> None:
        self.server = server
        self.load = load
        self.source = source
        self.say = say
        self.notify = notify
        self.record = record
        #: Rule 7: told (generation served, ``APPLIED``/``REFUSED``, reason) after each reload.
        self.report = report
        self.applied = 0
        self.refused = 0
        self._nursery: trio.Nursery | None = None
        self._pools: list[WorkerPool] = []
        self._draining: list[Evaluator] = []
        self._wanted = trio.Event()
        #: Rule 7: the generation a worker's parent asked for (None: number them here).
        self._target: int | None = None

    def request(self, generation: int | None = None) -> None:
        """Ask for a reload (rule 1), to the parent's ``generation`` when given (rule 7);
        returns at once. Safe to call any number of times."""
        if generation is not None:
            self._target = max(generation, self._target or 0)
        self._wanted.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Install the reloader and run requested reloads one at a time; hold the nursery
        where old generations drain. When cancelled (the server stopped), every pool a reload
        forked is closed."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                while True:
                    await self._wanted.wait()
                    self._wanted = trio.Event()  # a SIGHUP from here on is one more (rule 1)
                    await self.reload()
        finally:
            for pool in self._pools:
                pool.close()

    async def reload(self) -> None:
        """One reload (module rules); never raises."""
        self.notify("RELOADING=1")
        while len(self._draining) >= MAX_DRAINING:  # rule 5: bounded processes
            await trio.sleep(_POLL)
        target = self._target  # rule 7: what a later request asks for is a later reload's
        try:
            generation = await self._prepare()
        except (ConfigError, ReloadRefused) as error:
            self.refused += 1
            self.say(
                "warning",
                "REFUSED",
                f"SIGHUP: configuration not reloaded, the old one keeps serving: {error}",
            )
            if self.record:
                await self._record(status="REFUSED", reason=str(error))
            await self._report("REFUSED", str(error))
            self.notify("READY=1")
            return
        self._apply(generation, target)
        server = self.server
        self.say(
            "info",
            "APPLIED",
            f"SIGHUP: configuration reloaded from {generation.config.source}: "
            f"{sorted(server.sessions)}",
        )
        if self.record:
            await self._record(status="APPLIED", **reload_fields(generation.sessions))
        await self._report("APPLIED", None)
        self.notify("READY=1")

    async def _report(self, status: str, reason: str | None) -> None:
        """Rule 7: the outcome, to whoever asked for the generation."""
        if self.report is not None:
            await self.report(self.server.generation, status, reason)

    def _apply(self, generation: _Generation, target: int | None = None) -> None:
        """Rule 4: one step of the event loop, no checkpoint, so no request sees half."""
        server = self.server
        pipeline = server._pipeline
        old_sessions, old = server.sessions, server._evaluator
        new_sessions = {session.name: session for session in generation.sessions}
        session_list = describe_sessions(new_sessions)
        server.sessions, server._session_list, server._evaluator = (
            new_sessions,
            session_list,
            generation.evaluator,
        )
        server.apply_security(generation.checked)
        server.metrics.set_sessions(new_sessions)
        admitted: set[object] = set()
        if pipeline is not None:
            admitted = set(pipeline.capacity.statistics().borrowers)
            if old is not None:
                pipeline.previous.append((old_sessions, old))
            pipeline.sessions, pipeline.session_list, pipeline.evaluator = (
                new_sessions,
                session_list,
                generation.evaluator,
            )
        self.applied += 1
        # Rule 7: the parent's number for a worker, else the next one.
        server.generation = target or server.generation + 1
        if old is not None and self._nursery is not None:
            self._draining.append(old)
            settle = server.config.idle_timeout + server.config.request_deadline
            self._nursery.start_soon(self._drain, old, pipeline, admitted, settle)

    async def _prepare(self) -> _Generation:
        """Rule 2: everything read and checked (in a thread: reading the file and building
        the mechanisms take ~0.1 s that the event loop keeps serving through), then the new
        workers forked (in the event loop's thread, as at start); nothing swapped."""
        server = self.server
        running, hosted, inherited = server.config, dict(server.sessions), list(server.inherited)
        config, sessions, checked = await trio.to_thread.run_sync(
            prepare,
            self.load,
            running,
            hosted,
            lambda new: check_listeners(new, inherited),
        )
        current = server._evaluator
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
        return _Generation(config, sessions, evaluator, checked)

    async def _drain(
        self, old: Evaluator, pipeline: Pipeline | None, admitted: set[object], settle: float
    ) -> None:
        """Rule 5: close ``old``'s workers once every request it ``admitted`` has ended (at
        the latest after ``settle`` seconds: the idle timeout for its evidence plus the
        request deadline for its evaluation bound any such request) and its last job has
        answered."""
        try:
            with trio.move_on_after(settle):
                while pipeline is not None and admitted:
                    admitted &= set(pipeline.capacity.statistics().borrowers)
                    if admitted:
                        await trio.sleep(_POLL)
            while old.pool.busy:
                await trio.sleep(_POLL)
            if pipeline is not None:
                pipeline.previous = [entry for entry in pipeline.previous if entry[1] is not old]
            old.pool.close()
        finally:
            self._draining.remove(old)
            self._pools = [pool for pool in self._pools if pool is not old.pool]

    async def _record(self, **fields: Any) -> None:
        audit = self.server.audit
        if audit is None:
            return
        try:
            await audit.record("config_reload", source=self.source, **fields)
        except Exception as error:  # the audit log's own fault handling reports it
            self.say("error", str(fields.get("status")), f"config_reload not recorded: {error}")
