"""The wire room: bytes in, events out, for the binary protocol (EVD1) and the binding.

One job: the sans-IO codec (frames, header events, the state table), the binding's wire form,
exact-type reading of header fields and the bounded echo of peer text; and the daemon's error
tree (``_errors``: it imports nothing, so every room may import it). It knows no socket, no
server, no file and no clock.

May import: ``canon``, ``session``, the shared ``mechanism`` modules; nothing else of
``daemon``.
"""
