"""Record the default `mem_fraction_static` 0.5.23 resolves for launches whose flags move
its reserves (tests/fixtures/memory_reserves/launch-fractions-<version>.json;
`tests/test_memory_launch_fractions.py` replays it through `validate` and `MemoryModel`):
DeepEP all-to-all (2 GiB with decode graphs, 1 GiB more with breakable prefill graphs), PD
decode and prefill engines (each drops the other phase's graphs; decode sizes activations
from its running requests), chunked prefill off (activations from `max_prefill_tokens`),
and `--disable-cuda-graph` and its per-phase forms; and (`launch-fractions-sm100-<version>`)
a few of them again on an SM100 platform, with the attention backend the release picks
there (`trtllm_mla` for DeepSeek-V3, whose default prefill graph it then turns off after
the fraction is sized).

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
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fidelity"))
#: The recorder's own resolver (stdlib and the release only).
runner: Any = importlib.import_module("runner")
#: The recorder of the default fractions, whose loop this one runs on its own launches.
fractions: Any = importlib.import_module("memory_fractions")

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
    {"chunked_prefill_size": -1, "max_prefill_tokens": 32768},
    {"max_prefill_tokens": 32768},
    {"chunked_prefill_size": 4096},
    {"disable_cuda_graph": True},
    {"disable_decode_cuda_graph": True},
    {"disable_prefill_cuda_graph": True},
    {"disable_cuda_graph": True, "cuda_graph_backend_decode": "full"},
)


#: An SM100 (B200-class) CUDA machine, where 0.5.23 picks `trtllm_mla` for DeepSeek-V3's
#: class and then turns its default prefill CUDA graph off
#: (`disable_prefill_cuda_graph_for_deepseek_trtllm_mla`), after `handle_gpu_memory_settings`
#: sized the fraction with the graph's reserve.
SM100_CUDA: dict[str, Any] = {
    "is_sm90": False,
    "is_sm100": True,
    "is_sm100_or_sm110": True,
    "is_blackwell": True,
    "is_hopper_with_cuda_12_3": False,
    "device_sm": 100,
    "device_capability": (10, 0),
}
SM100_MODELS = ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3.2-Exp", "Qwen/Qwen3-8B")
SM100_GPUS = ("B200", "GB200")
SM100_CASES: tuple[dict[str, Any], ...] = (
    {},
    DEEPEP,
    DPA,
    {"disaggregation_mode": "prefill"},
    {"cuda_graph_backend_prefill": "breakable"},
    {"disable_prefill_cuda_graph": True},
)


def _breakable_prefill_default() -> None:
    graphs: Any = importlib.import_module("sglang.srt.model_executor.cuda_graph_config")
    graphs.default_prefill_backend = lambda: graphs.Backend.BREAKABLE


def main(version: str) -> None:
    def launches(model: str) -> list[dict[str, Any]]:
        # Qwen3-8B has no experts: no EP case for it.
        return [
            {"tp_size": 8, **case}
            for case in CASES
            if not (case.get("ep_size") and "Qwen3-8B" in model)
        ]

    fractions.record(
        version, MODELS, GPUS, launches, "launch-fractions", _breakable_prefill_default
    )
    fractions.record(
        version,
        SM100_MODELS,
        SM100_GPUS,
        lambda model: [
            {"tp_size": 8, **case}
            for case in SM100_CASES
            if not (case.get("ep_size") and "Qwen3-8B" in model)
        ],
        "launch-fractions-sm100",
        _breakable_prefill_default,
        SM100_CUDA,
        ("attention_backend",),
    )


if __name__ == "__main__":
    main(sys.argv[1])
