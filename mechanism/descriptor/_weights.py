"""The ``native-weights`` provider (operation ``inspect``): SafeTensors I8 on a private snapshot.

Rules, in order; :func:`inspect_weights` never raises for bad input, it returns a
:class:`WeightsReport` whose ``status`` is ``OBSERVED``, ``INVALID`` or ``UNKNOWN`` with one stable
``reason_code``:

1. The payload is exact ``bytes`` (``WEIGHTS_NOT_BYTES``) of at most ``max_bytes``
   (``WEIGHTS_LIMIT_EXCEEDED``, UNKNOWN).
2. Header preflight (our own, so that a lying header has a precise code before any library call):
   8-byte little-endian length N with ``8 + N <= len`` (``WEIGHTS_HEADER_LENGTH_INVALID``);
   the N header bytes are strict UTF-8 JSON, an object, no duplicate keys, no integer of more
   than 20 digits (64 bits, safetensors' own width), trailing padding only spaces
   (``WEIGHTS_HEADER_INVALID``); every entry except ``__metadata__`` (string→string) has
   exactly ``dtype``, ``shape``, ``data_offsets``; dtype ``I8`` only (``WEIGHTS_DTYPE_UNSUPPORTED``,
   UNKNOWN); shape a list of non-negative ints; offsets ``[begin, end]`` with
   ``0 <= begin <= end <= data length`` and ``end - begin == prod(shape)``
   (``WEIGHTS_OFFSETS_INVALID``); the tensors tile the data buffer exactly, without gap or overlap
   (``WEIGHTS_OFFSETS_INVALID``).
3. Snapshot: the bytes are written once into a fresh private directory
   (:func:`mechanism.snapshots.make_snapshot_directory`: named after this process, mode 0700)
   as a file created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0600; the file's mode and size
   are checked and its bytes re-read and compared with the admitted payload, whose CanonFS
   reference the report carries (``WEIGHTS_SNAPSHOT_FAILED``, UNKNOWN). The caller's original
   source is never opened here: the provider only ever sees the admitted bytes.
4. The real ``safetensors`` library loads the snapshot **by path**
   (``safetensors.numpy.load_file``); a library refusal is ``WEIGHTS_LIBRARY_REJECTED``; a
   loaded tensor that disagrees with the header preflight is ``WEIGHTS_LIBRARY_MISMATCH``.
5. The report lists every tensor in header order: name, dtype, shape, ``sha256:`` digest of its
   data bytes, its data as hex, whether every byte is a balanced trit (0x00/0x01/0xff) and, for
   tensors of at most ``MAX_REPORTED_VALUES`` elements, the values as decimal strings.
   The snapshot directory is removed afterwards.
6. ``numpy`` and ``safetensors`` are imported when first needed (:func:`load_library`), not
   with this module: a client that only builds a binding never loads them. The provider
   calls :func:`load_library` when a host configures the mechanism (``prepare``), so a host's
   evaluation workers inherit them and no first decision pays for the import; without them
   (the ``descriptor`` extra not installed) the provider creates no mechanism at all.
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import struct
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

import attrs

from mechanism.canonical import digest_bytes
from mechanism.snapshots import make_snapshot_directory
from session import require_extra
from session.canon import DuplicateKeyError, StrictJSONError, loads_strict_json

from ._canonfs import canonfs_hash

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "MAX_REPORTED_VALUES",
    "MAX_WEIGHTS_BYTES",
    "WEIGHTS_REASON_CODES",
    "WeightsReport",
    "inspect_weights",
]

MAX_WEIGHTS_BYTES: Final = 65_536
MAX_HEADER_BYTES: Final = 16_384
MAX_TENSORS: Final = 64
MAX_RANK: Final = 8
MAX_REPORTED_VALUES: Final = 64
_MAX_INT_DIGITS: Final = 20
SNAPSHOT_NAME: Final = "payload.safetensors"

WEIGHTS_REASON_CODES: Final = (
    "WEIGHTS_NOT_BYTES",
    "WEIGHTS_LIMIT_EXCEEDED",
    "WEIGHTS_HEADER_LENGTH_INVALID",
    "WEIGHTS_HEADER_INVALID",
    "WEIGHTS_DTYPE_UNSUPPORTED",
    "WEIGHTS_OFFSETS_INVALID",
    "WEIGHTS_SNAPSHOT_FAILED",
    "WEIGHTS_LIBRARY_REJECTED",
    "WEIGHTS_LIBRARY_MISMATCH",
)
_UNKNOWN_CODES: Final = frozenset(
    {"WEIGHTS_LIMIT_EXCEEDED", "WEIGHTS_DTYPE_UNSUPPORTED", "WEIGHTS_SNAPSHOT_FAILED"}
)


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.frozen
class WeightsReport:
    status: str  # OBSERVED | INVALID | UNKNOWN
    reason_code: str | None
    message: str
    tensors: tuple[dict[str, Any], ...] = ()
    snapshot: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason_codes": [] if self.reason_code is None else [self.reason_code],
            "message": self.message,
            "tensors": list(self.tensors),
            "snapshot": self.snapshot,
        }


@attrs.frozen
class _Entry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def _header_int(literal: str) -> int:
    """A header integer: at most 20 digits (a 64-bit value, safetensors' own width).

    Longer literals are refused before conversion: ``int()`` of an n-digit literal costs
    O(n**2), and a product of such shapes would have tens of thousands of digits.
    """
    if len(literal.lstrip("-")) > _MAX_INT_DIGITS:
        raise _Refused("WEIGHTS_HEADER_INVALID", "a header integer is wider than 64 bits")
    return int(literal)


def _exact_ints(value: object) -> bool:
    return isinstance(value, list) and all(type(item) is int for item in value)


def _preflight(payload: bytes) -> tuple[list[_Entry], int]:
    """Rule 2: the header's tensors in header order, and where the data buffer starts."""
    header, header_length = _header(payload)
    data_length = len(payload) - 8 - header_length
    entries: list[_Entry] = []
    for name, spec in header.items():
        if name == "__metadata__":
            if not isinstance(spec, dict) or not all(
                isinstance(value, str) for value in spec.values()
            ):
                raise _Refused("WEIGHTS_HEADER_INVALID", "__metadata__ maps strings to strings")
            continue
        entries.append(_entry(name, spec, data_length))
        if len(entries) > MAX_TENSORS:
            raise _Refused("WEIGHTS_HEADER_INVALID", f"more than {MAX_TENSORS} tensors")
    position = 0
    for entry in sorted(entries, key=lambda item: (item.begin, item.end)):
        if entry.begin != position:
            raise _Refused("WEIGHTS_OFFSETS_INVALID", "tensors overlap or leave a gap")
        position = entry.end
    if position != data_length:
        raise _Refused("WEIGHTS_OFFSETS_INVALID", "trailing bytes after the last tensor")
    return entries, 8 + header_length


def _header(payload: bytes) -> tuple[dict[str, Any], int]:
    """The header's JSON object and its declared length N (``8 + N <= len(payload)``)."""
    if len(payload) < 8:
        raise _Refused("WEIGHTS_HEADER_LENGTH_INVALID", "shorter than the 8-byte header length")
    (header_length,) = struct.unpack("<Q", payload[:8])
    if header_length > min(MAX_HEADER_BYTES, len(payload) - 8):
        raise _Refused(
            "WEIGHTS_HEADER_LENGTH_INVALID", f"header length {header_length} exceeds the file"
        )
    raw = payload[8 : 8 + header_length]
    try:
        text = raw.decode("utf-8", errors="strict")
        header = loads_strict_json(text.rstrip(" "), refuse_constants=False, parse_int=_header_int)
    except DuplicateKeyError as duplicate:
        raise _Refused(
            "WEIGHTS_HEADER_INVALID", f"duplicate header key {duplicate.key!r}"
        ) from None
    except (UnicodeDecodeError, StrictJSONError):
        raise _Refused("WEIGHTS_HEADER_INVALID", "header is not strict UTF-8 JSON") from None
    if not isinstance(header, dict):
        raise _Refused("WEIGHTS_HEADER_INVALID", "header is not a JSON object")
    return header, header_length


def _entry(name: str, spec: object, data_length: int) -> _Entry:
    """One tensor's header entry: exact keys, dtype I8, its shape and offsets in the buffer."""
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data_offsets"}:
        raise _Refused("WEIGHTS_HEADER_INVALID", f"tensor {name!r}: wrong keys")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str):
        raise _Refused("WEIGHTS_HEADER_INVALID", f"tensor {name!r}: dtype is a string")
    if dtype != "I8":
        raise _Refused("WEIGHTS_DTYPE_UNSUPPORTED", f"tensor {name!r}: dtype {dtype} is not I8")
    if not _exact_ints(shape) or len(shape) > MAX_RANK or any(size < 0 for size in shape):
        raise _Refused("WEIGHTS_HEADER_INVALID", f"tensor {name!r}: bad shape")
    if not _exact_ints(offsets) or len(offsets) != 2:
        raise _Refused("WEIGHTS_OFFSETS_INVALID", f"tensor {name!r}: offsets are [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end <= data_length:
        raise _Refused(
            "WEIGHTS_OFFSETS_INVALID",
            f"tensor {name!r}: [{begin}, {end}) outside the {data_length}-byte data buffer",
        )
    if end - begin != math.prod(shape):
        raise _Refused(
            "WEIGHTS_OFFSETS_INVALID",
            f"tensor {name!r}: {end - begin} bytes for {math.prod(shape)} I8 elements",
        )
    return _Entry(name, dtype, tuple(shape), begin, end)


def _write_snapshot(directory: str, payload: bytes) -> tuple[str, dict[str, Any]]:
    path = os.path.join(directory, SNAPSHOT_NAME)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    descriptor = os.open(path, flags, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # exactly 0600 whatever the process umask
        view = memoryview(payload)
        while view:
            written = os.write(descriptor, view)
            view = view[written:]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    status = os.lstat(path)
    directory_mode = stat.S_IMODE(os.lstat(directory).st_mode)
    mode = stat.S_IMODE(status.st_mode)
    if not stat.S_ISREG(status.st_mode) or mode != 0o600 or directory_mode != 0o700:
        raise _Refused("WEIGHTS_SNAPSHOT_FAILED", "snapshot is not a private 0600 regular file")
    with open(path, "rb") as handle:
        reread = handle.read()
    if reread != payload:
        raise _Refused("WEIGHTS_SNAPSHOT_FAILED", "snapshot bytes differ from the admitted bytes")
    return path, {
        "file_mode": f"{mode:04o}",
        "directory_mode": f"{directory_mode:04o}",
        "exclusive_create": True,
        "size": len(reread),
        "reference": canonfs_hash(reread),
        "loaded_by_path": True,
        "removed_after_use": True,
    }


def _values(array: np.ndarray[Any, Any]) -> Any:
    listed = array.tolist()

    def convert(item: Any) -> Any:
        if isinstance(item, list):
            return [convert(element) for element in item]
        return str(int(item))

    return convert(listed)


def load_library() -> tuple[ModuleType, ModuleType]:
    """``(numpy, safetensors.numpy)``, imported on first use (rule 6); without them,
    :class:`session.ExtraMissing` naming the ``descriptor`` extra."""
    try:
        import numpy
        import safetensors.numpy
    except ImportError:
        require_extra("descriptor")
        raise  # installed, but broken: that library's own error
    return numpy, safetensors.numpy


def _tensor(
    numpy: ModuleType,
    entry: _Entry,
    array: np.ndarray[Any, Any],
    payload: bytes,
    data_start: int,
) -> dict[str, Any]:
    """Rule 5: one loaded tensor's report, once it agrees with its header entry (rule 4)."""
    data = payload[data_start + entry.begin : data_start + entry.end]
    if array.dtype != numpy.int8 or tuple(array.shape) != entry.shape or array.tobytes() != data:
        raise _Refused("WEIGHTS_LIBRARY_MISMATCH", f"tensor {entry.name!r} disagrees")
    tensor: dict[str, Any] = {
        "name": entry.name,
        "dtype": entry.dtype,
        "shape": list(entry.shape),
        "data_digest": digest_bytes(data),
        "data_hex": data.hex(),
        "balanced_trits": all(byte in (0x00, 0x01, 0xFF) for byte in data),
    }
    if array.size <= MAX_REPORTED_VALUES:
        tensor["values"] = _values(array)
    return tensor


def inspect_weights(payload: bytes, *, max_bytes: int = MAX_WEIGHTS_BYTES) -> WeightsReport:
    """Inspect a SafeTensors I8 payload through a private snapshot; never raises for bad input."""
    numpy, library = load_library()
    if type(payload) is not bytes:
        return WeightsReport("INVALID", "WEIGHTS_NOT_BYTES", "payload is not exact bytes")
    if len(payload) > max_bytes:
        return WeightsReport(
            "UNKNOWN", "WEIGHTS_LIMIT_EXCEEDED", f"{len(payload)} bytes exceed {max_bytes}"
        )
    try:
        entries, data_start = _preflight(payload)
    except _Refused as refusal:
        status = "UNKNOWN" if refusal.code in _UNKNOWN_CODES else "INVALID"
        return WeightsReport(status, refusal.code, refusal.message)
    directory: str | None = None
    snapshot: dict[str, Any] | None = None
    try:
        directory = make_snapshot_directory()
        path, snapshot = _write_snapshot(directory, payload)
        try:
            loaded = library.load_file(path)
        except Exception as error:  # any library refusal is a refusal, never an escape
            return WeightsReport(
                "INVALID", "WEIGHTS_LIBRARY_REJECTED", f"safetensors refused: {error}", (), snapshot
            )
        if set(loaded) != {entry.name for entry in entries}:
            raise _Refused("WEIGHTS_LIBRARY_MISMATCH", "library and header disagree on names")
        tensors = [
            _tensor(numpy, entry, loaded[entry.name], payload, data_start) for entry in entries
        ]
        return WeightsReport("OBSERVED", None, "", tuple(tensors), snapshot)
    except _Refused as refusal:
        status = "UNKNOWN" if refusal.code in _UNKNOWN_CODES else "INVALID"
        return WeightsReport(status, refusal.code, refusal.message, (), snapshot)
    except OSError as error:
        return WeightsReport(
            "UNKNOWN", "WEIGHTS_SNAPSHOT_FAILED", f"snapshot failed: {error.strerror or error}"
        )
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
