# Two commands for a new user:  `make run` (set up + start the app)  and  `make test` (set up + run all tests).
# `make test-fast` runs tests/unit and tests/app only (the inner loop); `make test-busy` runs `make test` with
# two spinning processes beside it (scripts/busy.sh), for whoever changes a test that waits or compares floats.
VENV    ?= .venv
PY      := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 lies on disk on the project's machines; elsewhere pip picks the best build.
TORCH   ?= torch==2.13.0
# No bytecode compiled at install time (165 s -> 97 s for a fresh setup here): Python compiles each module
# the first time it is imported, and only those, and keeps it under the venv (PYTHONPYCACHEPREFIX), nothing
# written beside the sources. A machine that sets PYTHONDONTWRITEBYTECODE keeps none, and every process then
# compiles all it imports again: a 2-step trainer run took 17.8 s, 7.5 s with the cache. The project's
# commands (and the processes they start: trainers, the app server) keep it.
NO_COMPILE := --no-compile
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache
unexport PYTHONDONTWRITEBYTECODE
# Python's UTF-8 mode for every process the commands start: files, pipes and the terminal read and written as
# UTF-8 whatever the machine's locale (under a non-UTF-8 one, tests writing "▁" pieces and commands printing
# "fünf" raised UnicodeEncodeError).
export PYTHONUTF8 := 1
PORT    ?= 8501
SYSTEM_PACKAGES := sword-text-sparv sword-text-web chromium

.PHONY: setup system-deps run test test-busy test-fast bench clean

setup: $(VENV)/.installed

# circuit-tracer is installed without its dependencies (they pin transformers below the version the Marian
# tests use): the attribution-graph tests need only its graph models (pydantic), to validate our JSON with.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q $(NO_COMPILE) "$(TORCH)" || $(PY) -m pip install -q $(NO_COMPILE) torch
	$(PY) -m pip install -q $(NO_COMPILE) -e '.[dev]'
	$(PY) -m pip install -q $(NO_COMPILE) --no-deps "circuit-tracer==0.5.0"
	touch $@

# Debian packages: the Bible texts (corpus tests, retraining) and Chromium (browser tests).
system-deps:
	@bash scripts/system_deps.sh $(SYSTEM_PACKAGES)

run: setup
	$(VENV)/bin/streamlit run app.py --server.port $(PORT)

# Unit tests and AppTests run on up to 4 cores at once (pytest-xdist; one torch thread per worker, so the
# workers do not fight over the cores), then the trainer subprocesses and the browser, one test at a time
# (they start processes of their own: everything outside tests/unit and tests/app), the 15 slowest listed.
# Two workers there were slower (1,066 s against 919 s): the poison demonstration and the fine-tune recipe,
# each training on two threads, then ran side by side at half speed (and xdist's `--dist loadgroup`, which
# would keep the browser tests on one worker, groups nothing under pytest 9: each worker starts an app
# server and a Chromium of its own). `pytest` alone runs everything in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
PARALLEL := OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS)

test: setup system-deps
	$(PARALLEL) tests/unit tests/app
	$(PY) -m pytest -q --durations=15 tests --ignore=tests/unit --ignore=tests/app

# `make test` on a busy processor: two processes spin beside it (BUSY_SPINNERS, BUSY_MAX_S), started by
# scripts/busy.sh before the tests and stopped when they end, fail or are interrupted, and after BUSY_MAX_S
# seconds (3 h) at the latest even if nothing stops them. A test that passes only on an idle machine fails here.
test-busy: setup system-deps
	bash scripts/busy.sh $(MAKE) --no-print-directory test

# The inner loop: unit tests and Streamlit AppTests (no trainer subprocesses, no browser), 10 minutes on 2 cores.
test-fast: setup
	$(PARALLEL) tests/unit tests/app

bench: setup
	$(PY) -m benchmarks all

clean:
	rm -rf $(VENV) runs .pytest_cache
