"""The audit line format: rendering, the seal, the one-line check, anchors
(``docs/audit-log.md`` §1–2).

Rules (the contract):

1. A line is a JSON object with sorted keys, no whitespace, UTF-8 (non-ASCII raw), whose
   *last* key is ``line_digest``: ``sha256:`` + SHA-256 of the line's *body* (every byte
   before ``,"line_digest":"…"}``, closed with ``}``). :func:`seal` builds it,
   :func:`check_line` checks it.
2. :func:`check_line` checks one line against the chain state before it, in this order, and
   names the first failure: final newline; length; seal well formed and matching; a JSON
   object without duplicate keys; ``seq`` = previous + 1; ``prev`` = previous digest; and for
   an ``audit_rotated`` line, ``previous_seq``/``previous_head`` equal to ``seq - 1``/``prev``.
3. A chain starts either at genesis (``seq`` 1, ``prev`` :data:`GENESIS`) or, in a file that
   continues a rotated one, with an ``audit_rotated`` line: :func:`start_state` gives the
   state such a first line continues from.
4. Anchors are ``SEQ:sha256:<64 hex>`` (the line with that ``seq`` has that digest) or the
   older bare ``sha256:<64 hex>`` (some line has that digest); anything else is refused by
   :func:`parse_anchor` with ``ValueError``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import orjson

from canon import digest_bytes, network_json_float_free
from daemon.wire._errors import ServiceError

GENESIS: Final = "sha256:" + "0" * 64
#: A line longer than this is refused by the verifier (no unbounded reads).
MAX_LINE_BYTES: Final = 64 * 1024 * 1024
#: The event of the first line of a file that continues a rotated one.
ROTATED_EVENT: Final = "audit_rotated"

SEAL_RE: Final = re.compile(rb',"line_digest":"(sha256:[0-9a-f]{64})"\}\Z')
_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")
_ANCHOR_RE: Final = re.compile(r"([1-9][0-9]{0,18}):(sha256:[0-9a-f]{64})\Z")


class AuditLogError(ServiceError):
    """The audit log cannot be opened or written (our fault, not the client's)."""


def seal(body: bytes) -> tuple[bytes, str]:
    """(sealed line, its digest) for a rendered body ``{...}`` (no newline)."""
    digest = digest_bytes(body)
    return body[:-1] + b',"line_digest":"' + digest.encode("ascii") + b'"}', digest


def render_body(fields: Mapping[str, Any]) -> bytes:
    """The sorted, compact body: the network variant of the canonical-JSON family
    (:func:`canon.network_json_float_free`), byte-identical to ``json.dumps(ensure_ascii=False,
    sort_keys=True, separators=(",", ":"))`` for the float-free values the daemon logs."""
    return network_json_float_free(fields)


def render_line(fields: Mapping[str, Any]) -> bytes:
    """The sealed line for ``fields`` (exactly what the writer produces; for tools/tests)."""
    return seal(render_body(dict(fields)))[0]


def is_digest(value: object) -> bool:
    return isinstance(value, str) and _DIGEST_RE.match(value) is not None


class AuditRef(NamedTuple):
    """Where a line sits in the chain: its ``seq`` and ``line_digest``."""

    seq: int
    line_digest: str

    @property
    def anchor(self) -> str:
        """The ``SEQ:DIGEST`` form ``audit verify --anchor`` takes."""
        return f"{self.seq}:{self.line_digest}"


class Anchor(NamedTuple):
    """A head recorded elsewhere earlier. ``seq`` is None for the older bare-digest form."""

    seq: int | None
    digest: str

    def __str__(self) -> str:
        return self.digest if self.seq is None else f"{self.seq}:{self.digest}"


def parse_anchor(text: str) -> Anchor:
    """``SEQ:sha256:<hex>`` or a bare ``sha256:<hex>``; ``ValueError`` for anything else."""
    if not isinstance(text, str):
        raise ValueError("an anchor is a string")
    match = _ANCHOR_RE.match(text)
    if match is not None:
        return Anchor(int(match.group(1)), match.group(2))
    if _DIGEST_RE.match(text):
        return Anchor(None, text)
    shown = text if len(text) <= 100 else text[:100] + "…"
    raise ValueError(
        f"anchor {shown!r} is not SEQ:sha256:<64 hex> (e.g. health's audit.anchor) "
        "or a bare sha256:<64 hex> digest"
    )


def parse_sealed(raw: bytes) -> tuple[str, dict[str, Any] | None, str | None]:
    """(digest, fields, None) for a well-sealed, canonical JSON object line (no newline),
    else ("", None, reason). Checks the seal, then the JSON; not the chain.

    Canonical: the body must be exactly the sorted, compact rendering of the other fields
    (what the writer produces), so a sealed line with duplicate keys, unsorted keys,
    whitespace or escape variants is refused (a reader could not tell which value counts)."""
    if len(raw) > MAX_LINE_BYTES:
        return "", None, f"line longer than {MAX_LINE_BYTES} bytes"
    match = SEAL_RE.search(raw)
    if match is None:
        return "", None, "line does not end with its line_digest seal (edited line)"
    digest = match.group(1).decode("ascii")
    body = raw[: match.start()] + b"}"
    if digest_bytes(body) != digest:
        return "", None, "line_digest does not match the line's bytes (edited line)"
    try:
        fields = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        return "", None, f"not a JSON line ({error})"
    if not isinstance(fields, dict):
        return "", None, "not a JSON object"
    rest = dict(fields)
    rest.pop("line_digest", None)
    if orjson.dumps(rest, option=orjson.OPT_SORT_KEYS) != body:
        return "", None, "not in canonical form (duplicate or unsorted keys, whitespace, escapes)"
    return digest, fields, None


def check_line(
    raw: bytes, had_newline: bool, seq: int, head: str
) -> tuple[str, dict[str, Any] | None, str | None]:
    """(digest, fields, None) when ``raw`` is the valid successor of (``seq``, ``head``),
    else ("", None, reason)."""
    if not had_newline:
        if len(raw) > MAX_LINE_BYTES:
            return "", None, f"line longer than {MAX_LINE_BYTES} bytes"
        return "", None, "truncated line (no final newline)"
    digest, fields, reason = parse_sealed(raw)
    if fields is None:
        return "", None, reason
    if type(fields.get("seq")) is not int or fields["seq"] != seq + 1:
        return "", None, f"sequence number {fields.get('seq')!r} where {seq + 1} was expected"
    if fields.get("prev") != head:
        return (
            "",
            None,
            "prev does not match the previous line's digest (dropped or reordered line)",
        )
    if fields.get("event") == ROTATED_EVENT and (
        fields.get("previous_seq") != seq or fields.get("previous_head") != head
    ):
        return "", None, "audit_rotated line names another previous seq or head than its chain"
    return digest, fields, None


def start_state(fields: dict[str, Any] | None) -> tuple[int, str] | None:
    """The (seq, head) a file's first line continues from: genesis for ``seq`` 1, the named
    previous line for an ``audit_rotated`` line, None when the line can start no chain."""
    if fields is None:
        return None
    seq = fields.get("seq")
    if seq == 1 and type(seq) is int:
        return 0, GENESIS
    previous_seq, previous_head = fields.get("previous_seq"), fields.get("previous_head")
    if (
        fields.get("event") == ROTATED_EVENT
        and type(seq) is int
        and type(previous_seq) is int
        and previous_seq >= 1
        and is_digest(previous_head)
    ):
        assert isinstance(previous_head, str)
        return previous_seq, previous_head
    return None
