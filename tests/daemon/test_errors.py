"""One error tree (``daemon/errors.py``): every exception the daemon package defines has the
one root, sits on the branch of whose fault it is, and the CLI maps the tree to its exit table
in one place, so an error no handler translated never passes as an internal error."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil

import pytest

import cli
import daemon
from daemon.client._outcomes import (
    ClientTimeout,
    RejectedError,
    ServerProtocolError,
    ServiceUnavailable,
    TransportError,
)
from daemon.config._config import ConfigError
from daemon.retention._store import ObjectCorrupt, StoreError
from daemon.server._pipeline import Refused
from daemon.tlog import CheckpointError
from daemon.wire._errors import EvidencedError, PeerError, ServiceError, exit_code
from daemon.wire._protocol import ErrorCode, ErrorResponse, ProtocolError
from daemon.wire._protocol_state import LocalProtocolError


def _public_exceptions() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(daemon.__path__, "daemon."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
                and not issubclass(value, cli.CliError)
            ):
                found.append(value)
    return found


def test_an_exception_outside_the_tree_is_refused() -> None:
    """Every public exception class of the package derives from EvidencedError: a caller's
    ``except EvidencedError`` catches everything the daemon raises on purpose."""
    classes = _public_exceptions()
    assert len(classes) > 40
    strays = sorted(
        f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, EvidencedError)
    )
    assert strays == []


def test_no_error_sits_on_both_branches_unless_it_is_a_refusal_with_a_fault() -> None:
    both = [
        c for c in _public_exceptions() if issubclass(c, PeerError) and issubclass(c, ServiceError)
    ]
    assert [c.__name__ for c in both] == ["ServiceUnavailable"]  # refused, service-side


def _rejected(code: str) -> RejectedError:
    return RejectedError(ErrorResponse(code=code, message="m", request_id=1))


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConfigError("bad key"), 65),
        (CheckpointError("NOTE_UNVERIFIED", "forged"), 65),
        (StoreError("disk"), 70),
        (ObjectCorrupt("bits"), 70),
        (TransportError("refused"), 69),
        (ClientTimeout("slow"), 75),
        (ServiceUnavailable(ErrorResponse(code="BUSY", message="m", request_id=1)), 75),
        (ServerProtocolError("garbage"), 65),
        (LocalProtocolError("bug"), 70),
        (Refused(ErrorCode.AUDIT_FAILED, "disk full"), 70),
        (Refused(ErrorCode.HEADER_INVALID, "bad header"), 65),
        (ValueError("not ours"), None),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_exit_table(error: BaseException, expected: int | None) -> None:
    assert exit_code(error) == expected


def test_protocol_error_takes_its_exit_from_the_fault_of_its_code() -> None:
    peer = ProtocolError(ErrorCode.HEADER_INVALID, "bad")
    assert exit_code(peer) == (65 if peer.fault.value == "peer" else 70)


@pytest.mark.parametrize(("raised", "expected"), [(ConfigError("x"), 65), (StoreError("y"), 70)])
def test_an_untranslated_daemon_error_exits_with_its_branch_not_as_internal(
    raised: Exception, expected: int, capsys: pytest.CaptureFixture[str]
) -> None:
    def build(argv: object) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="evidenced")

        def handler(args: argparse.Namespace) -> int:
            raise raised

        parser.set_defaults(handler=handler)
        return parser

    assert cli.run(build, [], classify=exit_code) == expected
    assert "internal error" not in capsys.readouterr().err
    assert cli.run(build, []) == 70  # without the mapping it would be one
