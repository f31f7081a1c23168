"""The project's byte encodings: the canonical-JSON family, digests and the strict JSON reader.

Every package (``session``, ``mechanism``, ``catalog``, ``daemon``, ``holdout``) encodes, digests
and strictly reads JSON through these names instead of its own copies, and this package imports
none of them: the catalog builds, indexes and plans without loading the session protocol or a
mechanism (``docs/spec/formation.md`` §7), and still shares its codec with them.

* :func:`core_json` / :func:`core_digest` — the **core** variant: ASCII-escaped, sorted,
  compact; binding, registry, package and index digests are computed over it.
* :func:`network_json` / :func:`network_json_float_free` — the **network** variant: raw UTF-8,
  sorted, compact (orjson); wire headers and, under :mod:`mechanism.canonical`'s value model,
  the VSTD canonical records.
* :func:`digest_bytes` (``sha256:<hex>``) and :func:`is_digest` (exactly that form).
* :func:`loads_strict_json` — duplicate keys refused at any depth; optional refusal of
  NaN/Infinity and of floats (:class:`StrictJSONError`, :class:`DuplicateKeyError`).
* The product's one error tree (:mod:`canon._errors`): :class:`EvidencedError` and its
  branches, the root of every exception any package raises.
"""

from ._encoding import (
    DIGEST_RE,
    core_digest,
    core_json,
    digest_bytes,
    is_digest,
    network_json,
    network_json_float_free,
)
from ._errors import (
    Busy,
    CallerError,
    EnvironmentFault,
    EvidencedError,
    LocalProtocolError,
    PeerError,
    RemoteProtocolError,
    ServiceError,
    Unavailable,
)
from ._strict import DuplicateKeyError, StrictJSONError, loads_strict_json

__all__ = [
    "DIGEST_RE",
    "Busy",
    "CallerError",
    "DuplicateKeyError",
    "EnvironmentFault",
    "EvidencedError",
    "LocalProtocolError",
    "PeerError",
    "RemoteProtocolError",
    "ServiceError",
    "StrictJSONError",
    "Unavailable",
    "core_digest",
    "core_json",
    "digest_bytes",
    "is_digest",
    "loads_strict_json",
    "network_json",
    "network_json_float_free",
]
