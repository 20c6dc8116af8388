# Thin targets over the `course` command. Each installs what it needs into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# The test suite in $(JOBS) processes, each group of tests whole in one (tests/conftest.py).
PARALLEL := -n $(JOBS)

.PHONY: help setup demo test test-deep test-fast lint lab formgrader release benchmark clean student-wheel student-lower-bounds

help:  ## this list: every target and what it does (PYTHON=python3.11 make ... where python3 is older)
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /\1\t/' | \
		awk -F'\t' '{ printf "  make %-22s %s\n", $$1, $$2 }'

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	mkdir -p .exchange
	bash tools/install_system_packages.sh
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)  ## install the course into .venv

demo: setup  ## release, build the demo class, autograde it in parallel, feedback, grade table (ALL=1: every demo student)
	$(BIN)/course demo --jobs $(JOBS) $(if $(ALL),--all,)

lint: setup  ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint  ## the test suite but its deep tier (lint first); installs Chromium for the browser tests
	bash tools/install_system_packages.sh --browser
	$(BIN)/python -m pytest $(PARALLEL) -m "not deep"

test-deep: setup  ## the deep tier: every callable of the student part scanned, the student part alone in a fresh venv, JupyterHub (CI runs it after make test)
	bash tools/install_system_packages.sh --browser
	$(BIN)/python -m pytest $(PARALLEL) -m deep

test-fast: lint  ## checks, pipeline units and repository checks, no grading run (docs/speed.md: how long)
	bash tools/install_system_packages.sh
	$(BIN)/python -m pytest $(PARALLEL) -m "not slow and not deep"

lab: setup  ## JupyterLab on your own copy of the student notebooks, work/ (made once from release/), no instructor tools
	$(BIN)/python tools/student_lab.py

formgrader: setup  ## the instructor's JupyterLab on the course folder: Nbgrader > Formgrader (course lab)
	$(BIN)/course lab

release: setup  ## regenerate release/ from source/ for a clone (a graded term: course release, docs/term.md)
	$(BIN)/course release --clone-only

benchmark: setup  ## seconds per submission, sequential vs parallel autograding
	$(BIN)/python benchmarks/autograde_speed.py --jobs $(JOBS)

student-wheel:  ## the student part (course/ only, no answers) as a wheel: dist/transformers_course-*.whl
	rm -rf dist/transformers_course-*.whl student/build
	$(PYTHON) -m pip wheel --no-deps --quiet --wheel-dir dist ./student
	rm -rf student/build transformers_course.egg-info

student-lower-bounds: student-wheel setup  ## the student wheel on its lowest requirements, A to H's visible tests (downloads torch)
	$(BIN)/python -m tests.student_install --lower-bounds

clean:  ## remove the demo's course folder (demo-course/); never the term's grades or submissions
	rm -rf demo-course
