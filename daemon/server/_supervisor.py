"""``evidenced serve --workers N``: N serving processes, one audit log (docs/adr/0015).

The parent binds the listeners, owns the audit log (and transparency log) and runs the
sequencer (:mod:`daemon.server._sequencer`); N worker processes accept on the same listening
sockets, read requests, evaluate and answer, each a :class:`~daemon.server._server.Server` whose
audit log is an :class:`~daemon.server._audit_client.AuditClient`.

Rules (the contract):

1. Start, in this order: bind the listeners (TCP, Unix, HTTP; or the inherited systemd
   sockets) in the parent, before any fork; fork the *spawner* (a single-threaded process
   that never runs an event loop and forks the workers on request, so a worker restarted
   later starts from the same clean state as the first ones); open the audit log and the
   transparency log; record ``daemon_start`` (the parent's pid); start the N workers; report
   readiness once every worker said it serves (then ``READY=1`` and the watchdog, as in one
   process). The listener checks (:mod:`daemon.config._checks`: exposure, inherited sockets
   included, the TLS and token files) and the evidence stores are checked in the parent
   first, so they fail the start as in one process (with the same codes). A worker that
   cannot start (it exits before saying so) stops the start: ``daemon_stop`` is written,
   the workers stopped, the start fails with :class:`WorkersFailed`.
2. A worker whose stream ends while the daemon is not draining (it crashed or was killed)
   is restarted in the same slot, after :data:`RESTART_DELAY` seconds (doubling, up to
   :data:`RESTART_DELAY_MAX`, while it keeps dying within :data:`STABLE_SECONDS`). Every line
   it sent was committed and acknowledged only once durable; its clients reconnect to the
   listening socket, which never closed.
3. SIGINT/SIGTERM (received by the service assembly, :mod:`daemon.server._service`, and
   applied by the signal policy of :mod:`daemon.server._signals`, as in one process: it calls
   :meth:`Supervisor.drain`, then :meth:`Supervisor.stop_workers`): the parent stops
   restarting and sends SIGTERM to every worker (a second signal: SIGTERM again, which makes
   them cancel in-flight requests, as in one process); each drains as one process does and
   exits; once all are gone (or ``shutdown_grace`` + 5 s passed: then SIGKILL) the parent
   writes one ``daemon_stop`` with the workers' summed counters (unless an audit outage
   outlasts one last try: then the close reports it, as in one process), closes the logs and
   removes the Unix socket file.
3a. SIGHUP (with a configuration file; the signal policy calls
   :meth:`Supervisor.request_reload`): the parent reads and checks the new configuration as
   one process does (:func:`daemon.server._reload.prepare`: restart-only keys, the TLS and
   tokens files, every session built), coalescing SIGHUPs as one process does. A refusal is
   the one ``config_reload`` ``REFUSED`` line, and no worker changes. Once it is accepted the
   parent takes the next generation and asks every serving worker over its link to reload to
   it (``_sequencer`` rule 7); each reloads as one process does (its own checks again,
   including the exposure check on its inherited listeners; new evaluation workers; no line of
   its own) and acknowledges. ``config_reload`` ``APPLIED`` is written only once every
   running worker serves the new generation — so every request after the line, on any
   worker, is authorised against the new tokens (``_connection`` rule 3). A worker that
   refuses it (its own checks fail: the file changed between the parent's reading and its
   own) or does not acknowledge within :func:`reload_deadline` seconds is killed (stderr:
   ``config_reload_worker_failed``) and, once it is gone, restarted as rule 2 says, on the new
   generation; the line is written once it is gone. A worker started later (a restart) is
   told the generation and loads the configuration file itself. A worker that was starting
   when a reload was applied reports the older generation it started on once it serves, and
   is asked again (once per generation), so every worker ends on the parent's generation; the
   parent's line waits for it too. Without a configuration file, SIGHUP is ignored with a
   message.
4. Workers ignore SIGINT (the parent decides) and stop when the parent's stream ends. A worker
   starts through the service assembly as one process does
   (:func:`daemon.server._service.serve_one`).
5. ``health`` (answered by whichever worker a client reaches) aggregates: the counters and
   connection figures summed over the workers, ``workers`` (each worker's figures, pid,
   restarts, heartbeat), the sequencer's audit and transparency status.
6. A worker silent past the heartbeat deadline is killed, then restarted by rule 2
   (:mod:`daemon.server._heartbeat`). ``/metrics`` is per process
   (the worker that answered; docs/operations.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket as stdlib_socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import trio

from daemon.audit._audit import AuditLog, AuditLogError, Durability
from daemon.audit._transparency import attach, open_transparency
from daemon.config._hosting import HostedSession, ServerConfig
from daemon.retention._publish import PublishLoop
from daemon.server._audit_client import PUSH_INTERVAL
from daemon.server._heartbeat import Heartbeat
from daemon.server._listeners import open_listeners
from daemon.server._publishing import start_publishing, stop_publishing
from daemon.server._sequencer import Link, Sequencer
from daemon.server._shipping import start_shipping, stop_shipping
from daemon.server._spawner import Spawner
from daemon.tlog import TransparencyLog
from daemon.wire import _logs as logs
from daemon.wire._errors import ServiceError

__all__ = ["Bound", "Supervisor", "WorkersFailed", "bind"]

#: Rule 3a: seconds a worker's reload may take beyond the drain of its older generation.
RELOAD_BUILD_SECONDS: Final = 30.0
RESTART_DELAY: Final = 0.1
_POLL: Final = 0.01
RESTART_DELAY_MAX: Final = 5.0
STABLE_SECONDS: Final = 10.0


class WorkersFailed(ServiceError, RuntimeError):
    """The workers could not be started (rule 1)."""


def reload_deadline(config: ServerConfig) -> float:
    """Rule 3a: how long a worker may take to acknowledge a reload: its own reload waits for
    its older generation to drain (at most ``idle_timeout`` + ``request_deadline``,
    ``_reload`` rule 5), then builds (:data:`RELOAD_BUILD_SECONDS`)."""
    return config.idle_timeout + config.request_deadline + RELOAD_BUILD_SECONDS


@attrs.define
class Bound:
    """The listening sockets, bound once in the parent (rule 1)."""

    binary: list[stdlib_socket.socket]
    http: list[stdlib_socket.socket]
    listen: dict[str, str | None]
    unix_path: str | None
    owns_unix: bool

    def close_sockets(self) -> None:
        for sock in (*self.binary, *self.http):
            sock.close()

    def close(self) -> None:
        self.close_sockets()
        if self.owns_unix and self.unix_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.unix_path)


def _detach(listener: trio.SocketListener) -> stdlib_socket.socket:
    trio_socket = listener.socket
    family, kind = trio_socket.family, trio_socket.type
    return stdlib_socket.socket(family, kind, fileno=trio_socket.detach())


def bind(config: ServerConfig, inherited: Sequence[stdlib_socket.socket]) -> Bound:
    """Rule 1's first step, before any fork (a short event loop of its own)."""

    async def opening() -> Bound:
        listening = await open_listeners(config, inherited)
        http: list[trio.SocketListener] = []
        listen: dict[str, str | None] = dict(listening.addresses())
        if config.http is not None:
            http = await trio.open_tcp_listeners(config.http.listen[1], host=config.http.listen[0])
            host, port = http[0].socket.getsockname()[:2]
            listen["http"] = f"{host}:{port}"
        return Bound(
            [_detach(listener) for listener in listening.listeners],
            [_detach(listener) for listener in http],
            listen,
            listening.unix_path,
            owns_unix=not inherited,
        )

    return trio.run(opening)


# --------------------------------------------------------------------------- the parent


@attrs.define
class _Slot:
    link: Link | None = None
    restarts: int = 0
    started: float = 0.0
    delay: float = RESTART_DELAY
    #: The generation this slot's serving worker was last asked to reload to (rule 3a).
    caught_up: int = 0


class Supervisor:
    """The parent of a multi-process daemon (module rules)."""

    def __init__(
        self,
        sessions: Sequence[HostedSession],
        config: ServerConfig,
        bound: Bound,
        count: int,
        spawner: Spawner,
        *,
        describe: Callable[[], dict[str, Any]],
    ) -> None:
        self.sessions = list(sessions)
        self.config = config
        self.bound = bound
        self.count = count
        self.spawner = spawner
        self.describe = describe
        self.audit: AuditLog | None = None
        self.transparency: TransparencyLog | None = None
        self.publisher: PublishLoop | None = None
        self.sequencer: Sequencer | None = None
        self._slots = [_Slot() for _ in range(count)]
        self._draining = False
        self._serving = False  # every first worker said it serves (rule 1 is over)
        self._nursery: trio.Nursery | None = None
        self.heartbeat = Heartbeat()
        #: Called with ``"STOPPING=1"`` when a signal begins the drain (``sd_notify``).
        self.notify: Callable[[str], object] = lambda state: None
        #: Whether a listener is served exposed under ``insecure_listen`` (daemon.config._checks).
        self.exposed = False
        #: Rule 3a: reads and checks the configuration anew (None: no file to reload).
        self.prepare_reload: Callable[[], list[HostedSession]] | None = None
        self.source = ""
        #: Reloads applied (the generation a worker started now serves).
        self.generation = 0
        self.reloads_refused = 0
        self._reload_wanted = trio.Event()
        self._drain_wanted = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        config = self.config
        audit = AuditLog.open(
            config.audit_path,
            durability=config.audit_durability,
            overflow=config.audit_overflow,
            max_pending=config.audit_max_pending,
            rotate_bytes=config.audit_rotate_bytes,
        )
        self.audit = audit
        try:
            if config.transparency is not None:
                self.transparency = open_transparency(
                    config.transparency,
                    Path(config.audit_path),
                    audit.durable.seq,
                    sync=audit.durability is Durability.FSYNC,
                )
                attach(audit, self.transparency)
                self.publisher = start_publishing(config.transparency, self.transparency)
            self.sequencer = Sequencer(audit, self.transparency)
            self.sequencer.publisher = self.publisher
            # The parent owns the log, so it ships it (daemon.server._shipping rule 1).
            self.sequencer.shipping = start_shipping(config, audit)
            async with trio.open_nursery() as audit_nursery:
                await audit_nursery.start(audit.run)
                try:
                    await self._serve(audit, task_status)
                finally:
                    with trio.CancelScope(shield=True):
                        await audit.close()
        finally:
            audit.close_sync()
            stop_publishing(self.publisher)  # the last checkpoint too
            if self.sequencer is not None:
                await stop_shipping(self.sequencer.shipping)

    async def _serve(self, audit: AuditLog, task_status: trio.TaskStatus[None]) -> None:
        await audit.record("daemon_start", **self.describe())
        stopped = False
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for index in range(self.count):
                    await self._start(index)
                with trio.fail_after(max(30.0, self.config.request_deadline)):
                    for slot in self._slots:
                        assert slot.link is not None
                        await _ready_or_gone(slot.link)
                if not all(s.link is not None and s.link.ready.is_set() for s in self._slots):
                    self.stop_workers()
                    raise WorkersFailed("a worker exited before it could serve (see above)")
                nursery.start_soon(self._push_state)
                nursery.start_soon(self._reloads, audit)
                nursery.start_soon(self.heartbeat.watch, self._links, lambda: self._draining)
                self._serving = True
                task_status.started()
                await self._drain_wanted.wait()
                await self._drain(nursery)
            stopped = True
        finally:
            self._draining = True
            with trio.CancelScope(shield=True):
                assert self.sequencer is not None
                # As one process: during an outage one last try, else no daemon_stop (the
                # close then reports it, and serve exits 70 saying so).
                with contextlib.suppress(AuditLogError), trio.move_on_after(2):
                    await audit.recover()
                    await audit.record(
                        "daemon_stop",
                        decisions=self.sequencer.retired["decisions"],
                        refusals=self.sequencer.retired["refusals"],
                    )
            if not stopped:
                self._kill_workers()

    # The three calls of the signal policy (daemon.server._signals), made by the service
    # assembly (daemon.server._service), which receives the signals.

    def drain(self) -> None:
        """Rule 3: begin the drain (idempotent)."""
        self._drain_wanted.set()

    def stop_workers(self) -> None:
        """Rule 3: SIGTERM to every live worker (a second one hurries their drain)."""
        for slot in self._slots:
            if slot.link is not None and slot.link.alive:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.link.pid, signal.SIGTERM)

    def request_reload(self) -> bool:
        """Rule 3a: ask for a reload; False when there is no configuration to reload."""
        if self.prepare_reload is None:
            return False
        if not self._draining:
            self._reload_wanted.set()
        return True

    async def _reloads(self, audit: AuditLog) -> None:
        """Rule 3a: one reload at a time; SIGHUPs during one collapse into one more."""
        from daemon.config._config import ConfigError
        from daemon.server._reload import ReloadRefused, reload_fields

        while True:
            await self._reload_wanted.wait()
            self._reload_wanted = trio.Event()
            if self.prepare_reload is None or self._draining:
                continue
            self.notify("RELOADING=1")
            try:  # in a thread: the sequencer keeps committing lines meanwhile
                sessions = await trio.to_thread.run_sync(self.prepare_reload)
            except (ConfigError, ReloadRefused) as error:
                self.reloads_refused += 1
                logs.warning(
                    "config_reload",
                    f"SIGHUP: configuration not reloaded, the old one keeps serving: {error}",
                    status="REFUSED",
                    workers=self.count,
                )
                await self._record_reload(audit, status="REFUSED", reason=str(error))
                self.notify("READY=1")
                continue
            self.sessions = sessions
            self.generation += 1
            await self._reload_workers(self.generation)
            await self._record_reload(audit, status="APPLIED", **reload_fields(sessions))
            logs.info(
                "config_reload",
                f"SIGHUP: configuration reloaded from {self.source}: "
                f"{sorted(s.name for s in sessions)} ({self.count} workers)",
                status="APPLIED",
                workers=self.count,
                sessions=sorted(s.name for s in sessions),
            )
            self.notify("READY=1")

    async def _reload_workers(self, generation: int) -> None:
        """Rule 3a: every serving worker asked to reload to ``generation``; returns once every
        running worker serves it, a worker that refused it or did not acknowledge in time
        having been killed (and gone: its replacement starts on ``generation``)."""
        for slot in self._slots:
            link = slot.link
            if link is not None and link.alive and link.ready.is_set():
                slot.caught_up = generation
                await link.reload(generation)

        def behind() -> list[Link]:
            return [
                link
                for link in self._links()
                if link.alive and link.generation < generation and link.refusal is None
            ]

        with trio.move_on_after(reload_deadline(self.config)):
            while behind():  # a starting worker is caught up once it serves (_catch_up)
                await trio.sleep(_POLL)
        failed = [link for link in self._links() if link.alive and link.generation < generation]
        for link in failed:
            reason = link.refusal or (
                f"no acknowledgement within {reload_deadline(self.config):g} s"
            )
            logs.error(
                "config_reload_worker_failed",
                f"worker {link.index} (pid {link.pid}) did not apply generation {generation} "
                f"({reason}); killing it, it restarts on generation {generation}",
                worker=link.index,
                worker_pid=link.pid,
                generation=generation,
                reason=reason,
            )
            with contextlib.suppress(ProcessLookupError):
                os.kill(link.pid, signal.SIGKILL)
        with trio.move_on_after(10):  # the kernel closes a killed worker's connections
            for link in failed:
                await _ended(link)

    async def _record_reload(self, audit: AuditLog, **fields: Any) -> None:
        try:
            await audit.record("config_reload", source=self.source, **fields)
        except AuditLogError as error:  # the audit log's own fault handling reports it
            logs.error(
                "audit_write_failed",
                f"config_reload not recorded: {error}",
                path=str(audit.path),
                error=str(error),
            )

    async def _drain(self, nursery: trio.Nursery) -> None:
        """Rule 3: the workers stopped, then the nursery of their links cancelled."""
        self._draining = True
        self.spawner.stop()
        self.stop_workers()
        with trio.move_on_after(self.config.shutdown_grace + 5):
            for slot in self._slots:
                if slot.link is not None:
                    await _ended(slot.link)
        stuck = [s.link for s in self._slots if s.link is not None and s.link.alive]
        if stuck:
            logs.warning(
                "workers_killed_at_stop",
                f"{len(stuck)} worker(s) did not end within the shutdown grace; killing them",
                workers=[link.index for link in stuck],
                worker_pids=[link.pid for link in stuck],
            )
        self._kill_workers()
        for slot in self._slots:  # their streams end at exit
            if slot.link is not None:
                with trio.move_on_after(5):
                    await _ended(slot.link)
        nursery.cancel_scope.cancel()

    def _kill_workers(self) -> None:
        for slot in self._slots:
            if slot.link is not None and slot.link.alive:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.link.pid, signal.SIGKILL)

    async def _start(self, index: int) -> None:
        assert self._nursery is not None
        generation = self.generation
        pid, sock = await self.spawner.spawn(index, generation)
        slot = self._slots[index]
        slot.link = Link(index, pid, sock, generation)
        slot.started = time.monotonic()
        self._nursery.start_soon(self._watch, slot, slot.link)

    async def _watch(self, slot: _Slot, link: Link) -> None:
        """Serve one worker's link; restart the worker if it ends early (rule 2)."""
        assert self.sequencer is not None
        await self.sequencer.serve(link)
        if self._draining or not self._serving:  # a start that failed is rule 1's
            return
        logs.warning(
            "worker_restart",
            f"worker {link.index} (pid {link.pid}) exited; restarting it",
            worker=link.index,
            worker_pid=link.pid,
        )
        if time.monotonic() - slot.started < STABLE_SECONDS:
            slot.delay = min(slot.delay * 2, RESTART_DELAY_MAX)
        else:
            slot.delay = RESTART_DELAY
        await trio.sleep(slot.delay)
        if self._draining:
            return
        slot.restarts += 1
        await self._start(link.index)

    def _links(self) -> list[Link]:
        return [slot.link for slot in self._slots if slot.link is not None]

    def workers(self) -> list[dict[str, Any]]:
        return [
            {**link.entry(slot.restarts), **self.heartbeat.fields(link)}
            for slot in self._slots
            if (link := slot.link) is not None
        ]

    async def _catch_up(self) -> None:
        """Rule 3a: a serving worker on an older generation than the parent's (it was starting
        when a reload was applied) is asked to reload to it, once per generation."""
        for slot in self._slots:
            link = slot.link
            if (
                link is not None
                and link.alive
                and link.ready.is_set()
                and link.generation < self.generation
                and slot.caught_up < self.generation
                and not self._draining
            ):
                slot.caught_up = self.generation
                await link.reload(self.generation)

    async def _push_state(self) -> None:
        """Every worker gets the daemon's state (:meth:`Sequencer.state`); a worker left on an
        older generation is caught up (:meth:`_catch_up`)."""
        assert self.sequencer is not None
        while True:
            await self._catch_up()
            state = self.sequencer.state(self.workers())
            state["failure_reason"] = state["failure_reason"] or self.heartbeat.reason(
                self._links()
            )
            for slot in self._slots:
                link = slot.link
                if link is not None and link.alive:
                    await link.writer.send(["c", state])
            await trio.sleep(PUSH_INTERVAL)


async def _ready_or_gone(link: Link) -> None:
    while link.alive and not link.ready.is_set():
        await trio.sleep(_POLL)


async def _ended(link: Link) -> None:
    while link.alive:
        await trio.sleep(_POLL)
