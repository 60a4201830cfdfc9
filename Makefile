# NCET developer entry points. On a fresh clone, `make demo` and `make test` are all you need:
# both create the virtual environment first.
#
#   make venv    create .venv and install ncet (editable) with its test extras
#   make demo    run the demo: a bundled model and its per-node mapping table
#   make lint    ruff over the sources
#   make docs    regenerate docs/support-boundary.md from ncet/frontend/boundary.py
#   make test    lint, then the whole test suite: tests/ and, through nbval, notebooks/; then
#                the notebooks again on capped instruction sets and one thread
#   make notebooks  re-execute every notebook and store its outputs (after changing one)
#   make reliability  the reliability suite alone (docs/reliability.md; `make test` runs it too)
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

# The notebooks' second run: PyTorch's kernels capped at AVX2 (oneDNN, MKL, ATen) and one
# thread. Their stored outputs were made on some other CPU and thread count, so an output that
# depends on the CPU's rounding fails here on every machine, not only on some.
PORTABLE := ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2 \
            OMP_NUM_THREADS=1

.PHONY: venv demo lint docs test notebooks reliability clean

venv: $(STAMP)

# Reinstalls whenever pyproject.toml or constraints.txt changes.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -c constraints.txt -e '.[test]'
	$(BIN)/python -m pip install -c constraints.txt --no-deps onnx2pytorch onnx2torch onnxsim
	touch $@

demo: venv
	$(BIN)/ncet demo

lint: venv
	$(BIN)/ruff check $(LINT_PATHS)

docs: venv
	$(BIN)/python -m ncet.frontend.boundary > docs/support-boundary.md

# pytest exits 5 when it collects no tests; that fails this target, on purpose (both runs).
# pyproject.toml's [tool.pytest.ini_options] makes this run tests/ and notebooks/, the notebooks
# under nbval (stored outputs compared, notebooks/sanitize.cfg masking addresses and ids); the
# browser tests drive Debian's /usr/bin/chromium (Playwright never downloads a browser).
test: lint
	$(BIN)/python -m pytest
	env $(PORTABLE) $(BIN)/python -m pytest notebooks/ -p no:cacheprovider

notebooks: venv
	$(BIN)/python notebooks/refresh.py

# Threads, hostile files, the untouched model, atomic writes, the command line, tracing hazards
# and random models: each file is named, so a renamed one fails here instead of dropping out.
reliability: venv
	$(BIN)/python -m pytest -p no:cacheprovider tests/test_threads.py \
	    tests/test_hostile_files.py tests/test_io.py tests/test_no_mutation.py \
	    tests/test_atomic_writes.py tests/test_cli.py tests/test_tracing_hazards.py \
	    tests/test_fuzz.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
