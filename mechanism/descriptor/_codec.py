"""The six-line T81 experiment descriptor: strict decoder and canonical encoder.

A descriptor is exactly six nonempty ASCII lines, each ended by one LF, at most 4,096 bytes,
every field byte in [33, 126]. Fields, in order: schema, payload reference, representation,
provider, operations, constraint profile (``docs/spec/descriptor.md`` §5).

Decoding checks, in this order; the first failure raises :class:`DescriptorError` whose ``code``
is stable and whose ``kind`` is ``"invalid"`` (a refuted descriptor), ``"unsupported"`` (another
version of a known schema/profile family) or ``"limit"`` (a host limit lowered below 4,096):

==== ========================================== ==================================================
 #    code                                        refused
==== ========================================== ==================================================
 1    DESCRIPTOR_NOT_BYTES                        anything but exact ``bytes``
 2    DESCRIPTOR_TOO_LARGE                        more than 4,096 bytes (the format's own maximum)
 3    DESCRIPTOR_LIMIT_EXCEEDED (limit)           more than the host's lowered ``max_bytes``
 4    DESCRIPTOR_EMPTY                            zero bytes
 5    DESCRIPTOR_CR_FORBIDDEN                     any CR byte (so CRLF line ends)
 6    DESCRIPTOR_NON_ASCII                        any byte >= 0x80
 7    DESCRIPTOR_WHITESPACE                       space, TAB, VT or FF anywhere
 8    DESCRIPTOR_CONTROL_BYTE                     any other byte < 0x21 except LF, and DEL (0x7F)
 9    DESCRIPTOR_ESCAPE_FORBIDDEN                 escaping or quoting: ``\\`` ``"`` ``'`` ``%``
 10   DESCRIPTOR_KEYED_FIELD                      ``=`` (key=value, i.e. named/optional fields)
 11   DESCRIPTOR_FINAL_LF_MISSING                 last byte not LF (unterminated last line)
 12   DESCRIPTOR_EMPTY_LINE                       an empty line among the first six
 12a  DESCRIPTOR_DUPLICATE_FIELD                  two lines assert the same field (see below)
 13   DESCRIPTOR_TRAILING_LINES                   more than six lines (incl. an extra final LF)
 14   DESCRIPTOR_TOO_FEW_LINES                    fewer than six lines
 15   DESCRIPTOR_SCHEMA_UNSUPPORTED (unsupported) line 1 ``t81.experiment-descriptor.v<other>``
 16   DESCRIPTOR_SCHEMA_INVALID                   line 1 anything else but the exact schema
 17   DESCRIPTOR_PAYLOAD_REFERENCE_MALFORMED      line 2 not exactly 64 lowercase hex digits
 18   DESCRIPTOR_REPRESENTATION_UNKNOWN           line 3 not a compiled representation
 19   DESCRIPTOR_PROVIDER_UNKNOWN                 line 4 not a compiled provider
 20   DESCRIPTOR_PROVIDER_MISMATCH                line 3/4 not a compiled pair (e.g. swapped)
 21   DESCRIPTOR_OPERATIONS_NOT_SINGLETON         line 5 a list (any ``,``), so also duplicates
 22   DESCRIPTOR_OPERATION_UNKNOWN                line 5 not a compiled operation
 23   DESCRIPTOR_OPERATION_MISMATCH               line 5 not the provider's singleton operation
 24   DESCRIPTOR_PROFILE_UNSUPPORTED (unsupported) line 6 ``object-interface-fixtures-v<other>``
 25   DESCRIPTOR_PROFILE_INVALID                  line 6 anything else but the exact profile
==== ========================================== ==================================================

A line *asserts a field* when it has that field's shape: the schema family
``t81.experiment-descriptor.v<N>``, 64 lowercase hex digits (payload reference), a compiled
representation, a compiled provider, a compiled operation, or the profile family
``object-interface-fixtures-v<N>``. No two of the six fields can share a shape, so two lines
asserting the same field are a duplicated field (seed: "No … duplicate fields … are accepted"),
refused with its own code before the line count is judged; a seventh line that asserts no
field is a trailing line. (``run,run`` is one field listing an operation twice:
``DESCRIPTOR_OPERATIONS_NOT_SINGLETON``.)

Decoding only establishes that the six assertions are well formed and consistent with the
compiled catalog's pairings; they remain *claims* until discovery checks the representation by
equality with the adapter's fixture. ``encode_descriptor(payload)`` writes the canonical descriptor
of one of the two compiled fixtures (anything else raises ``DESCRIPTOR_PAYLOAD_NOT_ADMITTED``).
Descriptor identity is :func:`~._canonfs.canonfs_hash` of the descriptor's own bytes.
"""

from __future__ import annotations

import re
from typing import Final

import attrs

from session.canon import CallerError

from ._canonfs import canonfs_hash, is_canonfs_ref
from ._catalog import (
    CATALOG,
    CATALOG_BY_PROVIDER,
    KNOWN_OPERATIONS,
    KNOWN_REPRESENTATIONS,
    PROFILE,
    SCHEMA,
)

__all__ = [
    "DESCRIPTOR_LINES",
    "DESCRIPTOR_REASON_CODES",
    "MAX_DESCRIPTOR_BYTES",
    "DescriptorError",
    "DescriptorFields",
    "decode_descriptor",
    "descriptor_identity",
    "encode_descriptor",
]

MAX_DESCRIPTOR_BYTES: Final = 4096
DESCRIPTOR_LINES: Final = 6

DESCRIPTOR_REASON_CODES: Final = (
    "DESCRIPTOR_NOT_BYTES",
    "DESCRIPTOR_TOO_LARGE",
    "DESCRIPTOR_LIMIT_EXCEEDED",
    "DESCRIPTOR_EMPTY",
    "DESCRIPTOR_CR_FORBIDDEN",
    "DESCRIPTOR_NON_ASCII",
    "DESCRIPTOR_WHITESPACE",
    "DESCRIPTOR_CONTROL_BYTE",
    "DESCRIPTOR_ESCAPE_FORBIDDEN",
    "DESCRIPTOR_KEYED_FIELD",
    "DESCRIPTOR_FINAL_LF_MISSING",
    "DESCRIPTOR_EMPTY_LINE",
    "DESCRIPTOR_DUPLICATE_FIELD",
    "DESCRIPTOR_TRAILING_LINES",
    "DESCRIPTOR_TOO_FEW_LINES",
    "DESCRIPTOR_SCHEMA_UNSUPPORTED",
    "DESCRIPTOR_SCHEMA_INVALID",
    "DESCRIPTOR_PAYLOAD_REFERENCE_MALFORMED",
    "DESCRIPTOR_REPRESENTATION_UNKNOWN",
    "DESCRIPTOR_PROVIDER_UNKNOWN",
    "DESCRIPTOR_PROVIDER_MISMATCH",
    "DESCRIPTOR_OPERATIONS_NOT_SINGLETON",
    "DESCRIPTOR_OPERATION_UNKNOWN",
    "DESCRIPTOR_OPERATION_MISMATCH",
    "DESCRIPTOR_PROFILE_UNSUPPORTED",
    "DESCRIPTOR_PROFILE_INVALID",
)

_WHITESPACE: Final = frozenset(b" \t\x0b\x0c")
_ESCAPES: Final = frozenset(b"\\\"'%")
_SCHEMA_FAMILY: Final = re.compile(r"t81\.experiment-descriptor\.v[0-9]+")
_PROFILE_FAMILY: Final = re.compile(r"object-interface-fixtures-v[0-9]+")


class DescriptorError(CallerError, ValueError):
    """A descriptor (or encoder input) was refused; ``code`` is stable, ``kind`` classifies it."""

    def __init__(self, code: str, message: str, *, kind: str = "invalid") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.kind = kind
        self.message = message


@attrs.frozen
class DescriptorFields:
    """The six decoded (still untrusted) assertions of a well-formed descriptor."""

    schema: str
    payload_reference: str
    representation: str
    provider: str
    operation: str
    profile: str

    def to_dict(self) -> dict[str, str]:
        return {
            "schema": self.schema,
            "payload_reference": self.payload_reference,
            "representation": self.representation,
            "provider": self.provider,
            "operations": self.operation,
            "profile": self.profile,
        }

    def lines(self) -> tuple[str, ...]:
        return (
            self.schema,
            self.payload_reference,
            self.representation,
            self.provider,
            self.operation,
            self.profile,
        )


def descriptor_identity(data: bytes) -> str:
    """Descriptor identity: the CanonFS hash of the descriptor's own bytes."""
    return canonfs_hash(data)


def _scan_bytes(data: bytes) -> None:
    if b"\r" in data:
        raise DescriptorError("DESCRIPTOR_CR_FORBIDDEN", "CR bytes (CRLF line ends) are refused")
    present = frozenset(data)
    if any(byte >= 0x80 for byte in present):
        raise DescriptorError("DESCRIPTOR_NON_ASCII", "bytes above 0x7F are refused")
    if present & _WHITESPACE:
        raise DescriptorError("DESCRIPTOR_WHITESPACE", "whitespace is refused")
    if any((byte < 0x21 and byte != 0x0A) or byte == 0x7F for byte in present):
        raise DescriptorError("DESCRIPTOR_CONTROL_BYTE", "control bytes are refused")
    if present & _ESCAPES:
        raise DescriptorError("DESCRIPTOR_ESCAPE_FORBIDDEN", "escaping and quoting are refused")
    if ord("=") in present:
        raise DescriptorError("DESCRIPTOR_KEYED_FIELD", "key=value fields are refused")


def _asserted_field(line: str) -> str | None:
    """The field whose shape ``line`` has, or ``None`` (no two fields share a shape)."""
    if _SCHEMA_FAMILY.fullmatch(line):
        return "schema"
    if is_canonfs_ref(line):
        return "payload_reference"
    if line in KNOWN_REPRESENTATIONS:
        return "representation"
    if line in CATALOG_BY_PROVIDER:
        return "provider"
    if line in KNOWN_OPERATIONS:
        return "operations"
    if _PROFILE_FAMILY.fullmatch(line):
        return "profile"
    return None


def _split_lines(data: bytes) -> list[str]:
    if not data.endswith(b"\n"):
        raise DescriptorError("DESCRIPTOR_FINAL_LF_MISSING", "every line must end with one LF")
    lines = data[:-1].decode("ascii").split("\n")
    for number, line in enumerate(lines[:DESCRIPTOR_LINES], start=1):
        if line == "":
            raise DescriptorError("DESCRIPTOR_EMPTY_LINE", f"line {number} is empty")
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        field = _asserted_field(line)
        if field is None:
            continue
        if field in seen:
            raise DescriptorError(
                "DESCRIPTOR_DUPLICATE_FIELD",
                f"lines {seen[field]} and {number} both assert the {field} field",
            )
        seen[field] = number
    if len(lines) > DESCRIPTOR_LINES:
        raise DescriptorError(
            "DESCRIPTOR_TRAILING_LINES", f"{len(lines)} lines; exactly {DESCRIPTOR_LINES} allowed"
        )
    if len(lines) < DESCRIPTOR_LINES:
        raise DescriptorError(
            "DESCRIPTOR_TOO_FEW_LINES", f"{len(lines)} lines; exactly {DESCRIPTOR_LINES} needed"
        )
    return lines


def _check_fields(lines: list[str]) -> DescriptorFields:
    schema, reference, representation, provider, operation, profile = lines
    if schema != SCHEMA:
        if _SCHEMA_FAMILY.fullmatch(schema):
            raise DescriptorError(
                "DESCRIPTOR_SCHEMA_UNSUPPORTED",
                "unsupported descriptor version",
                kind="unsupported",
            )
        raise DescriptorError("DESCRIPTOR_SCHEMA_INVALID", f"line 1 must be {SCHEMA}")
    if not is_canonfs_ref(reference):
        raise DescriptorError(
            "DESCRIPTOR_PAYLOAD_REFERENCE_MALFORMED", "line 2 must be 64 lowercase hex digits"
        )
    if representation not in KNOWN_REPRESENTATIONS:
        raise DescriptorError("DESCRIPTOR_REPRESENTATION_UNKNOWN", "line 3 names no adapter")
    adapter = CATALOG_BY_PROVIDER.get(provider)
    if adapter is None:
        raise DescriptorError("DESCRIPTOR_PROVIDER_UNKNOWN", "line 4 names no compiled provider")
    if adapter.representation != representation:
        raise DescriptorError(
            "DESCRIPTOR_PROVIDER_MISMATCH",
            f"representation {representation} is not paired with provider {provider}",
        )
    if "," in operation:
        raise DescriptorError(
            "DESCRIPTOR_OPERATIONS_NOT_SINGLETON", "line 5 must be exactly one operation"
        )
    if operation not in KNOWN_OPERATIONS:
        raise DescriptorError("DESCRIPTOR_OPERATION_UNKNOWN", "line 5 names no compiled operation")
    if operation not in adapter.operations:
        raise DescriptorError(
            "DESCRIPTOR_OPERATION_MISMATCH", f"provider {provider} does not offer {operation}"
        )
    if profile != PROFILE:
        if _PROFILE_FAMILY.fullmatch(profile):
            raise DescriptorError(
                "DESCRIPTOR_PROFILE_UNSUPPORTED",
                "unsupported constraint profile",
                kind="unsupported",
            )
        raise DescriptorError("DESCRIPTOR_PROFILE_INVALID", f"line 6 must be {PROFILE}")
    return DescriptorFields(schema, reference, representation, provider, operation, profile)


def decode_descriptor(data: bytes, *, max_bytes: int = MAX_DESCRIPTOR_BYTES) -> DescriptorFields:
    """Strictly decode a descriptor; raise :class:`DescriptorError` (see the module table)."""
    if type(data) is not bytes:
        raise DescriptorError("DESCRIPTOR_NOT_BYTES", "a descriptor is exact bytes")
    if len(data) > MAX_DESCRIPTOR_BYTES:
        raise DescriptorError(
            "DESCRIPTOR_TOO_LARGE", f"{len(data)} bytes; at most {MAX_DESCRIPTOR_BYTES} allowed"
        )
    if len(data) > max_bytes:
        raise DescriptorError(
            "DESCRIPTOR_LIMIT_EXCEEDED", f"{len(data)} bytes exceed the host limit", kind="limit"
        )
    if not data:
        raise DescriptorError("DESCRIPTOR_EMPTY", "a descriptor has six lines")
    _scan_bytes(data)
    return _check_fields(_split_lines(data))


def encode_descriptor(payload: bytes) -> bytes:
    """The canonical descriptor for one of the two compiled fixture payloads."""
    if type(payload) is not bytes:
        raise DescriptorError("DESCRIPTOR_PAYLOAD_NOT_ADMITTED", "a payload is exact bytes")
    for adapter in CATALOG:
        if payload == adapter.fixture_bytes:
            (operation,) = sorted(adapter.operations)
            fields = DescriptorFields(
                SCHEMA,
                canonfs_hash(payload),
                adapter.representation,
                adapter.provider,
                operation,
                PROFILE,
            )
            return "".join(line + "\n" for line in fields.lines()).encode("ascii")
    raise DescriptorError(
        "DESCRIPTOR_PAYLOAD_NOT_ADMITTED",
        "the constraint profile admits only the two compiled fixture payloads",
    )
