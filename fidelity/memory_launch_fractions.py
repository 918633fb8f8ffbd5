"""Record the default `mem_fraction_static` 0.5.23 resolves for launches whose flags move
its reserves (tests/fixtures/memory_reserves/launch-fractions-<version>.json;
`tests/test_memory_launch_fractions.py` replays it through `validate` and `MemoryModel`):
DeepEP all-to-all (2 GiB with decode graphs, 1 GiB more with breakable prefill graphs), PD
decode and prefill engines (each drops the other phase's graphs; decode sizes activations
from its running requests), chunked prefill off (activations from `max_prefill_tokens`),
and `--disable-cuda-graph` and its per-phase forms.

Runs inside the release venv, as `memory_fractions.py` does (`runner.Resolver` on its SM90
CUDA platform, the GPU's memory answered by replacing `get_device_memory_capacity`):

    PYTHONPATH=. ~/.cache/meshsat-fidelity/0.5.23/bin/python \
        fidelity/memory_launch_fractions.py 0.5.23

The prefill backend's default asks `torch.cuda.is_available()` itself, which the recorder's
platform does not answer on CPU; on a CUDA machine it answers yes and the default is the
breakable backend (`default_prefill_backend`), so the recorder answers it so here: these
records carry the prefill-graph reserve, as a launch on the GPU does.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fidelity"))
#: The recorder's own resolver (stdlib and the release only).
runner: Any = importlib.import_module("runner")
#: The recorder of the default fractions: one way of making SGLang's answers plain JSON.
_plain = importlib.import_module("memory_fractions")._plain

OUT = ROOT / "tests" / "fixtures" / "memory_reserves"
MODELS = ("deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B")
GPUS = ("H200", "H100", "B200")
DEEPEP = {"ep_size": 8, "moe_a2a_backend": "deepep"}
DPA = {"attn_dp_size": 8}
CASES: tuple[dict[str, Any], ...] = (
    {},
    DEEPEP,
    {**DEEPEP, **DPA},
    {**DEEPEP, "disaggregation_mode": "prefill"},
    {**DEEPEP, "disaggregation_mode": "decode"},
    {**DEEPEP, "disable_cuda_graph": True},
    {**DEEPEP, "disable_prefill_cuda_graph": True},
    {**DEEPEP, "disable_decode_cuda_graph": True},
    DPA,
    {**DPA, "disaggregation_mode": "prefill"},
    {"disaggregation_mode": "decode"},
    {"disaggregation_mode": "decode", "max_running_requests": 4096},
    {"disaggregation_mode": "prefill"},
    {"chunked_prefill_size": -1},
    {"chunked_prefill_size": 4096},
    {"disable_cuda_graph": True},
    {"disable_decode_cuda_graph": True},
    {"disable_prefill_cuda_graph": True},
    {"disable_cuda_graph": True, "cuda_graph_backend_decode": "full"},
)


def main(version: str) -> None:
    from meshsat.solver.memory.gpus import gpu
    from meshsat.solver.memory.models import model_config

    runner.RESOLVED_FIELDS = (*runner.RESOLVED_FIELDS, "mem_fraction_static")
    runner._prepare()
    r = runner.Resolver()
    if r.platform is None:
        raise SystemExit(f"{version} cannot be told it runs on CUDA")
    hook: Any = importlib.import_module("sglang.srt.arg_groups.memory_hook")
    graphs: Any = importlib.import_module("sglang.srt.model_executor.cuda_graph_config")
    graphs.default_prefill_backend = lambda: graphs.Backend.BREAKABLE
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            d = Path(tmp, model.replace("/", "--"))
            d.mkdir()
            (d / "config.json").write_text(json.dumps(_plain(model_config(model))))
            for name in GPUS:
                mib = gpu(name).memory_mib
                hook.get_device_memory_capacity = lambda device=None, mib=mib: float(mib)
                for case in CASES:
                    if case.get("ep_size") and "Qwen3-8B" in model:
                        continue  # no experts
                    args = {"tp_size": 8, **case}
                    out = r.resolve({"id": 0, "model": str(d), "platform": "cuda", "args": args})
                    rec: dict[str, Any] = {"model": model, "gpu": name, "args": args}
                    if out["accepted"]:
                        rec["mem_fraction_static"] = out["resolved"]["mem_fraction_static"]
                    else:
                        rec["error"] = (out["error"] or "")[:120]
                    records.append(rec)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"launch-fractions-{version}.json"
    path.write_text(json.dumps({"version": version, "records": records}, indent=0) + "\n")
    print(f"{path}: {len(records)} records")


if __name__ == "__main__":
    main(sys.argv[1])
