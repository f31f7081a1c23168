"""The fleet room: many replicas' logs, read from where they are published.

One job: a fleet file's logs and witnesses, publishing a log's tiles, and one monitoring pass
over every log of a fleet (:mod:`daemon.fleet._fleet`). ``evidenced log publish`` and
``evidenced log monitor --fleet`` parse the arguments and print; this room computes.

May import: ``daemon.retention``, ``daemon.audit``, ``daemon.tlog``, ``daemon.wire`` and the
project's libraries; never a command.
"""
