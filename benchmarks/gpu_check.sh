#!/usr/bin/env bash
# Every cp check that needs a GPU, as one run of under 5 minutes on a machine that has one:
#   1. the cp tests on CUDA (MESHSAT_CP_DEVICE=cuda; process groups under NCCL, one GPU per
#      rank, so worlds above the GPU count skip and say so);
#   2. benchmarks/cp_layer_check.py on CUDA: zigzag, interleave and ring at cp 1, 2 and 4 (ranks
#      as threads sharing the GPU), fp32 and bf16, each exact against the float64 oracle, the
#      second layer (KV write included) under torch.cuda.set_sync_debug_mode("error"), and the
#      FlashAttention calls per strategy (varlen for zigzag/interleave, tiles for ring);
#   3. bench_cp parts 2-3 on CUDA over NCCL (shard/gather throughput; attention per layer with
#      ring's KV per rank) at the world sizes the GPUs allow.
#
#   PYTHON=/path/to/python-with-cuda-torch benchmarks/gpu_check.sh
#
# PYTHON defaults to .venv/bin/python, which must hold a CUDA build of torch (the CPU
# constraint file is for machines without a GPU). flash_attn is used when it is importable;
# step 2 prints "none" in its FlashAttention column when it is not. Each step has its own
# timeout (90 + 75 + 100 s), so the whole run ends within 5 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

"$PY" - <<'PYEOF'
import importlib.util, sys, torch
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: torch {torch.__version__} sees no CUDA device")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s): "
      f"{torch.cuda.get_device_name(0)}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
      f"flash_attn {'installed' if importlib.util.find_spec('flash_attn') else 'not installed'}")
PYEOF
gpus=$("$PY" -c 'import torch; print(torch.cuda.device_count())')

worlds=1
for w in 2 4; do
  if [ "$gpus" -ge "$w" ]; then worlds="$worlds,$w"; fi
done

echo "== 1. cp tests on CUDA (MESHSAT_CP_DEVICE=cuda, NCCL for process groups)"
MESHSAT_CP_DEVICE=cuda timeout 90 "$PY" -m pytest -q -p no:cacheprovider -x \
  tests/test_cp_worked_examples.py tests/test_cp_attention.py tests/test_cp_exactness.py \
  tests/test_cp_ring.py tests/test_cp_seed_interface.py tests/test_cp_seed_contract.py \
  tests/test_cp_multiprocess.py -rs

echo "== 2. per-layer check on CUDA: exact, sync-free second layer, FlashAttention calls"
timeout 75 "$PY" benchmarks/cp_layer_check.py --device cuda --cp 1,2,4

echo "== 3. bench_cp on CUDA (NCCL worlds: $worlds)"
timeout 100 "$PY" benchmarks/bench_cp.py --device cuda --parts 2,3 --worlds "$worlds" \
  --repeats 5 --tokens 65536 --hidden 4096
