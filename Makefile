# Two commands for a new user:  `make run` (set up + start the app)  and  `make test` (set up + run all tests).
# `make test-fast` runs tests/unit and tests/app only (the inner loop).
VENV    ?= .venv
PY      := $(VENV)/bin/python
# The CPU wheel of torch 2.13.0 lies on disk on the project's machines; elsewhere pip picks the best build.
TORCH   ?= torch==2.13.0
PORT    ?= 8501
SYSTEM_PACKAGES := sword-text-sparv sword-text-web chromium

.PHONY: setup system-deps run test test-fast bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q "$(TORCH)" || $(PY) -m pip install -q torch
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# Debian packages: the Bible texts (corpus tests, retraining) and Chromium (browser tests).
system-deps:
	@bash scripts/system_deps.sh $(SYSTEM_PACKAGES)

run: setup
	$(VENV)/bin/streamlit run app.py --server.port $(PORT)

test: setup system-deps
	$(PY) -m pytest -q

# The inner loop: unit tests and Streamlit AppTests (no trainer subprocesses, no browser), about two minutes.
test-fast: setup
	$(PY) -m pytest -q tests/unit tests/app

bench: setup
	$(PY) -m benchmarks all

clean:
	rm -rf $(VENV) runs .pytest_cache
