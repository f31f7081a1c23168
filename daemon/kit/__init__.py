"""The kit room: the mechanism conformance battery.

One job: run a mechanism provider's samples through the battery of checks every hosted
mechanism must pass (:mod:`daemon.kit._conformance` states it; its inputs are
:mod:`daemon.kit._conformance_cases`, its checks :mod:`daemon.kit._conformance_checks`). It
runs no server and reads no log; ``evidenced mechanisms --check`` calls it, and
:mod:`daemon.kit._pytest_face` is its assertion and pytest fixture, which the public face
``daemon.conformance`` re-exports.

May import: ``daemon.wire`` and the project's libraries; never a command.
"""
