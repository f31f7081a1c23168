"""Bounded echo: how a value a client chose appears in a message, an audit field or a stderr line.

Rules (the contract):

1. :func:`echo` returns a short, printable value *verbatim* when it is printable
   (``str.isprintable``) and its UTF-8 form is at most ``limit`` bytes (default
   :data:`ECHO_LIMIT`, 128). So an ordinary session name or mechanism id reads as itself.
2. Any other value is replaced by an escaped prefix and a marker:
   ``<prefix>… (<length> chars, sha256:<hex>)``. The prefix is the value's leading characters,
   each non-printable or non-ASCII one written as a Python escape (``\\x7f``, ``\\u202e``,
   ``\\U0001f600``; a backslash as ``\\\\``), cut before it would pass ``limit`` characters,
   so it is plain ASCII. ``<length>`` counts the value's characters; the digest is the SHA-256
   of its UTF-8 bytes (lone surrogates encoded as they are), which identifies the full value
   for anyone who holds it. The work is linear in the value (one digest) and the prefix
   costs at most ``limit`` steps.
3. A non-string value (bytes, numbers, lists from a malformed request) is echoed through its
   ``repr`` under the same rules.
4. Therefore, for ``limit`` L, the echo is at most L + 100 characters and, rendered as JSON
   (``"`` and ``\\`` doubled at worst), at most 2 L + 100 bytes — whatever the input.
   :func:`bounded_message` applies the same rule to a whole message with the larger
   :data:`MESSAGE_LIMIT`, so a message that carries echoes, or a codec message that quotes
   the request, is bounded too.
"""

from __future__ import annotations

import hashlib
from typing import Final

#: Longest client value echoed verbatim, in UTF-8 bytes (and the escaped prefix, in chars).
ECHO_LIMIT: Final = 128
#: Longest message (error frame ``message``, audit ``message``) sent or logged verbatim.
MESSAGE_LIMIT: Final = 384


def _escaped(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if char.isascii() and char.isprintable():
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """``value`` as it may appear in a message or log field (module rules 1-3)."""
    text = value if type(value) is str else repr(value)
    if len(text) <= limit and text.isprintable():
        raw = text.encode("utf-8", "surrogatepass")
        if len(raw) <= limit:
            return text
    else:
        raw = text.encode("utf-8", "surrogatepass")
    prefix: list[str] = []
    used = 0
    for char in text[:limit]:
        piece = _escaped(char)
        if used + len(piece) > limit:
            break
        prefix.append(piece)
        used += len(piece)
    digest = hashlib.sha256(raw).hexdigest()
    return f"{''.join(prefix)}… ({len(text)} chars, sha256:{digest})"


def bounded_message(message: str) -> str:
    """A whole message under :data:`MESSAGE_LIMIT` (module rule 4)."""
    return echo(message, MESSAGE_LIMIT)
