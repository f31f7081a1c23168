"""``evidenced holdout``: observe, score, commit, release, interop.

Every sub-command prints exactly one JSON document on stdout and one-line messages on stderr.

* ``observe CHALLENGES --out OBS.json [--commitment HEX] [--implementation LABEL]`` runs the
  adapter (real mechanisms, real sessions) and writes one observation document. Exit 0 when
  written with no disagreement, 1 when written but a fixture label disagreed with its root (that
  challenge has no observation), 65 when the emission is refused (unknown operator, schema,
  unreadable input; nothing is written).
* ``score --challenges CHALLENGES --observations OBS.json [--commitment HEX] [--schemas DIR]
  [--release ID] [--implementation LABEL]`` prints ``{"verdict", "refusal", "by_challenge"}``.
  A folder CHALLENGES needs ``--commitment`` (otherwise usage error 2, with the document
  ``{"verdict": "REFUSED", "refusal": "commitment-required", "by_challenge": {}}``).
  ``--release`` defaults to this instrument's release id for the schemas in use.
  Exit 0 PASS, 1 FAIL, 65 REFUSED.
* ``commit DIR`` prints ``{"commitment": HEX, "files": N}`` (65 for a malformed folder).
* ``release [--schemas DIR]`` prints ``{"spec_release_id": ..., "files": {label: sha256}}``.
* ``interop OBS.json...`` prints the HOLDOUT-INTEROP report. Exit 0 PASS or NOT MEASURED, 1
  with findings, 65 refused.

Every file is read with a cap (:func:`session.read_capped` here, the scorer's own in
``_commitment``; 16 MiB, twice the strict reader's 8 MiB document bound): a larger file is
unreadable input (exit 65, the message names the cap), ``/dev/zero`` included.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

# The command line may use the bottom layer's capped read; the scorer modules may not (they
# import nothing of the project), so ``_commitment`` keeps its own.
from session import read_capped

from ._commitment import (
    challenge_commitment,
    load_challenge_folder,
    load_schemas,
    release_files,
    release_id,
    schema_dir,
)
from ._reader import StrictReadError, read_json
from ._scorer import Refusal, interop, read_challenge_array, refused, score_bytes

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_REJECTED = 65


def _emit(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False) + "\n")


def _say(message: str) -> None:
    sys.stderr.write(f"evidenced holdout: {message}\n")


def load_challenges(path: Path, commitment: str | None, *, required: bool = True) -> list[Any]:
    """A folder (verified against ``commitment``; when not ``required`` and none is given, in
    INDEX order without verification) or a single JSON array file."""
    if path.is_dir():
        if commitment is None:
            if required:
                raise Refusal("commitment-required", "a challenge folder needs --commitment")
            commitment = challenge_commitment(path)
        return load_challenge_folder(path, commitment)
    try:
        data = read_capped(path)
    except OSError as error:
        raise Refusal("challenge-unreadable", f"{path}: {error.strerror or error}") from None
    return read_challenge_array(data)


def _score(args: argparse.Namespace) -> int:
    challenges_path = Path(args.challenges)
    if challenges_path.is_dir() and args.commitment is None:
        # Still exactly one JSON document on stdout (docs/holdout.md: `score` prints one document).
        _emit(refused("commitment-required", "a challenge folder needs --commitment").to_dict())
        _say("usage error: a challenge folder needs --commitment HEX")
        return EXIT_USAGE
    schemas_dir = Path(args.schemas) if args.schemas is not None else schema_dir()
    try:
        schemas = load_schemas(schemas_dir)
    except OSError as error:
        report = refused("schemas-invalid", f"{error.filename}: {error.strerror or error}")
    except Refusal as refusal:
        report = refused(refusal.code, refusal.detail)
    else:
        try:
            expected = args.release if args.release is not None else release_id(schemas_dir)
            challenges = load_challenges(challenges_path, args.commitment)
            observation_bytes = read_capped(args.observations)
        except Refusal as refusal:
            report = refused(refusal.code, refusal.detail)
        except OSError as error:
            report = refused(
                "observation-unreadable", f"{error.filename}: {error.strerror or error}"
            )
        else:
            report = score_bytes(
                challenges,
                observation_bytes,
                schemas=schemas,
                expect_release=expected,
                expect_implementation=args.implementation,
            )
    _emit(report.to_dict())
    if report.verdict == "REFUSED":
        _say(f"refused: {report.refusal}: {report.detail}")
        return EXIT_REJECTED
    if report.missing:
        _say(f"no observation for: {', '.join(report.missing)}")
    return EXIT_OK if report.verdict == "PASS" else EXIT_FAIL


def _commit(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    try:
        commitment = challenge_commitment(directory)
    except Refusal as refusal:
        _say(f"refused: {refusal.code}: {refusal.detail}")
        _emit({"commitment": None, "refusal": refusal.code})
        return EXIT_REJECTED
    files = sum(1 for path in directory.rglob("*") if path.is_file())
    _emit({"commitment": commitment, "files": files})
    return EXIT_OK


def _release(args: argparse.Namespace) -> int:
    schemas_dir = Path(args.schemas) if args.schemas is not None else None
    files = release_files(schemas_dir)
    _emit(
        {
            "spec_release_id": release_id(schemas_dir),
            "files": {
                label: hashlib.sha256(read_capped(path)).hexdigest()
                for label, path in sorted(files.items())
            },
        }
    )
    return EXIT_OK


def _interop(args: argparse.Namespace) -> int:
    documents: list[Any] = []
    for name in args.observations:
        try:
            documents.append(read_json(read_capped(name)))
        except StrictReadError as error:
            _emit({"status": "REFUSED", "refusal": "observation-unreadable", "findings": []})
            _say(f"refused: {name}: {error}")
            return EXIT_REJECTED
    report = interop(documents)
    _emit(report.to_dict())
    if report.status == "REFUSED":
        _say(f"refused: {report.refusal}")
        return EXIT_REJECTED
    return EXIT_FAIL if report.status == "FAIL" else EXIT_OK


def _observe(args: argparse.Namespace) -> int:
    from .adapter import observe_command  # the adapter loads the mechanisms; the scorer never

    return observe_command(args)


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
    observe.set_defaults(handler=_observe)

    score = commands.add_parser("score", help="score an observation document")
    score.add_argument("--challenges", required=True, help="folder with INDEX.json or array")
    score.add_argument("--observations", required=True, help="the observation document")
    score.add_argument("--commitment", default=None, help="required for a challenge folder")
    score.add_argument("--schemas", default=None, help="folder with the two holdout schemas")
    score.add_argument("--release", default=None, help="the run's spec_release_id")
    score.add_argument("--implementation", default=None, help="expected producer label")
    score.set_defaults(handler=_score)

    commit = commands.add_parser("commit", help="print the commitment of a challenge folder")
    commit.add_argument("directory", metavar="DIR")
    commit.set_defaults(handler=_commit)

    release = commands.add_parser("release", help="print this instrument's release id")
    release.add_argument("--schemas", default=None, help="folder with the two holdout schemas")
    release.set_defaults(handler=_release)

    compare = commands.add_parser("interop", help="HOLDOUT-INTEROP over observation documents")
    compare.add_argument("observations", nargs="*", metavar="OBS.json")
    compare.set_defaults(handler=_interop)
