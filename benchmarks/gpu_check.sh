#!/usr/bin/env bash
# The cp checks that need a GPU, for a machine that has one: the exactness tests on CUDA (real
# process groups under NCCL, one GPU per rank) and the benchmark on CUDA. Under 5 minutes.
#
#   PYTHON=/path/to/python-with-cuda-torch benchmarks/gpu_check.sh
#
# PYTHON defaults to .venv/bin/python, which must hold a CUDA build of torch (the CPU
# constraint file is for machines without a GPU). flash_attn is used when it is importable.
# NCCL needs a GPU per rank, so world sizes above the GPU count are skipped (and say so).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}

"$PY" - <<'EOF'
import importlib.util, sys, torch
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA device")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s): "
      f"{torch.cuda.get_device_name(0)}, flash_attn "
      f"{'installed' if importlib.util.find_spec('flash_attn') else 'not installed'}")
EOF
gpus=$("$PY" -c 'import torch; print(torch.cuda.device_count())')

worlds=1
for w in 2 4; do
  if [ "$gpus" -ge "$w" ]; then worlds="$worlds,$w"; fi
done

echo "== cp tests on CUDA (MESHSAT_CP_DEVICE=cuda, NCCL for process groups)"
MESHSAT_CP_DEVICE=cuda timeout 170 "$PY" -m pytest -q -p no:cacheprovider \
  tests/test_cp_worked_examples.py tests/test_cp_attention.py tests/test_cp_exactness.py \
  tests/test_cp_multiprocess.py -rs

echo "== bench_cp on CUDA (NCCL worlds: $worlds)"
timeout 110 "$PY" benchmarks/bench_cp.py --device cuda --worlds "$worlds" --repeats 5 \
  --tokens 65536 --hidden 4096
