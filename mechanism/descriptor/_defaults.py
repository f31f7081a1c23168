# ruff: noqa: E501
"""The embedded default host configuration (also used by the daemon's ``descriptor`` session).

Rules: the default Axion policy allows the fixture run (tier 1, at most 4 instructions, and a
Path B final-authorization entry for exactly ``run`` on the TISC fixture reference); the default
allowlist holds exactly the two fixture entries. Both are byte-identical to
``fixtures/descriptor/policy-default.apl`` and ``fixtures/descriptor/allowlist-default.json``.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_ALLOWLIST", "DEFAULT_POLICY"]

DEFAULT_POLICY: Final = (
    b"(policy\n"
    b"  (tier 1)\n"
    b"  (max-instructions 4)\n"
    b'  (final-authorization (operation run) (payload "c5f5925cf1d666588094757aaf5750741e847cd977bf2023c134d25ba0a2bed1")))\n'
)

DEFAULT_ALLOWLIST: Final = (
    b"{\n"
    b'  "schema_version": "t81.descriptor-allowlist.v1",\n'
    b'  "entries": [\n'
    b'    {"provider": "t81vm", "operation": "run", "payload_reference": "c5f5925cf1d666588094757aaf5750741e847cd977bf2023c134d25ba0a2bed1"},\n'
    b'    {"provider": "native-weights", "operation": "inspect", "payload_reference": "35690a91bff631659a4d5fd04cae57594ca2a4c3d8bf0831a5b936cffa24fd88"}\n'
    b"  ]\n"
    b"}\n"
)
