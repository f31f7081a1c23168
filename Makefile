# The README's two commands: `make demo` (the main job) and `make test` (the whole suite).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint fmt bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m daemon.demo

test: $(STAMP) lint
	$(PY) -m pytest -q; status=$$?; if [ $$status -eq 5 ]; then echo 'no tests collected'; status=0; fi; exit $$status

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

fmt: $(STAMP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

# Every benchmarks/bench_*.py, then one table of all figures and goals (docs/benchmarks.md).
# BENCH_ARGS: e.g. --quick, --json figures.json, --baseline old.json, or script names.
bench: $(STAMP)
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
