# Two entry points do all set-up on a fresh machine:
#   make demo   -> creates .venv, installs, runs the default E8 study (CPU, minutes)
#   make test   -> creates .venv, installs, runs the fast test suite
# `make demo SEEDS=1` runs the study with one training seed per condition (a quick look;
# its hypotheses then rest on one model each).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.robuststats-installed
PYTEST_ARGS ?= -m "not slow" -n 2
# optional extras the test suite exercises (tests needing a missing one skip)
EXTRAS ?= dev,test,lmeval,ray,inspect,dashboard,msprobe,trl
# training seeds per condition of `make demo`
SEEDS ?= 5

.PHONY: install demo test test-slow lint bench clean-venv

$(STAMP): pyproject.toml requirements/constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c requirements/constraints-cpu.txt torch
	$(PY) -m pip install --quiet -c requirements/constraints-cpu.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/robuststats study studies/e8_matrix.yaml --seeds $(SEEDS)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -m slow -n 2

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) benchmarks/engine_overhead.py
	$(PY) benchmarks/bootstrap_speed.py

clean-venv:
	rm -rf $(VENV)
