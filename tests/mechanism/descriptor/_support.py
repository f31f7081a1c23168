"""Helpers for the descriptor tests: fixture paths (from ``testdata``) and a trit packer."""

from __future__ import annotations

import hashlib
import sys
from typing import Any, Final

import testdata

REPO: Final = testdata.REPO
FIXTURES: Final = testdata.fixture("descriptor", directory=True)
TISC_REF: Final = "c5f5925cf1d666588094757aaf5750741e847cd977bf2023c134d25ba0a2bed1"
SAFETENSORS_REF: Final = "35690a91bff631659a4d5fd04cae57594ca2a4c3d8bf0831a5b936cffa24fd88"

# Written out from docs/spec/descriptor.md §1.2 (index → glyph), independently of the module.
SPEC_ALPHABET: Final = (
    [str(d) for d in range(10)]
    + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    + [
        "-",
        "−",
        "×",
        "÷",
        "=",
        "<",
        ">",
        "≤",
        "≥",
        "≠",
        "≈",
        "∞",
        "λ",
        "μ",
        "π",
        "σ",
        "τ",
        "ω",
        "Γ",
    ]
)


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def sha3_ref(data: bytes) -> str:
    return hashlib.sha3_512(data).digest()[:32].hex()


def sha256_ref(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def pack_word(fields: tuple[int, int, int, int, int]) -> str:
    """An independent balanced-ternary packer (no range checks: used to forge bad words)."""
    widths = (8, 21, 41, 21, 5)
    trits: list[int] = []
    for value, width in zip(fields, widths, strict=True):
        digits = []
        magnitude = abs(value)
        for _ in range(width):
            remainder = magnitude % 3
            magnitude //= 3
            if remainder == 2:
                remainder = -1
                magnitude += 1
            digits.append(remainder)
        assert magnitude == 0, "value does not fit its trit width"
        trits.extend(-t for t in digits) if value < 0 else trits.extend(digits)
    return "".join(
        SPEC_ALPHABET[sum((trits[i + j] + 1) * 3**j for j in range(4))] for i in range(0, 96, 4)
    )


# One process-wide audit hook (hooks cannot be removed); it records only while a test listens.
OPEN_EVENTS: Final[dict[str, Any]] = {"active": False, "events": []}


def _audit_hook(event: str, args: tuple[Any, ...]) -> None:
    if OPEN_EVENTS["active"] and event == "open":
        OPEN_EVENTS["events"].append((str(args[0]), args[1], args[2]))


sys.addaudithook(_audit_hook)
