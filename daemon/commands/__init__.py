"""The commands room: every ``evidenced`` subcommand and the tools built on the rest.

One job: turn argv into calls on the other rooms and their results into the CLI contract
(``cli``: one JSON document on stdout, the exit table). Serve, config, log, mechanisms,
report, demo, replay/gc, and the mechanism conformance kit live here.

May import every other room; no room imports it (``daemon.cli`` and ``daemon.conformance``
are its public faces).
"""
