# dpsynth: `make book` (the main job) and `make test` each set themselves up from nothing.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test lint pytest book clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (dpsynth)" >/dev/null
	touch $@

venv: $(STAMP)

lint: venv
	$(BIN)/ruff check dpsynth tests benchmarks data

pytest: venv
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests

test: lint pytest

clean:
	rm -rf _build book/executed .pytest_cache
