"""``evidenced catalog``: list, show, search, package build/verify, plan, readiness.

Contract (the :mod:`cli` contract applies): stdout is exactly one JSON document (an error is
``{"error": {"code", "message", "exit"}}``); stderr carries one-line messages; no traceback.
Nothing here imports, executes or instantiates a component. Input files are read with
:func:`cli.read_input` (``-`` is stdin) and parsed strictly.

Exit codes:

* ``list``, ``show``, ``search``, ``plan``, ``package build``: 0 on an answer.
* ``package verify``: 0 ``VALID``, 1 ``INVALID`` (the report lists every discrepancy); 66 when
  the path is not a readable directory.
* ``readiness``: 0 ``READY``, 1 ``INVALID`` or ``BLOCKED``, 3 ``NOT_ESTABLISHED``.
* ``plan`` with a stored package whose bytes changed: 1 (one-line reason on stderr).
* 2 usage; 65 malformed input (bad JSON, wrong record shape, unknown component id
  ``UNKNOWN_COMPONENT``, a non-empty output directory: ``CATALOG_REFUSED``); 66 a missing or
  unreadable input file; 73 an output directory that cannot be written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from session import cli
from session.cli import CliError, Exit, RejectedInput, UsageError

from ._entries import reference_registry
from ._errors import CatalogError, ComponentIndexError, PlanningError
from ._index import (
    INDEX_NAME,
    ComponentIndex,
    build_index,
    load_build_package,
    load_index,
    verify_build,
    write_build,
)
from ._jsonio import loads_strict
from ._package import MANIFEST_NAME, StoredPackage, build_package, load_package
from ._planning import ValidationAnalysis, ValidationPlan, plan_validation
from ._readiness import (
    assess_execution_readiness,
    authorization_from_json,
    declarations_from_json,
    reassessment_from_json,
)
from ._registry import ComponentRegistry

__all__ = ["register"]

EXIT_OK = Exit.OK
EXIT_INVALID = Exit.FAIL
EXIT_UNKNOWN = Exit.UNKNOWN

_READINESS_EXIT = {"READY": EXIT_OK, "INVALID": EXIT_INVALID, "BLOCKED": EXIT_INVALID}

_emit = cli.emit


def _refused(error: CatalogError | str) -> RejectedInput:
    return RejectedInput(str(error), code="CATALOG_REFUSED")


def _read(path: str, what: str) -> Any:
    return loads_strict(cli.read_input(path), PlanningError, f"{what} {path}")


def _load_stored(path: str) -> StoredPackage:
    """A package directory, or a build directory whose index names exactly one package (its
    path checked like every index-named package: it must stay inside the build directory)."""
    directory = Path(path)
    if (directory / MANIFEST_NAME).is_file():
        return load_package(directory)
    if (directory / INDEX_NAME).is_file():
        index = load_index(directory)
        paths = sorted({e.package_path for e in index.entries})
        if len(paths) != 1:
            raise ComponentIndexError(f"{directory} indexes {len(paths)} packages; name one")
        return load_build_package(directory, index.entries[0])
    raise ComponentIndexError(f"{directory} holds neither {MANIFEST_NAME} nor {INDEX_NAME}")


def _registry_for(package: StoredPackage | None) -> ComponentRegistry:
    return reference_registry() if package is None else package.registry()


def _cmd_list(args: argparse.Namespace) -> int:
    registry = reference_registry()
    _emit({**registry.canonical_dict(), "registry_sha256": registry.canonical_digest()})
    return EXIT_OK


def _cmd_show(args: argparse.Namespace) -> int:
    descriptor = reference_registry().get(args.component_id)
    if descriptor is None:
        raise RejectedInput(
            f"no component {args.component_id!r} in the registry", code="UNKNOWN_COMPONENT"
        )
    _emit(descriptor.to_dict())
    return EXIT_OK


def _cmd_search(args: argparse.Namespace) -> int:
    if args.mechanism is None and args.relation is None:
        raise UsageError("search needs --mechanism and/or --relation")
    try:
        if args.index is not None:
            index: ComponentIndex = load_index(Path(args.index))
        else:
            package = build_package()
            index = build_index([(package, "WORKTREE")])
    except CatalogError as error:
        raise _refused(error) from None
    _emit(
        index.search_exact(
            args.schema,
            args.mode,
            mechanism_id=args.mechanism,
            relation_id=args.relation,
            package_id=args.package_id,
            package_version=args.package_version,
        )
    )
    return EXIT_OK


def _cmd_build(args: argparse.Namespace) -> int:
    output = Path(args.directory)
    try:
        package = build_package(package_id=args.package_id, package_version=args.package_version)
        index = write_build(package, output)
    except ComponentIndexError as error:
        raise _refused(error) from None
    except OSError as error:
        raise cli.OutputError(str(error.filename or output), error.strerror or str(error)) from None
    entry = index.entries[0]
    _emit(
        {
            "index_path": str(output / INDEX_NAME),
            "index_digest": index.canonical_digest(),
            "package_path": entry.package_path,
            "package_sha256": entry.package_sha256,
            "registry_sha256": entry.registry_sha256,
            "component_count": len(index.entries),
            "artifact_count": len(package.artifacts),
            "execution_performed": False,
        }
    )
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    if not directory.is_dir():
        raise cli.InputError(f"build directory {directory}", "not a directory")
    report = verify_build(directory)
    _emit(report)
    if report["result"] != "VALID":
        for error in report["errors"]:
            cli.say(error)
        return EXIT_INVALID
    return EXIT_OK


def _cmd_plan(args: argparse.Namespace) -> int:
    try:
        analysis = ValidationAnalysis.from_dict(_read(args.analysis, "analysis"))
        package = None if args.package is None else _load_stored(args.package)
    except CatalogError as error:
        raise _refused(error) from None
    try:
        plan = plan_validation(analysis, _registry_for(package), package=package)
    except CatalogError as error:
        raise CliError(
            f"stored package rejected: {error}", exit=EXIT_INVALID, code="PACKAGE_REJECTED"
        ) from None
    _emit(plan.to_dict())
    return EXIT_OK


def _cmd_readiness(args: argparse.Namespace) -> int:
    try:
        analysis = ValidationAnalysis.from_dict(_read(args.analysis, "analysis"))
        plan = ValidationPlan.from_dict(_read(args.plan, "plan"))
        declarations = declarations_from_json(_read(args.declarations, "declarations"))
        authorization = (
            None
            if args.authorization is None
            else authorization_from_json(_read(args.authorization, "authorization"))
        )
        reassessment = (
            None
            if args.reassessment is None
            else reassessment_from_json(_read(args.reassessment, "reassessment"))
        )
        package = None if args.package is None else _load_stored(args.package)
        registry = _registry_for(package)
    except (CatalogError, TypeError) as error:
        raise _refused(str(error)) from None
    report = assess_execution_readiness(
        analysis, plan, registry, declarations, authorization, reassessment, package=package
    )
    _emit(report.to_dict())
    return _READINESS_EXIT.get(report.status, EXIT_UNKNOWN)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``catalog`` command and its sub-commands."""
    parser = subparsers.add_parser(
        "catalog",
        help="component registry, stored packages, exact discovery, planning, readiness",
        description="Describe mechanisms without executing them.",
    )
    commands = parser.add_subparsers(dest="catalog_command", metavar="SUBCOMMAND")

    listing = commands.add_parser("list", help="print the registry and its digest")
    listing.set_defaults(handler=_cmd_list)

    show = commands.add_parser("show", help="print one component descriptor")
    show.add_argument("component_id", help="the component id, e.g. component:...")
    show.set_defaults(handler=_cmd_show)

    search = commands.add_parser("search", help="exact declared discovery")
    search.add_argument("--schema", required=True, help="planning surface schema, e.g. VSTD-2")
    search.add_argument("--mode", required=True, help="interaction mode, e.g. OFFLINE_REPLAY")
    search.add_argument("--mechanism", default=None, help="exact mechanism id")
    search.add_argument("--relation", default=None, help="exact relation id")
    search.add_argument("--package-id", default=None, help="only this package id")
    search.add_argument("--package-version", default=None, help="only this package version")
    search.add_argument(
        "--index", default=None, help="index.json or build directory (default: the source tree)"
    )
    search.set_defaults(handler=_cmd_search)

    package = commands.add_parser("package", help="build or verify stored packages")
    package_commands = package.add_subparsers(dest="package_command", metavar="ACTION")
    build = package_commands.add_parser("build", help="write index.json and a package to DIR")
    build.add_argument("directory", help="an empty or new output directory")
    build.add_argument(
        "--package-id", default="package:evidenced-reference-components", help="the package id"
    )
    build.add_argument("--package-version", default="0.1.0", help="the package version")
    build.set_defaults(handler=_cmd_build)
    verify = package_commands.add_parser("verify", help="re-check every byte of a build DIR")
    verify.add_argument("directory", help="a build directory")
    verify.set_defaults(handler=_cmd_verify)

    plan = commands.add_parser("plan", help="plan declared candidates for an analysis")
    plan.add_argument("analysis", help="analysis JSON file ('-': stdin)")
    plan.add_argument("--package", default=None, help="package or build directory")
    plan.set_defaults(handler=_cmd_plan)

    readiness = commands.add_parser("readiness", help="assess preflight declarations")
    readiness.add_argument("--analysis", required=True, help="analysis JSON file")
    readiness.add_argument("--plan", required=True, help="plan JSON file (catalog plan)")
    readiness.add_argument("--declarations", required=True, help="JSON array of declarations")
    readiness.add_argument("--authorization", default=None, help="authorization JSON file")
    readiness.add_argument("--reassessment", default=None, help="reassessment JSON file")
    readiness.add_argument("--package", default=None, help="package or build directory")
    readiness.set_defaults(handler=_cmd_readiness)
