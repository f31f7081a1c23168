"""C2SP signed notes with Ed25519 keys in Go ``sumdb/note`` encodings, and C2SP
``tlog-cosignature`` witness signatures (``docs/spec/transparency.md §2``, ``§5``).

Rules (the contract):

1. Key names are non-empty UTF-8 with no Unicode space and no ``+``. A key ID is the first 4
   bytes (big-endian) of ``SHA-256(name || 0x0A || type || public key)``; ``type`` is
   :data:`SIG_ED25519` (``0x01``, a note signature) or :data:`SIG_COSIGNATURE` (``0x04``, a
   witness cosignature). Verifier keys are ``<name>+<8 hex>+<base64(type || 32-byte key)>``,
   signer keys ``PRIVATE+KEY+<name>+<8 hex>+<base64(type || 32-byte seed)>``; parsing
   recomputes the key ID and refuses a mismatch (:class:`KeyFormatError` with a reason).
2. Parsing a note (:func:`parse_note`), in order, first failure decides
   (:class:`NoteError`, ``code``): ``NOTE_TOO_LARGE`` over :data:`MAX_NOTE_BYTES`;
   ``NOTE_MALFORMED`` for invalid UTF-8, a control character other than newline, no blank
   line before the signature block, a signature line that is not ``— <name> <base64>``
   (standard base64 with padding, at least 5 bytes), or more than :data:`MAX_SIGNATURES`.
3. Opening a note (:func:`open_note`) parses it, then: signatures from unknown
   ``(name, key ID)`` pairs are kept as *unverified* and ignored; a known key's signature that
   does not verify is ``NOTE_BAD_SIGNATURE`` (the whole note is refused); a note with no
   verified known signature is ``NOTE_UNVERIFIED``. A repeated line is counted once.
4. An Ed25519 note signature covers the note text including its final newline. A
   cosignature covers ``cosignature/v1\\ntime <T>\\n`` followed by the note text, and its
   payload is ``timestamp (8 bytes, big-endian) || signature (64)``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import time
import unicodedata
from collections.abc import Sequence
from typing import Final

import attrs
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from daemon.wire._errors import PeerError

SIG_ED25519: Final = 0x01
SIG_COSIGNATURE: Final = 0x04
SIGNATURE_TYPES: Final = (SIG_ED25519, SIG_COSIGNATURE)
MAX_NOTE_BYTES: Final = 64 * 1024
MAX_SIGNATURES: Final = 100
EM_DASH: Final = "\u2014"
_SIGNATURE_PREFIX: Final = EM_DASH + " "
_B64_RE: Final = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


class NoteError(PeerError):
    """A note is refused; ``code`` is one of ``NOTE_TOO_LARGE``, ``NOTE_MALFORMED``,
    ``NOTE_BAD_SIGNATURE``, ``NOTE_UNVERIFIED``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class KeyFormatError(PeerError, ValueError):
    """A verifier or signer key string is malformed or inconsistent."""


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    """Strict standard base64 with padding; ``ValueError`` otherwise."""
    if not _B64_RE.fullmatch(text):
        raise ValueError("not standard padded base64")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as error:
        raise ValueError(str(error)) from None


def valid_key_name(name: str) -> bool:
    return (
        bool(name)
        and "+" not in name
        and not any(
            character.isspace() or unicodedata.category(character) == "Zs" for character in name
        )
    )


def key_id(name: str, sig_type: int, public: bytes) -> int:
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([sig_type]) + public).digest()
    return int.from_bytes(digest[:4], "big")


def _public_bytes(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@attrs.frozen
class VerifierKey:
    """A public key that verifies note signatures (type 0x01) or cosignatures (0x04)."""

    name: str
    key_id: int
    sig_type: int
    public: bytes

    @classmethod
    def from_public(cls, name: str, public: bytes, sig_type: int = SIG_ED25519) -> VerifierKey:
        if not valid_key_name(name):
            raise KeyFormatError(f"invalid key name {name!r}")
        if sig_type not in SIGNATURE_TYPES or len(public) != 32:
            raise KeyFormatError("an Ed25519 key is 32 bytes of type 0x01 or 0x04")
        return cls(name, key_id(name, sig_type, public), sig_type, public)

    @classmethod
    def parse(cls, text: str) -> VerifierKey:
        parts = text.strip().split("+", 2)
        if len(parts) != 3:
            raise KeyFormatError("a verifier key is NAME+KEYID+BASE64")
        name, hex_id, encoded = parts
        if not re.fullmatch(r"[0-9a-f]{8}", hex_id):
            raise KeyFormatError("the key ID is not 8 lowercase hex digits")
        try:
            raw = b64decode(encoded)
        except ValueError:
            raise KeyFormatError("the key is not standard base64") from None
        if len(raw) != 33 or raw[0] not in SIGNATURE_TYPES:
            raise KeyFormatError("the key is not an Ed25519 key of type 0x01 or 0x04")
        key = cls.from_public(name, raw[1:], raw[0])
        if key.key_id != int(hex_id, 16):
            raise KeyFormatError("the key ID does not match the name and key")
        return key

    def encode(self) -> str:
        return f"{self.name}+{self.key_id:08x}+{b64encode(bytes([self.sig_type]) + self.public)}"

    def verify_payload(self, text: bytes, payload: bytes) -> bool:
        """Does a signature line's payload (after the key ID) verify over note ``text``?"""
        public = Ed25519PublicKey.from_public_bytes(self.public)
        if self.sig_type == SIG_COSIGNATURE:
            if len(payload) != 72:
                return False
            timestamp = int.from_bytes(payload[:8], "big")
            message, signature = cosigned_message(text, timestamp), payload[8:]
        else:
            if len(payload) != 64:
                return False
            message, signature = text, payload
        try:
            public.verify(signature, message)
        except InvalidSignature:
            return False
        return True


def cosigned_message(text: bytes, timestamp: int) -> bytes:
    return b"cosignature/v1\ntime " + str(timestamp).encode("ascii") + b"\n" + text


@attrs.frozen
class SignerKey:
    """A private key; :meth:`encode` is the Go ``sumdb/note`` signer-key form."""

    name: str
    sig_type: int
    seed: bytes = attrs.field(repr=False)

    @classmethod
    def generate(cls, name: str, sig_type: int = SIG_ED25519) -> SignerKey:
        if not valid_key_name(name):
            raise KeyFormatError(f"invalid key name {name!r}")
        seed = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        return cls(name, sig_type, seed)

    @classmethod
    def parse(cls, text: str) -> SignerKey:
        parts = text.strip().split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise KeyFormatError("a signer key is PRIVATE+KEY+NAME+KEYID+BASE64")
        _, _, name, hex_id, encoded = parts
        if not valid_key_name(name) or not re.fullmatch(r"[0-9a-f]{8}", hex_id):
            raise KeyFormatError("invalid key name or key ID")
        try:
            raw = b64decode(encoded)
        except ValueError:
            raise KeyFormatError("the key is not standard base64") from None
        if len(raw) != 33 or raw[0] not in SIGNATURE_TYPES:
            raise KeyFormatError("the key is not an Ed25519 seed of type 0x01 or 0x04")
        key = cls(name, raw[0], raw[1:])
        if key.verifier().key_id != int(hex_id, 16):
            raise KeyFormatError("the key ID does not match the name and key")
        return key

    @property
    def _private(self) -> Ed25519PrivateKey:
        return Ed25519PrivateKey.from_private_bytes(self.seed)

    def verifier(self) -> VerifierKey:
        return VerifierKey.from_public(self.name, _public_bytes(self._private), self.sig_type)

    def encode(self) -> str:
        verifier = self.verifier()
        raw = b64encode(bytes([self.sig_type]) + self.seed)
        return f"PRIVATE+KEY+{self.name}+{verifier.key_id:08x}+{raw}"

    def sign(self, text: bytes, *, timestamp: int | None = None) -> NoteSignature:
        """A signature line over note ``text`` (a cosignature carries ``timestamp``, default
        now)."""
        verifier = self.verifier()
        if self.sig_type == SIG_COSIGNATURE:
            when = int(time.time()) if timestamp is None else timestamp
            payload = when.to_bytes(8, "big") + self._private.sign(cosigned_message(text, when))
        else:
            payload = self._private.sign(text)
        return NoteSignature(self.name, verifier.key_id, payload)


@attrs.frozen
class NoteSignature:
    name: str
    key_id: int
    payload: bytes

    def line(self) -> str:
        blob = b64encode(self.key_id.to_bytes(4, "big") + self.payload)
        return f"{_SIGNATURE_PREFIX}{self.name} {blob}\n"


@attrs.frozen
class Note:
    """A parsed note: its text (ending with a newline) and its signature lines, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def encode(self) -> bytes:
        return (self.text + "\n" + "".join(s.line() for s in self.signatures)).encode("utf-8")


@attrs.frozen
class OpenedNote:
    """A note with at least one verified signature from a known key."""

    note: Note
    verified: tuple[VerifierKey, ...]
    unverified: tuple[NoteSignature, ...]


def _malformed(message: str) -> NoteError:
    return NoteError("NOTE_MALFORMED", message)


def parse_note(data: bytes) -> Note:
    """Split and syntax-check a signed note (rule 2); nothing is verified."""
    if len(data) > MAX_NOTE_BYTES:
        raise NoteError("NOTE_TOO_LARGE", f"a note of {len(data)} bytes exceeds {MAX_NOTE_BYTES}")
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("the note is not UTF-8") from None
    if any(ord(c) < 0x20 and c != "\n" for c in decoded):
        raise _malformed("the note contains a control character")
    split = decoded.rfind("\n\n")
    if split < 0:
        raise _malformed("no blank line before the signatures")
    text, block = decoded[: split + 1], decoded[split + 2 :]
    if not block or not block.endswith("\n"):
        raise _malformed("the signature block is empty or does not end with a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise _malformed(f"more than {MAX_SIGNATURES} signatures")
    signatures = []
    for line in lines:
        if not line.startswith(_SIGNATURE_PREFIX):
            raise _malformed("a signature line does not start with an em dash and a space")
        name, _, blob = line[len(_SIGNATURE_PREFIX) :].partition(" ")
        if not valid_key_name(name) or not blob:
            raise _malformed("a signature line has no valid key name or signature")
        try:
            raw = b64decode(blob)
        except ValueError:
            raise _malformed("a signature is not standard base64") from None
        if len(raw) < 5:
            raise _malformed("a signature is shorter than 5 bytes")
        signatures.append(NoteSignature(name, int.from_bytes(raw[:4], "big"), raw[4:]))
    return Note(text, tuple(signatures))


def open_note(data: bytes, verifiers: Sequence[VerifierKey]) -> OpenedNote:
    """Parse and verify a note against known keys (rule 3)."""
    note = parse_note(data)
    known = {(key.name, key.key_id): key for key in verifiers}
    text = note.text.encode("utf-8")
    verified: list[VerifierKey] = []
    unverified: list[NoteSignature] = []
    seen: set[NoteSignature] = set()
    for signature in note.signatures:
        if signature in seen:
            continue
        seen.add(signature)
        key = known.get((signature.name, signature.key_id))
        if key is None:
            unverified.append(signature)
            continue
        if not key.verify_payload(text, signature.payload):
            raise NoteError(
                "NOTE_BAD_SIGNATURE",
                f"the signature by {key.name}+{key.key_id:08x} does not verify",
            )
        if key not in verified:
            verified.append(key)
    if not verified:
        raise NoteError("NOTE_UNVERIFIED", "no signature by a known key")
    return OpenedNote(note, tuple(verified), tuple(unverified))


def sign_note(text: str, *signers: SignerKey) -> bytes:
    """A signed note: ``text`` (must end with a newline) and one signature per signer."""
    if not text.endswith("\n") or "\n\n" in text:
        raise ValueError("note text must end with one newline and contain no blank line")
    raw = text.encode("utf-8")
    return Note(text, tuple(signer.sign(raw) for signer in signers)).encode()


def add_signature(data: bytes, signer: SignerKey, *, timestamp: int | None = None) -> bytes:
    """``data`` with one more signature line by ``signer`` (e.g. a witness cosignature)."""
    note = parse_note(data)
    signature = signer.sign(note.text.encode("utf-8"), timestamp=timestamp)
    kept = tuple(
        s for s in note.signatures if (s.name, s.key_id) != (signature.name, signature.key_id)
    )
    return Note(note.text, (*kept, signature)).encode()
