# The README's two commands: `make demo` (the main job) and `make test` (the whole suite).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo demo-retain test lint apidocs fmt coverage bench clean browser screenshots curl faketime nginx gotools schemathesis openapi openapi-examples config-views shells python-daemon

# Tools at the exact versions of constraints.txt; runtime dependencies as pyproject.toml's ranges.
# daemon/__init__.py's __version__ is the version the package metadata is built from. The example third-party
# mechanism (examples/evidenced-sri) is installed as its own distribution, as a user would: the
# tests serve it and run the conformance kit against it.
EXAMPLE := examples/evidenced-sri
$(STAMP): pyproject.toml constraints.txt daemon/__init__.py $(EXAMPLE)/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip -c constraints.txt
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	$(PY) -m pip install --quiet -c constraints.txt -e $(EXAMPLE)
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/evidenced demo

# The demo with evidence retention on, then a replay of every decision it made (docs/retention.md).
demo-retain: $(STAMP)
	$(VENV)/bin/evidenced demo --retain

# The suite on $(TEST_WORKERS) worker processes, whole test files per worker (module fixtures
# run once). `make test TEST_WORKERS=0` runs it in this process.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test: $(STAMP) lint apidocs browser curl faketime nginx gotools schemathesis shells python-daemon
	$(PYTEST); status=$$?; if [ $$status -eq 5 ]; then echo 'no tests collected'; status=0; fi; exit $$status

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

# The whole suite under coverage (child processes included): the files not fully covered, then
# one line per package (scripts/coverage_by_package.py).
coverage: $(STAMP)
	$(PYTEST) --cov --cov-report=term:skip-covered
	$(PY) scripts/coverage_by_package.py

# The API reference of the public names, from their docstrings (docs/api.md): warnings are errors.
API_MODULES := session mechanism daemon daemon.conformance
apidocs: $(STAMP)
	rm -rf docs/api
	$(PY) -W error -m pdoc --docformat restructuredtext -o docs/api $(API_MODULES)

fmt: $(STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# Headless Chromium (browser tests, README screenshots) and Graphviz `dot` (explain layouts), from
# Debian's packages, installed once when absent (needs root). Never fails: without them the
# browser tests skip and say why, and explain lays graphs out with grandalf.
browser:
	@if command -v chromium >/dev/null && command -v dot >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends chromium graphviz fonts-dejavu-core >/dev/null; } \
	  || echo 'make browser: could not install chromium/graphviz (browser tests will skip)'; \
	else echo 'make browser: chromium/graphviz absent and not root (browser tests will skip)'; fi

# The real curl and jq binaries the HTTP API tests and the runnable docs drive
# (tests/daemon/test_http_curl.py, tests/daemon/test_docs_run.py), from Debian's packages,
# installed once when absent (needs root). Never fails: without them those tests skip and say why.
curl:
	@if command -v curl >/dev/null && command -v jq >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends curl jq ca-certificates >/dev/null; } \
	  || echo 'make curl: could not install curl/jq (the curl tests will skip)'; \
	else echo 'make curl: curl/jq absent and not root (the curl tests will skip)'; fi

# libfaketime, which steps a real daemon's wall clock while it serves
# (tests/daemon/test_clock_step.py), from Debian's packages, installed once when absent (needs
# root). Never fails: without it that test skips and says why (the synthetic logs of
# tests/daemon/test_retention_gc.py hold the same rules everywhere).
faketime:
	@if ls /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends faketime libfaketime >/dev/null; } \
	  || echo 'make faketime: could not install libfaketime (the clock-step test will skip)'; \
	else echo 'make faketime: libfaketime absent and not root (the clock-step test will skip)'; fi

# The fish shell, which loads `evidenced completion fish` in tests/daemon/test_packaging.py
# (bash is always there), from Debian's package, installed once when absent (needs root).
# Never fails: without it that test skips and says why.
shells:
	@if command -v fish >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends fish >/dev/null; } \
	  || echo 'make shells: could not install fish (the fish completion test will skip)'; \
	else echo 'make shells: fish absent and not root (the fish completion test will skip)'; fi

# Go and Debian's golang.org/x/mod (sumdb/tlog, sumdb/note): the independent tlog-tiles client
# that reads a live daemon's transparency log over HTTP (tests/daemon/test_http_tlog.py).
# Installed once when absent (needs root). Never fails: without them that test skips.
gotools:
	@if command -v go >/dev/null && [ -d /usr/share/gocode/src/golang.org/x/mod/sumdb/tlog ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends golang-go golang-golang-x-mod-dev >/dev/null; } \
	  || echo 'make gotools: could not install go (the Go tlog client test will skip)'; \
	else echo 'make gotools: go absent and not root (the Go tlog client test will skip)'; fi

# schemathesis in a tool venv of its own: it pins a jsonschema-rs older than the daemon needs.
# tests/daemon/test_openapi.py runs its `st` against a live daemon (docs/openapi.json).
SCHEMATHESIS_VENV := .venv-schemathesis
SCHEMATHESIS_VERSION := 4.32.5
schemathesis: $(SCHEMATHESIS_VENV)/bin/st
$(SCHEMATHESIS_VENV)/bin/st:
	$(PYTHON) -m venv $(SCHEMATHESIS_VENV)
	$(SCHEMATHESIS_VENV)/bin/pip install --quiet schemathesis==$(SCHEMATHESIS_VERSION)

# docs/openapi.json, written from the route table (daemon/server/_openapi.py); a test holds the
# two equal.
openapi: $(STAMP)
	$(PY) -m daemon.server._openapi > docs/openapi.json

# daemon/config/default.toml and docs/configuration.md's key tables, written from the schema
# (daemon/schema/_tables.py, one declaration per key); tests/daemon/test_config_keys.py holds
# them equal.
config-views: $(STAMP)
	$(PY) -m daemon.config._default_file > daemon/config/default.toml
	$(PY) scripts/config_docs.py

# The description's examples (daemon/server/openapi-examples.json), real answers of a daemon
# started by the script; tests/daemon/test_openapi.py says when a mechanism changed them. Run
# `make openapi` after it.
openapi-examples: $(STAMP)
	$(PY) scripts/openapi_examples.py

# python-daemon and its one dependency, lockfile: the distribution that installs the same
# `daemon/__init__.py` as evidenced, as wheels for the test that installs it beside evidenced
# in a fresh venv (tests/test_wheel.py). Downloaded once; never fails: without them that test
# skips and says why.
PYTHON_DAEMON_WHEELS := .wheels/python-daemon
python-daemon: $(PYTHON_DAEMON_WHEELS)/.downloaded
$(PYTHON_DAEMON_WHEELS)/.downloaded: $(STAMP)
	@$(PY) -m pip download --quiet --no-deps --only-binary :all: --dest $(PYTHON_DAEMON_WHEELS) \
	  python-daemon==3.1.2 lockfile==0.12.2 && touch $@ \
	  || echo 'make python-daemon: could not download python-daemon (its test will skip)'

# A real nginx, the load balancer of the multi-replica test (tests/daemon/test_fleet_nginx.py),
# from Debian's package, installed once when absent (needs root). Never fails: without it that
# test skips and says why. The package's own service is not used (the test starts nginx).
nginx:
	@if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends nginx-light >/dev/null; } \
	  || echo 'make nginx: could not install nginx (the multi-replica test will skip)'; \
	else echo 'make nginx: nginx absent and not root (the multi-replica test will skip)'; fi

screenshots: $(STAMP) browser
	$(PY) scripts/screenshots.py

# Every benchmarks/bench_*.py, then one table of all figures and goals (docs/benchmarks.md).
# BENCH_ARGS: e.g. --quick, --json figures.json, --baseline old.json, or script names.
bench: $(STAMP)
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(SCHEMATHESIS_VENV) build *.egg-info .coverage .coverage.* docs/api
