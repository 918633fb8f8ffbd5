# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.meshsat-installed

.PHONY: demo test lint bench clean

# torch comes through a constraints file pinned to the CPU build on disk, so set-up never
# pulls a CUDA build; a virtualenv that already has torch keeps its own.
$(STAMP): pyproject.toml constraints/torch-cpu.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(PY) -c 'import torch' 2>/dev/null; then \
		$(PY) -m pip install -q -e '.[dev]'; \
	else \
		$(PY) -m pip install -q -c constraints/torch-cpu.txt -e '.[dev]'; \
	fi
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/meshsat validate --example dp-cp-conflict || test $$? -eq 1
	$(VENV)/bin/meshsat validate --example deepseek-v3-prefill-cp

test: $(STAMP)
	$(PY) -m pytest
	$(MAKE) --no-print-directory lint

lint: $(STAMP)
	$(PY) -m ruff check solver cp tests benchmarks
	$(PY) -m ruff format --check solver cp tests benchmarks
	$(PY) -m mypy

bench: $(STAMP)
	$(PY) benchmarks/bench_validate.py
	$(PY) benchmarks/bench_fix.py
	$(PY) benchmarks/bench_cp.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
