"""The service assembly: one place that turns hosted sessions and a :class:`ServerConfig` into
a running service, for ``evidenced serve``, ``evidenced serve --workers N`` (the parent and each
worker) and the library's :func:`daemon.serve`.

Rules (the contract):

1. :class:`ServiceHooks` is everything around the server: the service manager's ``notify``
   (``sd_notify``; default: nothing), the watchdog interval (``WATCHDOG=1`` pings; default:
   none), and ``load`` with its ``source`` (read the configuration anew for a SIGHUP reload,
   :mod:`daemon.server._reload`; default: none, and SIGHUP is ignored with a message).
   :meth:`ServiceHooks.from_environment` is systemd's (``NOTIFY_SOCKET``, ``WATCHDOG_USEC``).
2. :func:`run_service` (no event loop running) serves until the service stops: one process
   (:func:`serve_one`) when ``config.serving_count()`` is 1, else the supervisor of
   :mod:`daemon.server._supervisor` with its N workers, each of which serves through
   :func:`serve_one` too. Either way, in this order: the listener checks and the start of
   :mod:`daemon.config._checks` and :class:`~daemon.server._server.Server`; ``on_ready``
   called once serving; ``READY=1`` with ``MAINPID`` and a ``STATUS``; then ``WATCHDOG=1``
   every interval while the event loop runs. It returns the :class:`Server` or the
   :class:`Supervisor` (its audit log's state), or raises why the start failed (never an
   exception group: the first cause).
3. Signals are received here and nowhere else (:mod:`daemon.server._signals`: which ones, when,
   and the one policy): the receiver is opened before the server (or the supervisor) starts
   and obeyed once it serves. One process: SIGHUP a reload, coalesced; SIGINT/SIGTERM
   ``STOPPING=1`` and the drain (:meth:`Server.shutdown`); a second one cancels the in-flight
   requests (:meth:`Server.cancel_in_flight`). The parent of workers: the same signals, every
   worker reloaded or drained together. A worker: SIGTERM as one process; its reloads are
   asked for by its parent over its link, not by a signal. A :class:`Server` whose config has
   no ``handle_signals`` receives none.
4. :func:`serve_one` is the one-process assembly as a task (the library's :func:`serve` and
   :func:`open_server` await it, and so does each worker of ``--workers N``): the server, its
   reloader when ``load`` is given (a worker's writes no ``config_reload`` line: its parent
   writes the one line; it reloads when its link asks, to the parent's generation, and
   reports the outcome back over it: :mod:`daemon.server._reload` rule 7), the watchdog, the
   signals, ``on_ready`` and ``READY=1``; ``task_status.started`` receives the
   :class:`Server`. It returns once the server has stopped.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket as stdlib_socket
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from daemon.audit._audit import Durability
from daemon.config._checks import Checked, check_listeners
from daemon.config._config import DaemonConfig
from daemon.config._hosting import HostedSession, ServerConfig
from daemon.config._security import LoadedSecurity
from daemon.server import _signals as signals
from daemon.server import _systemd as systemd
from daemon.server._audit_client import AuditClient
from daemon.server._reload import Reloader, prepare
from daemon.server._server import Server, WorkerRole
from daemon.server._spawner import Spawner, WorkerMain
from daemon.server._supervisor import Bound, Supervisor, bind
from daemon.wire import _logs as logs
from session import VerificationMechanism

__all__ = ["ServiceHooks", "open_server", "run_service", "serve", "serve_one"]


def _ignore(state: str) -> None:
    """No service manager to tell."""


def _say(level: str, status: str, line: str) -> None:
    """A reload's message, as the ``config_reload`` event at ``level`` (docs/operations.md)."""
    logs.log(level, "config_reload", line, status=status)


@attrs.frozen
class ServiceHooks:
    """Rule 1."""

    notify: Callable[[str], object] = _ignore
    watchdog: float | None = None
    load: Callable[[], tuple[DaemonConfig, ServerConfig]] | None = None
    source: str = ""
    say: Callable[[str, str, str], None] = _say

    @classmethod
    def from_environment(
        cls,
        *,
        load: Callable[[], tuple[DaemonConfig, ServerConfig]] | None = None,
        source: str = "",
        say: Callable[[str, str, str], None] = _say,
    ) -> ServiceHooks:
        """systemd's hooks: ``sd_notify`` and the watchdog of ``WATCHDOG_USEC``."""
        return cls(systemd.notify, systemd.watchdog_interval(), load, source, say)


def _first_cause(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def serve_one(
    server: Server,
    hooks: ServiceHooks = ServiceHooks(),
    on_ready: Callable[[Server], None] = lambda server: None,
    *,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Rule 4."""
    reloader = None
    if hooks.load is not None:
        reloader = Reloader(
            server,
            hooks.load,
            source=hooks.source,
            say=hooks.say,
            notify=hooks.notify,
            record=server.role is None,
        )
        if server.role is not None:  # a worker: its parent asks, over its link (rule 4)
            server.role.client.on_reload = reloader.request
            reloader.report = server.role.client.report_reload

    def reload() -> bool:
        if reloader is None:
            return False
        if not server.stopping:
            reloader.request()
        return True

    stop = trio.CancelScope()

    async def run_server(*, task_status: trio.TaskStatus[Server]) -> None:
        try:
            await server.run(task_status=task_status)
        finally:
            stop.cancel()

    wanted = signals.wanted(
        handle_signals=server.config.handle_signals, worker=server.role is not None
    )
    try:
        with signals.receive(wanted) as received, stop:
            async with trio.open_nursery() as nursery:
                await nursery.start(run_server)
                if reloader is not None:
                    await nursery.start(reloader.run)
                on_ready(server)
                _ready(nursery, hooks, f"serving {', '.join(sorted(server.sessions))}")
                if received is not None:
                    nursery.start_soon(
                        _obey(
                            received,
                            hooks,
                            drain=server.shutdown,
                            hurry=server.cancel_in_flight,
                            reload=reload,
                        )
                    )
                task_status.started(server)
                await trio.sleep_forever()
    except BaseExceptionGroup as group:  # never a group out of the assembly (rule 2)
        raise _first_cause(group) from None


def _ready(nursery: trio.Nursery, hooks: ServiceHooks, status: str) -> None:
    """Rule 2: ``READY=1`` once serving, then the watchdog."""
    hooks.notify(f"READY=1\nMAINPID={os.getpid()}\nSTATUS={status}")
    if hooks.watchdog is not None:
        nursery.start_soon(systemd.watchdog, hooks.notify, hooks.watchdog)


def _obey(
    received: AsyncIterator[int],
    hooks: ServiceHooks,
    *,
    drain: Callable[[], None],
    hurry: Callable[[], None],
    reload: Callable[[], bool],
    draining: str = "shutting down",
) -> Callable[[], Any]:
    """Rule 3: the one signal policy over what the receiver got, as a task."""
    return functools.partial(
        signals.obey,
        received,
        drain=drain,
        hurry=hurry,
        reload=reload,
        notify=hooks.notify,
        draining=draining,
    )


def run_service(
    sessions: Sequence[HostedSession],
    config: ServerConfig,
    hooks: ServiceHooks,
    *,
    inherited: Sequence[stdlib_socket.socket] = (),
    on_ready: Callable[[Server | Supervisor], None] = lambda service: None,
    serving: Callable[[], None] = lambda: None,
) -> Server | Supervisor:
    """Rule 2. ``serving`` is called in each worker of a ``--workers`` daemon once it
    serves; ``on_ready`` in the process that started the service."""
    if config.serving_count() > 1:
        try:
            return _run_workers(
                sessions, config, hooks, inherited=inherited, on_ready=on_ready, serving=serving
            )
        except BaseExceptionGroup as group:
            raise _first_cause(group) from None
    server = Server(sessions, config)
    server.inherited = list(inherited)
    trio.run(serve_one, server, hooks, on_ready)
    return server


# --------------------------------------------------------------------------- --workers N


def _worker_main(
    sessions: Sequence[HostedSession],
    config: ServerConfig,
    bound: Bound,
    serving: Callable[[], None],
    load: Callable[[], tuple[DaemonConfig, ServerConfig]] | None,
) -> WorkerMain:
    """What a forked worker runs (:mod:`daemon.server._supervisor` rules 3a and 4): one
    :class:`Server` on the inherited listeners whose audit log is an :class:`AuditClient`,
    through :func:`serve_one` (with ``load``, its reloader). Never returns normally to the
    spawner: the caller exits."""

    def main(index: int, sock: stdlib_socket.socket, generation: int) -> None:
        signals.worker_dispositions()
        hosted = list(sessions)
        if generation and load is not None:  # started after a reload: serve what it applied
            try:
                hosted = load()[0].build_sessions()[0]
            except Exception as error:
                logs.warning(
                    "config_reload",
                    f"worker {index}: the configuration no longer loads ({error}); "
                    "serving the one the daemon started with",
                    worker=index,
                    status="REFUSED",
                )
        server = Server(hosted, attrs.evolve(config, handle_signals=True))
        server.generation = generation
        server.inherited = list(bound.binary)
        server.inherited_http = list(bound.http)
        hooks = ServiceHooks(
            load=load,
            say=lambda level, status, line: logs.log(
                level, "config_reload", f"worker {index}: {line}", worker=index, status=status
            ),
        )

        async def run() -> None:
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
            client = AuditClient(
                stream,
                path=Path(config.audit_path),
                durability=Durability(config.audit_durability),
                in_tree=config.transparency is not None,
                index=index,
            )
            server.role = WorkerRole(client, index)
            async with trio.open_nursery() as nursery:
                await nursery.start(serve_one, server, hooks, lambda server: serving())
                await client.ready(server.generation)

        trio.run(run)

    return main


def _open_stores(sessions: Sequence[HostedSession]) -> None:
    """The evidence stores open here as in a worker (a store that cannot be opened stops the
    start as in one process, not each worker); after the spawner's fork, so no client or
    thread a store makes is inherited."""
    from daemon.retention._open import open_store

    for session in sessions:
        if session.retention is not None:
            open_store(session.retention.store)


def _run_workers(
    sessions: Sequence[HostedSession],
    config: ServerConfig,
    hooks: ServiceHooks,
    *,
    inherited: Sequence[stdlib_socket.socket],
    on_ready: Callable[[Supervisor], None],
    serving: Callable[[], None],
) -> Supervisor:
    """Rule 2 for ``config.serving_count()`` workers (:mod:`daemon.server._supervisor`):
    ``serving`` is called in each worker once it serves. Call from a process without a
    running event loop (the spawner is forked first)."""
    # The checks of one process (daemon.config._checks), on the listeners that will serve: a
    # bad TLS or token file, or an exposed listener, stops the start here, naming it.
    checked = check_listeners(config, inherited)
    bound = bind(config, inherited)
    try:
        spawner = Spawner(
            _worker_main(sessions, config, bound, serving, hooks.load), bound.close_sockets
        )
    except BaseException:
        bound.close()
        raise
    bound.close_sockets()  # the spawner keeps them for the workers
    try:
        _open_stores(sessions)
    except BaseException:
        spawner.close()
        bound.close()
        raise
    holder: list[Server] = []

    def describe() -> dict[str, Any]:
        return holder[0].start_fields(bound.listen)

    supervisor = Supervisor(
        sessions, config, bound, config.serving_count(), spawner, describe=describe
    )
    supervisor.notify = hooks.notify
    supervisor.exposed = bool(checked.exposed)
    if hooks.load is not None:
        reload_from = hooks.load
        supervisor.source = hooks.source

        def prepare_reload() -> list[HostedSession]:
            # The parent's listening sockets are the workers' now; the exposure of a listener
            # cannot change without a restart-only key, and each worker checks its own.
            _, built, _ = prepare(
                reload_from,
                config,
                {session.name: session for session in supervisor.sessions},
                lambda new: Checked(
                    new.security.load(),
                    new.http.security.load() if new.http is not None else LoadedSecurity(),
                ),
            )
            return built

        supervisor.prepare_reload = prepare_reload

    async def main() -> None:
        server = Server(sessions, config)
        server.exposed = checked.exposed
        holder.append(server)
        stop = trio.CancelScope()

        async def supervise(*, task_status: trio.TaskStatus[None]) -> None:
            try:
                await supervisor.run(task_status=task_status)
            finally:
                stop.cancel()

        with signals.receive(signals.PROCESS) as received, stop:
            async with trio.open_nursery() as nursery:
                await nursery.start(supervise)
                on_ready(supervisor)
                _ready(nursery, hooks, f"serving ({supervisor.count} workers)")
                assert received is not None
                nursery.start_soon(
                    _obey(
                        received,
                        hooks,
                        drain=supervisor.drain,
                        hurry=supervisor.stop_workers,
                        reload=supervisor.request_reload,
                        draining=f"draining {supervisor.count} workers",
                    )
                )
                await trio.sleep_forever()

    try:
        trio.run(main)
    finally:
        spawner.close()
        bound.close()
    return supervisor


# --------------------------------------------------------------------------- the library


async def serve(
    sessions: Sequence[HostedSession] | Mapping[str, Sequence[VerificationMechanism]],
    config: ServerConfig | None = None,
    *,
    handle_signals: bool | None = None,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED,
    **options: Any,
) -> None:
    """The host API: serve ``sessions`` until shutdown.

    ``sessions`` is a list of :class:`HostedSession` or a mapping ``name -> mechanisms``
    (then each session admits 2 items / 524,288 bytes). ``config`` or keyword ``options``
    (fields of :class:`ServerConfig`) say where and how. ``task_status.started`` receives the
    :class:`Server` (its ``tcp_address``/``unix_path`` and ``shutdown()``).

    It runs the service assembly of ``evidenced serve`` (:func:`serve_one`) with no service
    manager and no configuration file. Signals: with
    ``handle_signals`` (the default when called from the main thread, where Python delivers
    signals; pass ``False`` to keep your own handlers) SIGINT and SIGTERM shut the server down
    gracefully (a second one: at once) and SIGHUP is ignored with a message (there is no
    configuration file to reload; ``evidenced serve`` reloads its own). Without it, stop the
    server with ``server.shutdown()``.
    """
    hosted = _hosted(sessions)
    if handle_signals is None:
        handle_signals = threading.current_thread() is threading.main_thread()
    if config is None:
        config = ServerConfig(**options, handle_signals=handle_signals)
    else:
        config = attrs.evolve(config, **options, handle_signals=handle_signals)
    server = Server(hosted, config)
    await serve_one(server, task_status=task_status)


def _hosted(
    sessions: Sequence[HostedSession] | Mapping[str, Sequence[VerificationMechanism]],
) -> list[HostedSession]:
    if isinstance(sessions, Mapping):
        return [HostedSession(name, tuple(mechs)) for name, mechs in sessions.items()]
    return list(sessions)


@contextlib.asynccontextmanager
async def open_server(
    sessions: Sequence[HostedSession] | Mapping[str, Sequence[VerificationMechanism]],
    config: ServerConfig | None = None,
    **options: Any,
) -> AsyncIterator[Server]:
    """Run a server for the duration of the block (tests, embedding); shuts down on exit,
    gracefully also when the block raises (the error is re-raised once the server stopped)."""
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        server: Server = await nursery.start(_run_server, _hosted(sessions), config, options)
        try:
            yield server
        except Exception as error:  # let the server drain instead of cancelling it
            failure = error
        finally:
            server.shutdown()
    if failure is not None:
        raise failure


async def _run_server(
    sessions: list[HostedSession],
    config: ServerConfig | None,
    options: dict[str, Any],
    *,
    task_status: trio.TaskStatus[Server] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve(sessions, config, task_status=task_status, **options)
