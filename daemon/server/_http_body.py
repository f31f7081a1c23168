"""Submit bodies over HTTP: a JSON document with base64 evidence, or ``multipart/form-data``
with a ``binding`` part and raw evidence parts (``curl -F evidence=@file``).

Rules (the contract):

1. Media type. ``application/json`` is a JSON body; ``multipart/form-data`` with a
   ``boundary`` is a multipart body; anything else (or multipart without a boundary) is
   ``HEADER_INVALID`` with status 415. Nothing else about the request is read from the body.
2. Limit before reading (:func:`body_limit`): the most bytes a body for a session can need,
   from the session's effective bounds — its evidence (base64-expanded for JSON), a binding of
   at most ``max_binding_bytes`` and a fixed allowance per item. The front end refuses a
   declared ``Content-Length`` over it (``EVIDENCE_BYTES_EXCEEDED``, 413) before reading a
   body byte, and cuts a body (chunked or not) the moment it passes it.
3. JSON body: strict UTF-8 JSON (no BOM, no ``NaN``/``Infinity``, no duplicate keys, no
   string holding a lone surrogate — a ``\\ud800`` escape without its pair is not Unicode
   text, and EVD1 refuses the same header as not JSON) that is an object with exactly
   ``binding`` (an object) and ``evidence`` (an array of objects with exactly ``base64``, a
   string), else ``HEADER_INVALID``. More items than admitted is
   ``EVIDENCE_ITEMS_EXCEEDED`` and more decoded bytes ``EVIDENCE_BYTES_EXCEEDED``, both
   known from the array before a byte is decoded; then each item is standard base64 with
   canonical padding (length a multiple of 4, no whitespace, no other alphabet), else
   ``HEADER_INVALID`` naming the item.
4. Multipart body, parsed as it streams (``multipart``'s sans-IO push parser, strict mode,
   part heads of at most 8 fields and 4,224 bytes): each part has a ``form-data``
   ``Content-Disposition`` with a ``name``; a part with no name, an empty name or another
   name than ``binding``/``evidence``, a second ``binding`` or none at all is
   ``HEADER_INVALID``. The ``binding`` part is a JSON object under rule 3's JSON rules, at
   most ``max_binding_bytes`` (else ``HEADER_TOO_LARGE``). Each ``evidence`` part is one item,
   raw, in the order sent; a part that declares its ``Content-Length`` is checked before its
   bytes are read. The items are counted as they arrive: the first item over the admitted
   count is ``EVIDENCE_ITEMS_EXCEEDED`` and the first byte over the admitted total
   ``EVIDENCE_BYTES_EXCEEDED``, refused then, without reading further.
5. Every refusal is :class:`~daemon.server._http_errors.HttpRefusal`; nothing else escapes for any
   body bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any, Final

import attrs
import multipart

from daemon.server._http_errors import HttpRefusal
from daemon.wire._echo import echo
from daemon.wire._protocol import ErrorCode

__all__ = ["BodyParser", "SubmitBody", "body_limit", "body_parser"]

#: Per item (and for the document itself): JSON punctuation, or a multipart part's boundary
#: line and head (the head is bounded by :data:`PART_HEAD_BYTES`).
ITEM_ALLOWANCE: Final = 4608
PART_HEAD_BYTES: Final = 4224
PART_HEAD_FIELDS: Final = 8
JSON_TYPE: Final = "application/json"
MULTIPART_TYPE: Final = "multipart/form-data"


@attrs.frozen
class SubmitBody:
    """A parsed submit body: the binding's wire form and the raw evidence items."""

    binding: dict[str, Any]
    items: tuple[bytes, ...]


def body_limit(*, max_items: int, max_bytes: int, max_binding_bytes: int) -> int:
    """The largest body a session admitting ``max_items`` items of ``max_bytes`` in total
    can need (rule 2), whichever media type carries it."""
    base64_bytes = 4 * math.ceil(max_bytes / 3)
    return max_binding_bytes + base64_bytes + (max_items + 2) * ITEM_ALLOWANCE


class BodyParser:
    """Feed body chunks (:meth:`feed`), then :meth:`finish` for the :class:`SubmitBody`."""

    def feed(self, chunk: bytes) -> None:
        raise NotImplementedError

    def finish(self) -> SubmitBody:
        raise NotImplementedError


def body_parser(
    content_type: str,
    boundary: str | None,
    *,
    max_items: int,
    max_bytes: int,
    max_binding_bytes: int,
) -> BodyParser:
    """The parser for a body of ``content_type`` (rule 1)."""
    if content_type == JSON_TYPE:
        return _JsonBody(max_items=max_items, max_bytes=max_bytes)
    if content_type == MULTIPART_TYPE:
        if not boundary:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID, "multipart/form-data without a boundary", status=415
            )
        try:
            return _MultipartBody(
                boundary,
                max_items=max_items,
                max_bytes=max_bytes,
                max_binding_bytes=max_binding_bytes,
            )
        except (multipart.MultipartError, ValueError) as error:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID, f"unusable multipart boundary: {error}", status=415
            ) from None
    raise HttpRefusal(
        ErrorCode.HEADER_INVALID,
        f"a submit body is {JSON_TYPE} or {MULTIPART_TYPE}, not {content_type or 'untyped'}",
        status=415,
    )


# --------------------------------------------------------------------------- JSON


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        keys = [key for key, _ in pairs]
        duplicate = next(key for key in keys if keys.count(key) > 1)
        raise ValueError(f"duplicate key {duplicate!r}")
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: The strict decoder, built once (``json.loads`` with hooks builds one per call).
_DECODER: Final = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_no_constant)
#: A surrogate's escape: in a text decoded as strict UTF-8, the only way a string gets one.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _lone_surrogate(document: Any) -> str | None:
    """The first string (key or value) of ``document`` holding a surrogate, or None. The
    decoder joins an escaped pair into one code point, so any surrogate left is lone."""
    stack = [document]
    while stack:
        value = stack.pop()
        if type(value) is str:
            if _SURROGATE.search(value) is not None:
                return value
        elif type(value) is dict:
            stack.extend(value)
            stack.extend(value.values())
        elif type(value) is list:
            stack.extend(value)
    return None


def parse_json(data: bytes, what: str) -> Any:
    """Strict JSON (rule 3): UTF-8, no BOM, no duplicate keys, no NaN/Infinity, no lone
    surrogate."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise HttpRefusal(ErrorCode.HEADER_INVALID, f"{what} is not UTF-8: {error}") from None
    if text.startswith("\ufeff"):
        raise HttpRefusal(ErrorCode.HEADER_INVALID, f"{what} starts with a byte order mark")
    try:
        document = _DECODER.decode(text)
    except RecursionError:
        raise HttpRefusal(ErrorCode.HEADER_INVALID, f"{what} nests too deep") from None
    except ValueError as error:
        raise HttpRefusal(ErrorCode.HEADER_INVALID, f"{what} is not JSON: {error}") from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None:
        lone = _lone_surrogate(document)
        if lone is not None:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID,
                f"{what} is not JSON: the string {echo(lone, 32)!r} holds a lone surrogate "
                "(an unpaired \\ud800-\\udfff escape is not Unicode text)",
            )
    return document


def _decoded_size(text: str) -> int:
    """The bytes a canonical base64 text decodes to (without decoding it)."""
    return len(text) // 4 * 3 - text[-2:].count("=") if text else 0


class _JsonBody(BodyParser):
    def __init__(self, *, max_items: int, max_bytes: int) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self._data += chunk

    def finish(self) -> SubmitBody:
        document = parse_json(bytes(self._data), "the request body")
        self._data = bytearray()
        if type(document) is not dict or set(document) != {"binding", "evidence"}:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID,
                'the request body must be an object with exactly "binding" and "evidence"',
            )
        binding, evidence = document["binding"], document["evidence"]
        if type(binding) is not dict:
            raise HttpRefusal(ErrorCode.BINDING_INVALID, "binding must be an object")
        if type(evidence) is not list:
            raise HttpRefusal(ErrorCode.HEADER_INVALID, "evidence must be an array")
        texts = []
        for index, item in enumerate(evidence):
            if type(item) is not dict or set(item) != {"base64"} or type(item["base64"]) is not str:
                raise HttpRefusal(
                    ErrorCode.HEADER_INVALID,
                    f'evidence[{index}] must be an object with exactly "base64", a string',
                )
            texts.append(item["base64"])
        if len(texts) > self.max_items:
            raise HttpRefusal(
                ErrorCode.EVIDENCE_ITEMS_EXCEEDED,
                f"{len(texts)} evidence items sent; at most {self.max_items} admitted",
            )
        declared = sum(_decoded_size(text) for text in texts)
        if declared > self.max_bytes:
            raise HttpRefusal(
                ErrorCode.EVIDENCE_BYTES_EXCEEDED,
                f"{declared} evidence bytes sent; at most {self.max_bytes} admitted",
            )
        items = []
        for index, text in enumerate(texts):
            if len(text) % 4:
                raise HttpRefusal(
                    ErrorCode.HEADER_INVALID,
                    f"evidence[{index}] is not base64: length {len(text)} is not a multiple of 4",
                )
            try:
                items.append(base64.b64decode(text, validate=True))
            except (binascii.Error, ValueError) as error:
                raise HttpRefusal(
                    ErrorCode.HEADER_INVALID, f"evidence[{index}] is not base64: {error}"
                ) from None
        return SubmitBody(binding, tuple(items))


# --------------------------------------------------------------------------- multipart


class _MultipartBody(BodyParser):
    def __init__(
        self, boundary: str, *, max_items: int, max_bytes: int, max_binding_bytes: int
    ) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.max_binding_bytes = max_binding_bytes
        self._parser = multipart.PushMultipartParser(
            boundary,
            max_header_size=PART_HEAD_BYTES,
            max_header_count=PART_HEAD_FIELDS,
            strict=True,
        )
        self._binding: bytearray | None = None
        self._binding_done = False
        self._items: list[bytearray] = []
        self._current: bytearray | None = None
        self._total = 0

    def feed(self, chunk: bytes) -> None:
        if chunk:
            self._parse(chunk)

    def _parse(self, chunk: bytes) -> None:
        try:
            for event in self._parser.parse(chunk):
                if isinstance(event, multipart.MultipartSegment):
                    self._current = self._start(event)
                elif event is None:
                    if self._current is self._binding:
                        self._binding_done = True
                    self._current = None
                else:
                    self._data(event)
        except multipart.ParserLimitReached as error:
            raise HttpRefusal(
                ErrorCode.HEADER_TOO_LARGE, f"multipart part head too large: {error}"
            ) from None
        except multipart.MultipartError as error:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID, f"malformed multipart body: {error}"
            ) from None

    def _start(self, segment: multipart.MultipartSegment) -> bytearray:
        name = segment.name
        if segment.disposition != "form-data" or not name:
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID,
                'every part needs Content-Disposition: form-data with a name ("binding" or '
                '"evidence")',
            )
        declared = segment.header("Content-Length")
        if name == "binding":
            if self._binding is not None:
                raise HttpRefusal(ErrorCode.HEADER_INVALID, "more than one binding part")
            if declared is not None and _size(declared) > self.max_binding_bytes:
                raise self._binding_too_large()
            self._binding = bytearray()
            return self._binding
        if name != "evidence":
            raise HttpRefusal(
                ErrorCode.HEADER_INVALID,
                f"unknown part {echo(name, 64)!r}: parts are named binding or evidence",
            )
        if len(self._items) >= self.max_items:
            raise HttpRefusal(
                ErrorCode.EVIDENCE_ITEMS_EXCEEDED,
                f"more than {self.max_items} evidence items sent; at most {self.max_items} "
                "admitted",
            )
        if declared is not None and self._total + _size(declared) > self.max_bytes:
            raise self._too_many_bytes(self._total + _size(declared))
        item = bytearray()
        self._items.append(item)
        return item

    def _data(self, data: bytes) -> None:
        current = self._current
        assert current is not None
        current += data
        if current is self._binding:
            if len(current) > self.max_binding_bytes:
                raise self._binding_too_large()
            return
        self._total += len(data)
        if self._total > self.max_bytes:
            raise self._too_many_bytes(self._total)

    def _binding_too_large(self) -> HttpRefusal:
        return HttpRefusal(
            ErrorCode.HEADER_TOO_LARGE, f"binding part over {self.max_binding_bytes} bytes"
        )

    def _too_many_bytes(self, total: int) -> HttpRefusal:
        return HttpRefusal(
            ErrorCode.EVIDENCE_BYTES_EXCEEDED,
            f"more than {self.max_bytes} evidence bytes sent ({total} so far); at most "
            f"{self.max_bytes} admitted",
        )

    def finish(self) -> SubmitBody:
        self._parse(b"")
        if self._binding is None or not self._binding_done:
            raise HttpRefusal(ErrorCode.HEADER_INVALID, "no binding part")
        binding = parse_json(bytes(self._binding), "the binding part")
        if type(binding) is not dict:
            raise HttpRefusal(ErrorCode.BINDING_INVALID, "binding must be an object")
        return SubmitBody(binding, tuple(bytes(item) for item in self._items))


def _size(text: str) -> int:
    if not text.isdigit() or len(text) > 18:
        raise HttpRefusal(ErrorCode.HEADER_INVALID, "a part's Content-Length is not a size")
    return int(text)
