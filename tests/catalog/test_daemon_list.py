"""Daemon integration: a client discovers each session mechanism's catalog entry via ``list``,
without anything being executed."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import catalog
from daemon import default_sessions, open_client, open_server


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="evc", dir="/tmp"))  # Unix socket paths are short
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def test_list_embeds_the_catalog_entry_of_every_default_mechanism(short_dir: Path) -> None:
    async with (
        open_server(
            default_sessions(),
            tcp=None,
            unix=str(short_dir / "s"),
            audit_path=str(short_dir / "audit.jsonl"),
        ) as server,
        open_client(unix=server.unix_path) as client,
    ):
        sessions = await client.list_sessions()
    listed = {m["mechanism_id"]: m["catalog_entry"] for s in sessions for m in s["mechanisms"]}
    assert set(listed) == {catalog.FORMATION_MECHANISM_ID, catalog.DESCRIPTOR_MECHANISM_ID}
    for mechanism_id, entry in listed.items():
        assert entry is not None
        assert entry == catalog.entry_for_mechanism(mechanism_id)
        assert entry["kind"] == "ADAPTER" and mechanism_id in entry["mechanism_ids"]
    # Listing executed nothing: the audit log holds no decision line.
    lines = (short_dir / "audit.jsonl").read_text().splitlines()
    assert not any("decision_id" in json.loads(line) for line in lines)
