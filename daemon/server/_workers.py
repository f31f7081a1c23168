"""A small pool of forked evaluation worker processes (docs/adr/0009).

Rules (the contract):

1. Fork, not spawn. Each worker is ``os.fork()``-ed from the server, so it runs exactly the
   code and the mechanism instances the server announced (a mechanism digest is computed from
   source files at import: a fresh interpreter could compute another one) and nothing is
   pickled but the jobs and their answers. The ``handler`` given to the pool is what the
   worker runs for each job.
2. A worker keeps nothing of the server it does not need. Right after the fork it closes every
   descriptor but stdio and its own socket (so it never holds a client connection, a
   listener or the audit log's lock), drops the server's signal wake-up descriptor, ignores
   SIGINT (the server decides when workers stop), takes SIGTERM by default, asks the kernel
   to kill it when the server dies (``PR_SET_PDEATHSIG``, Linux), freezes the inherited
   heap out of the cyclic collector (no finaliser of a server object ever runs in it) and
   keeps its heap for reuse (:func:`daemon.server._resources.keep_heap`: one job at a time bounds
   it).
3. Jobs and answers cross a socket pair as length-prefixed pickles; a job's large byte
   strings (``blobs``, the evidence) follow its pickle raw, are sent from the caller's objects
   without a copy and received straight into one buffer, then handed to the handler as
   ``handler(job, blobs)``. An exception in the handler is answered as
   :class:`WorkerJobError` (type and bounded message); the worker keeps serving. A worker
   that dies or answers garbage raises :class:`WorkerDied` and is
   replaced on the next job.
4. Deadlines cannot be defeated. :meth:`WorkerPool.run` is cancellable at any point; a
   cancelled job's worker is killed (``SIGKILL``), reaped and replaced, so an overrunning
   evaluation ends at the deadline whatever it holds (the GIL, a C loop). At most ``size``
   jobs run at once; more wait for a worker (under the caller's deadline).
5. :meth:`WorkerPool.close` kills every worker and reaps it; it is idempotent. Zombies of
   killed workers are reaped without blocking on the next job or at close; ``on_reaped`` is
   then called with each killed worker's pid (the server removes what it left behind).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import pickle
import signal
import socket
import struct
import sys
import warnings
from collections.abc import Callable
from typing import Any, Final

import trio

from daemon.server._resources import keep_heap
from daemon.wire._echo import echo
from daemon.wire._errors import ServiceError

_LENGTH: Final = struct.Struct(">Q")
_PR_SET_PDEATHSIG: Final = 1


class WorkerDied(ServiceError):
    """The worker process died or broke the job protocol (the job has no answer)."""


class WorkerJobError(ServiceError):
    """The handler raised in the worker; the message says what (bounded)."""


class _Worker:
    def __init__(self, pid: int, sock: trio.socket.SocketType) -> None:
        self.pid = pid
        self.sock = sock


def _send_all(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_LENGTH.pack(len(data)) + data)


def _receive_exact(sock: socket.socket, size: int) -> bytearray | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = sock.recv_into(view[received:])
        if not count:
            return None
        received += count
    view.release()
    return buffer


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the server died before the request above took effect
        os._exit(0)


Handler = Callable[[Any, tuple[bytes, ...]], Any]


def _worker_main(fd: int, parent: int, handler: Handler) -> None:
    """The worker's whole life (rule 2, then the job loop). Never returns."""
    gc.freeze()
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(parent)
    keep_heap()  # one job at a time: reuse the heap rather than map each big buffer
    os.closerange(3, fd)
    os.closerange(fd + 1, max(fd + 2, os.sysconf("SC_OPEN_MAX")))
    os.set_blocking(fd, True)
    conn = socket.socket(fileno=fd)
    while True:
        head = _receive_exact(conn, _LENGTH.size)
        if head is None:
            return
        body = _receive_exact(conn, _LENGTH.unpack(head)[0])
        if body is None:
            return
        job, sizes = pickle.loads(body)
        payload = _receive_exact(conn, sum(sizes))
        if payload is None:
            return
        blobs = []
        offset = 0
        with memoryview(payload) as view:
            for size in sizes:
                blobs.append(bytes(view[offset : offset + size]))
                offset += size
        del payload
        try:
            answer: tuple[bool, Any] = (True, handler(job, tuple(blobs)))
        except BaseException as error:
            answer = (False, f"{type(error).__name__}: {echo(str(error), 256)}")
        try:
            data = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
        except Exception as error:
            data = pickle.dumps((False, f"the answer cannot be sent: {type(error).__name__}"))
        del answer, body, blobs, job
        _send_all(conn, data)


def fork_worker(handler: Handler) -> tuple[int, socket.socket]:
    """Fork one worker running ``handler``; (its pid, the server's end of its socket)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    parent = os.getpid()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() in a process with threads. The child runs only
        # _worker_main, which takes no lock another thread could hold (docs/adr/0009).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 0
        try:
            fd = theirs.detach()
            _worker_main(fd, parent, handler)
        except BaseException:
            code = 70
        finally:
            os._exit(code)
    theirs.close()
    ours.setblocking(False)
    return pid, ours


class WorkerPool:
    """``size`` forked workers running ``handler`` (module rules)."""

    def __init__(
        self,
        size: int,
        handler: Handler,
        on_reaped: Callable[[int], None] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.size = size
        self._handler = handler
        self._on_reaped = on_reaped
        self._busy: set[_Worker] = set()
        self._idle: list[_Worker] = []
        self._alive = 0
        self._slots = trio.Semaphore(size)
        self._zombies: list[int] = []
        self._closed = False
        self.replaced = 0

    @property
    def busy(self) -> int:
        return self.size - self._slots.value

    @property
    def pids(self) -> list[int]:
        """The live workers' process ids (idle and busy)."""
        return sorted(worker.pid for worker in (*self._idle, *self._busy))

    def start(self) -> None:
        """Fork every worker now (at start, before the server has threads or connections)."""
        while self._alive < self.size:
            self._idle.append(self._fork())

    def _fork(self) -> _Worker:
        pid, sock = fork_worker(self._handler)
        self._alive += 1
        return _Worker(pid, trio.socket.from_stdlib_socket(sock))

    async def run(self, job: Any, blobs: tuple[bytes, ...] = ()) -> Any:
        """Run ``handler(job, blobs)`` in a worker; its answer, or :class:`WorkerJobError` /
        :class:`WorkerDied`. Cancellation kills the worker (rule 4)."""
        if self._closed:
            raise WorkerDied("the worker pool is closed")
        meta = pickle.dumps((job, [len(blob) for blob in blobs]), pickle.HIGHEST_PROTOCOL)
        data = (_LENGTH.pack(len(meta)) + meta, *blobs)
        async with self._slots:
            self._reap()
            worker = self._idle.pop() if self._idle else self._fork()
            self._busy.add(worker)
            healthy = False
            try:
                answer = await self._exchange(worker, data)
                healthy = True
            finally:
                self._busy.discard(worker)
                if healthy and not self._closed:
                    self._idle.append(worker)
                else:
                    self._discard(worker)
        ok, value = answer
        if not ok:
            raise WorkerJobError(value)
        return value

    async def _exchange(self, worker: _Worker, data: tuple[bytes, ...]) -> tuple[bool, Any]:
        sock = worker.sock
        try:
            for part in data:
                with memoryview(part) as view:
                    while view:
                        sent = await sock.send(view)
                        view = view[sent:]
            head = await self._receive_exact(sock, _LENGTH.size)
            body = await self._receive_exact(sock, _LENGTH.unpack(head)[0])
            answer = pickle.loads(body)
        except (OSError, EOFError, pickle.UnpicklingError) as error:
            raise WorkerDied(f"evaluation worker {worker.pid} failed: {error}") from None
        if type(answer) is not tuple or len(answer) != 2 or type(answer[0]) is not bool:
            raise WorkerDied(f"evaluation worker {worker.pid} answered garbage")
        return answer

    @staticmethod
    async def _receive_exact(sock: trio.socket.SocketType, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = await sock.recv(min(size - len(chunks), 1 << 20))
            if not chunk:
                raise EOFError("the worker closed its socket")
            chunks += chunk
        return bytes(chunks)

    def _discard(self, worker: _Worker) -> None:
        """Kill ``worker`` (whatever it is doing) and forget it; reaped later."""
        self._alive -= 1
        self.replaced += 1
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)
        worker.sock.close()
        self._zombies.append(worker.pid)
        self._reap()

    def _reap(self) -> None:
        for pid in list(self._zombies):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self._zombies.remove(pid)
                if self._on_reaped is not None:
                    self._on_reaped(pid)

    def close(self) -> None:
        """Kill and reap every worker (rule 5)."""
        self._closed = True
        for worker in self._idle:
            self._alive -= 1
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
            worker.sock.close()
            self._zombies.append(worker.pid)
        self._idle.clear()
        for pid in self._zombies:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            if self._on_reaped is not None:
                self._on_reaped(pid)
        self._zombies.clear()
