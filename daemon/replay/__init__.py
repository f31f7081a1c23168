"""The replay room: offline work on a finished audit log and its evidence store.

One job: read decisions back from the log, replay them against the retained evidence, and
collect the store's garbage. It runs no server.

May import: ``daemon.retention``, ``daemon.audit``, ``daemon.config``, ``daemon.wire``,
``daemon.tlog`` and the project's libraries; never ``daemon.server`` or a command.
"""
