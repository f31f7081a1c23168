"""Write ``docs/configuration.md``'s key tables from the schema (``make config-views``).

The tables between ``<!-- BEGIN generated … -->`` and ``<!-- END generated -->`` are
:func:`daemon.config._config_schema.key_table` (``evidenced config keys --markdown``), generated
from the one declaration of each key (``daemon/schema/_tables.py``); the rest of the page is
prose and is kept as it is. ``tests/daemon/test_config_keys.py`` fails when the page and the
schema differ, and says to run this.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from daemon.config._config_schema import key_table

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
_GENERATED = re.compile(r"(<!-- BEGIN generated[^\n]*-->\n)(.*?)(<!-- END generated -->)", re.S)


def main() -> int:
    text = PAGE.read_text(encoding="utf-8")
    if _GENERATED.search(text) is None:
        print(f"{PAGE.name}: no generated block to write", file=sys.stderr)
        return 1
    PAGE.write_text(
        _GENERATED.sub(lambda found: found[1] + key_table() + found[3], text, count=1),
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
