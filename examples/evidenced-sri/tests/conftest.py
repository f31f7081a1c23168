"""The evidenced conformance kit as a pytest plugin (opt-in, in the root conftest)."""

pytest_plugins = ["daemon.conformance"]
