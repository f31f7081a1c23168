"""The audit log as a signed transparency log (``docs/spec/transparency.md``).

A pure library (files and cryptography, no sockets, nothing of the session or the
mechanisms): RFC 9162 Merkle tree and proofs, C2SP ``tlog-tiles`` storage, C2SP signed notes,
checkpoints and cosignatures, decision receipts, whole-log verification and a monitor; and the
one guarded way to read a file it serves (``_served_files``, whose reads for requests run under
a trio limiter of their own: the one use of trio here) and to look an audit line up
(``_lookup``).
The audit log writer (:mod:`daemon.audit._audit`) and the protocol use it; nothing here imports
them.

May import: ``daemon.wire``, ``daemon.schema`` (the checkpoint interval's default); never
another room.
"""

from daemon.tlog._checkpoint import (
    Checkpoint,
    CheckpointError,
    SignedCheckpoint,
    count_cosignatures,
    open_checkpoint,
    peek_checkpoint,
)
from daemon.tlog._keys import KeyFileError, default_origin, load_signer, write_key_file
from daemon.tlog._log import CHECKPOINT_FILE, TransparencyError, TransparencyLog
from daemon.tlog._merkle import (
    EMPTY_ROOT,
    MemoryTree,
    ProofRangeError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    verify_consistency,
    verify_inclusion,
)
from daemon.tlog._monitor import Monitor, Observation
from daemon.tlog._note import (
    SIG_COSIGNATURE,
    SIG_ED25519,
    KeyFormatError,
    NoteError,
    SignerKey,
    VerifierKey,
    add_signature,
    open_note,
    parse_note,
    sign_note,
)
from daemon.tlog._receipt import (
    RECEIPT_FORMAT,
    ReceiptReport,
    encode_receipt,
    make_receipt,
    verify_receipt,
)
from daemon.tlog._tiles import TileDirectory, TileError, TileReader, parse_tile_path, tile_path
from daemon.tlog._verify import LogReport, verify_directory

__all__ = [
    "CHECKPOINT_FILE",
    "EMPTY_ROOT",
    "RECEIPT_FORMAT",
    "SIG_COSIGNATURE",
    "SIG_ED25519",
    "Checkpoint",
    "CheckpointError",
    "KeyFileError",
    "KeyFormatError",
    "LogReport",
    "MemoryTree",
    "Monitor",
    "NoteError",
    "Observation",
    "ProofRangeError",
    "ReceiptReport",
    "SignedCheckpoint",
    "SignerKey",
    "TileDirectory",
    "TileError",
    "TileReader",
    "TransparencyError",
    "TransparencyLog",
    "VerifierKey",
    "add_signature",
    "consistency_proof",
    "count_cosignatures",
    "default_origin",
    "encode_receipt",
    "inclusion_proof",
    "leaf_hash",
    "load_signer",
    "make_receipt",
    "node_hash",
    "open_checkpoint",
    "open_note",
    "parse_note",
    "parse_tile_path",
    "peek_checkpoint",
    "sign_note",
    "tile_path",
    "verify_consistency",
    "verify_directory",
    "verify_inclusion",
    "verify_receipt",
    "write_key_file",
]
