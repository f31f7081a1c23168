"""Finding one audit line (a transparency-log leaf) by its index, decision id or line digest,
for a receipt asked after the fact (``evidenced log receipt``, ``GET /v1/log/entry``).

Rules (the contract):

1. The files are an audit log's rotated files then the live file, in chain order
   (``daemon.audit`` lists them). Leaf ``index`` is the line whose ``seq``
   is ``index + 1``.
2. By index: the rotated files' names (``LOG.<first seq>-<last seq>``) say which file holds
   the line, only that file is read, up to the line. By ``decision_id`` or ``line_digest``:
   the files are read newest first, every line whose bytes contain the value is parsed, and
   the first whose field equals it exactly is the answer.
3. A query is checked before a file is opened (:class:`LookupInvalid`): an index is a
   non-negative integer, a decision id a UUID in lower-case hex, a line digest
   ``sha256:`` and 64 lower-case hex digits; exactly one of the three.
4. Nothing found is :class:`LineNotFound`; a file that cannot be read is ``OSError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import attrs

from daemon.tlog._verify import iter_lines
from daemon.wire._errors import PeerError

__all__ = ["LineNotFound", "LineQuery", "LookupInvalid", "find_line"]

_ARCHIVE_RE: Final = re.compile(r"\.(\d{12})-(\d{12})\Z")
DECISION_ID_RE: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
LINE_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}")
_CHUNK: Final = 1 << 16


class LookupInvalid(PeerError, ValueError):
    """The query itself is malformed (rule 3): the asker's fault."""


class LineNotFound(PeerError, LookupError):
    """No audit line answers the query (rule 4)."""


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
