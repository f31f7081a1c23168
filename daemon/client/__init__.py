"""The client room: talking to a daemon.

One job: the clients (``docs/client.md``) — the async one on anyio (asyncio or trio) and the
blocking one, each over the binary protocol (EVD1, the sans-IO codec of ``daemon.wire``) or
the HTTP/JSON API (httpx) — their one retry rule, their typed results, the honest binding of
evidence files, connecting to a target, and fetching receipts. Importing a client never loads
the server; the blocking client's binary-protocol path loads no event loop and no HTTP client.

Layers, each below the next: the calls (``_evd1_calls``, ``_http_calls``: what each method
sends and how its answer is read, pure), the transports (``_evd1_async``, ``_blocking``,
``_http_transport``: one kept connection or pool, the I/O), the clients (``_client``,
``_sync``: retries ``_retry``, batches, honest bindings ``_honest``); beside them the results
(``_outcomes``, ``_results``), the targets (``_targets``, ``_connect``), ``_receipts``, and the
``sessions`` answer a command line keeps between invocations (``_sessions_cache``).

May import: ``daemon.wire``, ``daemon.tlog``, ``daemon.config`` (targets and TLS material
only), ``session`` (with ``session.canon``); never ``daemon.server`` or a command.
"""
