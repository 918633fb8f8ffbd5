#!/usr/bin/env bash
# The cp checks that need a GPU, for a machine that has one: the exactness tests of all three
# strategies (zigzag, interleave, ring) on CUDA (real process groups under NCCL, one GPU per
# rank), the sync-free claim under torch.cuda.set_sync_debug_mode("error"), and the benchmark
# on CUDA. Under 6 minutes.
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
  tests/test_cp_ring.py tests/test_cp_seed_interface.py tests/test_cp_multiprocess.py -rs

echo "== sync-free layer on CUDA: a second layer's run_attention under set_sync_debug_mode(error)"
timeout 90 "$PY" - <<'EOF'
import torch
from meshsat.cp import CPBatch, InterleaveStrategy, LayerKV, RingStrategy, ZigzagStrategy
from tests.cp_helpers import make_inputs, tolerance

dev = torch.device("cuda")
batch = CPBatch((3000, 170, 400), (210, 0, 50))
for cls in (ZigzagStrategy, InterleaveStrategy, RingStrategy):
    for dtype in (torch.float32, torch.bfloat16):
        s = cls(1)  # one GPU: cp 1 (outside can_apply, still the full code path)
        b = batch.with_metadata(
            s.build_metadata(batch.num_tokens, batch.seq_lens, batch.extend_lens)
        )
        x = make_inputs(b, heads=8, kv_heads=2, dim=64, dtype=dtype, device=dev, seed=0)
        q, k, v = (s.shard_hidden_states(t, b) for t in (x.q, x.k, x.v))
        outs = []
        for layer in range(2):
            kv = LayerKV.from_prefix(batch, x.prefix_k, x.prefix_v)
            s.materialize_full_kv(b, kv, k, v)
            fn = s.default_attn_fn(b, kv)
            torch.cuda.synchronize()
            if layer == 1:  # layer 0 builds the forward's device state
                torch.cuda.set_sync_debug_mode("error")
            outs.append(s.run_attention(q, b, dev, fn))
            torch.cuda.set_sync_debug_mode("default")
        got = s.gather_hidden_states(outs[1], b)
        torch.testing.assert_close(got.double().cpu(), x.oracle(batch), **tolerance(dtype))
        print(f"{cls.name} {dtype}: second layer sync-free and exact")
EOF

echo "== bench_cp on CUDA (NCCL worlds: $worlds)"
timeout 110 "$PY" benchmarks/bench_cp.py --device cuda --worlds "$worlds" --repeats 5 \
  --tokens 65536 --hidden 4096
