"""``GET /ready`` asked without a token while the daemon is not ready (``docs/operations.md``
§10, ``daemon/server/_http_server.py`` rule 4; issue "hold under attack, third round": the
``503`` body carried the store's path, an object digest and the error text to anyone)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from daemon_testkit import bytes_binding
from http_testkit import LiveDaemon

from daemon import RejectedError, SyncClient
from daemon.retention import name_of

TOKEN = "a-token-for-the-ready-probe"


def test_ready_without_a_token_while_the_store_fails_says_the_status_word_only(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{hashlib.sha256(TOKEN.encode()).hexdigest()} ops\n")
    tokens.chmod(0o600)
    store = tmp_path / "evidence"
    store.mkdir(mode=0o700)
    item = b"evidence whose object is a FIFO"
    hexdigest = name_of(item).removeprefix("sha256:")
    planted = store / hexdigest[:2] / hexdigest[2:4] / hexdigest
    planted.parent.mkdir(parents=True, mode=0o700)
    os.mkfifo(planted, 0o600)
    daemon = LiveDaemon(
        config_text=(
            '[server]\nlisten = ""\nsocket = "s"\n'
            f'[http]\nlisten = "127.0.0.1:0"\ntokens_file = "{tokens}"\n'
            '[audit]\npath = "audit.jsonl"\n'
            '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\nmax_evidence_items = 1\n'
            f'retain = "all"\nstore = "fs:{store}"\n'
        )
    )
    try:
        try:
            SyncClient(unix=daemon.socket).submit("bytes", bytes_binding(item), [item])
        except RejectedError as refused:
            assert refused.code == "AUDIT_FAILED"
        probe = daemon.get("/ready")
        assert (probe.status, probe.error["code"]) == (503, "AUDIT_FAILED")
        assert probe.error["message"] == "not ready: degraded"
        for secret in (str(store), hexdigest, "FIFO", "corrupt"):
            assert secret not in probe.body.decode(), secret
        assert probe.closed
        authorized = daemon.exchange(
            f"GET /ready HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        assert authorized.status == 503
        assert str(store) in authorized.error["message"]  # a token bearer learns the reason
    finally:
        daemon.stop()
        daemon.cleanup()
