"""The server room: the running daemon.

One job: serve decisions. The request core (pipeline, evaluation workers), the two front ends
(EVD1, HTTP) over the connection machinery (listeners, peer and noise ledgers, raw-socket fast
paths), metrics, serving workers and their sequencer, reload and systemd.

May import: ``daemon.config``, ``daemon.audit``, ``daemon.retention``, ``daemon.tlog``,
``daemon.wire`` and the project's libraries; never a client or a command.
"""
