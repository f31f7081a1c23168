"""The evidenced conformance kit as a pytest plugin: opt-in, in the suite's *root* conftest
(pytest reads ``pytest_plugins`` only there)."""

pytest_plugins = ["daemon.conformance"]
