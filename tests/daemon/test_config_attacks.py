"""Configuration text that used to escape ``parse_config`` as something other than
``ConfigError`` (the linear-growth audit): the daemon must say "invalid configuration", exit 65."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon import ConfigError, load_config
from daemon.config._config import parse_config


@pytest.mark.parametrize(
    ("attack", "text"),
    [
        ("deeply nested arrays", "x = " + "[" * 5000),
        ("deeply nested inline tables", "x = " + "{a=" * 5000),
        ("integer of 5,000 digits", "x = " + "1" * 5000),
    ],
)
def test_hostile_toml_is_a_config_error_not_another_exception(attack: str, text: str) -> None:
    with pytest.raises(ConfigError, match="not TOML"):
        parse_config(text, base=Path("/srv"), source="attack.toml")


def test_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "evidenced.toml"
    path.write_bytes(b'[server]\nlisten = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)
