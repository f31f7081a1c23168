"""The commands room: every ``evidenced`` subcommand and the tools built on the rest.

One job: turn argv into calls on the other rooms and their results into the CLI contract
(``session.cli``: one JSON document on stdout, the exit table). Serve, config, log,
mechanisms, report, demo, replay/gc: argument parsing and printing; what they compute lives in
the rooms below (the conformance kit in ``daemon.kit``, the audit report in
``daemon.report``, the fleet tools in ``daemon.fleet``).

May import every other room; no room imports it (``daemon.cli`` and ``daemon.conformance``
are its public faces).
"""
