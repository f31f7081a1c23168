"""docs/protocol.md's worked byte example is real: parse it, re-encode it, serve it."""

from __future__ import annotations

import re
from pathlib import Path

from daemon.wire._binding import binding_from_wire
from daemon.wire._protocol import (
    NEED_DATA,
    ClientConnection,
    Evidence,
    Hello,
    ServerConnection,
    Submit,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def example(name: str) -> bytes:
    """Bytes of the xxd dump that follows ``<!-- example: NAME -->`` in the document."""
    text = DOC.read_text("utf-8")
    match = re.search(rf"<!-- example: {name} -->\n```\n(.*?)```", text, re.S)
    assert match is not None, f"example {name} missing from docs/protocol.md"
    data = bytearray()
    for line in match.group(1).splitlines():
        offset, _, rest = line.partition(": ")
        assert int(offset, 16) == len(data), "xxd offsets must be contiguous"
        data += bytes.fromhex(rest[:39].replace(" ", ""))
    return bytes(data)


def test_documented_hello_and_submit_parse_to_the_documented_events() -> None:
    hello, submit = example("hello"), example("submit")
    assert len(hello) == 58 and len(submit) == 549
    conn = ServerConnection()
    conn.receive_data(hello + submit)
    first = conn.next_event()
    assert first == Hello((1,), "example")
    second = conn.next_event()
    assert isinstance(second, Submit)
    assert (second.request_id, second.session, second.item_sizes) == (1, "bytes", (6,))
    assert conn.bytes_wanted() == 0  # stopped before the evidence, as the document says
    conn.accept_evidence()
    assert conn.next_event() == Evidence(1, (b"hello\n",))
    assert conn.next_event() is NEED_DATA
    binding = binding_from_wire(second.binding)
    assert binding.predicate == "bytes.sha256"
    assert binding.evidence_refs == (
        "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
    )


def test_documented_frames_are_the_canonical_encoding_of_their_events() -> None:
    hello, submit = example("hello"), example("submit")
    assert ClientConnection.send(Hello((1,), "example")) == hello
    conn = ServerConnection()
    conn.receive_data(hello + submit)
    conn.next_event()
    event = conn.next_event()
    assert isinstance(event, Submit)
    assert ClientConnection.send(event, (b"hello\n",)) == submit


def test_the_section_8_python_example_runs_against_a_live_daemon(short_dir: Path) -> None:
    """Issue 26: §8's Python example used a ``binding`` it never defined. The block, as
    printed (only its two addresses pointed at this test's daemon), runs to a PASS."""
    import json
    import os
    import signal
    import subprocess
    import sys

    text = DOC.read_text("utf-8")
    section = text[text.index("## 8. Using it") : text.index("## 9.")]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    config = short_dir / "evidenced.toml"
    config.write_text(
        '[server]\nlisten = "127.0.0.1:0"\nsocket = "s"\n[audit]\npath = "audit.jsonl"\n'
        '[sessions.formation]\nmechanisms = ["formation"]\nmax_evidence_bytes = 524288\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=short_dir,
        env=env,
    )
    try:
        assert daemon.stdout is not None
        ready = json.loads(daemon.stdout.readline() or b"null")
        assert ready is not None, daemon.communicate(timeout=30)[1]
        host, port = ready["tcp"].rsplit(":", 1)
        snippet = match.group(1)
        assert '("127.0.0.1", 7433)' in snippet and '"/run/evidenced.sock"' in snippet
        snippet = snippet.replace('("127.0.0.1", 7433)', repr((host, int(port))))
        snippet = snippet.replace('"/run/evidenced.sock"', repr(ready["unix"]))
        done = subprocess.run(
            [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[1].startswith("PASS "), done.stdout
        assert "'status'" in lines[2] or '"status"' in lines[2]
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.communicate(timeout=30)
