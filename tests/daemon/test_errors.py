"""One error tree (``canon/_errors.py``): every exception any package of the product defines has
the one root, sits on the branch of whose fault it is, and the CLI maps the tree to its exit
table in one place, so an error no handler translated never passes as an internal error."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil

import pytest

import catalog
import daemon
import mechanism
import session
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
from mechanism import holdout
from session import canon, cli

PRODUCT = (canon, session, mechanism, catalog, daemon, holdout, cli)


def _public_exceptions(
    packages: tuple[object, ...] = (daemon,), *, with_cli: bool = False
) -> list[type[BaseException]]:
    found = []
    for package in packages:
        prefix = f"{package.__name__}."  # type: ignore[attr-defined]
        modules = [package.__name__] + [  # type: ignore[attr-defined]
            info.name
            for info in pkgutil.walk_packages(package.__path__, prefix)  # type: ignore[attr-defined]
        ]
        for module_name in modules:
            module = importlib.import_module(module_name)
            for name, value in vars(module).items():
                if (
                    inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and value.__module__ == module.__name__
                    and not name.startswith("_")
                    and (with_cli or not issubclass(value, cli.CliError))
                ):
                    found.append(value)
    return found


def test_a_host_catching_the_root_catches_every_packages_errors() -> None:
    """Every public exception class of every package (the library's ``ValueError``s of a
    certificate, a policy, a catalog entry, the CLI's own) derives from the one root: a host
    embedding evidenced writes one ``except EvidencedError``."""
    classes = _public_exceptions(PRODUCT, with_cli=True)
    assert len(classes) > 70
    strays = sorted(
        f"{c.__module__}.{c.__qualname__}"
        for c in classes
        if not issubclass(c, canon.EvidencedError)
    )
    assert strays == []
    roots = {
        c
        for c in classes
        if not any(
            base.__module__.split(".")[0] in {p.__name__ for p in PRODUCT} for base in c.__mro__[1:]
        )
    }
    assert roots == {canon.EvidencedError}
    assert daemon.EvidencedError is canon.EvidencedError


def test_a_library_error_keeps_the_builtin_base_its_callers_catch() -> None:
    """Joining the tree took no builtin base away (``except ValueError`` still catches a
    malformed certificate) and gave none that was not there."""
    from mechanism.formation import FormationError
    from session import CeilingError, InputTooLarge

    assert issubclass(FormationError, ValueError)
    assert issubclass(InputTooLarge, OSError)
    assert issubclass(CeilingError, TypeError)
    assert not issubclass(cli.CliError, ValueError)
    assert issubclass(FormationError, canon.CallerError)


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
        (canon.StrictJSONError("duplicate key"), 65),
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
