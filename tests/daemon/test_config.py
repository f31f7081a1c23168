"""The TOML configuration: the embedded default, strict keys and types, optional sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon import ConfigError, default_sessions, load_config
from daemon.config._config import parse_address, parse_config


def parse(text: str) -> object:
    return parse_config(text, base=Path("/srv"), source="test.toml")


def test_default_config_hosts_formation_and_descriptor_with_their_bounds() -> None:
    config = load_config(None)
    assert config.server.tcp == ("127.0.0.1", 7433)
    assert config.server.audit_durability == "fsync"
    sessions = {session.name: session for session in default_sessions()}
    assert sessions["formation"].mechanisms[0].mechanism_id == "vstd.typed_formation.checked.0.1"
    assert (sessions["formation"].max_evidence_items, sessions["formation"].max_evidence_bytes) == (
        2,
        524_288,
    )
    assert "descriptor" in sessions


def test_relative_paths_resolve_against_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "evidenced.toml"
    path.write_text(
        '[server]\nlisten = ""\nsocket = "run/s"\n[audit]\npath = "log/audit.jsonl"\n'
        '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
    )
    config = load_config(path)
    assert config.server.tcp is None
    assert config.server.unix == str(tmp_path / "run" / "s")
    assert config.server.audit_path == str(tmp_path / "log" / "audit.jsonl")


def test_fairness_and_worker_settings_are_read_and_worker_threads_is_the_former_name(
    tmp_path: Path,
) -> None:
    path = tmp_path / "evidenced.toml"
    sessions = '[sessions.bytes]\nmechanisms = ["bytes-sha256"]\n'
    path.write_text(
        '[server]\nsocket_group = "evidenced"\npre_hello_timeout = 2\nmin_evidence_rate = 4096\n'
        "evidence_grace = 0.5\nmax_connections_per_peer = 10\nmax_in_flight_per_peer = 3\n"
        "worker_threads = 3\n" + sessions
    )
    server = load_config(path).server
    assert (server.socket_group, server.pre_hello_timeout, server.min_evidence_rate) == (
        "evidenced",
        2.0,
        4096,
    )
    assert (server.evidence_grace, server.max_connections_per_peer) == (0.5, 10)
    assert (server.max_in_flight_per_peer, server.worker_processes) == (3, 3)
    path.write_text("[server]\nworker_threads = 3\nworker_processes = 2\n" + sessions)
    with pytest.raises(ConfigError, match="worker_threads and worker_processes"):
        load_config(path)


@pytest.mark.parametrize(
    ("mistake", "text", "message"),
    [
        ("not toml", "[server", "not TOML"),
        ("zero evidence rate", "[server]\nmin_evidence_rate = 0\n", "min_evidence_rate"),
        ("socket group as a number", "[server]\nsocket_group = 0\n", "server.socket_group"),
        ("unknown table", "[serverr]\n", "unknown key 'serverr'"),
        ("unknown server key", '[server]\nlisten_on = "x"\n', "server: unknown key 'listen_on'"),
        (
            "boolean as a number",
            "[server]\nmax_in_flight = true\n",
            "server.max_in_flight: expected int, got bool",
        ),
        (
            "string as a number",
            '[server]\nidle_timeout = "5"\n',
            "server.idle_timeout: expected float, got str",
        ),
        (
            "boolean as a session bound",
            '[sessions.formation]\nmechanisms = ["formation"]\nmax_evidence_bytes = true\n',
            "sessions.formation.max_evidence_bytes: expected int, got bool",
        ),
        (
            "number among the mechanisms",
            '[sessions.a]\nmechanisms = ["formation", 3]\n',
            "sessions.a.mechanisms[1]: expected str, got int",
        ),
        ("session without mechanisms", "[sessions.a]\noptional = true\n", "mechanisms: required"),
        ("session that is not a table", "[sessions]\na = 1\n", "sessions.a: expected table"),
        (
            "zero timeout",
            "[server]\nidle_timeout = 0\n[sessions.a]\nmechanisms=['formation']\n",
            "idle_timeout",
        ),
        ("bad address", '[server]\nlisten = "localhost"\n', "HOST:PORT"),
        ("bad durability", '[audit]\ndurability = "sometimes"\n', "sometimes"),
        ("no sessions", "[server]\n", "no [sessions"),
        ("unknown mechanism", '[sessions.a]\nmechanisms = ["rm-rf"]\n', "mechanisms must be"),
        ("empty mechanisms", "[sessions.a]\nmechanisms = []\n", "mechanisms must be"),
        (
            "negative bound",
            '[sessions.a]\nmechanisms = ["formation"]\nmax_evidence_bytes = -1\n',
            "non-negative",
        ),
        (
            "options for another mechanism",
            '[sessions.a]\nmechanisms = ["formation"]\n[sessions.a.options.descriptor]\nx = 1\n',
            "options",
        ),
    ],
)
def test_invalid_configuration_is_refused_with_the_key_named(
    mistake: str, text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        parse(text)


def test_every_shape_error_of_a_file_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as raised:
        parse('[server]\nmax_in_flight = 1.5\nnope = 1\n[sessions.a]\nmechanisms = "formation"\n')
    message = str(raised.value)
    assert message.startswith("test.toml: ")
    for part in (
        "server.max_in_flight: expected int, got float",
        "server: unknown key 'nope'",
        "sessions.a.mechanisms: expected array, got str",
    ):
        assert part in message


def test_the_schema_defaults_are_the_embedded_default_and_the_server_defaults() -> None:
    """Three places state the defaults (the schema, default.toml, ServerConfig): one truth."""
    import tomllib

    from daemon.config._config import default_config_text
    from daemon.config._config_schema import CONFIG_CONVERTER, AuditTable, ServerTable
    from daemon.config._hosting import ServerConfig

    embedded = tomllib.loads(default_config_text())
    server_table = CONFIG_CONVERTER.unstructure(ServerTable())
    assert server_table.pop("worker_threads") is None  # the former name, never a default
    assert server_table == embedded["server"]
    audit_table = CONFIG_CONVERTER.unstructure(AuditTable())
    assert audit_table.pop("sinks") == []  # [[audit.sinks]]: a commented example only
    assert audit_table == embedded["audit"]
    server = ServerConfig()
    assert server.security.tls is None and server.security.tokens_file is None
    for key, value in embedded["server"].items():
        if key in ("tls_cert", "tls_key", "tls_client_ca", "tokens_file"):
            assert value == "", key  # "" is none: ServerConfig's security is empty
        elif key not in ("listen", "socket"):
            assert getattr(server, key) == value, key


def test_mechanism_options_reach_the_constructor_and_raising_only_is_refused() -> None:
    config = parse(
        '[sessions.f]\nmechanisms = ["formation"]\n[sessions.f.options.formation]\nmax_nodes = 8\n'
    )
    hosted, skipped = config.build_sessions()  # type: ignore[attr-defined]
    assert hosted[0].name == "f" and skipped == []
    raised = parse(
        '[sessions.f]\nmechanisms = ["formation"]\n'
        "[sessions.f.options.formation]\nmax_nodes = 100000\n"
    )
    with pytest.raises(ConfigError, match="not hosted"):
        raised.build_sessions()  # type: ignore[attr-defined]


def test_optional_session_whose_mechanism_fails_is_skipped_with_a_reason() -> None:
    config = parse(
        '[sessions.f]\nmechanisms = ["formation"]\n'
        '[sessions.b]\nmechanisms = ["bytes-sha256"]\noptional = true\n'
        "[sessions.b.options.bytes-sha256]\nunexpected = 1\n"
    )
    hosted, skipped = config.build_sessions()  # type: ignore[attr-defined]
    assert [session.name for session in hosted] == ["f"]
    assert len(skipped) == 1 and "'b' not hosted" in skipped[0]


def test_addresses() -> None:
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_address("[::1]:7433") == ("::1", 7433)
    for bad in ("7433", ":1", "host:99999", "host:x"):
        with pytest.raises(ConfigError):
            parse_address(bad)
