# Thin targets over the `course` command. Each installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# The test suite in $(JOBS) processes, each group of tests whole in one (tests/conftest.py).
PARALLEL := -n $(JOBS)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: setup demo test test-fast lint lab release benchmark clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	mkdir -p .exchange
	bash tools/install_system_packages.sh
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)  ## install the course into .venv

demo: setup  ## release, build the demo class, autograde it in parallel, feedback, grade table (ALL=1: every demo student)
	$(BIN)/course demo --jobs $(JOBS) $(if $(ALL),--all,)

lint: setup  ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint  ## the whole test suite (lint first); installs Chromium for the browser tests
	bash tools/install_system_packages.sh --browser
	$(BIN)/python -m pytest $(PARALLEL)

test-fast: lint  ## checks, pipeline units and repository checks, no grading run (under 2 minutes)
	bash tools/install_system_packages.sh
	$(BIN)/python -m pytest $(PARALLEL) -m "not slow"

lab: setup  ## JupyterLab on your own copy of the student notebooks, work/ (made once from release/)
	$(BIN)/python tools/student_copy.py
	$(BIN)/jupyter lab $(ROOT_FLAG) --notebook-dir=work

release: setup  ## regenerate release/ from source/
	$(BIN)/course release

benchmark: setup  ## seconds per submission, sequential vs parallel autograding
	$(BIN)/python benchmarks/autograde_speed.py --jobs $(JOBS)

clean:  ## remove what grading wrote (keeps .venv and autograded/README.md)
	rm -rf submitted feedback gradebook.db grades.csv grading_report.csv
	find autograded -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
