"""The configuration room: the reading of the one typed schema, and the security rules.

One job: read and check a configuration (TOML, hosted sessions, HTTP and TLS material,
tokens) and state the exposure rules, without running any part of the server. The keys
themselves are declared in :mod:`daemon.schema`; this room reads them, and generates the
embedded ``default.toml`` and the key table from them.

May import: ``daemon.wire``, ``daemon.schema``, ``daemon.audit``, ``daemon.retention``,
``daemon.tlog``, ``session``, ``mechanism``, ``catalog``, ``canon``; never ``daemon.server``, a
client or a command.
"""
