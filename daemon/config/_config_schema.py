"""The shape of the daemon's TOML configuration: ONE cattrs converter over the schema's tables,
and the key table derived from them.

The tables are declared once, in :mod:`daemon.schema._tables` (each key's type, default, range
rule and meaning). :func:`structure_config` turns the table ``tomllib`` returns into
:class:`ConfigFile` with :data:`CONFIG_CONVERTER` (``forbid_extra_keys=True``, detailed
validation) and these rules; every violation in the document is reported, each as
``<key path>: <problem>`` (joined by ``; `` in document order) in one :class:`SchemaError`:

1. A table is exactly a TOML table (at the top: ``server``, ``http``, ``audit``,
   ``transparency``, ``sessions``, ``stores``); a key the table does not declare is refused
   (``server: unknown key 'listen_on'``; several: ``unknown keys [...]``).
2. Every value has exactly its field's type: ``bool`` is not a number, an ``int`` is not a
   ``str``; a ``float`` field takes an ``int`` (not a ``bool``) or a ``float``; an array field
   takes an array whose members have the member type
   (``sessions.formation.max_evidence_bytes: expected int, got bool``,
   ``sessions.a.mechanisms[1]: expected str, got int``).
3. A field without a default that is missing is ``<path>: required`` (a session's
   ``mechanisms``).
4. :func:`key_rows` and :func:`key_table` (``evidenced config keys``, ``docs/configuration.md``)
   are generated from the tables, never written by hand.

Range and cross-field rules (addresses, known mechanisms, option tables named after the
session's mechanisms) are :mod:`daemon.config._config`'s, checked after the shape; the range
rules of single keys are the schema's, run by each runtime view when it is built.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Final

import attrs

from daemon.schema._tables import (
    CHOICES,
    DOC,
    RULE,
    AuditTable,
    ConfigFile,
    HttpTable,
    ServerTable,
    SessionTable,
    SinkTable,
    StoreTable,
    TransparencyTable,
    check_range,
    default_of,
)
from daemon.wire._errors import PeerError
from session._exact import ExactError, exact_converter, structure_exact

__all__ = [
    "CONFIG_CONVERTER",
    "DOC",
    "KEY_TABLES",
    "RULE",
    "AuditTable",
    "ConfigFile",
    "HttpTable",
    "SchemaError",
    "ServerTable",
    "SessionTable",
    "SinkTable",
    "StoreTable",
    "TransparencyTable",
    "check_range",
    "key_rows",
    "key_table",
    "meaning",
    "structure_config",
    "unstructure_config",
]


class SchemaError(PeerError, ValueError):
    """A configuration whose shape is wrong; the message names every key path at fault."""


#: The exact-type converter of the configuration (:mod:`session._exact`, shared with the
#: mechanism options).
CONFIG_CONVERTER: Final = exact_converter()


def structure_config(raw: dict[str, Any]) -> ConfigFile:
    """``raw`` (what ``tomllib`` returned) as :class:`ConfigFile` (module rules)."""
    try:
        return structure_exact(CONFIG_CONVERTER, raw, ConfigFile)
    except ExactError as error:
        raise SchemaError(str(error)) from None


def unstructure_config(config: ConfigFile) -> dict[str, Any]:
    """The plain tables of ``config`` (arrays as lists), e.g. to print the effective file."""
    value: dict[str, Any] = CONFIG_CONVERTER.unstructure(config)
    for table in value["sessions"].values():
        table["mechanisms"] = list(table["mechanisms"])
    for sink in value["audit"]["sinks"]:
        sink["events"] = list(sink["events"])
    value["audit"]["sinks"] = list(value["audit"]["sinks"])
    if value.get("http") is not None:
        value["http"]["trusted_proxies"] = list(value["http"]["trusted_proxies"])
    return value


#: The tables of the key table, in the file's order: (heading, class).
KEY_TABLES: Final = (
    ("[server]", ServerTable),
    ("[http]", HttpTable),
    ("[audit]", AuditTable),
    ("[[audit.sinks]]", SinkTable),
    ("[transparency]", TransparencyTable),
    ("[sessions.<name>]", SessionTable),
    ('[stores."<store>"]', StoreTable),
)
_SCALAR_NAMES: Final = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _type_label(kind: Any) -> str:
    """A field's type in the words of the key table (``integer or "auto"``, ``array of
    strings``)."""
    members = [member for member in typing.get_args(kind) if member is not type(None)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return " or ".join(_type_label(member) for member in members)
    if typing.get_origin(kind) is tuple:
        if attrs.has(members[0]):
            return "array of tables"
        return f"array of {_SCALAR_NAMES[members[0]]}s"
    if typing.get_origin(kind) is dict:
        return "table of strings" if members[1:] == [str] else "tables"
    return _SCALAR_NAMES[kind]


def _toml_default(table: type, key: str) -> Any:
    """The declared default as TOML states it (an array as a list; None when unset)."""
    default = default_of(table, key)
    if default is attrs.NOTHING:
        return None
    return list(default) if type(default) is tuple else default


def _default_text(row: dict[str, Any]) -> str:
    default = row["default"]
    if row["required"]:
        return "required"
    if default is None:
        return "unset"
    if type(default) is bool:
        return "`true`" if default else "`false`"
    if type(default) is str:
        return f'`"{default}"`'
    if type(default) is list:
        return f"`{json.dumps(default)}`"
    return f"`{default}`"


def key_rows() -> list[dict[str, Any]]:
    """Every key of the schema: ``table``, ``key``, ``type``, ``default`` (its value, None
    when unset), ``required``, ``rule`` (the range rule, or None), ``choices`` (the only values
    it takes; empty: any) and ``doc`` (its meaning)."""
    rows = []
    for table, cls in KEY_TABLES:
        attrs.resolve_types(cls)  # the annotations as types (cattrs does it when it first runs)
        for field in attrs.fields(cls):
            rows.append(
                {
                    "table": table,
                    "key": field.name,
                    "type": _type_label(field.type),
                    "default": _toml_default(cls, field.name),
                    "required": field.default is attrs.NOTHING,
                    "rule": field.metadata.get(RULE),
                    "choices": list(field.metadata.get(CHOICES, ())),
                    "doc": field.metadata.get(DOC, ""),
                }
            )
    return rows


def meaning(row: dict[str, Any]) -> str:
    """A key's meaning as the key table and ``default.toml`` say it: its docs line, then its
    range rule and its choices, when it has them."""
    said = str(row["doc"])
    if row["rule"]:
        said += f" ({row['rule']})"
    if row["choices"]:
        said += (
            " (one of " + ", ".join(f"`{json.dumps(choice)}`" for choice in row["choices"]) + ")"
        )
    return said


def key_table() -> str:
    """The Markdown key table of ``docs/configuration.md`` (``evidenced config keys
    --markdown``), generated from the schema: one table per TOML table."""
    lines: list[str] = []
    current = None
    for row in key_rows():
        if row["table"] != current:
            current = row["table"]
            if lines:
                lines.append("")
            lines += [
                f"### `{current}`",
                "",
                "| key | type | default | meaning |",
                "|---|---|---|---|",
            ]
        lines.append(f"| `{row['key']}` | {row['type']} | {_default_text(row)} | {meaning(row)} |")
    return "\n".join(lines) + "\n"
