"""The configuration room: the one typed schema, its defaults, and the security rules.

One job: read and check a configuration (TOML, hosted sessions, HTTP and TLS material,
tokens) and state the exposure rules, without running any part of the server.

May import: ``daemon.wire``, ``daemon.audit``, ``daemon.retention``, ``daemon.tlog``,
``session``, ``mechanism``, ``catalog``, ``canon``; never ``daemon.server``, a client or a
command.
"""
