"""A bare server that runs one decision's stages and nothing else (``bench_wire.py``'s yardstick).

Run: ``python benchmarks/_bare_stages.py FOLDER [none|hop|fsync]``; prints
``{"http": "127.0.0.1:PORT"}`` once it listens, serves until SIGTERM.

Per HTTP request on a keep-alive connection it runs the daemon's own code for the stages
``bench_stages.py`` times, in order: the request head and body through
:class:`HttpServerCodec` and ``body_parser``, the binding (``binding_from_wire``), admission
(the pipeline's bounds check and a capacity slot), the decision (``evaluate_pair`` on the
request's own pair), the decision's audit line rendered and chained (``AuditLog._render``,
written to a file with ``write(2)``, no fsync), the ``Decision`` answer encoded and written to
the socket.
The socket is read and written directly (non-blocking, ``trio.lowlevel.wait_readable``), one
checkpoint per request.

What it leaves out is exactly what the daemon adds around those stages: the connection core
(deadlines, peer ledger, strike policy), trio streams, the pipeline's refusal and cancellation
paths, the group commit's thread hop and fsync, metrics, retention, the transparency log. The
daemon's CPU per decision over this server's, on the same load, is the share of that
structure. Refusals are not handled: any request the daemon would refuse closes the connection.

The second argument says what each request waits for before its answer is written (default
``none``): ``hop``, an empty call in one of trio's worker threads
(``trio.to_thread.run_sync``); ``fsync``, the audit file fsync'd in one (what a fsync'd
decision waits for at c=1, without the group commit's batching).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import trio
from bench_stages import Job

from daemon.server._evaluation import evaluate_pair
from daemon.server._http_body import JSON_TYPE, body_parser
from daemon.server._http_codec import END_OF_BODY, NEED_DATA, HttpServerCodec, RequestHead
from daemon.server._pipeline import _Request
from daemon.tlog._names import DecisionIds
from daemon.wire._binding import binding_from_wire
from daemon.wire._protocol import Decision, Submit, encode_header

MAX_BODY = 65536
WAITS = ("none", "hop", "fsync")


class Stages:
    """The job's session and audit log, and one request's stages on its bytes."""

    def __init__(self, folder: Path) -> None:
        self.job = Job(folder)
        self.ids = DecisionIds(None)
        self.audit = os.open(folder / "bare-audit.jsonl", os.O_WRONLY | os.O_CREAT, 0o600)

    def decide(self, body: bytes, codec: HttpServerCodec) -> bytes:
        job = self.job
        parser = body_parser(
            JSON_TYPE, None, max_items=1, max_bytes=4096, max_binding_bytes=MAX_BODY
        )
        parser.feed(body)
        submitted = parser.finish()
        binding = binding_from_wire(submitted.binding)
        sizes = tuple(len(item) for item in submitted.items)
        request = _Request(Submit(1, "bytes", submitted.binding, sizes), {}, "127.0.0.1:0")
        job.pipeline.bounds(request)
        job.pipeline.acquire_capacity(request)
        try:
            evaluated = evaluate_pair(job.session, binding, submitted.items)
        finally:
            job.pipeline.release_capacity(request)
        os.write(self.audit, job.log._render("decision", job.fields(evaluated)))
        result = evaluated[0].to_dict()
        answer = Decision(1, self.ids(), "bytes", result, 7, "sha256:" + "a" * 64)
        return codec.respond(200, encode_header(answer.to_header()))


async def serve(stages: Stages, stream: trio.SocketStream, wait: str) -> None:
    descriptor = stream.socket.fileno()
    codec = HttpServerCodec()
    body = bytearray()
    while True:
        event = codec.next_event()
        if event is NEED_DATA:
            try:
                data = os.read(descriptor, 262144)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(descriptor)
                continue
            codec.receive_data(data)
            if not data:
                return
        elif isinstance(event, RequestHead):
            codec.accept_body(MAX_BODY)
            body.clear()
        elif isinstance(event, bytes):
            body += event
        elif event is END_OF_BODY:
            answer = stages.decide(bytes(body), codec)
            if wait == "hop":
                await trio.to_thread.run_sync(int)
            elif wait == "fsync":
                await trio.to_thread.run_sync(os.fsync, stages.audit)
            await _write_all(descriptor, answer)
            if not codec.next_cycle():
                return
            await trio.lowlevel.checkpoint()
        else:
            return


async def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(descriptor, view) :]
        except BlockingIOError:
            await trio.lowlevel.wait_writable(descriptor)


async def main(folder: Path, wait: str) -> None:
    if wait not in WAITS:
        raise SystemExit(f"wait must be one of {', '.join(WAITS)}, not {wait!r}")
    stages = Stages(folder)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    host, port = listeners[0].socket.getsockname()[:2]
    print(json.dumps({"http": f"{host}:{port}"}), flush=True)

    async def handler(stream: trio.SocketStream) -> None:
        async with stream:
            await serve(stages, stream, wait)

    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, handler, listeners)
            async for _ in signals:
                nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "none")
