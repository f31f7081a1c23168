"""``evidenced submit`` with many pairs: ``--pair A B`` (repeated) or ``--batch FILE``.

The :mod:`cli` contract applies. Per command:

* ``submit --session NAME (--pair A B)... [--batch FILE]`` (the address, token and TLS flags of
  a single ``submit``) builds the honest binding of every pair (the session's one mechanism,
  as a single ``submit`` does) and submits them all in batches of up to 64 pairs, one request
  each: ``POST .../decisions:batch`` over ``http://``/``https://`` (``docs/http.md``),
  ``submit_batch`` over the binary protocol (``docs/protocol.md`` §4.1; against a server
  without batches the client falls back to one submit per pair): the library client's
  ``submit_batch`` (``daemon.client._sync``), after one ``sessions`` request (none with
  ``--sessions FILE``); pairs a batch had refused ``BUSY`` are sent again as it retries them.
  ``--batch FILE`` lists one request per line, its evidence files separated by whitespace
  (blank lines and lines starting with ``#`` are skipped; ``-`` is stdin). ``--binding`` does
  not combine with them.
* stdout is ``{"decisions": [...]}``, one element per pair in order: the decision (as a single
  ``submit`` prints it) or ``{"error": {"code", "message", "decision_id"}}`` for a pair the
  server refused. Exit: 65 when any pair was refused, else 1 when any failed, else 3 when any is
  UNKNOWN, else 0; a failure of the whole exchange exits as a single ``submit`` does.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from daemon.client._outcomes import BATCH_SIZE, RejectedError, SubmitResult
from session import cli
from session.cli import Exit, UsageError

if TYPE_CHECKING:  # the client loads when pairs are submitted, not with ``submit``'s parser
    from daemon.client._sync import SyncClient

__all__ = ["BATCH_SIZE", "read_batch_file", "submit_pairs"]

_OUTCOME_EXIT: Final = {"PASS": Exit.OK, "FAIL": Exit.FAIL, "UNKNOWN": Exit.UNKNOWN}
T = TypeVar("T")


def read_batch_file(name: str) -> list[list[str]]:
    """The evidence file names of each request listed in ``name`` (module rules)."""
    text = cli.read_input(name).decode("utf-8", "replace")
    requests = []
    for line in text.splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            requests.append(fields)
    if not requests:
        raise UsageError(f"--batch {name}: no request listed")
    return requests


def submit_pairs(
    args: argparse.Namespace,
    *,
    client: Callable[[], SyncClient],
    prepare: Callable[[SyncClient], object],
    run: Callable[[Callable[[], Any]], Any],
) -> int:
    """``submit`` with ``--pair``/``--batch`` (module rules). ``submit``'s own pieces are
    handed in (``daemon/commands/_client_cli.py``): the command's client, what it does to a
    client before the first call (``--sessions``), and the runner that maps client failures
    to exits."""
    if args.binding or args.receipt or args.print_binding or args.files:
        raise UsageError("--pair and --batch take no FILE, --binding, --receipt or --print-binding")
    names = [list(pair) for pair in args.pairs or []]
    if args.batch:
        names += read_batch_file(args.batch)
    requests = [[cli.read_input(name) for name in request] for request in names]

    def main() -> list[SubmitResult | RejectedError]:
        with client() as connected:
            prepare(connected)
            return connected.submit_batch(args.session, [(None, items) for items in requests])

    results: list[SubmitResult | RejectedError] = run(main)
    documents: list[dict[str, Any]] = []
    exits: set[int] = set()
    for result in results:
        if isinstance(result, RejectedError):
            documents.append(
                {
                    "error": {
                        "code": result.code,
                        "message": result.message,
                        "decision_id": result.decision_id,
                    }
                }
            )
            exits.add(Exit.REJECTED)
        else:
            documents.append(result.to_dict())
            exits.add(_OUTCOME_EXIT.get(result.outcome, Exit.INTERNAL))
    cli.emit({"decisions": documents})
    refused = sum(isinstance(result, RejectedError) for result in results)
    cli.say(f"{len(results)} pairs: {len(results) - refused} decided, {refused} refused")
    for code in (Exit.REJECTED, Exit.INTERNAL, Exit.FAIL, Exit.UNKNOWN):
        if code in exits:
            return code
    return Exit.OK


def add_pair_arguments(parser: argparse.ArgumentParser) -> None:
    """``--pair A B`` and ``--batch FILE`` on ``submit``."""
    parser.add_argument(
        "--pair",
        dest="pairs",
        nargs=2,
        action="append",
        metavar=("A", "B"),
        help="one evidence pair (repeat for many; instead of FILE...)",
    )
    parser.add_argument(
        "--batch",
        metavar="FILE",
        help="a file listing one request per line, its evidence files separated by spaces",
    )
