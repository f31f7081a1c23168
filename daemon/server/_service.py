"""The service assembly: one place that turns hosted sessions and a :class:`ServerConfig` into
a running service, for ``evidenced serve``, ``evidenced serve --workers N`` and the library's
:func:`daemon.serve`.

Rules (the contract):

1. :class:`ServiceHooks` is everything around the server: the service manager's ``notify``
   (``sd_notify``; default: nothing), the watchdog interval (``WATCHDOG=1`` pings; default:
   none), and ``load`` with its ``source`` (read the configuration anew for a SIGHUP reload,
   :mod:`daemon.server._reload`; default: none, and SIGHUP is ignored with a message).
   :meth:`ServiceHooks.from_environment` is systemd's (``NOTIFY_SOCKET``, ``WATCHDOG_USEC``).
2. :func:`run_service` (no event loop running) serves until the service stops: one process
   (:func:`serve_one`) when ``config.serving_count()`` is 1, else the supervisor of
   :mod:`daemon.server._supervisor` with its N workers. Either way, in this order: the
   listener checks and the start of :mod:`daemon.config._checks` and
   :class:`~daemon.server._server.Server`; ``on_ready`` called once serving; ``READY=1``
   with ``MAINPID`` and a ``STATUS``; then ``WATCHDOG=1`` every interval while the event
   loop runs; and the one signal policy of :mod:`daemon.server._signals` (SIGHUP a reload,
   coalesced, every worker together; SIGINT/SIGTERM ``STOPPING=1`` and the drain; a second
   signal cancels in-flight requests). It returns the
   :class:`Server` or the :class:`Supervisor` (its audit log's state), or raises why the
   start failed (never an exception group: the first cause).
3. :func:`serve_one` is the one-process assembly as a task (the library's :func:`serve` and
   :func:`open_server` await it): the server, its reloader when ``load`` is given, the
   watchdog, ``on_ready`` and ``READY=1``; ``task_status.started`` receives the
   :class:`Server`. It returns once the server has stopped.
"""

from __future__ import annotations

import contextlib
import os
import socket as stdlib_socket
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from daemon import logs
from daemon.config._config import DaemonConfig
from daemon.config._hosting import HostedSession, ServerConfig
from daemon.server import _systemd as systemd
from daemon.server._reload import Reloader
from daemon.server._server import Server
from daemon.server._supervisor import Supervisor, run_workers
from session import VerificationMechanism

__all__ = ["ServiceHooks", "open_server", "run_service", "serve", "serve_one"]


def _ignore(state: str) -> None:
    """No service manager to tell."""


def _say(line: str) -> None:
    """A reload's message, as the ``config_reload`` event (docs/operations.md)."""
    logs.info("config_reload", line)


@attrs.frozen
class ServiceHooks:
    """Rule 1."""

    notify: Callable[[str], object] = _ignore
    watchdog: float | None = None
    load: Callable[[], tuple[DaemonConfig, ServerConfig]] | None = None
    source: str = ""
    say: Callable[[str], None] = _say

    @classmethod
    def from_environment(
        cls,
        *,
        load: Callable[[], tuple[DaemonConfig, ServerConfig]] | None = None,
        source: str = "",
        say: Callable[[str], None] = _say,
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
    """Rule 3."""
    server.notify = hooks.notify
    stop = trio.CancelScope()

    async def run_server(*, task_status: trio.TaskStatus[Server]) -> None:
        try:
            await server.run(task_status=task_status)
        finally:
            stop.cancel()

    try:
        with stop:
            async with trio.open_nursery() as nursery:
                await nursery.start(run_server)
                if hooks.load is not None:
                    reloader = Reloader(
                        server, hooks.load, source=hooks.source, say=hooks.say, notify=hooks.notify
                    )
                    await nursery.start(reloader.run)
                if hooks.watchdog is not None:
                    nursery.start_soon(systemd.watchdog, hooks.notify, hooks.watchdog)
                on_ready(server)
                hooks.notify(
                    f"READY=1\nMAINPID={os.getpid()}\nSTATUS=serving "
                    f"{', '.join(sorted(server.sessions))}"
                )
                task_status.started(server)
                await trio.sleep_forever()
    except BaseExceptionGroup as group:  # never a group out of the assembly (rule 2)
        raise _first_cause(group) from None


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
            return run_workers(
                sessions,
                config,
                inherited=inherited,
                on_ready=on_ready,
                notify=hooks.notify,
                serving=serving,
                load=hooks.load,
                source=hooks.source,
                watchdog=hooks.watchdog,
            )
        except BaseExceptionGroup as group:
            raise _first_cause(group) from None
    server = Server(sessions, config)
    server.inherited = list(inherited)
    trio.run(serve_one, server, hooks, on_ready)
    return server


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
    import threading

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
