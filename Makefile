# NCET developer entry points. On a fresh clone, `make demo` and `make test` are all you need:
# both create the virtual environment first.
#
#   make venv    create .venv and install ncet (editable) with its test extras
#   make demo    run the demo: a bundled model and its per-node mapping table
#   make lint    ruff over the sources
#   make docs    regenerate docs/support-boundary.md from ncet/boundary.py
#   make test    lint, then the whole test suite: tests/ and, through nbval, notebooks/
#   make clean   remove .venv, build output and caches
#
# Every install goes through constraints.txt: it pins torch to the CPU build on local disk.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.stamp

# The folders ruff checks; only those that exist (git keeps no empty folders, and ruff fails
# on a missing path).
LINT_PATHS := $(wildcard ncet widgets tests benchmarks notebooks)

.PHONY: venv demo lint docs test clean

venv: $(STAMP)

# Reinstalls whenever pyproject.toml or constraints.txt changes.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -c constraints.txt -e '.[test]'
	touch $@

demo: venv
	$(BIN)/ncet demo

lint: venv
	$(BIN)/ruff check $(LINT_PATHS)

docs: venv
	$(BIN)/python -m ncet.boundary > docs/support-boundary.md

# pytest exits 5 when it collects no tests; that fails this target, on purpose.
# pyproject.toml's [tool.pytest.ini_options] makes this run tests/ and notebooks/, the notebooks
# under nbval (stored outputs compared, notebooks/sanitize.cfg masking addresses and ids); the
# browser tests drive Debian's /usr/bin/chromium (Playwright never downloads a browser).
test: lint
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
