"""The schema room: every configuration key, declared once.

One job: declare each key of the daemon's TOML configuration — its table, name, type, default,
range rule and one line of meaning — as plain data (attrs tables, no behaviour beyond checking a
value against its rule). Every view of a key is derived from this declaration, never copied:
the configuration reader (:mod:`daemon.config._config_schema`), the runtime objects of every
room (``ServerConfig``, ``HttpConfig``, ``TransparencyConfig``, ``SinkConfig``, the sessions'
bounds, the ``[stores]`` limits), the embedded ``default.toml``, ``evidenced config keys`` and
``docs/configuration.md``'s tables. It sits on the floor just above ``wire`` so that every room
that holds a runtime view of a key can read its declaration.

May import: ``daemon.wire`` (the codec's bounds, which are the defaults of their keys:
``daemon.wire._records``, where they are defined, not the codec itself),
``session``, ``canon``; nothing else of ``daemon``.
"""
