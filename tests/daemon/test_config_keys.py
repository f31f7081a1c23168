"""One declaration of each configuration key.

The schema (``daemon/schema/_tables.py``) declares a key's type, default, range rule and
meaning once; the embedded default (generated), every runtime object (``ServerConfig``,
``HttpConfig``, ``TransparencyConfig``, ``SinkConfig``, a hosted session's bounds, the
``[stores]`` limits), ``config check`` and ``docs/configuration.md`` must agree with it. Each
test is named after the drift it stops: a key whose default differed between ``default.toml``,
the schema and a runtime object; a range a runtime object checks on its own; a key read from
the file but never copied to the running server; a documentation table that went stale.
"""

from __future__ import annotations

import functools
import math
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import clirun
import pytest

from daemon import ServerConfig
from daemon.audit._shipping_config import SinkConfig
from daemon.audit._transparency import TransparencyConfig
from daemon.config._config import default_config_text, parse_config
from daemon.config._config_schema import (
    KEY_TABLES,
    RULE,
    ConfigFile,
    ServerTable,
    key_rows,
    key_table,
)
from daemon.config._default_file import default_toml
from daemon.config._hosting import HostedSession, schema_fields
from daemon.config._http_config import HttpConfig
from daemon.schema._tables import (
    RULES,
    AuditTable,
    HttpTable,
    SessionTable,
    SinkTable,
    StoreTable,
    TransparencyTable,
    choices_of,
    default_of,
    rule_of,
)

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


# -- every view derived from the one declaration (docs/adr/0022)

#: Values probed against every range rule: each runtime view must take exactly those its
#: schema rule takes (a view with a range of its own, or a rule the schema lacks, differs).
PROBES: tuple[object, ...] = (-1, 0, 1e-300, 0.5, 1, 2, 3600, 3600.5, 1e300, math.inf, math.nan)
PROBES += (True, "1", "auto", 10**400)
#: Fields a runtime view holds in another form than the file's (a resolved path or None for
#: ``""``, an address as (host, port), a security object): compared by the reader's tests.
OTHER_FORM = {"url", "token_file", "tls_ca", "listen", "tls_cert", "tls_key", "tls_client_ca"}
OTHER_FORM |= {"tokens_file"}


def _hosted(**bounds: Any) -> HostedSession:
    return HostedSession("s", (), **bounds)


#: (the schema table, the runtime view, how one is built with ``**keys``, extra keys per probed
#: key so a cross-key rule, e.g. ``backoff_min <= backoff_max``, never answers for the range).
VIEWS: list[tuple[type, type, Callable[..., object], dict[str, dict[str, Any]]]] = [
    (HttpTable, HttpConfig, HttpConfig, {}),
    (TransparencyTable, TransparencyConfig, functools.partial(TransparencyConfig, "k"), {}),
    (
        SinkTable,
        SinkConfig,
        functools.partial(SinkConfig, "a", "console"),
        {"backoff_min": {"backoff_max": 1e300}, "backoff_max": {"backoff_min": 1e-300}},
    ),
    (SessionTable, HostedSession, _hosted, {}),
]


def _view_id(value: object) -> str:
    return getattr(value, "__name__", "") if isinstance(value, type) else ""


def _keys_of(table: type, view: type) -> list[str]:
    """The keys of ``table`` with a default that ``view`` holds in the file's form."""
    keys = {key for key in attrs.fields_dict(table) if default_of(table, key) is not attrs.NOTHING}
    return [field.name for field in attrs.fields(view) if field.name in keys - OTHER_FORM]


def test_a_hand_edited_embedded_default_is_caught() -> None:
    """``default.toml`` is generated from the schema (``make config-views``); a default changed
    in one and not the other, or a key added to the schema and not to the file, fails here."""
    generated = default_toml()
    assert default_config_text() == generated, "run: make config-views"
    raw = clirun.in_process(["config", "default", "--raw"])
    assert raw.returncode == 0 and raw.stdout.decode() == generated
    stated = tomllib.loads(generated)
    for key in attrs.fields_dict(ServerTable):
        assert key in stated["server"] or f"# {key} (unset):" in generated, key


@pytest.mark.parametrize(("table", "view", "build", "extra"), VIEWS, ids=_view_id)
def test_a_runtime_view_with_a_default_of_its_own_is_caught(
    table: type, view: type, build: Callable[..., object], extra: dict[str, dict[str, Any]]
) -> None:
    keys = _keys_of(table, view)
    assert keys, view  # the view holds schema keys: the comparison below cannot be empty
    built = build()
    for key in keys:
        assert getattr(built, key) == default_of(table, key), f"{view.__name__}.{key}"


@pytest.mark.parametrize(("table", "view", "build", "extra"), VIEWS, ids=_view_id)
def test_a_runtime_view_with_a_range_of_its_own_is_caught(
    table: type, view: type, build: Callable[..., object], extra: dict[str, dict[str, Any]]
) -> None:
    ranged = [key for key in _keys_of(table, view) if rule_of(table, key) is not None]
    assert ranged, view
    for key in ranged:
        rule = rule_of(table, key)
        assert rule is not None
        for probe in PROBES:
            try:
                build(**{key: probe, **extra.get(key, {})})
            except ValueError as error:
                assert not rule.holds(probe), f"{view.__name__}.{key} refused {probe!r}: {error}"
                assert key in str(error) or "bounds" in str(error), error
            else:
                assert rule.holds(probe), f"{view.__name__}.{key} took {probe!r}"


def test_a_server_setting_with_a_range_of_its_own_is_caught() -> None:
    """``ServerConfig`` holds the ``[server]`` keys and the ``[audit]`` ones as ``audit_<key>``:
    each takes exactly what its schema rule takes."""
    for name, key in schema_fields().items():
        label = key.metadata.get(RULE)
        if label is None:
            continue
        rule = RULES[label]
        for probe in PROBES:
            try:
                ServerConfig(**{name: probe})  # type: ignore[arg-type]
            except ValueError as error:
                assert not rule.holds(probe) and name in str(error), (name, probe, error)
            else:
                assert rule.holds(probe), (name, probe)


def test_the_server_listen_defaults_are_the_schema_listen_keys() -> None:
    assert "{}:{}".format(*ServerConfig().tcp or ()) == default_of(ServerTable, "listen")
    assert "{}:{}".format(*HttpConfig().listen) == default_of(HttpTable, "listen")


def test_a_store_limit_outside_the_schema_rule_is_refused_and_only_then(tmp_path: Path) -> None:
    from daemon.retention import parse_spec
    from daemon.retention._policy import RetentionPolicy, parse_store_limits

    policies = {"s": RetentionPolicy("all", parse_spec("fs:x", base=tmp_path), "fs:x")}
    for key in attrs.fields_dict(StoreTable):
        rule = rule_of(StoreTable, key)
        assert rule is not None
        for probe in PROBES:
            if type(probe) is str:
                continue  # a string is a size or a duration, parsed, not a number
            try:
                parse_store_limits({"fs:x": {key: probe}}, policies, "t")
            except ValueError as error:
                assert not rule.holds(probe) and key in str(error), (key, probe, error)
            else:
                assert rule.holds(probe), (key, probe)
    with pytest.raises(ValueError, match=r"unknown keys \['keep'\]"):
        parse_store_limits({"fs:x": {"keep": 1}}, policies, "t")


def test_config_check_refuses_what_serve_refuses_for_a_rule_below_the_reader(
    tmp_path: Path,
) -> None:
    """The (0, 3600] checkpoint rule lived only in the transparency log's own object; it is the
    schema's now, and ``config check`` (which builds the same object) refuses it by name."""
    path = tmp_path / "evidenced.toml"
    path.write_text(
        '[transparency]\nkey_file = "log.key"\ncheckpoint_interval = 7200.0\n'
        '[sessions.b]\nmechanisms = ["bytes-sha256"]\n'
    )
    result = clirun.in_process(["config", "check", path])
    error = clirun.error_of(result)
    assert result.returncode == 65 and error["code"] == "CONFIG_INVALID"
    assert "checkpoint_interval must be a number of seconds in (0, 3600]" in error["message"]


def test_an_audit_policy_the_schema_does_not_list_is_caught() -> None:
    """``durability`` and ``overflow`` are enums of the audit log; their values are the schema's
    choices, and every other choice-bound key's runtime set is read from the schema."""
    from daemon.audit._audit import Durability, Overflow
    from daemon.audit._fields import RETAIN_MODES
    from daemon.audit._shipping_config import START_AT, TYPES

    assert tuple(member.value for member in Durability) == choices_of(AuditTable, "durability")
    assert tuple(member.value for member in Overflow) == choices_of(AuditTable, "overflow")
    assert choices_of(SessionTable, "retain") == RETAIN_MODES
    assert (choices_of(SinkTable, "type"), choices_of(SinkTable, "start_at")) == (TYPES, START_AT)
    for choice in choices_of(AuditTable, "durability"):
        assert ServerConfig(audit_durability=choice).audit_durability == choice
    with pytest.raises(ValueError):
        ServerConfig(audit_durability="sometimes")


def test_a_max_pending_of_zero_is_refused_by_check_and_open_not_raised_to_one_in_silence(
    tmp_path: Path,
) -> None:
    """The key allowed 0 while the audit log refused it and the server quietly ran with 1: one
    rule now, the schema's, refused by ``config check`` and by ``AuditLog.open`` alike."""
    from daemon.audit._audit import AuditLog

    path = tmp_path / "evidenced.toml"
    path.write_text('[audit]\nmax_pending = 0\n[sessions.b]\nmechanisms = ["bytes-sha256"]\n')
    result = clirun.in_process(["config", "check", path])
    error = clirun.error_of(result)
    assert result.returncode == 65 and error["code"] == "CONFIG_INVALID"
    assert "max_pending must be a positive integer" in error["message"]
    with pytest.raises(ValueError, match="max_pending must be a positive integer"):
        AuditLog.open(tmp_path / "audit.jsonl", max_pending=0)
    assert ServerConfig(audit_max_pending=1).audit_max_pending == 1
