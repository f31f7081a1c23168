"""The wire room: bytes in, events out, for the binary protocol (EVD1) and the binding.

One job: the sans-IO codec (frames, header events, the state table), the binding's wire form,
exact-type reading of header fields and the bounded echo of peer text. On the same floor, because
they import nothing of the project and every room may import them: the daemon's error tree
(``_errors``) and its operational messages (``_logs``: the one structlog configuration,
docs/operations.md; the audit log does not pass through it). The codec knows no socket, no
server, no file and no clock.

May import: ``canon``, ``session``, the shared ``mechanism`` modules; nothing else of
``daemon``.
"""
