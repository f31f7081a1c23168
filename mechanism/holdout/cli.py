"""``evidenced holdout``: observe, score, commit, release, interop.

The :mod:`cli` contract applies: every sub-command prints exactly one JSON document on stdout
and one-line messages on stderr. A refusal the instrument defines (``docs/spec/holdout.md``:
``REFUSED`` score and interop reports, an observation emission refused with its code) is the
command's answer document, exit 65; a usage error, an unwritable ``--out`` or an internal
failure is the contract's error document.

* ``observe CHALLENGES --out OBS.json [--commitment HEX] [--implementation LABEL]`` runs the
  adapter (real mechanisms, real sessions) and writes one observation document. Exit 0 when
  written with no disagreement, 1 when written but a fixture label disagreed with its root (that
  challenge has no observation), 65 when the emission is refused (``{"written": false,
  "refusal": CODE}``: unknown operator, schema, unreadable input; nothing is written), 73 when
  ``--out`` cannot be written.
* ``score --challenges CHALLENGES --observations OBS.json [--commitment HEX] [--schemas DIR]
  [--release ID] [--implementation LABEL]`` prints ``{"verdict", "refusal", "by_challenge",
  "explanations"}`` (one explanation per non-passing predicate and missing challenge, its first
  50 also as lines on stderr).
  A folder CHALLENGES needs ``--commitment`` (otherwise usage error 2, code
  ``commitment-required``). ``--release`` defaults to this instrument's release id for the
  schemas in use. Exit 0 PASS, 1 FAIL, 65 REFUSED.
* ``commit DIR`` prints ``{"commitment": HEX, "files": N}`` (65 for a malformed folder:
  ``{"commitment": null, "refusal": CODE}``).
* ``release [--schemas DIR]`` prints ``{"spec_release_id": ..., "files": {label: sha256}}``.
* ``interop OBS.json...`` prints the HOLDOUT-INTEROP report. Exit 0 PASS or NOT MEASURED, 1
  with findings, 65 refused.

Every file is read with a cap (:func:`cli.read_input` here, ``-`` for stdin; the scorer's own in
``_commitment``; 16 MiB, twice the strict reader's 8 MiB document bound): a larger file is
unreadable input (exit 65, the message names the cap), ``/dev/zero`` included.

The instrument needs the ``holdout`` extra (jsonschema, jsonschema-specifications,
jsonschema-rs, rfc8785): without it every command exits 69 (``EXTRA_MISSING``, the one line
naming ``pip install 'evidenced[holdout]'``) before reading anything; the parser, and so
``--help`` and the completion scripts, need none of it (the handlers are
:mod:`holdout._holdout_cli`, imported when a command runs).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from session import require_extra

__all__ = ["register"]


def _handler(name: str) -> Callable[[argparse.Namespace], int]:
    """The handler ``name`` of :mod:`holdout._holdout_cli`, run once the extra is found."""

    def run(args: argparse.Namespace) -> int:
        require_extra("holdout")
        from . import _holdout_cli

        handler: Callable[[argparse.Namespace], int] = getattr(_holdout_cli, name)
        return handler(args)

    return run


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "holdout", help="holdout challenges: observe, score, commit, release, interop"
    )
    commands = parser.add_subparsers(dest="holdout_command", metavar="SUBCOMMAND")

    observe = commands.add_parser("observe", help="apply challenges, write one observation doc")
    observe.add_argument("challenges", metavar="CHALLENGES", help="folder or JSON array file")
    observe.add_argument("--out", required=True, help="where to write the observation document")
    observe.add_argument("--commitment", help="verify a challenge folder against this HEX")
    observe.add_argument("--implementation", default=None, help="producer label to write")
    observe.add_argument("--corpus", default=None, help="corpus folder (default: this project's)")
    observe.set_defaults(handler=_handler("_observe"))

    score = commands.add_parser("score", help="score an observation document")
    score.add_argument("--challenges", required=True, help="folder with INDEX.json or array")
    score.add_argument("--observations", required=True, help="the observation document")
    score.add_argument("--commitment", default=None, help="required for a challenge folder")
    score.add_argument("--schemas", default=None, help="folder with the two holdout schemas")
    score.add_argument("--release", default=None, help="the run's spec_release_id")
    score.add_argument("--implementation", default=None, help="expected producer label")
    score.set_defaults(handler=_handler("_score"))

    commit = commands.add_parser("commit", help="print the commitment of a challenge folder")
    commit.add_argument("directory", metavar="DIR", help="a challenge folder with INDEX.json")
    commit.set_defaults(handler=_handler("_commit"))

    release = commands.add_parser("release", help="print this instrument's release id")
    release.add_argument("--schemas", default=None, help="folder with the two holdout schemas")
    release.set_defaults(handler=_handler("_release"))

    compare = commands.add_parser("interop", help="HOLDOUT-INTEROP over observation documents")
    compare.add_argument(
        "observations", nargs="*", metavar="OBS.json", help="observation documents to compare"
    )
    compare.set_defaults(handler=_handler("_interop"))
