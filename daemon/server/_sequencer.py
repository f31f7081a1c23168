"""The one sequencer of a multi-process daemon: every worker's lines, one audit log
(docs/adr/0015).

The parent process owns the :class:`~daemon.audit._audit.AuditLog` (and the transparency log fed
by it) exactly as a one-process daemon does; each serving worker reaches it through a
:class:`Link` (its :class:`~daemon.server._audit_client.AuditClient` at the other end).

Rules (the contract):

1. A frame of lines (``["r", [[id, event, fields], ...]]``) is committed with
   :meth:`AuditLog.record_batch`: rendered (``seq``, chain) in the order received, written and
   synced in the log's group commit; then one frame answers them all (``["a", acks]``), each
   ``[id, "ok", seq, line_digest, line]`` (``line``: the line's text when a transparency log
   is kept, else null), ``[id, "dropped"]``, ``[id, "failed", message]`` or
   ``[id, "invalid", message]``. Nothing is acknowledged before it met the durability policy.
   Frames are committed concurrently (one task each), so a slow fsync never stops the link
   from reading the next frame: it goes into the next group commit.
2. ``["s", figures]``: the worker's figures (connections, in flight, counters), kept on the
   link; the last ones a worker sent survive it (for ``daemon_stop``'s totals).
3. ``["q", id, kind, ...]``: a transparency request (``checkpoint``, ``inclusion``,
   ``consistency``) or an entry lookup (``entry``, ``index``, ``decision_id``,
   ``line_digest``: ``[log index, line]``), answered ``["q", id, true, payload]`` or
   ``["q", id, false, [code, message]]`` from the one transparency log and its lookup index.
   Each is answered by a task of its own, so a slow one never stops the link from reading
   the next frame; proofs and lookups read files through the one guarded way
   (:mod:`daemon.tlog._served_files` rule 6: its own limiter and deadline, ``BUSY`` past it).
4. ``["ready", index, pid, generation]``: the worker serves (its listeners accept), on that
   configuration generation.
5. :meth:`Sequencer.state` is what every worker is pushed (``["c", state]``): the log's
   failure reason and status, the transparency status, and every worker's figures.
6. A frame that is not one of these is a broken worker: its link is closed (the supervisor
   restarts it).
7. Reloads (``_supervisor`` rule 3a): :meth:`Link.reload` sends ``["reload", generation]``;
   the worker answers ``["g", generation, status, reason]`` once it applied
   (``APPLIED``: :attr:`Link.generation` is the generation it serves now) or refused
   (``REFUSED``: :attr:`Link.refusal` is why). The generation a worker serves only grows:
   the one it was started on, then each it applied (its figures' ``generation`` too).
"""

from __future__ import annotations

import contextlib
import os
import socket as stdlib_socket
from collections import Counter
from typing import Any

import trio

from daemon.audit._audit import AuditLog, AuditLogError
from daemon.audit._shipper import Shipping
from daemon.audit._transparency import (
    RequestRefused,
    checkpoint_answer,
    consistency_answer,
    inclusion_answer,
)
from daemon.audit._transparency import status as transparency_status
from daemon.retention._publish import PublishLoop
from daemon.server._ipc import FrameError, FrameReader, FrameWriter
from daemon.server._publishing import publish_status
from daemon.server._shipping import shipping_status
from daemon.tlog import TransparencyLog
from daemon.tlog._lookup import (
    IndexFailed,
    IndexRebuilding,
    LineLookup,
    LineNotFound,
    LineQuery,
    LookupInvalid,
)
from daemon.tlog._served_files import FileReads, ReadsStuck
from daemon.wire import _logs as logs

__all__ = ["Link", "Sequencer"]


class Link:
    """The sequencer's end of one worker process's stream."""

    def __init__(
        self, index: int, pid: int, sock: stdlib_socket.socket, generation: int = 0
    ) -> None:
        self.index = index
        self.pid = pid
        #: Rule 7: the configuration generation the worker serves, as it last said (or as
        #: it was started on), and why it refused the last one it was asked for (else None).
        self.generation = generation
        self.refusal: str | None = None
        self.stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        self.reader = FrameReader(self.stream)
        self.writer = FrameWriter(self.stream)
        self.ready = trio.Event()
        self.alive = True
        self.figures: dict[str, Any] = {}
        self.lines = 0
        self.frames = 0
        self.last_heard = trio.current_time()  # any frame is a heartbeat (_heartbeat rule 1)

    async def reload(self, generation: int) -> bool:
        """Rule 7: ask the worker to reload to ``generation``; False when it is gone."""
        self.refusal = None
        return await self.writer.send(["reload", generation])

    def served(self, generation: Any) -> None:
        """Rule 7: the worker said it serves ``generation`` (a generation only grows)."""
        if type(generation) is int and generation > self.generation:
            self.generation = generation

    def entry(self, restarts: int) -> dict[str, Any]:
        """This worker in ``health``'s ``workers``."""
        return {
            "index": self.index,
            "pid": self.pid,
            "alive": self.alive,
            "restarts": restarts,
            "lines": self.lines,
            "frames": self.frames,
            **self.figures,
        }


class Sequencer:
    """Commits the lines of every link into ``audit`` (module rules)."""

    def __init__(self, audit: AuditLog, transparency: TransparencyLog | None) -> None:
        self.audit = audit
        self.transparency = transparency
        #: Reads of the log's files for the workers' queries (rule 3).
        self.reads = FileReads()
        index = audit.line_index
        #: The entry lookup over the audit log's index (rule 3), with a transparency log.
        self.lookup = None if index is None else LineLookup(index, self.reads)
        #: The transparency log's publisher (health shows it), when the log is published.
        self.publisher: PublishLoop | None = None
        #: The decision-log sinks this process ships the log to (health shows them).
        self.shipping: Shipping | None = None
        #: Figures of workers no longer running, added to the totals (rule 2).
        self.retired: Counter[str] = Counter()

    async def serve(self, link: Link) -> None:
        """Serve one link until its worker's stream ends (rules 1-4, 6)."""
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    try:
                        message = await link.reader.receive()
                    except FrameError as error:
                        logs.error(
                            "worker_frame_invalid",
                            f"worker {link.index} (pid {link.pid}) sent {error}; closing",
                            worker=link.index,
                            worker_pid=link.pid,
                            error=str(error),
                        )
                        break
                    if message is None:
                        break
                    link.last_heard = trio.current_time()
                    kind = message[0] if isinstance(message, list) and message else None
                    if kind == "r":
                        nursery.start_soon(self._commit, link, message[1])
                    elif kind == "s":
                        link.figures = message[1]
                        link.served(link.figures.get("generation"))
                    elif kind == "q":
                        nursery.start_soon(self._answer_query, link, message)
                    elif kind == "ready":
                        link.served(message[3] if len(message) > 3 else None)
                        link.ready.set()
                    elif kind == "g":  # rule 7
                        link.served(message[1])
                        if message[2] != "APPLIED":
                            link.refusal = str(message[3])
                    else:
                        logs.error(
                            "worker_frame_invalid",
                            f"worker {link.index} (pid {link.pid}) sent an unknown frame",
                            worker=link.index,
                            worker_pid=link.pid,
                            error="unknown frame",
                        )
                        break
        finally:
            link.alive = False
            for key in ("decisions", "refusals"):
                value = link.figures.get(key)
                if isinstance(value, int):
                    self.retired[key] += value
            with contextlib.suppress(Exception):
                await link.stream.aclose()

    async def _commit(self, link: Link, lines: list[Any]) -> None:
        """Rule 1."""
        results = await self.audit.record_batch([(line[1], line[2]) for line in lines])
        in_tree = self.transparency is not None
        acks: list[Any] = []
        for line, result in zip(lines, results, strict=True):
            ident = line[0]
            if result is None:
                acks.append([ident, "dropped"])
            elif isinstance(result, AuditLogError):
                acks.append([ident, "failed", str(result)])
            elif isinstance(result, BaseException):
                acks.append([ident, "invalid", str(result)])
            else:
                ref, rendered = result
                text = rendered[:-1].decode("utf-8") if in_tree else None
                acks.append([ident, "ok", ref.seq, ref.line_digest, text])
        link.lines += len(lines)
        link.frames += 1
        await link.writer.send(["a", acks])

    async def _answer_query(self, link: Link, message: list[Any]) -> None:
        await link.writer.send(await self._query(message))

    async def _query(self, message: list[Any]) -> list[Any]:
        """Rule 3."""
        ident, kind, args = message[1], message[2], message[3:]
        log = self.transparency
        try:
            if kind == "checkpoint":
                payload: Any = checkpoint_answer(log)
            elif kind == "inclusion":
                payload = await self.reads.run(inclusion_answer, log, int(args[0]), int(args[1]))
            elif kind == "consistency":
                payload = await self.reads.run(consistency_answer, log, int(args[0]), int(args[1]))
            else:
                payload = await self._entry(args)
        except RequestRefused as refused:
            return ["q", ident, False, [refused.code, str(refused)]]
        except (ReadsStuck, IndexRebuilding) as busy:
            return ["q", ident, False, ["BUSY", str(busy)]]
        return ["q", ident, True, payload]

    async def _entry(self, args: list[Any]) -> list[Any]:
        """An entry lookup (rule 3) by the one guarded lookup (``daemon.tlog._lookup``)."""
        if self.lookup is None:
            raise RequestRefused("TRANSPARENCY_DISABLED", "this daemon keeps no lookup index")
        try:
            query = LineQuery(index=args[0], decision_id=args[1], line_digest=args[2])
            index, line = await self.lookup.find(query)
        except LookupInvalid as error:
            raise RequestRefused("HEADER_INVALID", str(error)) from None
        except LineNotFound as error:
            raise RequestRefused("UNKNOWN_KIND", str(error)) from None
        except (IndexFailed, OSError) as error:
            raise RequestRefused("INTERNAL", f"the audit log cannot be read: {error}") from None
        return [index, line.decode("utf-8")]

    def state(self, workers: list[dict[str, Any]]) -> dict[str, Any]:
        """Rule 5."""
        return {
            "failure_reason": self.audit.failure_reason or self.audit.alarm,
            "audit": shipping_status(self.audit.status(), self.shipping),
            "transparency": publish_status(
                transparency_status(self.transparency, self.audit.line_index), self.publisher
            ),
            "sequencer_pid": os.getpid(),
            "workers": workers,
        }
