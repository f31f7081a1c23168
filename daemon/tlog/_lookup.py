"""One guarded way to look an audit line (a transparency-log leaf) up by its index, decision
id or line digest: the daemon's ``GET /v1/log/entry`` (:class:`LineLookup` over a
:class:`LineIndex`), and the offline scan of ``evidenced log receipt`` (:func:`find_line`).

Rules (the contract):

1. The files are an audit log's rotated files then the live file, in chain order
   (``daemon.audit`` lists them). Leaf ``index`` is the line whose ``seq``
   is ``index + 1``.
2. Offline (:func:`find_line`). By index: the rotated files' names (``LOG.<first seq>-<last
   seq>``) say which file holds the line, only that file is read, up to the line. By
   ``decision_id`` or ``line_digest``: the files are read newest first, every line whose bytes
   contain the value is parsed, and the first whose field equals it exactly is the answer.
3. A query is checked before a file is opened or the index is asked (:class:`LookupInvalid`):
   an index is a non-negative integer, a decision id a UUID in lower-case hex, a line digest
   ``sha256:`` and 64 lower-case hex digits; exactly one of the three.
4. Nothing found is :class:`LineNotFound`; a file that cannot be read is ``OSError``.
5. The index (:class:`LineIndex`) lives where the lines are committed (the audit writer, in
   the one process that owns the log: the sequencer under ``--workers N``) and holds, for
   every line, its offset in its file, and a 32-bit keyed fingerprint (Python's SipHash of
   the value behind 16 random bytes drawn at start, so no one can aim collisions) of its
   top-level ``decision_id``, if any, and of its ``line_digest``, in one table with linear
   hashing (buckets of about :data:`BUCKET_LOAD` entries split one at a time as it grows: no
   pause to rehash). A
   lookup is O(1): one bucket searched in C, then only the lines whose fingerprint matches are
   read. It costs about 40 bytes a line (8 for the offset, 12 per key: a 4-byte fingerprint
   and an 8-byte ``seq``; 38 MiB for 1M lines, ``docs/benchmarks.md``).
6. It is fed by the writer with every line right after the line is durable
   (:meth:`LineIndex.add`, with the line's offset in its file: 0 starts a new file) and rebuilt
   at start in a background thread of its own (:meth:`LineIndex.rebuild`) from the lines
   already on disk (the live file's descriptor is taken at start, so a rotation meanwhile
   changes nothing), at most :data:`REBUILD_BURST` lines between two yields of the GIL. Until
   that rebuild is done, a query the index cannot answer yet is :class:`IndexRebuilding`
   (``BUSY``: retry), never a wrong "not found".
7. An answer is read from disk, never from memory: the candidate line is read at its offset
   through :mod:`daemon.tlog._served_files` (rules 1–3: the audit log's directory, no link, a
   regular file; rule 6: a thread of its own limiter, within its deadline), at most
   :data:`MAX_LINE_BYTES`, and is the answer only if it parses and carries the expected
   ``seq`` and the asked field exactly; a rotation that moved it meanwhile is followed to the
   rotated file. So a fingerprint collision costs one line read, never a wrong answer.
8. The lookup budget (:class:`LookupBudget`): at most :data:`LOOKUP_SLOTS` lookups at once per
   serving process, at most :data:`LOOKUP_SLOTS_PER_PEER` of them one peer's (a host, an
   IPv6 /64, a Unix uid); over either is :class:`LookupBusy` (``BUSY``) at once, so one peer
   cannot take every slot.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import re
import sys
import threading
import time
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from daemon.tlog._served_files import FileReads, NotServed, open_under
from daemon.tlog._verify import iter_lines
from daemon.wire._errors import Busy, PeerError, ServiceError

__all__ = [
    "LOOKUP_SLOTS",
    "LOOKUP_SLOTS_PER_PEER",
    "IndexFailed",
    "IndexRebuilding",
    "LineIndex",
    "LineLookup",
    "LineNotFound",
    "LineQuery",
    "LookupBudget",
    "LookupBusy",
    "LookupInvalid",
    "find_line",
]

_ARCHIVE_RE: Final = re.compile(r"\.(\d{12})-(\d{12})\Z")
DECISION_ID_RE: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
LINE_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}")
_CHUNK: Final = 1 << 16
#: Mean entries per bucket of the index's table before one more bucket is split off (rule 5).
BUCKET_LOAD: Final = 64
#: Lines the rebuild indexes between two yields of the GIL (rule 6).
REBUILD_BURST: Final = 2048
#: The longest line a lookup reads (the audit log's own bound).
MAX_LINE_BYTES: Final = 64 * 1024 * 1024
#: Lookups at once per serving process, and per peer (rule 8).
LOOKUP_SLOTS: Final = 8
LOOKUP_SLOTS_PER_PEER: Final = 2
_READ_STEP: Final = 1 << 14
_REBUILD_CHUNK: Final = 1 << 18
_DECISION_KEY: Final = b'"decision_id":"'
_SEAL_KEY: Final = b',"line_digest":"'
_DIGEST_CHARS: Final = len("sha256:") + 64


class LookupInvalid(PeerError, ValueError):
    """The query itself is malformed (rule 3): the asker's fault."""


class LineNotFound(PeerError, LookupError):
    """No audit line answers the query (rule 4)."""


class IndexRebuilding(Busy):
    """The index is still being rebuilt and cannot answer this query yet (rule 6)."""


class LookupBusy(Busy):
    """Every lookup slot, or the peer's share of them, is taken (rule 8)."""


@attrs.frozen
class LineQuery:
    """Exactly one of ``index``, ``decision_id``, ``line_digest`` (rule 3)."""

    index: int | None = None
    decision_id: str | None = None
    line_digest: str | None = None

    def __attrs_post_init__(self) -> None:
        given = [v for v in (self.index, self.decision_id, self.line_digest) if v is not None]
        if len(given) != 1:
            raise LookupInvalid("give exactly one of index, decision_id, line_digest")
        if self.index is not None and (type(self.index) is not int or self.index < 0):
            raise LookupInvalid("index must be a non-negative integer")
        if self.decision_id is not None and not DECISION_ID_RE.fullmatch(self.decision_id):
            raise LookupInvalid("decision_id must be a UUID in lower-case hex")
        if self.line_digest is not None and not LINE_DIGEST_RE.fullmatch(self.line_digest):
            raise LookupInvalid("line_digest must be 'sha256:' and 64 lower-case hex digits")

    def describe(self) -> str:
        if self.index is not None:
            return f"log index {self.index}"
        if self.decision_id is not None:
            return f"decision_id {self.decision_id}"
        return f"line_digest {self.line_digest}"


def find_line(files: Sequence[Path], query: LineQuery) -> tuple[int, bytes]:
    """``(log index, line without newline)`` of the line ``query`` names (module rules)."""
    if query.index is not None:
        return query.index, _by_index(files, query.index)
    field, value = (
        ("decision_id", query.decision_id)
        if query.decision_id is not None
        else ("line_digest", query.line_digest)
    )
    assert value is not None
    needle = value.encode("ascii")
    for path in reversed(files):
        for line in _lines_newest_first(path):
            if needle not in line:
                continue
            record = _record(line)
            if record is not None and record.get(field) == value:
                seq = record.get("seq")
                if type(seq) is int and seq >= 1:
                    return seq - 1, line
    raise LineNotFound(f"no audit line with {query.describe()}")


def _by_index(files: Sequence[Path], index: int) -> bytes:
    seq = index + 1
    first = 1
    for path in files:
        match = _ARCHIVE_RE.search(path.name)
        if match is not None:
            start, end = int(match[1]), int(match[2])
            if seq > end:
                first = end + 1
                continue
            first = start
        for offset, line in enumerate(iter_lines([path], [False])):
            if offset == seq - first:
                record = _record(line)
                if record is None or record.get("seq") != seq:
                    raise LineNotFound(f"the line at log index {index} does not carry seq {seq}")
                return line
        break
    raise LineNotFound(f"no audit line at log index {index}")


def _record(line: bytes) -> dict[str, object] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if type(record) is dict else None


def _lines_newest_first(path: Path) -> Iterator[bytes]:
    """The complete lines of ``path``, last first (a torn final segment is not a line)."""
    with path.open("rb") as handle:
        end = handle.seek(0, 2)
        position = end
        carry = b""
        at_end = True
        while position > 0:
            step = min(_CHUNK, position)
            position -= step
            handle.seek(position)
            parts = (handle.read(step) + carry).split(b"\n")
            carry = parts[0]
            tail = parts[1:]
            if at_end and tail:
                tail = tail[:-1]  # after the last newline: empty, or a torn line
                at_end = False
            yield from reversed(tail)
        if not at_end:
            yield carry


# --------------------------------------------------------------------------- the index (rules 5-7)


class IndexFailed(ServiceError):
    """The index stopped (it could not take a line): lookups cannot be answered this run."""


def _decision_id(line: bytes) -> bytes | None:
    """The top-level ``decision_id`` of an audit line, or a candidate for it. The key's bytes
    occur unescaped only as a key (a quote inside a JSON string is escaped): when they occur
    once that is the candidate (a nested one is weeded out when the line is read, rule 7);
    more than once, the line is parsed."""
    start = line.find(_DECISION_KEY)
    if start < 0:
        return None
    start += len(_DECISION_KEY)
    if line.find(_DECISION_KEY, start) < 0:
        end = line.find(b'"', start)
        return line[start:end] if end > start else None
    record = _record(line)
    value = None if record is None else record.get("decision_id")
    return value.encode("utf-8") if isinstance(value, str) else None


def _line_digest(line: bytes) -> bytes | None:
    """The ``line_digest`` of a sealed audit line: its last key, at a fixed place."""
    end = len(line) - 2
    start = end - _DIGEST_CHARS
    key = start - len(_SEAL_KEY)
    if key < 0 or line[end:] != b'"}' or line[key:start] != _SEAL_KEY:
        return None
    return line[start:end]


class _Table:
    """32-bit fingerprint → seqs: linear hashing over buckets of two arrays (rule 5)."""

    __slots__ = ("_fingerprints", "_level", "_seqs", "_split", "count")

    def __init__(self) -> None:
        self._fingerprints: list[array[int]] = [array("I")]
        self._seqs: list[array[int]] = [array("Q")]
        self._level = 0  # 2**level buckets, plus the `split` already split off this round
        self._split = 0
        self.count = 0

    def _bucket(self, fingerprint: int) -> int:
        bucket = fingerprint & ((1 << self._level) - 1)
        if bucket < self._split:
            bucket = fingerprint & ((2 << self._level) - 1)
        return bucket

    def add(self, fingerprint: int, seq: int) -> None:
        bucket = fingerprint & ((1 << self._level) - 1)
        if bucket < self._split:
            bucket = fingerprint & ((2 << self._level) - 1)
        self._fingerprints[bucket].append(fingerprint)
        self._seqs[bucket].append(seq)
        self.count += 1
        if self.count > BUCKET_LOAD * len(self._seqs):
            self._split_one()

    def _split_one(self) -> None:
        """Split bucket ``split`` by the next bit: its entries stay or move to a new bucket."""
        old, bit = self._split, 1 << self._level
        stay_f, stay_s, move_f, move_s = array("I"), array("Q"), array("I"), array("Q")
        for fingerprint, seq in zip(self._fingerprints[old], self._seqs[old], strict=True):
            if fingerprint & bit:
                move_f.append(fingerprint)
                move_s.append(seq)
            else:
                stay_f.append(fingerprint)
                stay_s.append(seq)
        self._fingerprints[old], self._seqs[old] = stay_f, stay_s
        self._fingerprints.append(move_f)
        self._seqs.append(move_s)
        self._split += 1
        if self._split == bit:
            self._level += 1
            self._split = 0

    def find(self, fingerprint: int) -> list[int]:
        bucket = self._bucket(fingerprint)
        fingerprints, seqs = self._fingerprints[bucket], self._seqs[bucket]
        found: list[int] = []
        position = -1
        while True:
            try:
                position = fingerprints.index(fingerprint, position + 1)
            except ValueError:
                return found
            found.append(seqs[position])

    def nbytes(self) -> int:
        arrays = sum(map(sys.getsizeof, self._fingerprints)) + sum(map(sys.getsizeof, self._seqs))
        return arrays + sys.getsizeof(self._fingerprints) + sys.getsizeof(self._seqs)


def _archives(log: Path) -> list[tuple[int, int, str]]:
    """``(first seq, last seq, name)`` of the rotated files beside ``log``, in chain order."""
    prefix = log.name + "."
    found = []
    for name in os.listdir(log.parent):
        match = _ARCHIVE_RE.search(name)
        if match is not None and name[: match.start()] + "." == prefix:
            found.append((int(match[1]), int(match[2]), name))
    return sorted(found)


class LineIndex:
    """Where every audit line is, by ``seq``, ``decision_id`` and ``line_digest`` (rules 5–7).

    ``log`` is the live audit file, whose first line is ``first_seq``; lines up to
    ``durable_seq`` (``durable_size`` bytes of the live file) are on disk already and come from
    :meth:`rebuild`; the writer :meth:`add`-s the next ones. Thread-safe."""

    def __init__(self, log: Path, *, first_seq: int, durable_seq: int, durable_size: int) -> None:
        self.log = log
        self._key = os.urandom(16)
        self._lock = threading.Lock()
        self._table = _Table()
        self._offsets = array("Q", bytes(8 * durable_seq))  # offset + 1 (0: not indexed)
        self._on_disk = durable_seq
        self._archives = [item for item in _archives(log) if item[0] < first_seq]
        self._starts = [first for first, _, _ in self._archives] + [first_seq]
        self._live = (first_seq, durable_size)
        self._live_fd: int | None = None
        self.rebuilt = durable_seq == 0
        self.indexed = 0
        self.failure: str | None = None
        self.rebuild_error: str | None = None
        if durable_size:
            try:
                self._live_fd = open_under(log.parent, log.name)  # rule 6: before a rotation
            except (OSError, NotServed) as error:
                self.rebuild_error = f"{log}: {error}"

    # -- filling it

    def _fingerprint(self, person: bytes, value: bytes) -> int:
        return hash(self._key + person + value) & 0xFFFFFFFF

    def _put(self, seq: int, line: bytes) -> None:
        """(under the lock) The keys of line ``seq`` (no newline) into the table."""
        ident = _decision_id(line)
        if ident is not None:
            self._table.add(self._fingerprint(b"decision_id", ident), seq)
        digest = _line_digest(line)
        if digest is not None:
            self._table.add(self._fingerprint(b"line_digest", digest), seq)
        self.indexed += 1

    def add(self, lines: Sequence[bytes], offset: int) -> None:
        """(the audit writer, once ``lines`` are durable) The next lines, each ending with its
        newline, the first at ``offset`` of its file (0: it starts a new file). Never raises:
        a failure stops the index (:attr:`failure`), never the writer."""
        if self.failure is not None:
            return
        try:
            with self._lock:
                for line in lines:
                    seq = len(self._offsets) + 1
                    if offset == 0 and self._starts[-1] != seq:
                        self._starts.append(seq)
                    self._offsets.append(offset + 1)
                    self._put(seq, line[:-1] if line.endswith(b"\n") else line)
                    offset += len(line)
        except Exception as error:  # MemoryError, a bug: the lines are durable regardless
            self.failure = f"{type(error).__name__}: {error}"

    def start_rebuild(self) -> None:
        """Rebuild the lines on disk in a background thread of its own (rule 6)."""
        if not self.rebuilt:
            threading.Thread(target=self.rebuild, name="evidenced-line-index", daemon=True).start()

    def rebuild(self) -> None:
        """Index the lines that were on disk at start: the rotated files, then the live file
        up to its durable end (rule 6)."""
        try:
            for first, last, name in self._archives:
                try:
                    fd = open_under(self.log.parent, name)
                except (OSError, NotServed) as error:
                    self.rebuild_error = f"{name}: {error}"
                    continue
                try:
                    self._index_file(fd, first, min(last, self._on_disk), None)
                finally:
                    os.close(fd)
            if self._live_fd is not None:
                self._index_file(self._live_fd, self._live[0], self._on_disk, self._live[1])
        except OSError as error:
            self.rebuild_error = f"{self.log}: {error}"
        finally:
            if self._live_fd is not None:
                os.close(self._live_fd)
                self._live_fd = None
            self.rebuilt = True

    def _index_file(self, fd: int, first_seq: int, last_seq: int, size: int | None) -> None:
        seq, offset, position, pending = first_seq, 0, 0, b""
        burst = 0
        while seq <= last_seq:
            step = _REBUILD_CHUNK if size is None else min(_REBUILD_CHUNK, size - position)
            chunk = os.pread(fd, step, position) if step > 0 else b""
            if not chunk:
                return
            position += len(chunk)
            pending += chunk
            *complete, pending = pending.split(b"\n")
            with self._lock:
                for line in complete:
                    if seq > last_seq:
                        break
                    self._offsets[seq - 1] = offset + 1
                    self._put(seq, line)
                    offset += len(line) + 1
                    seq += 1
            burst += len(complete)
            if burst >= REBUILD_BURST:
                burst = 0
                time.sleep(0)  # let the event loop's thread have the GIL
            if len(pending) > MAX_LINE_BYTES:
                return

    # -- asking it

    def status(self) -> dict[str, Any]:
        """What ``health`` shows of it (``transparency.lookup_index``)."""
        with self._lock:
            lines = len(self._offsets)
            nbytes = self._table.nbytes() + sys.getsizeof(self._offsets)
        return {
            "lines": lines,
            "indexed": self.indexed,
            "rebuilt": self.rebuilt,
            "bytes": nbytes,
            "failed": self.failure or self.rebuild_error,
        }

    def _not_yet(self) -> IndexRebuilding:
        return IndexRebuilding(
            f"the lookup index is being rebuilt ({self.indexed} of {len(self._offsets)} lines);"
            " retry"
        )

    def candidates(self, query: LineQuery) -> list[int]:
        """The seqs that may answer ``query`` (rule 5): in memory, O(1)."""
        with self._lock:
            if self.failure is not None:
                raise IndexFailed(f"the lookup index stopped: {self.failure}")
            if query.index is not None:
                seq = query.index + 1
                found = [seq] if seq <= len(self._offsets) and self._offsets[seq - 1] else []
                pending = seq <= self._on_disk
            else:
                person, value = (
                    (b"decision_id", query.decision_id)
                    if query.decision_id is not None
                    else (b"line_digest", query.line_digest)
                )
                assert value is not None
                found = self._table.find(self._fingerprint(person, value.encode("ascii")))
                pending = True
            if not found and pending and not self.rebuilt:
                raise self._not_yet()
            return found

    def resolve(self, query: LineQuery, seqs: Sequence[int]) -> tuple[int, bytes]:
        """(a read thread) The first of ``seqs`` whose line, read from disk, answers ``query``
        (rule 7): ``(log index, line without newline)``."""
        field, value = (
            ("decision_id", query.decision_id)
            if query.decision_id is not None
            else ("line_digest", query.line_digest)
        )
        for seq in seqs:
            line = self._read(seq)
            if line is None:
                continue
            record = _record(line)
            if record is None or record.get("seq") != seq:
                continue
            if query.index is None and record.get(field) != value:
                continue
            return seq - 1, line
        if not self.rebuilt:
            raise self._not_yet()
        raise LineNotFound(f"no audit line with {query.describe()}")

    def _read(self, seq: int) -> bytes | None:
        """Line ``seq`` from the file that holds it, or None (rule 7)."""
        with self._lock:
            offset = self._offsets[seq - 1] - 1
            at = bisect.bisect_right(self._starts, seq) - 1
            first = self._starts[at]
            following = self._starts[at + 1] if at + 1 < len(self._starts) else None
        name = self.log.name
        if following is not None:
            names = [f"{name}.{first:012d}-{following - 1:012d}"]
        else:  # the live file, or the rotated file it just became
            names = [name, *(n for f, _, n in _archives(self.log) if f == first)]
        for candidate in names:
            try:
                fd = open_under(self.log.parent, candidate)
            except FileNotFoundError:
                continue
            try:
                line = _line_at(fd, offset)
            finally:
                os.close(fd)
            if line is not None and _record_seq(line) == seq:
                return line
        return None


def _line_at(fd: int, offset: int) -> bytes | None:
    """The complete line that starts at ``offset``, without its newline (None if none)."""
    parts: list[bytes] = []
    read = 0
    while read <= MAX_LINE_BYTES:
        chunk = os.pread(fd, _READ_STEP, offset + read)
        if not chunk:
            return None
        end = chunk.find(b"\n")
        if end >= 0:
            parts.append(chunk[:end])
            return b"".join(parts)
        parts.append(chunk)
        read += len(chunk)
    return None


def _record_seq(line: bytes) -> object:
    record = _record(line)
    return None if record is None else record.get("seq")


class LineLookup:
    """The daemon's lookup (rules 3, 5–7): the index in memory, then the line from disk
    through ``reads`` (:mod:`daemon.tlog._served_files` rule 6)."""

    def __init__(self, index: LineIndex, reads: FileReads) -> None:
        self.index = index
        self.reads = reads

    async def find(self, query: LineQuery) -> tuple[int, bytes]:
        """``(log index, line)``; :class:`LineNotFound`, :class:`IndexRebuilding`,
        :class:`~daemon.tlog._served_files.ReadsStuck`, ``OSError``."""
        seqs = self.index.candidates(query)
        if not seqs:
            raise LineNotFound(f"no audit line with {query.describe()}")
        return await self.reads.run(self.index.resolve, query, seqs)


class LookupBudget:
    """Rule 8: at most ``slots`` lookups at once, at most ``per_peer`` of one peer's."""

    def __init__(self, slots: int = LOOKUP_SLOTS, per_peer: int = LOOKUP_SLOTS_PER_PEER) -> None:
        self.slots = slots
        self.per_peer = per_peer
        self.taken = 0
        self.refused = 0
        self._peers: Counter[str] = Counter()

    @contextlib.contextmanager
    def slot(self, peer: str) -> Iterator[None]:
        """Hold one slot for ``peer`` while a lookup runs, or :class:`LookupBusy` at once."""
        if self.taken >= self.slots:
            self.refused += 1
            raise LookupBusy(f"{self.slots} entry lookups are running; retry")
        if self._peers[peer] >= self.per_peer:
            self.refused += 1
            raise LookupBusy(f"this peer already runs {self.per_peer} entry lookups; retry")
        self.taken += 1
        self._peers[peer] += 1
        try:
            yield
        finally:
            self.taken -= 1
            self._peers[peer] -= 1
            if not self._peers[peer]:
                del self._peers[peer]
