"""The conformance kit for mechanism authors, as a library and as a pytest plugin.

Library: :func:`check_mechanism` runs the battery (:mod:`daemon.kit._conformance` states every
check) against a provider's entry-point name or ``module:attribute`` and returns a
:class:`ConformanceReport`; ``evidenced mechanism check TARGET`` is the same from the shell.

pytest: name this module in the *root* ``conftest.py`` of the author's suite (pytest only reads
``pytest_plugins`` there)::

    pytest_plugins = ["daemon.conformance"]

    def test_my_mechanism_conforms(mechanism_conformance):
        mechanism_conformance("my-provider")          # fails the test with every finding

The fixture ``mechanism_conformance(target, **settings)`` runs the battery and fails the test
(``pytest.fail``) listing each failing check and its findings; it returns the report. The
settings are the kit's (``repeats``, ``time_budget``, ``seed``); the provider's own options are
the ones it declares (``conformance_option_sets()``), each run as a host configured with them. It is
opt-in rather than registered under ``pytest11``: an auto-loaded plugin would import the daemon
into every pytest run of every environment with ``evidenced`` installed.

pytest is not a dependency of ``evidenced``: without it the library names import and run, the
fixture is simply not defined, and :func:`assert_conformant` raises ``AssertionError`` with the
same lines instead of ``pytest.fail``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from daemon.kit._conformance import Check, ConformanceReport, TargetError, check_mechanism

try:
    _pytest: Any = importlib.import_module("pytest")
except ImportError:  # the library without its pytest face
    _pytest = None

__all__ = [
    "Check",
    "ConformanceReport",
    "TargetError",
    "assert_conformant",
    "check_mechanism",
    "mechanism_conformance",
]


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


if _pytest is not None:
    mechanism_conformance = _pytest.fixture(_mechanism_conformance, name="mechanism_conformance")
