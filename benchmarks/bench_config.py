"""Configuration parsing benchmark: ``daemon.config._config.parse_config`` against its true floor.

Figures (interleaved rounds, median of per-round ratios; nothing asserted):

1. The embedded default configuration (``daemon/config/default.toml``): validating and building the
   typed configuration, as a ratio to ``tomllib.loads`` of the same text (work every parse
   does), and as an absolute time per parse.
2. A configuration of 64 sessions (each with mechanism options): the same ratio, so a
   per-session cost shows.

Mechanisms are not constructed (``parse_config`` only validates; ``build_sessions`` creates
them): what is measured is the reading of the file an operator edits. Run:
``python benchmarks/bench_config.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import functools
import tomllib
from pathlib import Path

from _harness import Report, main

from daemon.config._config import default_config_text, parse_config

_SESSION = """
[sessions.s{n}]
mechanisms = ["formation"]
max_evidence_items = 2
max_evidence_bytes = 524288

[sessions.s{n}.options.formation]
max_nodes = 100
"""


def run(report: Report, args: argparse.Namespace) -> None:
    base = Path.cwd()
    default = default_config_text()
    many = default + "".join(_SESSION.format(n=n) for n in range(64))
    for label, text in (("default config", default), ("64 sessions", many)):
        parse = functools.partial(parse_config, text, base=base, source="<bench>")
        floor = functools.partial(tomllib.loads, text)
        report.compare(f"parse_config, {label}", parse, floor, floor_name="tomllib.loads")
        report.time(f"parse_config, {label} (per parse)", parse)


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
