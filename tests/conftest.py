"""Settings for the whole suite.

Hypothesis runs without its per-example deadline: the suite never asserts on time (figures
belong to ``benchmarks/``), and on a loaded two-core CI machine a deadline only turns a slow
example into a flaky failure.

``evidenced submit`` keeps the sessions answer it was given per server address
(``daemon/client/_sessions_cache.py``): the suite's commands, in-process and in the
processes it starts, keep it in a folder of this run (``EVIDENCED_CACHE_DIR``), never in the
user's home.
"""

import os
import tempfile

from hypothesis import settings

os.environ["EVIDENCED_CACHE_DIR"] = tempfile.mkdtemp(prefix="evidenced-test-cache-")

settings.register_profile("evidenced", deadline=None)
settings.load_profile("evidenced")
