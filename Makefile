# Quick start: `make demo` and `make test`. Each target does its own set-up on a
# fresh machine: a virtualenv, the pinned packages, and the Delta jars resolved
# from Maven Central by Spark itself (spark.jars.packages) into the Ivy cache.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: setup demo test test-fast jars clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (Python 3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m state.session --warm
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

jars: setup
	$(PY) -m state.session --warm

demo: setup
	$(VENV)/bin/epochal demo

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
