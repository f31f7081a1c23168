"""Signed notes, keys and cosignatures (``docs/spec/transparency.md §2``, ``§3``, ``§5``)
against published vectors and an independent implementation.

* Go ``golang.org/x/mod/sumdb/note`` publishes, in its own tests and examples, the
  ``PeterNeumann`` key pair, a note it signs, and the ``EnochRoot`` verifier key and signature
  (generated from an all-zero seed). Those exact strings are below.
* Key IDs are recomputed here with ``hashlib`` alone, and signatures checked with the
  ``cryptography`` library directly.
* ``tlog-scales`` (a Python tlog-tiles library) verifies our checkpoints and cosignatures, and
  we verify a checkpoint it signs.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from tlog_scales import signing as scales_signing
from tlog_scales import tlog as scales_tlog

from daemon.tlog._checkpoint import Checkpoint, CheckpointError, count_cosignatures, open_checkpoint
from daemon.tlog._note import (
    SIG_COSIGNATURE,
    KeyFormatError,
    NoteError,
    SignerKey,
    VerifierKey,
    add_signature,
    open_note,
    parse_note,
    sign_note,
)

# Go x/mod sumdb/note: note_test.go (TestNewVerifier, TestNewSigner, TestSign) and
# example_test.go (ExampleSign_add_signatures).
GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_SIGNED = (
    GO_TEXT + "\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNX"
    "gKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
GO_ENOCH_VERIFIER = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
GO_ENOCH_LINE = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGw"
    "nWLox33WWd1RvMc+QQ=\n"
)


def test_go_signer_key_derives_go_verifier_key_and_signature() -> None:
    signer = SignerKey.parse(GO_SIGNER)
    assert signer.encode() == GO_SIGNER
    assert signer.verifier().encode() == GO_VERIFIER
    # Ed25519 is deterministic: we produce Go's published note byte for byte.
    assert sign_note(GO_TEXT, signer) == GO_SIGNED.encode()


def test_go_signed_note_opens_under_go_verifier_key() -> None:
    opened = open_note(GO_SIGNED.encode(), [VerifierKey.parse(GO_VERIFIER)])
    assert opened.note.text == GO_TEXT
    assert [key.name for key in opened.verified] == ["PeterNeumann"]


def test_go_example_with_two_signatures_and_zero_seed_key() -> None:
    zero = SignerKey("EnochRoot", 0x01, bytes(32))  # Go's example reads the seed from zeros
    assert zero.verifier().encode() == GO_ENOCH_VERIFIER
    both = add_signature(GO_SIGNED.encode(), zero)
    assert both == (GO_SIGNED + GO_ENOCH_LINE).encode()
    opened = open_note(both, [VerifierKey.parse(GO_VERIFIER), VerifierKey.parse(GO_ENOCH_VERIFIER)])
    assert len(opened.verified) == 2


def test_key_id_is_first_four_bytes_of_sha256_computed_by_hand() -> None:
    key = VerifierKey.parse(GO_VERIFIER)
    raw = base64.b64decode(GO_VERIFIER.split("+")[2])
    assert raw[0] == 0x01
    by_hand = hashlib.sha256(b"PeterNeumann\n" + raw).digest()[:4].hex()
    assert by_hand == "c74f20a3" == f"{key.key_id:08x}"
    witness = SignerKey.generate("witness.example/w1", SIG_COSIGNATURE).verifier()
    assert witness.key_id == int.from_bytes(
        hashlib.sha256(b"witness.example/w1\n\x04" + witness.public).digest()[:4], "big"
    )


def test_signature_checked_with_cryptography_directly() -> None:
    signer = SignerKey.generate("example.com/log")
    note = sign_note("hello\n", signer)
    blob = base64.b64decode(note.decode().split(" ")[-1])
    public = Ed25519PublicKey.from_public_bytes(signer.verifier().public)
    public.verify(blob[4:], b"hello\n")  # raises if wrong
    assert blob[:4] == signer.verifier().key_id.to_bytes(4, "big")


@pytest.mark.parametrize(
    "mangled",
    [
        "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # wrong key ID
        "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TX",  # other key
        "PeterNeumanX+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # other name
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # unknown alg
        "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # upper-case hex
        "PeterNeumann+c74f20a3",
        "",
    ],
)
def test_mangled_verifier_keys_are_refused(mangled: str) -> None:
    with pytest.raises(KeyFormatError):
        VerifierKey.parse(mangled)


def test_note_with_an_unknown_key_only_is_refused() -> None:
    with pytest.raises(NoteError) as caught:
        open_note(GO_SIGNED.encode(), [VerifierKey.parse(GO_ENOCH_VERIFIER)])
    assert caught.value.code == "NOTE_UNVERIFIED"


def test_edited_note_text_is_refused() -> None:
    edited = GO_SIGNED.replace("problem,", "problem;").encode()
    with pytest.raises(NoteError) as caught:
        open_note(edited, [VerifierKey.parse(GO_VERIFIER)])
    assert caught.value.code == "NOTE_BAD_SIGNATURE"


@pytest.mark.parametrize(
    "data",
    [
        b"no blank line\n\xe2\x80\x94 a AAAAAAA=\n",
        GO_TEXT.encode() + b"\n- PeterNeumann x08go/ZJku\n",  # hyphen, not em dash
        GO_TEXT.encode() + b"\n\xe2\x80\x94 PeterNeumann x08go\n",  # not padded base64
        GO_TEXT.encode() + b"\n\xe2\x80\x94 Peter+Neumann AAAAAAA=\n",  # '+' in name
        GO_TEXT.encode() + b"\n\xe2\x80\x94 PeterNeumann AAAA\n",  # < 5 bytes
        b"bad\x01control\n\n" + GO_ENOCH_LINE.encode(),
        b"\xff\xfe\n\n" + GO_ENOCH_LINE.encode(),
        GO_SIGNED.encode()[:-1],  # no final newline
        GO_TEXT.encode() + b"\n" + GO_ENOCH_LINE.encode() * 101,
    ],
)
def test_malformed_notes_are_refused(data: bytes) -> None:
    with pytest.raises(NoteError) as caught:
        parse_note(data)
    assert caught.value.code == "NOTE_MALFORMED"


def test_oversized_note_is_refused_before_parsing() -> None:
    with pytest.raises(NoteError) as caught:
        parse_note(b"x" * (64 * 1024 + 1))
    assert caught.value.code == "NOTE_TOO_LARGE"


def test_our_checkpoint_verifies_with_tlog_scales() -> None:
    signer = SignerKey.generate("example.com/evidenced/audit")
    checkpoint = Checkpoint("example.com/evidenced/audit", 20852163, hashlib.sha256(b"r").digest())
    note = checkpoint.sign(signer)
    theirs = scales_tlog.Checkpoint.from_text(note.decode())
    assert (theirs.origin, theirs.size, theirs.root_hash) == (
        checkpoint.origin,
        checkpoint.size,
        checkpoint.root,
    )
    theirs.verify(scales_signing.Vkey.from_string(signer.verifier().encode()))
    assert theirs.serialize().encode() == note


def test_tlog_scales_checkpoint_opens_under_our_verifier() -> None:
    private = Ed25519PrivateKey.generate()
    scales_signer = scales_signing.PlainEd25519Signer("example.org/their-log", private)
    theirs = scales_tlog.Checkpoint.make_signed(
        "example.org/their-log", 70000, hashlib.sha256(b"x").digest(), [scales_signer]
    )
    key = VerifierKey.parse(scales_signer.vkey.serialize())  # type: ignore[no-untyped-call]
    signed = open_checkpoint(theirs.serialize().encode(), key)
    assert signed.checkpoint == Checkpoint("example.org/their-log", 70000, theirs.root_hash)


def test_our_cosignature_verifies_with_tlog_scales_and_counts_toward_threshold() -> None:
    log = SignerKey.generate("example.com/log")
    witness = SignerKey.generate("witness.example/w1", SIG_COSIGNATURE)
    stranger = SignerKey.generate("witness.example/w2", SIG_COSIGNATURE)
    note = Checkpoint("example.com/log", 5, hashlib.sha256(b"r").digest()).sign(log)
    cosigned = add_signature(add_signature(note, witness, timestamp=1_700_000_000), stranger)
    theirs = scales_tlog.Checkpoint.from_text(cosigned.decode())
    vkeys = scales_signing.VkeySet(
        scales_signing.Vkey.from_string(log.verifier().encode()),
        scales_signing.Vkey.from_string(witness.verifier().encode()),
    )
    assert len(vkeys.verify(theirs.signatures, theirs)) == 2
    signed = open_checkpoint(cosigned, log.verifier(), [witness.verifier()])
    assert count_cosignatures(signed, [witness.verifier()]) == 1
    assert count_cosignatures(signed, [witness.verifier(), stranger.verifier()]) == 1


def test_checkpoint_signed_by_another_key_is_refused() -> None:
    pinned = SignerKey.generate("example.com/log")
    rewritten = SignerKey.generate("example.com/log")  # same origin, new key
    note = Checkpoint("example.com/log", 3, bytes(32)).sign(rewritten)
    with pytest.raises(CheckpointError) as caught:
        open_checkpoint(note, pinned.verifier())
    assert caught.value.code == "NOTE_UNVERIFIED"


def test_checkpoint_whose_origin_is_not_the_key_name_is_refused() -> None:
    signer = SignerKey.generate("example.com/log")
    note = sign_note(f"example.com/other\n3\n{base64.b64encode(bytes(32)).decode()}\n", signer)
    with pytest.raises(CheckpointError) as caught:
        open_checkpoint(note, signer.verifier())
    assert caught.value.code == "CHECKPOINT_ORIGIN"


@pytest.mark.parametrize(
    "text",
    [
        "o\n01\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
        "o\n-1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
        "o\n1\nAAAA\n",
        "o\n1\n",
    ],
)
def test_malformed_checkpoint_text_is_refused(text: str) -> None:
    with pytest.raises(CheckpointError) as caught:
        Checkpoint.parse_text(text)
    assert caught.value.code == "CHECKPOINT_MALFORMED"


def test_checkpoint_extension_lines_are_ignored() -> None:
    text = "o\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nextension line\n"
    assert Checkpoint.parse_text(text) == Checkpoint("o", 1, bytes(32))
