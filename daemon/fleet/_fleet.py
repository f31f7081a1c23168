"""``evidenced log publish`` and ``evidenced log monitor --fleet``: many logs, read from where
they are published (``docs/deployment.md``).

A **fleet file** (TOML) names every log a monitor follows and the witnesses it trusts::

    [[log]]
    key = "replica-a.example/evidenced+3f2a9c1e+AW…"   # the log's verifier key (or a file)
    tiles = "s3://evidence/tlog/replica-a/"             # fs:PATH, s3://…, or http(s)://…/

    [witnesses]
    keys = ["witness.example+0c1d2e3f+BA…"]            # cosignature (type 0x04) keys
    threshold = 1                                       # cosignatures each checkpoint needs

Rules (the contract) of one fleet pass, per log in file order:

1. The file is refused whole (exit 65, ``FLEET_INVALID``) when it is not TOML, a key is
   unknown, a log lacks ``key`` or ``tiles``, two logs share an origin or a log tag
   (:mod:`daemon.tlog._names`), or the threshold is not an integer in ``[0, len(keys)]``.
2. The log's checkpoint is read from its published tiles and observed by a
   :class:`daemon.tlog.Monitor` pinned to its key, whose state (the last consistent checkpoint)
   is kept per origin under ``--state-dir``; consistency is proved from the published tiles
   alone. ``FORK`` and ``ROLLBACK`` keep both signed notes as evidence under ``--evidence``.
3. A checkpoint with fewer verified witness cosignatures than the threshold is
   ``COSIGNATURES_SHORT``. An unreadable source is ``UNREACHABLE``.
4. Exit 0 when every log is ``FIRST``, ``SAME`` or ``GREW`` with its cosignatures; else 1.
5. A decision looked up by its id (``log receipt --fleet``) is searched for in the one log
   whose tag the id carries (a version-8 id of a replica with a transparency log); an id
   without a tag is searched for in every log, in file order.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs

from daemon.retention._publish import (
    PublishError,
    Target,
    TargetTiles,
    open_target,
    publish_directory,
)
from daemon.tlog import CHECKPOINT_FILE, CheckpointError, Monitor, count_cosignatures
from daemon.tlog._checkpoint import open_checkpoint, peek_checkpoint
from daemon.tlog._merkle import consistency_proof, inclusion_proof, leaf_hash, tree_root
from daemon.tlog._names import log_tag, tag_of
from daemon.tlog._note import SIG_COSIGNATURE, SIG_ED25519, KeyFormatError, VerifierKey
from daemon.tlog._receipt import make_receipt
from daemon.tlog._tiles import (
    ENTRIES,
    TILE_WIDTH,
    TileError,
    TileReader,
    decode_bundle,
    tile_path,
    tile_widths,
)
from daemon.wire._errors import PeerError

__all__ = ["Fleet", "FleetError", "FleetLog", "load_fleet", "monitor_fleet", "publish"]

_LOG_KEYS: Final = frozenset({"key", "tiles", "name"})
_WITNESS_KEYS: Final = frozenset({"keys", "threshold"})


class FleetError(PeerError):
    """The fleet file is refused (rule 1)."""

    code = "FLEET_INVALID"


@attrs.frozen
class FleetLog:
    key: VerifierKey
    tiles: str

    @property
    def origin(self) -> str:
        return self.key.name


@attrs.frozen
class Fleet:
    logs: tuple[FleetLog, ...]
    witnesses: tuple[VerifierKey, ...] = ()
    threshold: int = 0


def _key(text: str, where: str, sig_type: int, base: Path) -> VerifierKey:
    if "+" not in text:
        path = Path(text) if Path(text).is_absolute() else base / text
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise FleetError(f"{where}: cannot read key file {path}: {error}") from None
    try:
        key = VerifierKey.parse(text)
    except KeyFormatError as error:
        raise FleetError(f"{where}: {error}") from None
    if key.sig_type != sig_type:
        raise FleetError(f"{where}: key type {key.sig_type:#04x}, expected {sig_type:#04x}")
    return key


def load_fleet(path: Path) -> Fleet:
    """Read and check a fleet file (rule 1); key files are relative to the file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise FleetError(f"{path}: {error}") from None
    unknown = set(data) - {"log", "witnesses"}
    if unknown:
        raise FleetError(f"{path}: unknown keys {sorted(unknown)}")
    logs = _fleet_logs(path, data.get("log", []))
    witnesses, threshold = _fleet_witnesses(path, data.get("witnesses", {}))
    return Fleet(logs, witnesses, threshold)


def _fleet_logs(path: Path, entries: object) -> tuple[FleetLog, ...]:
    """The ``[[log]]`` entries: each a key and a tiles location, distinct origins and tags."""
    if not isinstance(entries, list) or not entries:
        raise FleetError(f"{path}: no [[log]] entries")
    logs: list[FleetLog] = []
    for number, entry in enumerate(entries, 1):
        where = f"{path}: log {number}"
        if not isinstance(entry, dict) or set(entry) - _LOG_KEYS:
            raise FleetError(f"{where}: only {sorted(_LOG_KEYS)} are known")
        if not isinstance(entry.get("key"), str) or not isinstance(entry.get("tiles"), str):
            raise FleetError(f"{where}: needs key and tiles (strings)")
        logs.append(FleetLog(_key(entry["key"], where, SIG_ED25519, path.parent), entry["tiles"]))
    origins = [log.origin for log in logs]
    if len(set(origins)) != len(origins):
        raise FleetError(f"{path}: two logs share an origin")
    if len({log_tag(origin) for origin in origins}) != len(origins):
        raise FleetError(
            f"{path}: two origins share a log tag (the first 4 bytes of SHA-256 of the origin,"
            " which decision ids carry): rename one log"
        )
    return tuple(logs)


def _fleet_witnesses(path: Path, table: object) -> tuple[tuple[VerifierKey, ...], int]:
    """The ``[witnesses]`` table: the cosigners' keys and how many must cosign."""
    if not isinstance(table, dict) or set(table) - _WITNESS_KEYS:
        raise FleetError(f"{path}: [witnesses] takes only {sorted(_WITNESS_KEYS)}")
    keys = table.get("keys", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise FleetError(f"{path}: witnesses.keys must be a list of keys")
    witnesses = tuple(
        _key(k, f"{path}: witness {i}", SIG_COSIGNATURE, path.parent) for i, k in enumerate(keys, 1)
    )
    threshold = table.get("threshold", len(witnesses))
    if type(threshold) is not int or not 0 <= threshold <= len(witnesses):
        raise FleetError(f"{path}: witnesses.threshold must be an integer in [0, {len(keys)}]")
    return witnesses, threshold


def _safe(origin: str) -> str:
    """An origin as a file name."""
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in origin)


def _state_file(directory: Path, origin: str) -> Path:
    return directory / f"{_safe(origin)}.checkpoint"


def _keep(evidence: Path, origin: str, status: str, items: tuple[tuple[str, bytes], ...]) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    folder = evidence / f"{_safe(origin)}-{status.lower()}-{stamp}"
    folder.mkdir(parents=True, exist_ok=False)
    for name, data in items:
        (folder / name).write_bytes(data)
    return str(folder)


def _observe_one(
    log: FleetLog, fleet: Fleet, state_dir: Path, evidence: Path, target: Target
) -> dict[str, Any]:
    result: dict[str, Any] = {"origin": log.origin, "tiles": log.tiles}
    state = _state_file(state_dir, log.origin)
    try:
        monitor = Monitor(log.key, state.read_bytes() if state.exists() else None)
    except CheckpointError as error:
        return {**result, "status": "STATE_INVALID", "message": f"{state}: {error}"}
    try:
        note = target.read(CHECKPOINT_FILE)
    except PublishError as error:
        return {**result, "status": "UNREACHABLE", "message": str(error)}
    if note is None:
        return {**result, "status": "UNREACHABLE", "message": f"no {CHECKPOINT_FILE} published"}
    tiles = TargetTiles(target)

    def prove(old: int, new: int) -> list[bytes]:
        return consistency_proof(TileReader(tiles, new).node, old, new)  # type: ignore[arg-type]

    try:
        observation = monitor.observe(note, prove)
    except (PublishError, TileError) as error:
        return {**result, "status": "UNPROVEN", "message": str(error)}
    result.update(observation.to_dict())
    if observation.alarm:
        result["evidence"] = _keep(evidence, log.origin, observation.status, observation.evidence)
        return result
    if observation.status == "BAD_CHECKPOINT":
        return result
    if monitor.last_note is not None:
        state_dir.mkdir(parents=True, exist_ok=True)
        temporary = state.with_name(f".{state.name}.tmp-{os.getpid()}")
        temporary.write_bytes(monitor.last_note)
        os.replace(temporary, state)
    signed = open_checkpoint(note, log.key, fleet.witnesses)
    cosigned = count_cosignatures(signed, fleet.witnesses)
    result["cosignatures"] = cosigned
    if cosigned < fleet.threshold:
        result["status"] = "COSIGNATURES_SHORT"
        result["message"] = f"{cosigned} of the {fleet.threshold} witness cosignatures needed"
    return result


_GOOD: Final = frozenset({"FIRST", "SAME", "GREW"})


def monitor_fleet(
    fleet: Fleet, state_dir: Path, evidence: Path
) -> tuple[bool, list[dict[str, Any]]]:
    """One pass over every log (rules 2–4): (all good, one result per log)."""
    results = []
    for log in fleet.logs:
        try:
            target = open_target(log.tiles)
        except PublishError as error:
            results.append({"origin": log.origin, "status": "UNREACHABLE", "message": str(error)})
            continue
        results.append(_observe_one(log, fleet, state_dir, evidence, target))
    return all(r["status"] in _GOOD for r in results), results


class PublishedLog:
    """One fleet log as published: its checkpoint opened under the log's key and its tiles
    proved to hash to the checkpoint's root (:class:`FleetError` otherwise)."""

    def __init__(self, log: FleetLog, target: Target) -> None:
        self.log = log
        self.target = target
        note = target.read(CHECKPOINT_FILE)
        if note is None:
            raise FleetError(f"{log.origin}: no {CHECKPOINT_FILE} published at {log.tiles}")
        try:
            checkpoint = open_checkpoint(note, log.key).checkpoint
        except CheckpointError as error:
            raise FleetError(f"{log.origin}: {error}") from None
        self.note = note
        self.size = checkpoint.size
        self.reader = TileReader(TargetTiles(target), self.size)  # type: ignore[arg-type]
        try:
            if tree_root(self.reader.node, self.size) != checkpoint.root:
                raise FleetError(f"{log.origin}: the published tiles do not hash to the checkpoint")
        except (TileError, PublishError) as error:
            raise FleetError(f"{log.origin}: {error}") from None

    def entries(self) -> Iterator[bytes]:
        """Every line of the log, in order, each bundle proved against its level-0 tile (the
        log needs ``[transparency] entry_bundles = true``)."""
        level, full, width = tile_widths(self.size)[0] if self.size else (0, 0, 0)
        try:
            for index in range(full + (1 if width else 0)):
                bundle = self.target.read(
                    tile_path(ENTRIES, index, TILE_WIDTH if index < full else width)
                )
                if bundle is None:
                    raise FleetError(
                        f"{self.log.origin}: entry bundle {index} is not published (the log"
                        " needs [transparency] entry_bundles = true)"
                    )
                entries = decode_bundle(bundle)
                hashes = b"".join(leaf_hash(entry) for entry in entries)
                if hashes != self.reader.tile(level, index):
                    raise FleetError(f"{self.log.origin}: entry bundle {index} is not the log's")
                yield from entries
        except (TileError, PublishError) as error:
            raise FleetError(f"{self.log.origin}: {error}") from None

    def receipt(self, index: int, line: bytes) -> dict[str, Any]:
        """The receipt of the line at ``index`` under the published checkpoint."""
        proof = inclusion_proof(self.reader.node, index, self.size)
        return make_receipt(line, index, self.size, proof, self.note)


def materialize(log: FleetLog, target: Target, out: Path) -> int:
    """Write the published log's proved lines to ``out`` as an audit log file; how many."""
    published = PublishedLog(log, target)
    with out.open("wb") as handle:
        handle.writelines(entry + b"\n" for entry in published.entries())
    return published.size


def decision_receipts(fleet: Fleet) -> dict[str, dict[str, Any]]:
    """Every decision of every fleet log, read once from what is published: decision id →
    its receipt under its replica's published checkpoint."""
    found: dict[str, dict[str, Any]] = {}
    for log in fleet.logs:
        published = PublishedLog(log, open_target(log.tiles))
        for index, entry in enumerate(published.entries()):
            if b'"event":"decision"' not in entry:
                continue
            decision_id = json.loads(entry).get("decision_id")
            if isinstance(decision_id, str):
                found[decision_id] = published.receipt(index, entry)
    return found


def fleet_receipt(
    fleet: Fleet, *, decision_id: str | None = None, line_digest: str | None = None
) -> dict[str, Any] | None:
    """The receipt of the decision line named by its ``decision_id`` or ``line_digest``, from
    whichever fleet log holds it (read from what is published only), or ``None``."""
    field, value = (
        ("decision_id", decision_id) if decision_id is not None else ("line_digest", line_digest)
    )
    if value is None:
        raise ValueError("give decision_id or line_digest")
    needle = f'"{field}":"{value}"'.encode()
    for log in _candidates(fleet, decision_id):
        published = PublishedLog(log, open_target(log.tiles))
        for index, entry in enumerate(published.entries()):
            if needle in entry and json.loads(entry).get(field) == value:
                return published.receipt(index, entry)
    return None


def _candidates(fleet: Fleet, decision_id: str | None) -> tuple[FleetLog, ...]:
    """The logs that may hold the decision: the one its id's tag names (rule 5), else all."""
    tag = None if decision_id is None else tag_of(decision_id)
    if tag is None:
        return fleet.logs
    return tuple(log for log in fleet.logs if log_tag(log.origin) == tag)


def fleet_key_for_receipt(data: bytes, fleet: Fleet) -> VerifierKey | None:
    """The verifier key of the fleet log whose origin the receipt's checkpoint names (its
    signature is checked by the caller, with that key); ``None`` when no log has it."""
    try:
        note = json.loads(data)["checkpoint"].encode("utf-8")
        origin = peek_checkpoint(note).origin
    except (ValueError, KeyError, TypeError, AttributeError, CheckpointError):
        return None
    return next((log.key for log in fleet.logs if log.origin == origin), None)


def publish(directory: Path, spec: str) -> dict[str, Any]:
    """One publishing pass (``log publish``)."""
    size = publish_directory(directory, spec)
    return {"status": "PUBLISHED", "target": spec, "size": size}
