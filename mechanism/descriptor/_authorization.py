"""Host authorization configuration: the exact local allowlist (Path C) and Axion (Path B).

Allowlist rules (UTF-8 JSON, at most ``MAX_ALLOWLIST_BYTES``; :func:`parse_allowlist` raises
:class:`AllowlistError` with a stable code):

* an object with exactly ``schema_version`` (``t81.descriptor-allowlist.v1``) and ``entries``;
  duplicate JSON keys are refused (``ALLOWLIST_INVALID``, ``ALLOWLIST_SCHEMA_UNSUPPORTED``);
* each entry is an object with exactly ``provider``, ``operation`` and ``payload_reference``
  (``ALLOWLIST_ENTRY_INVALID``); there are no patterns: a value containing any of
  ``* ? [ ] { } | ^ $ ! ~`` is ``ALLOWLIST_PATTERN_REFUSED``; ``provider`` and ``operation`` are
  exact names ``[a-z][a-z0-9-]*``; ``payload_reference`` is exactly 64 lowercase hex digits;
* a repeated entry is ``ALLOWLIST_DUPLICATE_ENTRY``. An empty list denies everything; nothing
  allows by default.

Configuration rules (:class:`AuthorizationConfig`, never raises for bad policy/allowlist input):

* ``policy`` and ``allowlist`` are text (``str``, UTF-8), exact ``bytes``, or a path object
  (``os.PathLike``) naming the host's file, read once at construction (an unreadable file, or
  one of more than 16 MiB, raises ``OSError`` there: :func:`session.read_capped`); anything
  else is a ``TypeError``. A plain ``str`` is always text, never a path.

* The configuration digest ``H({"schema_version": "t81.descriptor-authorization.v1",
  "axion_policy": sha256-of-policy-bytes, "allowlist": sha256-of-allowlist-bytes})`` is what a
  caller pins as the binding's ``authorization_policy`` parameter.
* A policy that fails to parse makes every Path B authorization fail closed
  (``AUTHORIZATION_POLICY_INVALID``); an allowlist that fails to parse makes every Path C
  authorization fail closed (``AUTHORIZATION_ALLOWLIST_INVALID``).

:meth:`AuthorizationConfig.authorize` runs exactly one path for the discovered ``(provider,
operation, payload_reference)`` (``docs/spec/descriptor.md`` §7.3: Axion with
``final_authorization=true`` for Path B; the exact local allowlist, *instead of* Axion, for
Path C):

* ``t81vm`` — Path B: one Axion evaluation with ``final_authorization=True``, syscall
  ``final-authorization`` and the operation/payload context (Deny or Quarantine →
  ``AUTHORIZATION_AXION_DENIED``; Defer → ``AUTHORIZATION_AXION_DEFERRED``, which is UNKNOWN).
  Allow and Warn authorize; a Warn is reported. The allowlist is not consulted.
* ``native-weights`` — Path C: the exact local allowlist (``AUTHORIZATION_NOT_ALLOWLISTED``).
  Axion is not consulted.
"""

from __future__ import annotations

import os
import re
from typing import Any, Final

import attrs

from mechanism.canonical import canonical_digest, digest_bytes
from session import read_capped
from session.canon import CallerError, DuplicateKeyError, StrictJSONError, loads_strict_json

from ._axion import PolicyEngine, SyscallContext, Verdict, VerdictKind
from ._canonfs import is_canonfs_ref

__all__ = [
    "ALLOWLIST_REASON_CODES",
    "ALLOWLIST_SCHEMA",
    "AUTHORIZATION_SCHEMA",
    "MAX_ALLOWLIST_BYTES",
    "AllowlistEntry",
    "AllowlistError",
    "AuthorizationConfig",
    "AuthorizationReport",
    "parse_allowlist",
]

ALLOWLIST_SCHEMA: Final = "t81.descriptor-allowlist.v1"
AUTHORIZATION_SCHEMA: Final = "t81.descriptor-authorization.v1"
MAX_ALLOWLIST_BYTES: Final = 65_536
MAX_ALLOWLIST_ENTRIES: Final = 1_024
ALLOWLIST_REASON_CODES: Final = (
    "ALLOWLIST_INVALID",
    "ALLOWLIST_SCHEMA_UNSUPPORTED",
    "ALLOWLIST_ENTRY_INVALID",
    "ALLOWLIST_PATTERN_REFUSED",
    "ALLOWLIST_DUPLICATE_ENTRY",
)
_NAME_RE: Final = re.compile(r"[a-z][a-z0-9-]*")
_PATTERN_CHARS: Final = frozenset("*?[]{}|^$!~")


class AllowlistError(CallerError, ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@attrs.frozen
class AllowlistEntry:
    provider: str
    operation: str
    payload_reference: str

    def to_dict(self) -> dict[str, str]:
        return {
            "provider": self.provider,
            "operation": self.operation,
            "payload_reference": self.payload_reference,
        }


def parse_allowlist(data: bytes | str) -> tuple[AllowlistEntry, ...]:
    """Parse allowlist JSON into exact entries; raise :class:`AllowlistError` otherwise."""
    if type(data) is str:
        data = data.encode("utf-8", errors="surrogatepass")
    if type(data) is not bytes:
        raise AllowlistError("ALLOWLIST_INVALID", "allowlist is str or bytes")
    if len(data) > MAX_ALLOWLIST_BYTES:
        raise AllowlistError("ALLOWLIST_INVALID", f"more than {MAX_ALLOWLIST_BYTES} bytes")
    try:
        document = loads_strict_json(data, refuse_constants=False)
    except DuplicateKeyError as duplicate:
        raise AllowlistError("ALLOWLIST_INVALID", str(duplicate)) from None
    except StrictJSONError:
        raise AllowlistError("ALLOWLIST_INVALID", "not strict UTF-8 JSON") from None
    if not isinstance(document, dict) or set(document) != {"schema_version", "entries"}:
        raise AllowlistError("ALLOWLIST_INVALID", "keys are exactly schema_version and entries")
    if document["schema_version"] != ALLOWLIST_SCHEMA:
        raise AllowlistError("ALLOWLIST_SCHEMA_UNSUPPORTED", f"schema is {ALLOWLIST_SCHEMA}")
    raw_entries = document["entries"]
    if not isinstance(raw_entries, list) or len(raw_entries) > MAX_ALLOWLIST_ENTRIES:
        raise AllowlistError("ALLOWLIST_INVALID", "entries is a list")
    entries: list[AllowlistEntry] = []
    seen: set[AllowlistEntry] = set()  # membership in O(1): a list made this loop quadratic
    for index, raw in enumerate(raw_entries):
        entry = _allowlist_entry(index, raw)
        if entry in seen:
            raise AllowlistError("ALLOWLIST_DUPLICATE_ENTRY", f"entry {index} repeats an entry")
        seen.add(entry)
        entries.append(entry)
    return tuple(entries)


def _allowlist_entry(index: int, raw: object) -> AllowlistEntry:
    """Entry ``index`` of the allowlist: exact keys, strings, no pattern, exact names and a
    CanonFS reference (else :class:`AllowlistError`, in that order)."""
    if not isinstance(raw, dict) or set(raw) != {"provider", "operation", "payload_reference"}:
        raise AllowlistError("ALLOWLIST_ENTRY_INVALID", f"entry {index}: wrong keys")
    values = [raw["provider"], raw["operation"], raw["payload_reference"]]
    if not all(type(value) is str for value in values):
        raise AllowlistError("ALLOWLIST_ENTRY_INVALID", f"entry {index}: values are strings")
    if any(_PATTERN_CHARS & set(value) for value in values):
        raise AllowlistError(
            "ALLOWLIST_PATTERN_REFUSED", f"entry {index}: patterns are not entries"
        )
    provider, operation, reference = values
    if not _NAME_RE.fullmatch(provider) or not _NAME_RE.fullmatch(operation):
        raise AllowlistError("ALLOWLIST_ENTRY_INVALID", f"entry {index}: exact names only")
    if not is_canonfs_ref(reference):
        raise AllowlistError(
            "ALLOWLIST_ENTRY_INVALID", f"entry {index}: payload_reference is 64 lowercase hex"
        )
    return AllowlistEntry(provider, operation, reference)


@attrs.frozen
class AuthorizationReport:
    status: str  # AUTHORIZED | DENIED | UNKNOWN
    reason_code: str | None
    paths: tuple[dict[str, Any], ...]
    configuration_digest: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason_codes": [] if self.reason_code is None else [self.reason_code],
            "configuration_digest": self.configuration_digest,
            "paths": list(self.paths),
        }


HostText = str | bytes | os.PathLike[str]


def _as_bytes(value: HostText) -> bytes:
    if type(value) is bytes:
        return value
    if type(value) is str:
        return value.encode("utf-8", errors="surrogatepass")
    if isinstance(value, os.PathLike):
        # A host may name its configuration file; it is read once, here, never at evaluation.
        return read_capped(value)
    raise TypeError("policy and allowlist are str (text), bytes or a path object")


class AuthorizationConfig:
    """One host's Axion policy and allowlist, parsed once; bad input fails closed."""

    def __init__(self, policy: HostText, allowlist: HostText) -> None:
        self.policy_bytes = _as_bytes(policy)
        self.allowlist_bytes = _as_bytes(allowlist)
        self.policy_error: str | None = None
        self.allowlist_error: str | None = None
        self.engine = PolicyEngine.from_text(self.policy_bytes)
        if self.engine.parse_failure is not None:
            self.policy_error = str(self.engine.parse_failure)
        try:
            self.entries: tuple[AllowlistEntry, ...] = parse_allowlist(self.allowlist_bytes)
        except AllowlistError as error:
            self.entries = ()
            self.allowlist_error = str(error)
        self.record = {
            "schema_version": AUTHORIZATION_SCHEMA,
            "axion_policy": digest_bytes(self.policy_bytes),
            "allowlist": digest_bytes(self.allowlist_bytes),
        }
        self.digest = canonical_digest(self.record)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.record,
            "digest": self.digest,
            "policy_error": self.policy_error,
            "allowlist_error": self.allowlist_error,
        }

    def authorize(
        self, provider: str, operation: str, payload_reference: str
    ) -> AuthorizationReport:
        paths: list[dict[str, Any]] = []

        def done(status: str, code: str | None) -> AuthorizationReport:
            return AuthorizationReport(status, code, tuple(paths), self.digest)

        if provider != "t81vm":
            # Path C: the exact local allowlist, instead of Axion.
            if self.allowlist_error is not None:
                paths.append({"path": "configuration", "error": self.allowlist_error})
                return done("DENIED", "AUTHORIZATION_ALLOWLIST_INVALID")
            wanted = AllowlistEntry(provider, operation, payload_reference)
            matched = wanted in self.entries
            paths.append(
                {
                    "path": "exact_local_allowlist",
                    "entry": wanted.to_dict(),
                    "result": "MATCHED" if matched else "NO_ENTRY",
                }
            )
            if not matched:
                return done("DENIED", "AUTHORIZATION_NOT_ALLOWLISTED")
            return done("AUTHORIZED", None)
        # Path B: a separate Axion evaluation with final_authorization=true.
        if self.policy_error is not None:
            paths.append({"path": "configuration", "error": self.policy_error})
            return done("DENIED", "AUTHORIZATION_POLICY_INVALID")
        context = SyscallContext(
            caller="descriptor-host",
            syscall="final-authorization",
            final_authorization=True,
            operation=operation,
            provider=provider,
            payload_reference=payload_reference,
        )
        verdict = self.engine.evaluate(context)
        paths.append(
            {
                "path": "axion_final_authorization",
                "context": {
                    "caller": context.caller,
                    "syscall": context.syscall,
                    "final_authorization": True,
                    "provider": provider,
                    "operation": operation,
                    "payload_reference": payload_reference,
                },
                "verdict": verdict.to_dict(),
            }
        )
        return _from_verdict(verdict, done)


def _from_verdict(verdict: Verdict, done: Any) -> AuthorizationReport:
    if verdict.kind in (VerdictKind.DENY, VerdictKind.QUARANTINE):
        result: AuthorizationReport = done("DENIED", "AUTHORIZATION_AXION_DENIED")
    elif verdict.kind is VerdictKind.DEFER:
        result = done("UNKNOWN", "AUTHORIZATION_AXION_DEFERRED")
    else:
        result = done("AUTHORIZED", None)
    return result
