"""The spawner of a multi-process daemon: forks its serving workers (docs/adr/0015).

Rules (the contract):

1. :class:`Spawner` forks one process from the parent before the parent starts an event loop
   or a thread. That process never runs an event loop: it forks a worker per request
   (:meth:`Spawner.spawn`: the slot index and the configuration generation in — 0 for the
   one the daemon started with, one more for each reload applied since, which a worker
   started later loads itself — the worker's pid and the parent's end of a new ``socketpair``
   out, passed with ``SCM_RIGHTS``), so every worker, the first ones and each restart, starts
   from the same single-threaded state, with the listening sockets it inherited.
2. It reaps its dead workers (every 0.5 s at least). It ignores SIGINT and SIGHUP (the parent
   decides), and its workers start so (:func:`daemon.server._signals.worker_dispositions`).
3. When the parent's end closes (:meth:`Spawner.stop`, or the parent died) it closes its copies
   of the listening sockets (``release``), waits for every worker to exit, and exits.
4. A worker that raises is reported on stderr (``evidenced: worker I stopped: ...``) and exits
   70.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket as stdlib_socket
import struct
import warnings
from collections.abc import Callable
from typing import Final

import trio

from daemon.server._signals import worker_dispositions
from daemon.wire import _logs as logs

__all__ = ["Spawner", "WorkerMain"]

#: What a forked worker runs: ``(slot index, its end of the sequencer's stream, the
#: configuration generation)``.
WorkerMain = Callable[[int, stdlib_socket.socket, int], None]
_SPAWN: Final = struct.Struct(">II")
_PID: Final = struct.Struct(">q")


class Spawner:
    """The single-threaded process that forks the workers (rule 1)."""

    def __init__(self, worker_main: WorkerMain, release: Callable[[], None]) -> None:
        ours, theirs = stdlib_socket.socketpair(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's coverage is not collected
            code = 0
            try:
                ours.close()
                _spawner_main(theirs, worker_main, release)
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        theirs.close()
        self.pid = pid
        self._control = ours
        self._lock = trio.Lock()

    async def spawn(self, index: int, generation: int = 0) -> tuple[int, stdlib_socket.socket]:
        """A new worker in slot ``index`` serving configuration ``generation``: (its pid, the
        parent's end of its stream)."""
        async with self._lock:
            return await trio.to_thread.run_sync(self._spawn_sync, index, generation)

    def _spawn_sync(self, index: int, generation: int) -> tuple[int, stdlib_socket.socket]:
        self._control.sendall(_SPAWN.pack(index, generation))
        data, fds, _, _ = stdlib_socket.recv_fds(self._control, _PID.size, 1)
        if len(data) != _PID.size or len(fds) != 1:
            raise OSError(errno.EPIPE, "the worker spawner stopped")
        (pid,) = _PID.unpack(data)
        return pid, stdlib_socket.socket(fileno=fds[0])

    def stop(self) -> None:
        """No more workers: the spawner exits (closing its copies of the listeners)."""
        with contextlib.suppress(OSError):
            self._control.shutdown(stdlib_socket.SHUT_RDWR)

    def close(self) -> None:
        """Stop the spawner (its workers are the supervisor's to stop) and reap it."""
        self.stop()
        self._control.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _spawner_main(
    control: stdlib_socket.socket, worker_main: WorkerMain, release: Callable[[], None]
) -> None:
    """Fork a worker per request; reap the dead ones. When the parent's end closes: close the
    listeners (``release``), wait for every worker to exit, and return."""
    worker_dispositions()  # what every worker it forks starts with
    while True:
        readable, _, _ = select.select([control], [], [], 0.5)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        if not readable:
            continue
        data = control.recv(_SPAWN.size, stdlib_socket.MSG_WAITALL)
        if len(data) < _SPAWN.size:
            release()
            with contextlib.suppress(ChildProcessError):
                while True:
                    os.waitpid(-1, 0)
            return
        index, generation = _SPAWN.unpack(data)
        parent_end, worker_end = stdlib_socket.socketpair(
            stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM
        )
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                control.close()
                parent_end.close()
                worker_main(index, worker_end, generation)
            except BaseException as error:
                code = 70
                _report(index, error)
            finally:
                os._exit(code)
        worker_end.close()
        stdlib_socket.send_fds(control, [_PID.pack(pid)], [parent_end.fileno()])
        parent_end.close()


def _report(index: int, error: BaseException) -> None:
    """Rule 4: the first cause of a worker's failure."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    with contextlib.suppress(Exception):
        detail = f"{type(error).__name__}: {error}"
        logs.error(
            "worker_stopped", f"worker {index} stopped: {detail}", worker=index, error=detail
        )
