# Quick start: `make demo` and `make test`. Each target does its own set-up on a
# fresh machine: a virtualenv, the locked packages (requirements.lock, installed with uv), and the Delta and
# S3A jars resolved from Maven Central by Spark itself (spark.jars.packages) into the Ivy cache.
# Python 3.12 is preferred (3.11 and 3.13 work): the first of these that runs is used
# (a pyenv shim can exist without a runnable interpreter behind it).
PYTHON ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 python3.13 python3.11; do \
            $$p -c 'import sys; assert (3, 11) <= sys.version_info[:2] < (3, 14)' >/dev/null 2>&1 && { echo $$p; break; }; done)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml requirements.lock | sha1sum | cut -c1-12)
# Where the tests put what the docs show (untracked: tests never write into docs/): the reliability
# tests' figures and the live Dagster test's screenshots.
FIGURES     ?= build/figures
SCREENSHOTS ?= build/screenshots
TEST_WORKERS ?= 2
# The installer of the set-up (and of `make lock`): uv, from PyPI, installs the locked packages in parallel
# (25 s into a fresh virtualenv with an empty cache, against 84 s for pip, 2026-11-29); pip where uv cannot
# (no uv wheel for the platform, say).
UV          := uv==0.13.9
# The packages are compiled to bytecode as they are installed (pip does it by default, uv with
# --compile-bytecode), and the project's own modules by compileall: where PYTHONDONTWRITEBYTECODE is set (as on
# this project's machine) Python never writes .pyc files itself, and every process (each `epochal` command, a
# Dagster run, Spark's Python workers) compiled what it imports from source, 1.4 s of the 2.7 s it took to
# import Dagster, PySpark, pandas and delta-rs (2026-11-29).
SOURCES     := epochal config state pipeline orchestration tests bench
TEST_ENV    := EPOCHAL_FIGURES_DIR=$(FIGURES) EPOCHAL_SCREENSHOTS_DIR=$(SCREENSHOTS)

.PHONY: setup demo test test-fast validate chromium bench jars lock clean reliability-doc docs-images

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@test -n "$(PYTHON)" || { echo "need Python 3.12 (or 3.11, 3.13) as python3.12, python3.13 or python3.11"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(UV) && $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -c requirements.lock -e '.[test,bench]' \
	    || { echo "uv could not install the packages here: pip installs them"; $(PY) -m pip install --quiet -c requirements.lock -e '.[test,bench]'; }
	$(PY) -m compileall -q -j 0 $(SOURCES) >/dev/null
	$(PY) -m epochal.state.session --warm
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Debian's chromium, for the screenshots of the Dagster UI (the playwright driver comes from PyPI):
# only `make test` needs it (`make demo` needs no root and no browser).
chromium:
	@command -v chromium >/dev/null && exit 0; command -v apt-get >/dev/null || { echo "need chromium (Debian package 'chromium') for the UI screenshot test"; exit 1; }
	apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }

jars: setup
	$(PY) -m epochal.state.session --warm

demo: setup
	$(VENV)/bin/epochal demo

# Two pytest-xdist workers, each its own pytest session with its own SparkSession; the slow tests go out first
# (tests/conftest.py), one test at a time, but for the tests that share a module fixture (an example's epochs):
# one worker runs those together (--dist loadscope, tests/support/xdist_units.py), so it is built once.
# A test's driver keeps about one core busy: three workers on the 2-core machine took longer (57 minutes
# against 52.5 from a fresh clone, 2026-11-28). TEST_WORKERS=0 runs everything in one process.
test: setup chromium validate
	$(TEST_ENV) $(PY) -m pytest -q --durations=25 -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# The Dagster definitions load (`dagster definitions validate`) for the example configuration.
validate: setup
	EPOCHAL_CONFIG=config/example.yaml $(VENV)/bin/dagster definitions validate -m epochal.orchestration.definitions

test-fast: setup validate
	$(TEST_ENV) $(PY) -m pytest -q -m "not slow"

# docs/reliability.md from the figures the reliability tests wrote to $(FIGURES) (run the tests first);
# sections without figures stay as they are.
reliability-doc: setup
	$(PY) -m tests.support.reliability_doc --figures $(FIGURES) --doc docs/reliability.md

# docs/images/ (the README's pictures) from the live Dagster test's screenshots in $(SCREENSHOTS).
docs-images:
	@for f in 01-asset-graph 02-materialize-dialog 04-backfill-succeeded 05-checkpoint-plots 07-replay-succeeded; do \
	    test -s $(SCREENSHOTS)/$$f.png || { echo "no $(SCREENSHOTS)/$$f.png: run the live Dagster test first (make test)"; exit 1; }; done
	cp $(SCREENSHOTS)/01-asset-graph.png docs/images/lineage.png
	cp $(SCREENSHOTS)/02-materialize-dialog.png docs/images/materialize-range.png
	cp $(SCREENSHOTS)/04-backfill-succeeded.png docs/images/backfill-succeeded.png
	cp $(SCREENSHOTS)/05-checkpoint-plots.png docs/images/checkpoint-plots.png
	cp $(SCREENSHOTS)/07-replay-succeeded.png docs/images/replay-partition.png

# The benchmark against Spark Structured Streaming (bench/README.md): hours at full size.
# BENCH_ARGS=--quick checks the harness in minutes; --parts/--sizes choose what runs.
bench: setup
	nice -n 15 $(PY) -m bench $(BENCH_ARGS)

# Re-resolve requirements.lock after changing the dependencies in pyproject.toml (uv, from PyPI).
lock: setup
	$(PY) -m pip install --quiet $(UV)  # present unless the set-up fell back to pip
	$(VENV)/bin/uv pip compile pyproject.toml --extra test --extra bench --extra deploy --universal \
	    --python-version 3.11 --no-header --quiet -o requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
