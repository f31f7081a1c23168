"""Settings for the whole suite.

Hypothesis runs without its per-example deadline: the suite never asserts on time (figures
belong to ``benchmarks/``), and on a loaded two-core CI machine a deadline only turns a slow
example into a flaky failure.
"""

from hypothesis import settings

settings.register_profile("evidenced", deadline=None)
settings.load_profile("evidenced")
