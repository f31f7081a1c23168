"""The audit room: the append-only, hash-chained audit log and the transparency tree beside it.

One job: write (durability, overflow, group commit), recover, rotate, verify and model the
audit log's lines, append each line's digest as a leaf of the transparency log, and ship the
committed lines to the configured sinks (read back from the files, never on the write path).

May import: ``daemon.wire``, ``daemon.schema`` (the keys of its runtime views),
``daemon.tlog``, ``canon``, ``session``; never a server, a
client or a command.
"""
