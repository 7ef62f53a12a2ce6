# Quick start: `make demo` and `make test`. Each target does its own set-up on a
# fresh machine: a virtualenv, the pinned packages, and the Delta and S3A jars resolved
# from Maven Central by Spark itself (spark.jars.packages) into the Ivy cache.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: setup demo test test-fast validate chromium bench jars clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench]'
	$(PY) -m state.session --warm
	@command -v chromium >/dev/null || $(MAKE) --no-print-directory chromium
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Debian's chromium, for the screenshots of the Dagster UI (the playwright driver comes from PyPI).
chromium:
	@command -v apt-get >/dev/null || { echo "need chromium (Debian package 'chromium') for the UI screenshot test"; exit 1; }
	apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }

jars: setup
	$(PY) -m state.session --warm

demo: setup
	$(VENV)/bin/epochal demo

test: setup validate
	$(PY) -m pytest -q --durations=25

# The Dagster definitions load (`dagster definitions validate`) for the example configuration.
validate: setup
	EPOCHAL_CONFIG=config/example.yaml $(VENV)/bin/dagster definitions validate -m orchestration.definitions

test-fast: setup validate
	$(PY) -m pytest -q -m "not slow"

# The benchmark against Spark Structured Streaming (bench/README.md): hours at full size.
# BENCH_ARGS=--quick checks the harness in minutes; --parts/--sizes choose what runs.
bench: setup
	nice -n 15 $(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
