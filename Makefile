# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.meshsat-installed

.PHONY: demo test lint bench fidelity plugin-venv plugin-record clean

# torch comes through a constraints file pinned to the CPU build on disk, so set-up never
# pulls a CUDA build; a virtualenv that already has torch keeps its own.
$(STAMP): pyproject.toml constraints/torch-cpu.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(PY) -c 'import torch' 2>/dev/null; then \
		$(PY) -m pip install -q -e '.[dev,perf,tune]'; \
	else \
		$(PY) -m pip install -q -c constraints/torch-cpu.txt -e '.[dev,perf,tune]'; \
	fi
	@touch $(STAMP)

# The main job on embedded examples: why a layout is rejected, the nearest one that works,
# what SGLang silently changes, what else fits, who talks to whom, and CP running for real.
demo: $(STAMP)
	@echo "== meshsat validate --example dp-cp-conflict (exit 1: invalid)"
	@$(VENV)/bin/meshsat validate --example dp-cp-conflict || test $$? -eq 1
	@echo "== meshsat fix --example dp-cp-conflict --gpus 8"
	@$(VENV)/bin/meshsat fix --example dp-cp-conflict --gpus 8
	@echo "== meshsat validate --example deepseek-v3-prefill-cp"
	@$(VENV)/bin/meshsat validate --example deepseek-v3-prefill-cp
	@echo "== meshsat enumerate --gpus 16 --where 'attn_cp >= 2' --where 'ep >= 8' --limit 8"
	@$(VENV)/bin/meshsat enumerate --gpus 16 --where "attn_cp >= 2" --where "ep >= 8" --limit 8
	@echo "== meshsat groups --set tp_size=8 --set attn_cp_size=2 --set ep_size=4 --set moe_dp_size=2"
	@$(VENV)/bin/meshsat groups --set tp_size=8 --set attn_cp_size=2 --set ep_size=4 --set moe_dp_size=2
	@echo "== meshsat plan --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 16 --tpot 50 --top 5 --plot plan-pareto.png"
	@$(VENV)/bin/meshsat plan --model deepseek-ai/DeepSeek-V3 --gpu H200 --gpus 16 --tpot 50 \
		--top 5 --plot plan-pareto.png
	@echo "== python -m meshsat.cp.demo --spawn 4 (zigzag CP over gloo, checked against one process)"
	@$(PY) -m meshsat.cp.demo --spawn 4 --set tp_size=4 --set attn_cp_size=2 \
		--set enable_prefill_cp=true --set cp_strategy=zigzag

# One pytest worker per core (`-n auto`; two on the CI machine); worksteal keeps the few
# long tests (the 384-GPU brute-force oracle) from queueing behind each other.
test: $(STAMP)
	$(PY) -m pytest -n auto --dist worksteal
	$(MAKE) --no-print-directory lint

lint: $(STAMP)
	$(PY) -m ruff check solver cp tests benchmarks fidelity
	$(PY) -m ruff format --check solver cp tests benchmarks fidelity
	$(PY) -m mypy

# Benchmarks compare against references in tests/, so the repository root is on the path.
bench: export PYTHONPATH := $(CURDIR)
bench: $(STAMP)
	$(PY) benchmarks/bench_validate.py
	$(PY) benchmarks/bench_fix.py
	$(PY) benchmarks/bench_enumerate.py
	$(PY) benchmarks/bench_cp.py
	$(PY) benchmarks/bench_inputs.py
	$(PY) benchmarks/bench_memory.py
	$(PY) benchmarks/bench_plan.py
	$(PY) benchmarks/bench_threads.py
	$(PY) benchmarks/bench_fidelity.py
	$(PY) benchmarks/bench_perf.py --write benchmarks/RESULTS-perf-speed.md
	$(PY) benchmarks/perf_accuracy.py --write benchmarks/RESULTS-perf.md
	$(PY) benchmarks/perf_disagg_accuracy.py --write-section benchmarks/RESULTS-perf.md
	$(PY) benchmarks/bench_web.py
	$(PY) benchmarks/bench_tune.py

# The real SGLang as the oracle: one CPU venv per release outside the repository
# ($$HOME/.cache/meshsat-fidelity/<version>), its flag table into fidelity/flags/ and its
# verdicts on generated configs into tests/fixtures/fidelity/. Not part of `make test`,
# which replays the recorded fixtures without SGLang.
FIDELITY_RELEASES ?= 0.5.23 0.5.19 0.5.18 0.4.6.post5
fidelity: $(STAMP)
	PYTHONPATH=$(CURDIR) $(PY) -m fidelity.record $(FIDELITY_RELEASES)
	PYTHONPATH=$(CURDIR) $(PY) -m fidelity.compare 0.5.19
	PYTHONPATH=$(CURDIR) $(PY) benchmarks/bench_fidelity.py

# meshsat's SGLang plugin against the real launch (tests/test_sglang_plugin.py replays the
# record). Its own venv: the fidelity venvs must not load the plugin while they record.
PLUGIN_CACHE ?= $(HOME)/.cache/meshsat-plugin
PLUGIN_RELEASE ?= 0.5.23
plugin-venv:
	MESHSAT_FIDELITY_CACHE=$(PLUGIN_CACHE) bash fidelity/setup_venv.sh $(PLUGIN_RELEASE)
	$(PLUGIN_CACHE)/$(PLUGIN_RELEASE)/bin/python -m pip install -q -c constraints/torch-cpu.txt .
	$(PLUGIN_CACHE)/$(PLUGIN_RELEASE)/bin/python -m pip install -q --no-deps --force-reinstall .

plugin-record: $(STAMP) plugin-venv
	MESHSAT_PLUGIN_CACHE=$(PLUGIN_CACHE) PYTHONPATH=$(CURDIR) $(PY) -m fidelity.plugin_launch $(PLUGIN_RELEASE)
	PYTHONPATH=$(CURDIR) $(PY) benchmarks/bench_plugin.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
