"""What each ``evidenced`` command imports (docs/benchmarks.md, "The CLI's imports").

A shell script that calls ``evidenced --help`` or ``evidenced submit`` pays for every module the
command loads. These tests hold *which* modules load (never how long they take): ``--help``
loads no command's module, and the client commands never load the server, the configuration,
the audit log, the transparency log or the numeric stack. Each runs a real interpreter.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from daemon.cli import SUMMARIES, build_parser
from daemon.client._targets import DEFAULT_TCP_PORT
from daemon.config._hosting import DEFAULT_PORT

HEAVY = (
    "trio",
    "numpy",
    "cattrs",
    "structlog",
    "cryptography",
    "boto3",
    "jsonschema",
    "daemon.server",
    "daemon.client",
    "daemon.config",
    "daemon.audit",
    "daemon.tlog",
    "mechanism",
    "holdout",
    "catalog",
)
SERVER_SIDE = (
    "daemon.server",
    "daemon.config._config",  # the client's TLS context (daemon.config._tls) is allowed
    "daemon.config._hosting",
    "daemon.audit",
    "daemon.tlog",
    "daemon.retention",
    "numpy",
    "cryptography",
    "boto3",
    "structlog",
)


def _loaded_by(*argv: str) -> set[str]:
    """The modules loaded once ``build_parser(argv)`` (what ``evidenced ARGV`` parses with)
    has run, in a fresh interpreter."""
    probe = (
        "import json, sys\n"
        "from daemon.cli import build_parser\n"
        f"build_parser({list(argv)!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(done.stdout))


def _under(modules: set[str], roots: tuple[str, ...]) -> set[str]:
    return {m for m in modules for root in roots if m == root or m.startswith(root + ".")}


@pytest.mark.parametrize("argv", [("--help",), (), ("no-such-command",)], ids=repr)
def test_help_loads_no_command_module(argv: tuple[str, ...]) -> None:
    assert _under(_loaded_by(*argv), HEAVY) == set()


@pytest.mark.parametrize("command", ["submit", "sessions", "health"])
def test_a_client_command_loads_no_server_side_room(command: str) -> None:
    assert _under(_loaded_by(command, "--help"), SERVER_SIDE) == set()


@pytest.mark.parametrize("command", ["submit", "sessions", "health"])
def test_a_client_command_loads_no_event_loop(command: str) -> None:
    """A client command's calls are the blocking client's: its parser loads no event loop,
    no HTTP client and not the async client (httpx loads for an HTTP address;
    ``tests/daemon/test_oneshot_cli.py`` runs the calls themselves)."""
    trio_side = ("trio", "anyio", "httpx", "h11", "daemon.client._client", "ssl")
    assert _under(_loaded_by(command, "--help"), trio_side) == set()


@pytest.mark.parametrize("command", ["submit", "sessions", "health"])
def test_a_client_command_loads_no_provider_registry(command: str) -> None:
    """The session package loads its value types only: the provider contract and registry,
    the pre-check pipeline, the session and the options converter load when a binding is
    built (``submit`` without ``--binding``), and the registry never needs
    ``importlib.metadata`` on a plain installation (``session/_entry_points.py``)."""
    registry = (
        "session._plugins",
        "session._provider",
        "session._precheck",
        "session._session",
        "session._options",
        "importlib.metadata",
    )
    assert _under(_loaded_by(command, "--help"), registry) == set()


def test_the_help_summaries_are_the_commands_own() -> None:
    """The fast ``--help`` lists each command with the help its own module registers."""
    parser = build_parser()
    group = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    registered = {choice.dest: choice.help for choice in group._choices_actions}
    assert registered == SUMMARIES


def test_the_fast_help_names_every_command() -> None:
    fast = build_parser(["--help"])
    full = build_parser()
    assert _commands(fast) == _commands(full) == list(SUMMARIES)


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    group = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(group.choices)


def test_the_client_default_port_is_the_daemons() -> None:
    assert DEFAULT_TCP_PORT == DEFAULT_PORT
