"""The client room: talking to a daemon.

One job: the binary and HTTP clients, connecting to a target, and fetching receipts. Importing
a client never loads the server.

May import: ``daemon.wire``, ``daemon.tlog``, ``daemon.config`` (targets and TLS material
only), ``canon``, ``session``; never ``daemon.server`` or a command.
"""
