"""Background verification of the audit log prefix start-up trusted from the sidecar, and of
the transparency tree against the lines (``docs/audit-log.md`` §7.6): how long a start on an
edited log or tree serves before ``health`` turns ``degraded``.

Generates a valid log of ``--mb`` MiB (default 64; the figure in the docs is ``--mb 1024``)
with ``bench_audit_startup.generate``, writes the sidecar at its end (a clean stop), makes a
same-length ``PASS``→``FAIL`` edit, opens the log as the daemon does (``AuditLog.open``) and
prints, for an edit on line 100 and on the next-to-last line:

* the start itself (what ``open`` took: the daemon serves from then on);
* the time from ``open`` until the alarm (the background verification found the edit);
* and for the unedited log the time to verify the whole prefix (``verified``).

Then it builds the log's transparency tree (tiles and a signed checkpoint, as a first start
with ``[transparency]`` does) and opens log and tree as the daemon does (``AuditLog.open``,
``open_transparency``, ``attach``): for the unedited tree, the time until the chain's pass
and then the tree's pass end (the whole background verification); for one hash flipped in the
first full level-0 tile and in the last full one the start never reads, the time until the
alarm.

One run each (a 1 GiB pass takes tens of seconds); the files are deleted at the end.

Run: ``.venv/bin/python benchmarks/bench_background_verify.py [--mb N] [--dir D]``
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_audit_startup import generate, sidecar_bytes

from daemon import AuditLog
from daemon.audit._audit_files import sidecar_path
from daemon.audit._transparency import TransparencyConfig, attach, line_source, open_transparency
from daemon.tlog import SignerKey, TransparencyLog, load_signer, tile_path, write_key_file

ORIGIN = "bench.example/evidenced"


def _edit(path: Path, offset: int) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset)
        line = handle.readline()
        index = line.index(b'"outcome":"PASS"')
        handle.seek(offset + index)
        handle.write(b'"outcome":"FAIL"')


def _measure(path: Path, sidecar: bytes, label: str) -> None:
    sidecar_path(path).write_bytes(sidecar)
    started = time.monotonic()
    log = AuditLog.open(path)
    opened = time.monotonic()
    background = log.background
    assert background is not None
    while background.state == "running":
        time.sleep(0.01)
    ended = time.monotonic()
    print(
        f"{label}: start {1000 * (opened - started):.1f} ms, background {background.state} "
        f"after {ended - opened:.2f} s ({background.end / 2**20:.0f} MiB prefix)"
    )
    if background.alarm:
        print(f"  alarm: {background.alarm[:140]}…")
    log.close_sync()


def _build_tree(path: Path, lines: int) -> TransparencyConfig:
    key = write_key_file(path.with_name("log.key"), SignerKey.generate(ORIGIN))
    config = TransparencyConfig(key_file=str(key), origin=ORIGIN)
    started = time.monotonic()
    TransparencyLog.open(
        config.directory_for(path),
        load_signer(key),
        log_size=lines,
        lines=line_source(path, lines),
        sync=False,
    )
    print(f"tree built from the lines in {time.monotonic() - started:.1f} s")
    return config


def _measure_tree(path: Path, sidecar: bytes, config: TransparencyConfig, label: str) -> None:
    sidecar_path(path).write_bytes(sidecar)
    started = time.monotonic()
    log = AuditLog.open(path)
    attach(log, open_transparency(config, path, log.durable.seq, sync=False))
    opened = time.monotonic()
    chain, tree = log.background, log.tree_background
    assert chain is not None and tree is not None
    chain_done: float | None = None
    while tree.state == "running":
        if chain_done is None and chain.state != "running":
            chain_done = time.monotonic()
        time.sleep(0.01)
    ended = time.monotonic()
    chain_done = chain_done or ended
    print(
        f"{label}: start {1000 * (opened - started):.1f} ms (log and tree), chain "
        f"{chain.state} after {chain_done - opened:.2f} s, tree {tree.state} after "
        f"{ended - opened:.2f} s ({ended - chain_done:.2f} s of its own; {tree.lines or 0:,} "
        f"lines, {tree.tiles or 0:,} tiles)"
    )
    if tree.alarm:
        print(f"  alarm: {tree.alarm[:160]}…")
    log.close_sync()


def _flip(tile: Path) -> None:
    data = bytearray(tile.read_bytes())
    data[100] ^= 0x01
    tile.write_bytes(bytes(data))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="evbgverify-", dir=args.dir))
    try:
        path = folder / "audit.jsonl"
        points = generate(path, args.mb)
        size = points[-1][2]
        print(f"log: {size / 2**20:.0f} MiB, {len(points):,} lines")
        at_end = sidecar_bytes(path, points[-1])
        _measure(path, at_end, "unedited")
        pristine = path.read_bytes() if args.mb <= 64 else None
        _edit(path, points[98][2])  # line 100 starts where line 99 ends
        _measure(path, at_end, "edit on line 100")
        with path.open("r+b") as handle:  # undo: FAIL -> PASS on line 100
            handle.seek(points[98][2])
            line = handle.readline()
            handle.seek(points[98][2] + line.index(b'"outcome":"FAIL"'))
            handle.write(b'"outcome":"PASS"')
        if pristine is not None:
            assert path.read_bytes() == pristine
        _edit(path, points[-3][2])  # the last line before the sidecar's own (start checks that)
        _measure(path, at_end, f"edit on line {len(points) - 1:,} (next to last)")
        with path.open("r+b") as handle:  # undo: the tree is built from the unedited lines
            handle.seek(points[-3][2])
            line = handle.readline()
            handle.seek(points[-3][2] + line.index(b'"outcome":"FAIL"'))
            handle.write(b'"outcome":"PASS"')
        config = _build_tree(path, len(points))
        directory = config.directory_for(path)
        _measure_tree(path, at_end, config, "tree unedited")
        for index in (0, len(points) // 256 - 2):
            tile = directory / tile_path(0, index)
            pristine_tile = tile.read_bytes()
            _flip(tile)
            _measure_tree(path, at_end, config, f"tree: one hash flipped in {tile_path(0, index)}")
            tile.write_bytes(pristine_tile)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
