"""The distribution's version: the one place it is written.

``pyproject.toml`` reads it from here (``[tool.setuptools.dynamic]``), so the installed package
metadata, ``evidenced --version`` (which reads that metadata) and the server's ``SERVER_NAME``
always agree. A plain constant: naming the server costs no metadata lookup at import.
"""

from __future__ import annotations

from typing import Final

__version__: Final = "0.1.0"
