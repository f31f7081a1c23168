"""CLI command ``log``: keys, receipts and the transparency log (``docs/transparency.md``).

Contract (stdout: exactly one JSON document; stderr: one-line messages, never a traceback):

* ``log keygen [--origin NAME | --audit-log PATH] --out FILE [--witness]`` writes a new
  signer key to FILE (mode 0600, created exclusively: an existing FILE is refused, exit 65)
  and prints ``{"origin", "verifier_key", "key_file", "type"}``. Without ``--origin`` the
  origin is the daemon's default for ``--audit-log`` (``docs/spec/transparency.md §6.3``).
* ``log verify DIR --key VKEY [--log FILE]... [--since CHECKPOINT_FILE]`` recomputes the
  tree from the audit lines, checks every tile, the checkpoint's signature and root, and
  consistency with an older checkpoint. The lines come from ``--log`` (oldest first), by
  default from the audit log DIR belongs to (``DIR`` = ``LOG.tlog``) and its rotated files.
  Exit 0 VERIFIED, 1 INVALID (with ``code``), 65 unreadable input.
* ``log verify-receipt FILE --key VKEY [--witness VKEY]... [--threshold N]``: exit 0
  VERIFIED, 1 INVALID, 65 unreadable.
* ``log monitor --dir DIR | --connect ADDR | --socket PATH --key VKEY [--state FILE]
  [--evidence DIR] [--interval S] [--count N]`` follows the checkpoints (``§9``); prints a
  summary; exit 0 while consistent, 1 on a fork or rollback (both notes written to
  ``--evidence``), 65 bad key or state, 69 unreachable.
* ``log cosign FILE --key WITNESS_KEY_FILE --log-key VKEY`` adds a witness cosignature to
  the checkpoint of a receipt or checkpoint file in place, after verifying it under the log
  key. Exit 0, 1 when the checkpoint does not verify, 65 unreadable.
* ``log receipt (--index N | --decision-id ID | --line-digest D) (--connect URL | --socket
  PATH | --dir DIR) [--key VKEY] [--out FILE] [--log FILE]... [--wait S]`` builds the receipt
  of a past decision (what ``rekor-cli get`` is to Rekor): from a daemon over HTTP (``GET
  /v1/log/entry``, ``/checkpoint``, ``/v1/log/inclusion-proof``), over the binary protocol
  (the line is read from the audit log the daemon's ``health`` names, which a Unix socket's
  peer shares; ``--log`` to name the files) or from a static tile directory (proofs from its
  tiles, the line from its entry bundles or the audit files beside it, ``--log``). With
  ``--key`` it is verified first. Prints the receipt (or, with ``--out``, writes it and prints
  ``{log_index, tree_size, file, verified}``). Exit 0; 1 the receipt does not verify under
  ``--key``; 65 no such line / bad query; 69 unreachable; 75 no checkpoint covers the line yet.
``VKEY`` arguments are verifier keys (``name+id+base64``) or files holding one.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from daemon.audit._transparency import audit_files
from daemon.tlog import (
    CHECKPOINT_FILE,
    SIG_COSIGNATURE,
    SIG_ED25519,
    CheckpointError,
    KeyFileError,
    KeyFormatError,
    Monitor,
    NoteError,
    Observation,
    SignerKey,
    TileDirectory,
    TileError,
    TileReader,
    VerifierKey,
    add_signature,
    consistency_proof,
    default_origin,
    encode_receipt,
    inclusion_proof,
    load_signer,
    make_receipt,
    open_checkpoint,
    peek_checkpoint,
    verify_directory,
    verify_receipt,
    write_key_file,
)
from daemon.tlog._lookup import LineNotFound, LineQuery, LookupInvalid, find_line
from daemon.tlog._tiles import ENTRIES, decode_bundle
from session import cli
from session.cli import CliError, Exit, RejectedInput

EXIT_OK: Final = Exit.OK
EXIT_INVALID: Final = Exit.FAIL
EXIT_USAGE: Final = Exit.USAGE
EXIT_REJECTED: Final = Exit.REJECTED
EXIT_UNREACHABLE: Final = Exit.UNREACHABLE
DEFAULT_AUDIT_LOG: Final = "evidenced-audit.jsonl"

_Refused = RejectedInput
_emit = cli.emit
_say = cli.say


def _read(path: str | Path) -> bytes:
    return cli.read_input(path)


def read_verifier_key(text: str, *, sig_type: int | None = None) -> VerifierKey:
    """A verifier key given inline or as a file holding one."""
    candidate = text
    if "+" not in text or Path(text).is_file():
        try:
            candidate = _read(text).decode("utf-8").strip()
        except UnicodeDecodeError:
            raise _Refused(f"key file {text} is not UTF-8 text") from None
    try:
        key = VerifierKey.parse(candidate)
    except KeyFormatError as error:
        raise _Refused(f"not a verifier key ({text}): {error}") from None
    if sig_type is not None and key.sig_type != sig_type:
        kind = "witness (type 0x04)" if sig_type == SIG_COSIGNATURE else "log (type 0x01)"
        raise _Refused(f"{text} is not a {kind} verifier key")
    return key


def _keygen(args: argparse.Namespace) -> int:
    origin = args.origin or default_origin(args.audit_log)
    sig_type = SIG_COSIGNATURE if args.witness else SIG_ED25519
    try:
        signer = SignerKey.generate(origin, sig_type)
    except KeyFormatError as error:
        raise _Refused(str(error)) from None
    try:
        path = write_key_file(args.out, signer)
    except KeyFileError as error:
        raise _Refused(str(error)) from None
    _say(f"wrote {path} (mode 0600); publish the verifier key, keep the file secret")
    _emit(
        {
            "origin": origin,
            "type": "witness" if args.witness else "log",
            "verifier_key": signer.verifier().encode(),
            "key_file": str(path),
        }
    )
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    key = read_verifier_key(args.key, sig_type=SIG_ED25519)
    directory = Path(args.directory)
    if not (directory / CHECKPOINT_FILE).is_file():
        raise _Refused(f"{directory} has no {CHECKPOINT_FILE}: not a transparency directory")
    if args.log:
        files = [Path(item) for item in args.log]
    elif directory.name.endswith(".tlog"):
        files = audit_files(directory.with_name(directory.name[: -len(".tlog")]))
    else:
        raise _Refused("give the audit log with --log (DIR is not named LOG.tlog)")
    for path in files:
        if not path.is_file():
            raise _Refused(f"{path} is not a file")
    since = _read(args.since) if args.since else None
    report = verify_directory(directory, files, key, since=since)
    document = report.to_dict()
    document["files"] = [str(path) for path in files]
    _emit(document)
    if not report.verified:
        _say(f"INVALID: {report.code}: {report.message}")
    return EXIT_OK if report.verified else EXIT_INVALID


def _verify_receipt(args: argparse.Namespace) -> int:
    if args.fleet:
        from daemon.commands._fleet_cli import verify_receipt_in_fleet

        return verify_receipt_in_fleet(args)
    if not args.key:
        raise cli.UsageError("log verify-receipt: --key or --fleet is required")
    key = read_verifier_key(args.key, sig_type=SIG_ED25519)
    witnesses = [read_verifier_key(item, sig_type=SIG_COSIGNATURE) for item in args.witness]
    if args.threshold > len(witnesses):
        raise _Refused(f"--threshold {args.threshold} exceeds the {len(witnesses)} witness keys")
    report = verify_receipt(_read(args.receipt), key, witnesses=witnesses, threshold=args.threshold)
    _emit(report.to_dict())
    if not report.verified:
        _say(f"INVALID: {report.code}: {report.message}")
    return EXIT_OK if report.verified else EXIT_INVALID


def _cosign(args: argparse.Namespace) -> int:
    try:
        witness = load_signer(args.key)
    except KeyFileError as error:
        raise _Refused(str(error)) from None
    if witness.sig_type != SIG_COSIGNATURE:
        raise _Refused(f"{args.key} is not a witness key (keygen --witness)")
    log_key = read_verifier_key(args.log_key, sig_type=SIG_ED25519)
    target = Path(args.file)
    data = _read(target)
    receipt: dict[str, Any] | None = None
    if data.lstrip().startswith(b"{"):
        try:
            receipt = json.loads(data)
            note = receipt["checkpoint"].encode("utf-8")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise _Refused(f"{target} is neither a receipt nor a checkpoint") from None
    else:
        note = data
    try:
        signed = open_checkpoint(note, log_key)
    except CheckpointError as error:
        _emit({"status": "INVALID", "code": error.code, "message": str(error)})
        return EXIT_INVALID
    cosigned = add_signature(note, witness)
    if receipt is not None:
        receipt["checkpoint"] = cosigned.decode("utf-8")
        output = (json.dumps(receipt, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    else:
        output = cosigned
    temporary = target.with_name(f".{target.name}.cosign-{os.getpid()}")
    cli.write_output(temporary, output)
    try:
        os.replace(temporary, target)
    except OSError as error:
        raise cli.OutputError(str(target), error.strerror or str(error)) from None
    _emit(
        {
            "status": "COSIGNED",
            "origin": signed.checkpoint.origin,
            "size": signed.checkpoint.size,
            "witness_key": witness.verifier().encode(),
            "file": str(target),
        }
    )
    return EXIT_OK


# --------------------------------------------------------------------------- monitor


def _static_source(
    directory: Path,
) -> tuple[Callable[[], bytes], Callable[[int, int], list[bytes]]]:
    tiles = TileDirectory(directory)

    def fetch() -> bytes:
        data = tiles.read_file(CHECKPOINT_FILE)
        if data is None:
            raise _Refused(f"{directory} has no {CHECKPOINT_FILE}")
        return data

    def prove(old: int, new: int) -> list[bytes]:
        return consistency_proof(TileReader(tiles, new).node, old, new)

    return fetch, prove


def _keep_evidence(root: Path, observation: Observation) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    folder = root / f"{observation.status.lower()}-{stamp}"
    folder.mkdir(parents=True, exist_ok=False)
    for name, data in observation.evidence:
        (folder / name).write_bytes(data)
    (folder / "observation.json").write_text(json.dumps(observation.to_dict(), indent=2) + "\n")
    return folder


def run_monitor(
    monitor: Monitor,
    fetch: Callable[[], bytes],
    prove: Callable[[int, int], list[bytes]],
    *,
    count: int,
    interval: float,
    evidence: Path,
    state: Path | None,
) -> tuple[int, dict[str, Any]]:
    """Poll ``count`` times (0: until an alarm or interrupt); (exit code, summary)."""
    seen: dict[str, int] = {}
    polls = 0
    kept: str | None = None
    alarm: Observation | None = None
    while True:
        observation = monitor.observe(fetch(), prove)
        polls += 1
        seen[observation.status] = seen.get(observation.status, 0) + 1
        _say(f"{observation.status}: {observation.message}")
        if observation.alarm:
            alarm = observation
            kept = str(_keep_evidence(evidence, observation))
            _say(f"evidence kept in {kept}")
            break
        if state is not None and monitor.last_note is not None:
            temporary = state.with_name(f".{state.name}.tmp-{os.getpid()}")
            temporary.write_bytes(monitor.last_note)
            os.replace(temporary, state)
        if count and polls >= count:
            break
        time.sleep(interval)
    last = monitor.last
    summary = {
        "status": alarm.status if alarm else "CONSISTENT",
        "message": alarm.message if alarm else None,
        "polls": polls,
        "observed": seen,
        "size": None if last is None else last.size,
        "evidence": kept,
    }
    return (EXIT_INVALID if alarm else EXIT_OK), summary


class _Unreachable(CliError):
    """The daemon cannot be reached (exit 69)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit=Exit.UNREACHABLE, code="UNREACHABLE")


def _remote_source(
    args: argparse.Namespace,
) -> tuple[Callable[[], bytes], Callable[[int, int], list[bytes]]]:
    from daemon.client._outcomes import ClientError, TransportError
    from daemon.client._sync import SyncClient
    from daemon.config._config import ConfigError, parse_address

    if args.socket:
        client = SyncClient(unix=args.socket, request_timeout=args.timeout)
    else:
        try:
            client = SyncClient(tcp=parse_address(args.connect), request_timeout=args.timeout)
        except ConfigError as error:
            raise _Refused(str(error)) from None

    def fetch() -> bytes:
        try:
            note: bytes = client.checkpoint()
            return note
        except TransportError as error:
            raise _Unreachable(str(error)) from None
        except ClientError as error:
            raise _Refused(f"the daemon refused the checkpoint request: {error}") from None

    def prove(old: int, new: int) -> list[bytes]:
        proof: list[bytes] = client.consistency_proof(old, new)
        return proof

    return fetch, prove


def _monitor(args: argparse.Namespace) -> int:
    if args.fleet:
        from daemon.commands._fleet_cli import run_fleet_monitor

        return run_fleet_monitor(args)
    if not args.key:
        raise cli.UsageError("log monitor: --key is required (except with --fleet)")
    key = read_verifier_key(args.key, sig_type=SIG_ED25519)
    state = Path(args.state) if args.state else None
    last_note = _read(state) if state is not None and state.exists() else None
    try:
        monitor = Monitor(key, last_note)
    except CheckpointError as error:
        raise _Refused(f"state {state}: {error}") from None
    if args.dir:
        fetch, prove = _static_source(Path(args.dir))
    else:
        fetch, prove = _remote_source(args)
    status, summary = run_monitor(
        monitor,
        fetch,
        prove,
        count=args.count,
        interval=args.interval,
        evidence=Path(args.evidence),
        state=state,
    )
    _emit(summary)
    return status


# --------------------------------------------------------------------------- receipt


def _line_query(args: argparse.Namespace) -> LineQuery:
    try:
        return LineQuery(
            index=args.index, decision_id=args.decision_id, line_digest=args.line_digest
        )
    except LookupInvalid as error:
        raise _Refused(str(error)) from None


def _find(files: list[Path], query: LineQuery) -> tuple[int, bytes]:
    if not files:
        raise _Refused("no audit files to read the line from (give --log FILE)")
    try:
        return find_line(files, query)
    except LineNotFound as error:
        raise CliError(str(error), exit=Exit.REJECTED, code="LINE_NOT_FOUND") from None
    except OSError as error:
        raise _Refused(f"cannot read the audit log: {error}") from None


def _static_receipt(args: argparse.Namespace, query: LineQuery) -> dict[str, Any]:
    """A receipt from a tile directory alone (plus its audit files or entry bundles)."""
    directory = Path(args.dir)
    tiles = TileDirectory(directory)
    note = tiles.read_file(CHECKPOINT_FILE)
    if note is None:
        raise _Refused(f"{directory} has no {CHECKPOINT_FILE}: not a transparency directory")
    size = peek_checkpoint(note).size
    if query.index is not None and query.index < size and not args.log:
        line = _bundle_line(tiles, query.index, size)
        found = (query.index, line) if line is not None else None
    else:
        found = None
    if found is None:
        if args.log:
            files = [Path(item) for item in args.log]
        elif directory.name.endswith(".tlog"):
            files = audit_files(directory.with_name(directory.name[: -len(".tlog")]))
        else:
            files = []
        found = _find(files, query)
    index, line = found
    if index >= size:
        raise CliError(
            f"log index {index} is not covered by the checkpoint (size {size}) yet",
            exit=Exit.BUSY,
            code="NOT_YET_COVERED",
        )
    try:
        proof = inclusion_proof(TileReader(tiles, size).node, index, size)
    except TileError as error:
        raise _Refused(f"{directory}: {error}") from None
    return make_receipt(line, index, size, proof, note)


def _bundle_line(tiles: TileDirectory, index: int, size: int) -> bytes | None:
    """Entry ``index`` from the entry bundles (``entry_bundles = true``), or None."""
    bundle, offset = divmod(index, 256)
    full = size // 256
    width = 256 if bundle < full else size % 256
    data = tiles.read(ENTRIES, bundle, width)
    if data is None:
        return None
    entries = decode_bundle(data)
    return entries[offset] if offset < len(entries) else None


def _remote_receipt(args: argparse.Namespace, query: LineQuery) -> dict[str, Any]:
    from daemon.client._outcomes import (
        ClientError,
        ClientTimeout,
        RejectedError,
        ServiceUnavailable,
        TransportError,
    )
    from daemon.client._receipts import ReceiptUnavailable, receipt_for_line_sync
    from daemon.client._sync import SyncClient
    from daemon.client._targets import parse_target

    options: dict[str, Any] = {
        "tls_ca": args.tls_ca,
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "token": _token(args.token_file) if args.token_file else None,
    }
    if args.socket:
        target = {"unix": args.socket, **options}
    elif args.address:
        try:
            parse_target(args.address)
        except ValueError as error:
            raise cli.UsageError(str(error)) from None
        target = {"url": args.address, **options}
    else:
        raise cli.UsageError("give one of --connect URL, --socket PATH, --dir DIR")

    def main() -> dict[str, Any]:
        with SyncClient(
            **target, connect_timeout=args.timeout, request_timeout=args.timeout
        ) as client:
            if client.protocol == "http":
                index, line = client.log_entry(query)
            else:
                if args.log:
                    files = [Path(item) for item in args.log]
                else:
                    audit = client.health().get("audit") or {}
                    path = audit.get("path") if isinstance(audit, dict) else None
                    files = audit_files(Path(path)) if isinstance(path, str) else []
                index, line = _find(files, query)
            return receipt_for_line_sync(client, index, line, wait=args.wait)

    try:
        return main()
    except ServiceUnavailable as error:
        raise CliError(
            f"refused: {error.code}: {error.message}", exit=Exit.BUSY, code=error.code
        ) from None
    except RejectedError as error:
        raise CliError(
            f"refused: {error.code}: {error.message}", exit=Exit.REJECTED, code=error.code
        ) from None
    except ClientTimeout as error:
        raise CliError(str(error), exit=Exit.BUSY, code="TIMEOUT") from None
    except TransportError as error:
        raise _Unreachable(str(error)) from None
    except ClientError as error:
        raise CliError(str(error), exit=Exit.INTERNAL, code="PROTOCOL") from None
    except ReceiptUnavailable as error:
        raise CliError(str(error), exit=Exit.BUSY, code="NOT_YET_COVERED") from None


def _token(path: str) -> str:
    lines = _read(path).decode("utf-8", "replace").splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise cli.UsageError(f"--token-file {path}: no token on its first line")
    return token


def _receipt(args: argparse.Namespace) -> int:
    query = _line_query(args)
    key = read_verifier_key(args.key, sig_type=SIG_ED25519) if args.key else None
    if args.fleet:
        from daemon.commands._fleet_cli import receipt_from_fleet

        receipt = receipt_from_fleet(args, query.decision_id, query.line_digest)
    elif args.dir:
        receipt = _static_receipt(args, query)
    else:
        receipt = _remote_receipt(args, query)
    data = encode_receipt(receipt)
    verified: bool | None = None
    if key is not None:
        report = verify_receipt(data, key)
        verified = report.verified
        if not report.verified:
            _emit(report.to_dict())
            _say(f"INVALID: {report.code}: {report.message}")
            return EXIT_INVALID
    if args.out:
        target = Path(args.out)
        temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        cli.write_output(temporary, data)
        try:
            os.replace(temporary, target)
        except OSError as error:
            raise cli.OutputError(str(target), error.strerror or str(error)) from None
        _say(f"receipt for log index {receipt['log_index']} written to {target}")
        _emit(
            {
                "log_index": receipt["log_index"],
                "tree_size": receipt["tree_size"],
                "file": str(target),
                "verified": verified,
            }
        )
    else:
        _emit(receipt)
    return EXIT_OK


def _index(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError("must be a non-negative integer")
    return int(text)


def _wrap(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except (NoteError, CheckpointError) as error:
            raise CliError(f"{error.code}: {error}", exit=Exit.REJECTED, code=error.code) from None

    return run


def _threshold(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    log = subparsers.add_parser("log", help="the transparency log: keys, receipts, verify")
    commands = log.add_subparsers(dest="log_command", metavar="COMMAND")
    keygen = commands.add_parser("keygen", help="write a new signing key (mode 0600)")
    keygen.add_argument("--out", required=True, help="the key file to create")
    keygen.add_argument("--origin", help="the log's origin (= key name)")
    keygen.add_argument(
        "--audit-log",
        default=DEFAULT_AUDIT_LOG,
        help="derive the default origin from this audit log path",
    )
    keygen.add_argument("--witness", action="store_true", help="a witness cosigning key")
    keygen.set_defaults(handler=_wrap(_keygen))

    verify = commands.add_parser("verify", help="recompute the tree and check tiles")
    verify.add_argument("directory", metavar="DIR", help="the transparency directory (LOG.tlog)")
    verify.add_argument("--key", required=True, help="the log's verifier key (or a file)")
    verify.add_argument("--log", action="append", default=[], help="audit file, oldest first")
    verify.add_argument("--since", help="an older checkpoint file to prove consistency with")
    verify.set_defaults(handler=_wrap(_verify))

    receipt = commands.add_parser("verify-receipt", help="check a decision receipt offline")
    receipt.add_argument("receipt", metavar="FILE", help="the receipt file ('-': stdin)")
    receipt.add_argument("--key", help="the log's verifier key (or a file)")
    receipt.add_argument("--fleet", help="a fleet file: the key is the log the receipt names")
    receipt.add_argument("--witness", action="append", default=[], help="witness verifier key")
    receipt.add_argument("--threshold", type=_threshold, default=0, help="cosignatures needed")
    receipt.set_defaults(handler=_wrap(_verify_receipt))

    monitor = commands.add_parser("monitor", help="follow checkpoints, prove consistency")
    where = monitor.add_mutually_exclusive_group(required=True)
    where.add_argument("--dir", help="a transparency directory (static tiles)")
    where.add_argument("--connect", help="a daemon's HOST:PORT")
    where.add_argument("--socket", help="a daemon's Unix socket")
    where.add_argument("--fleet", help="a fleet file: every log, from its published tiles")
    monitor.add_argument("--key", help="the log's verifier key (or a file; not with --fleet)")
    monitor.add_argument("--state", help="file (--fleet: folder) keeping the last checkpoint")
    monitor.add_argument(
        "--evidence",
        default="evidenced-monitor-evidence",
        help="folder where a fork's or rollback's notes are kept",
    )
    monitor.add_argument("--interval", type=float, default=5.0, help="seconds between polls")
    monitor.add_argument("--count", type=_threshold, default=0, help="polls (0: until alarm)")
    monitor.add_argument("--timeout", type=float, default=10.0, help="per-request seconds")
    monitor.set_defaults(handler=_wrap(_monitor))

    receipt_for = commands.add_parser(
        "receipt", help="fetch the receipt of a past decision (from a daemon or a tile directory)"
    )
    which = receipt_for.add_mutually_exclusive_group(required=True)
    which.add_argument("--index", type=_index, help="the audit line's log index (seq - 1)")
    which.add_argument("--decision-id", help="the decision's decision_id")
    which.add_argument("--line-digest", help="the audit line's line_digest (sha256:...)")
    source = receipt_for.add_mutually_exclusive_group(required=True)
    source.add_argument("--connect", dest="address", metavar="URL", help="a daemon's address")
    source.add_argument("--socket", help="a daemon's Unix socket")
    source.add_argument("--dir", help="a transparency directory (static tiles)")
    source.add_argument("--fleet", help="a fleet file: every log, from its published tiles")
    receipt_for.add_argument("--token-file", help="a file whose first line is the bearer token")
    receipt_for.add_argument("--tls-ca", help="CA bundle to verify the server")
    receipt_for.add_argument("--tls-cert", help="client certificate (PEM)")
    receipt_for.add_argument("--tls-key", help="client certificate's key (PEM)")
    receipt_for.add_argument("--log", action="append", default=[], help="audit file, oldest first")
    receipt_for.add_argument("--key", help="verify under the log's verifier key (or a file)")
    receipt_for.add_argument("--out", help="write the receipt to FILE (default: stdout)")
    receipt_for.add_argument(
        "--wait", type=float, default=10.0, help="seconds to wait for a covering checkpoint"
    )
    receipt_for.add_argument("--timeout", type=float, default=10.0, help="per-request seconds")
    receipt_for.set_defaults(handler=_wrap(_receipt))

    from daemon.commands._fleet_cli import register_publish

    register_publish(commands)

    cosign = commands.add_parser("cosign", help="add a witness cosignature to a checkpoint")
    cosign.add_argument("file", metavar="FILE", help="a receipt or a checkpoint file")
    cosign.add_argument("--key", required=True, help="the witness key file")
    cosign.add_argument("--log-key", required=True, help="the log's verifier key (or a file)")
    cosign.set_defaults(handler=_wrap(_cosign))
