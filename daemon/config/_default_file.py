"""The embedded default configuration (``daemon/config/default.toml``), generated from the
schema.

Rules (the contract):

1. :func:`default_toml` is the whole file: for each table of the schema
   (:mod:`daemon.schema._tables`), in its order, every key with its declared default and its
   declared meaning as the line's comment — nothing about a key is written here. ``[server]``
   and ``[audit]`` are on; ``[http]``, ``[[audit.sinks]]`` and ``[transparency]`` are commented
   out (present means on), a required key stated with an example value (:data:`EXAMPLES`).
2. A key without a default (unset) is a comment line ``# <key> (unset): <meaning>`` after the
   table's keys; a key whose value is a table of tables or an array of tables
   (``[sessions.<name>.options.<mechanism>]``, ``[[audit.sinks]]``) is ``# <key>: <meaning>``.
3. The sessions are the embedded default's own choice, not defaults of keys
   (:data:`SESSIONS`): ``formation``, and ``descriptor``, optional (ADR 0020); every other key
   of a session is the schema's default.
4. ``python -m daemon.config._default_file`` prints it (``make config-views`` writes the
   file); a test fails when the file and :func:`default_toml` differ.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Final

import attrs

from daemon.config._config_schema import key_rows, meaning
from daemon.schema._tables import (
    AuditTable,
    HttpTable,
    ServerTable,
    SessionTable,
    SinkTable,
    TransparencyTable,
    default_of,
)

__all__ = ["EXAMPLES", "SESSIONS", "default_toml"]

HEADER: Final = """\
# The embedded default configuration of `evidenced serve` (docs/configuration.md).
# Generated from the schema (daemon/schema/_tables.py) by `make config-views`: do not edit.
# Copy it, edit it, and pass it with `evidenced serve --config FILE`.
"""
#: Example values of required keys in the commented-out tables: (table, key) -> value.
EXAMPLES: Final[dict[tuple[str, str], Any]] = {
    ("[[audit.sinks]]", "name"): "central",
    ("[[audit.sinks]]", "type"): "http",
    ("[[audit.sinks]]", "url"): "https://logs.example/v1/evidenced",
    ("[transparency]", "key_file"): "log.key",
}
#: The embedded default's sessions: name -> the keys it sets (the others are defaults).
SESSIONS: Final[dict[str, dict[str, Any]]] = {
    "formation": {"mechanisms": ["formation"]},
    "descriptor": {"mechanisms": ["descriptor"], "max_evidence_bytes": 1_052_672, "optional": True},
}
#: (heading, table, on, what is said above it).
_TABLES: Final[tuple[tuple[str, type, bool, str], ...]] = (
    (
        "[server]",
        ServerTable,
        True,
        "The binary protocol's (EVD1) listeners and the server's limits.",
    ),
    (
        "[http]",
        HttpTable,
        False,
        "The HTTP/JSON API, /health, /ready and /metrics (docs/http.md): uncomment to turn it on\n"
        "(off by default: docs/adr/0014). A non-loopback listen needs TLS and authentication.",
    ),
    ("[audit]", AuditTable, True, "The audit log (docs/audit-log.md)."),
    (
        "[[audit.sinks]]",
        SinkTable,
        False,
        'Ship the committed decision lines (docs/audit-log.md "Shipping decision logs"): '
        "uncomment\none table per sink. The audit log stays the record: a sink that is down "
        "only falls behind.",
    ),
    (
        "[transparency]",
        TransparencyTable,
        False,
        "The signed transparency log (docs/transparency.md): uncomment to turn it on.",
    ),
)
_SESSIONS_INTRO: Final = (
    "`mechanisms` names installed mechanism providers (`evidenced mechanisms` lists them; a\n"
    "package adds one through the entry points `evidenced.mechanisms`, "
    "docs/writing-a-mechanism.md)."
)
_COLUMN: Final = 30
#: The key table's types of a key written as TOML tables of its own, never inline.
_TABLES_TYPES: Final = ("tables", "array of tables")
#: A session table's heading in the key table.
_ROW_TABLE: Final = {f"[sessions.{name}]": "[sessions.<name>]" for name in SESSIONS}


def _value(value: Any) -> str:
    """``value`` as TOML."""
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) in (int, float):
        return repr(value)
    if type(value) is str:
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(member) for member in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_value(item)}" for key, item in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")


def _block(heading: str, table: type, on: bool, given: dict[str, Any]) -> list[str]:
    """One table's lines (module rules 1 and 2)."""
    mark = "" if on else "# "
    lines = [f"{mark}{heading}"]
    unset = []
    rows = {
        row["key"]: row for row in key_rows() if row["table"] == _ROW_TABLE.get(heading, heading)
    }
    for field in attrs.fields(table):
        said = meaning(rows[field.name])
        default = default_of(table, field.name)
        value = given.get(field.name, EXAMPLES.get((heading, field.name), default))
        if rows[field.name]["type"] in _TABLES_TYPES:
            unset.append(f"# {field.name}: {said}")
            continue
        if value is attrs.NOTHING or value is None:
            unset.append(f"# {field.name} (unset): {said}")
            continue
        assignment = f"{mark}{field.name} = {_value(value)}"
        lines.append(f"{assignment:<{_COLUMN}} # {said}")
    return lines + unset


def _intro(text: str) -> list[str]:
    return [f"# {line}" for line in text.splitlines()]


def default_toml() -> str:
    """The text of ``daemon/config/default.toml`` (module rules)."""
    lines = HEADER.splitlines()
    for heading, table, on, intro in _TABLES:
        lines += ["", *_intro(intro), *_block(heading, table, on, {})]
    lines += ["", *_intro(_SESSIONS_INTRO)]
    for name, given in SESSIONS.items():
        lines += ["", *_block(f"[sessions.{name}]", SessionTable, True, given)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(default_toml())
