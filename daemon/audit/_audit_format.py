"""The audit line format: rendering, the seal, the one-line check, anchors
(``docs/audit-log.md`` §1–2).

Rules (the contract):

1. A line is a JSON object with sorted keys, no whitespace, UTF-8 (non-ASCII raw but for
   rule 5's code points), whose *last* key is ``line_digest``: ``sha256:`` + SHA-256 of the
   line's *body* (every byte before ``,"line_digest":"…"}``, closed with ``}``).
   :func:`seal` builds it, :func:`check_line` checks it.
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
5. Terminal-hostile code points are escaped. Wherever they occur (a client's binding, a
   refusal's message, any key or value), :data:`HOSTILE` — the C1 controls and DEL (U+007F
   to U+009F: NEL U+0085, CSI U+009B, …), the line and paragraph separators (U+2028,
   U+2029) and the bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066
   to U+2069) — is written as the JSON escape ``\\u`` + 4 lower-case hex digits
   (:func:`escape_hostile`), never raw (C0 controls are escaped by JSON itself). The line
   is still JSON and parses to the same value; the seal covers the escaped bytes. The set
   is fixed here, not taken from a Unicode database, so every version of the verifier
   agrees. A line written before this rule, with such code points raw, is canonical too:
   :func:`parse_sealed` accepts the body that is exactly the compact sorted rendering
   either with every one of them escaped or with none escaped (a mix is neither).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import orjson

from daemon.wire._errors import ServiceError
from session.canon import digest_bytes, network_json_float_free

GENESIS: Final = "sha256:" + "0" * 64
#: A line longer than this is refused by the verifier (no unbounded reads).
MAX_LINE_BYTES: Final = 64 * 1024 * 1024
#: The event of the first line of a file that continues a rotated one.
ROTATED_EVENT: Final = "audit_rotated"

SEAL_RE: Final = re.compile(rb',"line_digest":"(sha256:[0-9a-f]{64})"\}\Z')
_DIGEST_RE: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")
_ANCHOR_RE: Final = re.compile(r"([1-9][0-9]{0,18}):(sha256:[0-9a-f]{64})\Z")

#: Rule 5's code points, as (first, last) ranges.
HOSTILE: Final = (
    (0x7F, 0x9F),
    (0x61C, 0x61C),
    (0x200E, 0x200F),
    (0x2028, 0x202E),
    (0x2066, 0x2069),
)
#: Their UTF-8 forms (each a whole character: a lead byte never occurs inside another's).
_HOSTILE_UTF8: Final = re.compile(
    rb"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]"
)


def _escaped(match: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(match.group().decode("utf-8"))


def escape_hostile(data: bytes) -> bytes:
    """Rule 5: ``data`` (JSON, UTF-8) with every :data:`HOSTILE` code point as its
    ``\\uXXXX`` escape. Outside strings JSON is ASCII without DEL, so each one found is
    inside a string, where the escape denotes the same character."""
    if data.isascii() and b"\x7f" not in data:  # the common line: nothing to look for
        return data
    return _HOSTILE_UTF8.sub(_escaped, data)


def escape_hostile_text(text: str) -> str:
    """:func:`escape_hostile` for a text shown to a person (a report's table cell)."""
    raw = text.encode("utf-8", "surrogatepass")
    return escape_hostile(raw).decode("utf-8", "surrogatepass")


class AuditLogError(ServiceError):
    """The audit log cannot be opened or written (our fault, not the client's)."""


def seal(body: bytes) -> tuple[bytes, str]:
    """(sealed line, its digest) for a rendered body ``{...}`` (no newline)."""
    digest = digest_bytes(body)
    return body[:-1] + b',"line_digest":"' + digest.encode("ascii") + b'"}', digest


def render_body(fields: Mapping[str, Any]) -> bytes:
    """The sorted, compact body: the network variant of the canonical-JSON family
    (:func:`canon.network_json_float_free`), byte-identical to ``json.dumps(ensure_ascii=False,
    sort_keys=True, separators=(",", ":"))`` for the float-free values the daemon logs, with
    rule 5's code points escaped."""
    return escape_hostile(network_json_float_free(fields))


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
    (what the writer produces; rule 5: or what it produced before hostile code points were
    escaped), so a sealed line with duplicate keys, unsorted keys, whitespace or other escape
    variants is refused (a reader could not tell which value counts)."""
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
    rendered = orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)
    if body != rendered and body != escape_hostile(rendered):
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
