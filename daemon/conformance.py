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

from daemon.kit._conformance import Check, ConformanceReport, TargetError, check_mechanism
from daemon.kit._pytest_face import assert_conformant, mechanism_conformance

__all__ = [
    "Check",
    "ConformanceReport",
    "TargetError",
    "assert_conformant",
    "check_mechanism",
    "mechanism_conformance",
]
