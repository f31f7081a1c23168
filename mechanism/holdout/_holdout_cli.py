"""The handlers of ``evidenced holdout`` (the contract is :mod:`holdout.cli`'s): loaded when a
command runs, once :mod:`holdout.cli` has found the ``holdout`` extra installed, since the
scorer imports its libraries (jsonschema, jsonschema-rs, rfc8785) with its modules.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

# The command line uses the contract's capped read; the scorer modules may not (they import
# nothing of the project), so ``_commitment`` keeps its own.
from session import cli
from session.cli import CliError, Exit

from ._commitment import (
    challenge_commitment,
    load_challenge_folder,
    load_schemas,
    release_files,
    release_id,
    schema_dir,
)
from ._reader import StrictReadError, read_json
from ._scorer import (
    Refusal,
    ScoreReport,
    interop,
    read_challenge_array,
    refused,
    score_read,
)

EXIT_OK = Exit.OK
EXIT_FAIL = Exit.FAIL
EXIT_USAGE = Exit.USAGE
EXIT_REJECTED = Exit.REJECTED

_emit = cli.emit
_MAX_LINES = 50  # explanation lines on stderr; the document holds them all
_say = cli.say


def _read(path: str | Path) -> bytes:
    """A capped read whose failure is the caller's refusal (an ``OSError``)."""
    try:
        return cli.read_input(path)
    except cli.InputError as error:
        raise OSError(error.message) from None


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
        data = _read(path)
    except OSError as error:
        raise Refusal("challenge-unreadable", str(error)) from None
    return read_challenge_array(data)


def _score_report(args: argparse.Namespace, challenges_path: Path) -> ScoreReport:
    """The scoring run ``holdout score`` prints: a refusal while loading its inputs is the
    report's refusal (schemas, release, challenges, observations: read in that order)."""
    schemas_dir = Path(args.schemas) if args.schemas is not None else schema_dir()
    try:
        schemas = load_schemas(schemas_dir)
    except OSError as error:
        return refused("schemas-invalid", f"{error.filename}: {error.strerror or error}")
    except Refusal as refusal:
        return refused(refusal.code, refusal.detail)
    try:
        expected = args.release if args.release is not None else release_id(schemas_dir)
        challenges = load_challenges(challenges_path, args.commitment)
        observation_bytes = _read(args.observations)
    except Refusal as refusal:
        return refused(refusal.code, refusal.detail)
    except OSError as error:
        return refused("observation-unreadable", str(error))
    return score_read(  # the challenges were just read here: not copied again
        challenges,
        observation_bytes,
        schemas=schemas,
        expect_release=expected,
        expect_implementation=args.implementation,
    )


def _score(args: argparse.Namespace) -> int:
    challenges_path = Path(args.challenges)
    if challenges_path.is_dir() and args.commitment is None:
        raise CliError(
            "a challenge folder needs --commitment HEX",
            exit=Exit.USAGE,
            code="commitment-required",
        )
    report = _score_report(args, challenges_path)
    _emit(report.to_dict(), ordered=True)  # by_challenge in INDEX order
    if report.verdict == "REFUSED":
        _say(f"refused: {report.refusal}: {report.detail}")
        return EXIT_REJECTED
    if report.missing:
        _say(f"no observation for: {', '.join(report.missing)}")
    for explanation in report.explanations[:_MAX_LINES]:
        _say(explanation.line())
    if len(report.explanations) > _MAX_LINES:
        _say(f"... and {len(report.explanations) - _MAX_LINES} more (all in 'explanations')")
    return EXIT_OK if report.verdict == "PASS" else EXIT_FAIL


def _commit(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    try:
        commitment = challenge_commitment(directory)
    except Refusal as refusal:
        _emit({"commitment": None, "refusal": refusal.code})
        _say(f"refused: {refusal.code}: {refusal.detail}")
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
                label: hashlib.sha256(cli.read_input(path)).hexdigest()
                for label, path in sorted(files.items())
            },
        }
    )
    return EXIT_OK


def _interop(args: argparse.Namespace) -> int:
    documents: list[Any] = []
    for name in args.observations:
        try:
            documents.append(read_json(_read(name)))
        except (StrictReadError, OSError) as error:
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
    # The adapter loads the mechanisms; the scorer never.
    from .adapter import DEFAULT_IMPLEMENTATION, EmissionRefused, observe

    def refuse(code: str, detail: str) -> int:
        _emit({"written": False, "refusal": code})
        _say(f"refused: {code}: {detail}")
        return EXIT_REJECTED

    try:
        challenges = load_challenges(Path(args.challenges), args.commitment, required=False)
    except Refusal as refusal:
        return refuse(refusal.code, refusal.detail)
    try:
        emission = observe(
            challenges,
            corpus_directory=Path(args.corpus) if args.corpus is not None else None,
            implementation=args.implementation or DEFAULT_IMPLEMENTATION,
        )
    except EmissionRefused as refusal:
        return refuse(refusal.code, refusal.detail)
    data = json.dumps(emission.document, indent=1, ensure_ascii=False).encode() + b"\n"
    cli.write_output(args.out, data)
    _emit(
        {
            "written": True,
            "out": str(args.out),
            "implementation": emission.document["implementation"],
            "spec_release_id": emission.document["spec_release_id"],
            "observations": len(emission.document["observations"]),
            "not_observed": list(emission.problems),
        }
    )
    for problem in emission.problems:
        _say(f"{problem['id']}: {problem['code']}: {problem['detail']}")
    return EXIT_FAIL if emission.problems else EXIT_OK
