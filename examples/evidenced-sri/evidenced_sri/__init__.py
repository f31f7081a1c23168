"""evidenced-sri: an example third-party mechanism for the evidenced daemon.

It checks that a resource matches its W3C Subresource Integrity metadata. The package shows
every step an author takes (``docs/writing-a-mechanism.md`` in evidenced): a mechanism that uses
the shared pair pre-check pipeline, a provider with typed options and an honest binding, one
entry point (``evidenced.mechanisms``: ``sri``), and a test suite that runs the conformance kit.
"""

from ._integrity import ALGORITHMS, HashExpression, integrity_of, parse_metadata, strongest
from ._mechanism import (
    EXPECTED,
    MAX_METADATA_BYTES,
    MAX_RESOURCE_BYTES,
    MECHANISM_DIGEST,
    MECHANISM_ID,
    REASON_CODES,
    SriIntegrityMechanism,
)
from ._provider import PROVIDER, SriOptions, SriProvider

__all__ = [
    "ALGORITHMS",
    "EXPECTED",
    "MAX_METADATA_BYTES",
    "MAX_RESOURCE_BYTES",
    "MECHANISM_DIGEST",
    "MECHANISM_ID",
    "PROVIDER",
    "REASON_CODES",
    "HashExpression",
    "SriIntegrityMechanism",
    "SriOptions",
    "SriProvider",
    "integrity_of",
    "parse_metadata",
    "strongest",
]
