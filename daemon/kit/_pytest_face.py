"""The conformance kit's pytest face: the assertion and the fixture behind
:mod:`daemon.conformance` (which re-exports them; its docstring is the guide).

Rules (the contract):

1. :func:`assert_conformant` returns a passed report; otherwise it fails the running test with
   one line per failing check's finding (``pytest.fail`` without a traceback), or raises
   ``AssertionError`` with the same lines where pytest is not installed (it is not a
   dependency of ``evidenced``).
2. :data:`mechanism_conformance` is the fixture ``check(target, **settings)`` (the battery of
   :func:`~daemon.kit._conformance.check_mechanism`, then rule 1); it exists only where pytest
   is installed (``None`` otherwise).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from daemon.kit._conformance import ConformanceReport, check_mechanism

try:
    _pytest: Any = importlib.import_module("pytest")
except ImportError:  # the library without its pytest face
    _pytest = None

__all__ = ["assert_conformant", "mechanism_conformance"]


def assert_conformant(report: ConformanceReport) -> ConformanceReport:
    """``report`` when it passed; otherwise fail the running test with every finding."""
    if not report.passed:
        lines = [f"{report.target} ({report.mechanism_id}) fails the conformance battery:"]
        for name, findings in report.failed().items():
            lines.extend(f"  {name}: {finding}" for finding in findings)
        if _pytest is None:
            raise AssertionError("\n".join(lines))
        _pytest.fail("\n".join(lines), pytrace=False)
    return report


def _mechanism_conformance() -> Callable[..., ConformanceReport]:
    """``check(target, **settings)``: run the battery and fail the test on any finding."""

    def check(target: str, **settings: Any) -> ConformanceReport:
        return assert_conformant(check_mechanism(target, **settings))

    return check


mechanism_conformance: Any = (
    None
    if _pytest is None
    else _pytest.fixture(_mechanism_conformance, name="mechanism_conformance")
)
