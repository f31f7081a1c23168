"""The report room: what an audit log says, as aggregates and as one HTML page.

One job: stream an audit log into bounded aggregates (:mod:`daemon.report._report`) and draw
them (:mod:`daemon.report._report_html`, with the SVG charts of
:mod:`daemon.report._report_charts`). ``evidenced audit report`` parses the arguments and
prints; this room computes.

May import: ``daemon.audit``, ``daemon.tlog``, ``daemon.wire`` and the project's libraries;
never a command.
"""
