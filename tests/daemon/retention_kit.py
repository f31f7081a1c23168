"""Parts for retention and replay tests: moto's S3 server, and logs written the daemon's way.

Imported as ``retention_kit`` (conftest puts this folder on the path).

* :func:`moto_server` starts ``moto.server.ThreadedMotoServer`` on 127.0.0.1 (a real S3 API
  over HTTP: boto3 is never mocked); :func:`use_s3` points boto3 at it through the
  environment, exactly as an operator would (``AWS_ENDPOINT_URL_S3``, keys, region).
* :class:`LogWriter` writes a chain-valid audit log whose ``daemon_start`` and ``decision``
  lines have the fields the daemon writes (``daemon/audit/_fields.py``): it evaluates each
  pair exactly as the server does (fresh store + session), stores the evidence in a retention
  store, and seals each line with the audit format's own :func:`render_line`. Ten thousand
  decisions take a second, where a daemon round trip per decision would take many.
* :class:`VersionedMechanism` is offered by :data:`VERSIONED_PROVIDER`; :func:`offer_provider`
  makes it installed under the name ``test-versioned`` for one test (the provider registry
  answers an extra entry point, exactly what ``pip install`` of a package would add) and
  :func:`withdraw_provider` uninstalls it again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs

import session._plugins as plugins
from daemon.audit._audit import GENESIS, render_line
from daemon.audit._fields import decision_fields, session_config_entry
from daemon.config._config import create_mechanism
from daemon.config._describe import catalog_entry as _catalog_entry
from daemon.retention import RetentionStore
from daemon.tlog._names import DecisionIds
from session import (
    BoundProposition,
    EvidenceBounds,
    EvidenceStore,
    MechanismDecision,
    MechanismOutcome,
    MechanismProvider,
    NoOptions,
    VerificationMechanism,
    VerificationSession,
)


class VersionedMechanism:
    """A real mechanism whose build can change under a test: ``digest_version`` is what its
    digest says, ``behaviour`` what it decides (PASS when the first item starts with ``ok``;
    behaviour 2 FAILs everything). Changing only ``behaviour`` is a mechanism whose digest
    does not capture what it does (a replay then finds a DIFFERENT decision)."""

    mechanism_id = "test.versioned"
    digest_version = 1
    behaviour = 1

    def __init__(self) -> None:
        import hashlib

        version = f"test.versioned/{type(self).digest_version}".encode()
        self.mechanism_digest = "sha256:" + hashlib.sha256(version).hexdigest()

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        if type(self).behaviour == 1 and evidence[0].startswith(b"ok"):
            return MechanismDecision(MechanismOutcome.PASS, "", {"reason_codes": []})
        return MechanismDecision(
            MechanismOutcome.FAIL, "NOT_OK", {"reason_codes": ["NOT_OK"], "first": len(evidence)}
        )


class VersionedProvider(MechanismProvider[NoOptions]):
    """The provider of :class:`VersionedMechanism` (a test's entry point ``test-versioned``)."""

    mechanism_id = VersionedMechanism.mechanism_id

    def create(self, options: NoOptions) -> VerificationMechanism:
        return VersionedMechanism()

    def honest_binding(self, evidence: Sequence[bytes], options: NoOptions) -> BoundProposition:
        return versioned_binding(evidence[0])


VERSIONED_PROVIDER = VersionedProvider()
_VERSIONED_ENTRY = plugins.ProviderEntry(
    "test-versioned", "retention_kit:VERSIONED_PROVIDER", "evidenced-tests", "0"
)


def _listing(monkeypatch: Any, entries: Any) -> None:
    """Answer ``entries()`` wherever the registry is asked (the module and its re-export)."""
    import session

    monkeypatch.setattr(plugins, "provider_entries", entries)
    monkeypatch.setattr(session, "provider_entries", entries)


def offer_provider(monkeypatch: Any) -> None:
    """Install ``test-versioned`` for this test (the registry lists one more entry point)."""
    installed = plugins.provider_entries
    _listing(monkeypatch, lambda: (*installed(), _VERSIONED_ENTRY))


def withdraw_provider(monkeypatch: Any) -> None:
    """Uninstall ``test-versioned`` again (as if its package had been removed)."""
    offered = plugins.provider_entries
    _listing(monkeypatch, lambda: tuple(e for e in offered() if e != _VERSIONED_ENTRY))


def versioned_binding(item: bytes, digest: str | None = None) -> BoundProposition:
    import hashlib

    ref = "sha256:" + hashlib.sha256(item).hexdigest()
    return BoundProposition(
        subject_id="item",
        predicate="ok",
        expected=True,
        mechanism_id=VersionedMechanism.mechanism_id,
        mechanism_digest=digest or VersionedMechanism().mechanism_digest,
        evidence_refs=(ref,),
        trust_roots=("test-root",),
        bounds=EvidenceBounds(1, 1 << 20),
    )


@contextlib.contextmanager
def moto_server() -> Iterator[Any]:
    """A running moto S3 server on 127.0.0.1 (``stop()``/``start()`` simulate an outage; the
    port is kept and so is the data: moto keeps it in this process)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def s3_environment(server: Any) -> dict[str, str]:
    """The environment that points boto3 at ``server`` (as an operator would set it)."""
    host, port = server.get_host_and_port()
    return {
        "AWS_ENDPOINT_URL_S3": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "2",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def use_s3(monkeypatch: Any, server: Any, bucket: str) -> str:
    """Point this test's boto3 at ``server`` and create ``bucket``; the store spec."""
    for key, value in s3_environment(server).items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_RETRY_MODE"):
        monkeypatch.delenv(key, raising=False)
    client = raw_s3_client()
    client.create_bucket(Bucket=bucket)
    client.close()
    return f"s3://{bucket}/evidence"


def raw_s3_client() -> Any:
    """A plain boto3 S3 client (for tests that tamper with objects behind the store)."""
    from daemon.retention._s3 import shared_session

    return shared_session().client("s3")


@attrs.define
class LogWriter:
    """Writes ``daemon_start`` then decisions to ``path`` (module docstring)."""

    path: Path
    store: RetentionStore | None
    sessions: dict[str, tuple[str, ...]]
    options: dict[str, dict[str, dict[str, Any]]] = attrs.field(factory=dict)
    retain: str = "all"
    seq: int = 0
    head: str = GENESIS
    clock: datetime = attrs.field(factory=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    built: dict[str, tuple[VerificationMechanism, ...]] = attrs.field(factory=dict)
    lines: list[bytes] = attrs.field(factory=list)
    host_built: frozenset[str] = frozenset()
    replay_fields: bool = True
    memo: dict[Any, Any] = attrs.field(factory=dict)

    def _seal(self, fields: dict[str, Any]) -> dict[str, Any]:
        self.seq += 1
        self.clock += timedelta(milliseconds=1)
        fields = dict(
            fields,
            seq=self.seq,
            prev=self.head,
            timestamp=self.clock.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        )
        line = render_line(fields)
        self.head = line.rsplit(b'"line_digest":"', 1)[1][:-2].decode()
        self.lines.append(line + b"\n")
        return fields

    def start(self, *, announce: dict[str, str] | None = None) -> None:
        """A ``daemon_start`` line; ``announce`` overrides announced digests (mechanism id →
        digest), as if the log had been written by another build."""
        described = []
        config = {}
        for name, names in self.sessions.items():
            mechanisms = tuple(
                create_mechanism(name, item, dict(self.options.get(name, {}).get(item, {})))
                for item in names
            )
            self.built[name] = mechanisms
            described.append(
                {
                    "name": name,
                    "bounds": {"max_evidence_items": 2, "max_evidence_bytes": 1 << 20},
                    "mechanisms": [
                        {
                            "mechanism_id": m.mechanism_id,
                            "mechanism_digest": (announce or {}).get(
                                m.mechanism_id, m.mechanism_digest
                            ),
                            "catalog_entry": _catalog_entry(m.mechanism_id),
                        }
                        for m in mechanisms
                    ],
                }
            )
            if name not in self.host_built:
                config[name] = session_config_entry(
                    names,
                    self.options.get(name, {}),
                    self.retain,
                    None if self.store is None else self.store.id,
                )
        self._seal(
            {
                "event": "daemon_start",
                "server": "evidenced/test",
                "pid": os.getpid(),
                "listen": {"tcp": None, "unix": "test.sock"},
                "sessions": described,
                "session_config": config,
                "durability": "none",
            }
        )

    def decide(
        self,
        session: str,
        binding: BoundProposition,
        items: Sequence[bytes],
        *,
        store: bool = True,
        reuse: bool = False,
    ) -> dict[str, Any]:
        """Evaluate as the server does, retain (when ``store``), and write the line. With
        ``reuse``, a pair already decided reuses that evaluation and retention (for long
        logs of repeated pairs: the line is the same but for its id, seq and time)."""
        key = (session, binding.digest(), *items) if reuse else None
        remembered = self.memo.get(key) if key is not None else None
        if remembered is None:
            evidence_store = EvidenceStore()
            refs = [evidence_store.add(item) for item in items]
            verification = VerificationSession(evidence_store)
            for mechanism in self.built[session]:
                verification.register(mechanism)
            result = verification.evaluate(binding)
            if store and self.store is not None:
                for item in items:
                    self.store.put(item)
            remembered = (result, refs)
            if key is not None:
                self.memo[key] = remembered
        result, refs = remembered
        wire = result.to_dict()
        observations = wire["observations"]
        codes = observations.get("reason_codes") if isinstance(observations, dict) else None
        fields: dict[str, Any] = {
            "event": "decision",
            "decision_id": DecisionIds(None)(),
            "request_id": self.seq + 1,
            "session": session,
            "mechanism_id": result.mechanism_id,
            "mechanism_digest": wire["mechanism_digest"],
            "binding_digest": result.binding_digest,
            "evidence": [
                {"digest": ref, "size": len(item)} for ref, item in zip(refs, items, strict=True)
            ],
            "outcome": wire["outcome"],
            "details": result.details,
            "reason_codes": codes if isinstance(codes, list) else [],
            "observed_evidence_bytes": result.observed_evidence_bytes,
            "metrics": {"receive_ns": 1, "evaluate_ns": 1, "total_ns": 2},
            "requester": {"transport": "unix", "pid": 1, "uid": 0, "gid": 0},
        }
        if self.replay_fields:
            fields.update(decision_fields(binding, wire))
        if self.store is not None and self.retain != "none":
            fields["retained"] = store
            fields["store"] = self.store.id
        return self._seal(fields)

    def refusal(self, code: str = "BUSY") -> dict[str, Any]:
        return self._seal(
            {
                "event": "refusal",
                "decision_id": DecisionIds(None)(),
                "code": code,
                "fault": "service",
                "message": "test refusal",
                "request_id": None,
                "requester": {"transport": "unix"},
            }
        )

    def flush(self) -> Path:
        with self.path.open("ab") as handle:
            handle.write(b"".join(self.lines))
        self.lines.clear()
        return self.path
