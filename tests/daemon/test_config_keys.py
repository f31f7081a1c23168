"""One declaration of each configuration key.

The schema (``daemon/config/_config_schema.py``) declares a key's type, default, range rule and
meaning once; the embedded default, the runtime object and ``docs/configuration.md`` must
agree with it. Each test is named after the drift it stops: a key whose default differed
between ``default.toml``, the schema and ``ServerConfig``; a key read from the file but
never copied to the running server; a documentation table that went stale.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import attrs
import clirun
import pytest

from daemon import ServerConfig
from daemon.config._config import default_config_text, parse_config
from daemon.config._config_schema import (
    KEY_TABLES,
    RULE,
    ConfigFile,
    ServerTable,
    key_rows,
    key_table,
)
from daemon.config._hosting import schema_fields

ROOT = Path(__file__).resolve().parents[2]
#: ``[server]`` keys the reader turns into other ServerConfig fields (addresses, security).
READ_ELSEWHERE = {"listen", "socket", "worker_threads", "tls_cert", "tls_key", "tls_client_ca"}
READ_ELSEWHERE |= {"tokens_file"}


def test_a_stale_key_table_in_docs_configuration_md_is_caught() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    found = re.search(r"<!-- BEGIN generated[^\n]*-->\n(.*?)<!-- END generated -->", page, re.S)
    assert found is not None, "docs/configuration.md lost its generated key table"
    assert found.group(1) == key_table(), "run: evidenced config keys --markdown"
    printed = clirun.in_process(["config", "keys", "--markdown"])
    assert printed.returncode == 0 and printed.stdout.decode() == key_table()


def test_every_schema_key_has_a_meaning_and_every_table_is_listed() -> None:
    rows = key_rows()
    assert all(row["doc"] for row in rows), [row["key"] for row in rows if not row["doc"]]
    listed = clirun.in_process(["config", "keys"])
    assert listed.returncode == 0 and listed.document()["keys"] == rows
    tables = list(dict.fromkeys(heading.strip("[]").split(".")[0] for heading, _ in KEY_TABLES))
    assert tables == [field.name for field in attrs.fields(ConfigFile)]  # [stores] included


def _commented_table(text: str, table: str) -> dict[str, Any]:
    """The keys of a commented-out ``# [table]`` block of ``default.toml``."""
    lines = text.splitlines()
    start = lines.index(f"# [{table}]")
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith("# ") or not re.match(r"# [a-z_]+ +=", line):
            break
        block.append(line[2:])
    return tomllib.loads("\n".join(block))


def test_the_embedded_default_states_the_schema_defaults_commented_tables_included() -> None:
    text = default_config_text()
    embedded = tomllib.loads(text)
    for name, cls in (("server", ServerTable), ("audit", None)):
        table = embedded[name]
        rows = {row["key"]: row for row in key_rows() if row["table"] == f"[{name}]"}
        for key, value in table.items():
            assert rows[key]["default"] == value, f"[{name}] {key}"
        if cls is ServerTable:  # every key but the former name is in the default file
            assert set(rows) - set(table) == {"worker_threads"}
    for name in ("http", "transparency", "[audit.sinks]"):
        rows = {row["key"]: row for row in key_rows() if row["table"] == f"[{name}]"}
        table = _commented_table(text, name)
        assert table, name
        if name == "[audit.sinks]":  # the example states every key of a sink
            assert set(table) == set(rows)
        for key, value in table.items():
            default = rows[key]["default"]
            if rows[key]["required"] or default in (None, ""):
                continue  # an example value for a key without a default
            assert default == value, f"[{name}] {key}"


def test_a_server_key_read_from_the_file_always_reaches_the_running_server() -> None:
    copied = schema_fields()
    server_keys = {field.name for field in attrs.fields(ServerTable)}
    assert server_keys - set(copied) == READ_ELSEWHERE  # a new key cannot be silently dropped
    text = (
        "[server]\n"
        + "".join(
            f"{name} = {value}\n"
            for name, value in (
                ("idle_timeout", "7.5"),
                ("max_items", "3"),
                ("inline_max_bytes", "0"),
                ("max_connections_per_peer", "9"),
            )
        )
        + '[audit]\nmax_pending = 12\n[sessions.b]\nmechanisms = ["bytes-sha256"]\n'
    )
    server = parse_config(text, base=ROOT, source="t").server
    assert (server.idle_timeout, server.max_items, server.inline_max_bytes) == (7.5, 3, 0)
    assert (server.max_connections_per_peer, server.audit_max_pending) == (9, 12)


def test_server_config_takes_each_default_and_range_rule_from_the_schema() -> None:
    runtime = {field.name: field for field in attrs.fields(ServerConfig)}
    for name, key in schema_fields().items():
        assert runtime[name].default == key.default, name
        rule = key.metadata.get(RULE)
        if rule is None:
            continue
        bad: dict[str, Any] = {name: -1 if "integer" in rule else 0.0}
        with pytest.raises(ValueError, match=name):
            ServerConfig(**bad)


def test_the_configuration_and_the_mechanism_options_cannot_disagree_on_types() -> None:
    """Two copies of the exact-type hooks used to exist; one base (``session._exact``) now
    structures both, so the same fault reads the same in both."""
    from session import structure_options
    from session._exact import ExactError, exact_converter, structure_exact

    @attrs.frozen
    class Limits:
        count: int = 1
        names: tuple[str, ...] = ()

    for raw, problem in (
        ({"count": True}, "count: expected int, got bool"),
        ({"names": ["a", 2]}, "names[1]: expected str, got int"),
        ({"other": 1}, "unknown key 'other'"),
    ):
        with pytest.raises(ValueError) as from_options:
            structure_options(Limits, raw, where="w")
        with pytest.raises(ExactError) as from_base:
            structure_exact(exact_converter(), raw, Limits, "w")
        assert problem in str(from_options.value) and str(from_options.value) == str(
            from_base.value
        )
    with pytest.raises(ValueError, match=r"server.max_items: expected int, got bool"):
        parse_config(
            '[server]\nmax_items = true\n[sessions.b]\nmechanisms = ["bytes-sha256"]\n',
            base=ROOT,
            source="t",
        )
