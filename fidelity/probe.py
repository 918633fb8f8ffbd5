"""Hand-picked layouts for rules the generated corpus does not reach, run through each
installed release and judged by meshsat on that release's pack (not part of `make test`).

    PYTHONPATH=. python -m fidelity.probe 0.5.19 0.5.23 0.5.18 0.4.6.post5

The generator (`generate.py`) never sets the MoE runner, the DeepEP mode or a chunked prefill
small enough for pplx, so the rules about them (FlashInfer/pplx/DeepEP v2 runners, the pplx
dispatch budget, 0.4's DeepEP auto mode, flag choices) are confirmed here against the real
release instead. A layout that uses a field the release lacks is skipped. Prints one line
per layout and the agreement count; exits 1 on any disagreement.
"""

from __future__ import annotations

import sys
from typing import Any

from fidelity.compare import judge
from fidelity.generate import spell
from fidelity.record import dump_flags, resolve

DP4 = {"tp_size": 4, "enable_dp_attention": True, "dp_size": 4}
DP2 = {"tp_size": 4, "enable_dp_attention": True, "dp_size": 2}
PROBES: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "qwen3_moe",
        {**DP4, "moe_a2a_backend": "flashinfer", "moe_runner_backend": "flashinfer_cutlass"},
    ),
    (
        "qwen3_moe",
        {**DP4, "moe_a2a_backend": "flashinfer", "moe_runner_backend": "flashinfer_trtllm"},
    ),
    ("qwen3_moe", {**DP4, "moe_a2a_backend": "flashinfer", "moe_runner_backend": "deep_gemm"}),
    ("qwen3_moe", {**DP2, "moe_a2a_backend": "pplx", "chunked_prefill_size": 128}),
    ("qwen3_moe", {**DP2, "moe_a2a_backend": "pplx", "chunked_prefill_size": 512}),
    ("qwen3_moe", {**DP2, "moe_a2a_backend": "pplx", "chunked_prefill_size": 256}),
    ("qwen3_moe", {**DP2, "moe_a2a_backend": "pplx", "disaggregation_mode": "decode"}),
    (
        "qwen3_moe",
        {
            **DP2,
            "moe_a2a_backend": "pplx",
            "chunked_prefill_size": 128,
            "moe_runner_backend": "triton",
        },
    ),
    ("qwen3_moe", {"tp_size": 4, "moe_a2a_backend": "deepep_v2", "moe_runner_backend": "triton"}),
    ("qwen3_moe", {"tp_size": 4, "moe_a2a_backend": "deepep_v2"}),
    ("deepseek_v3", {**DP4, "moe_a2a_backend": "deepep", "deepep_mode": "low_latency"}),
    ("deepseek_v3", {**DP4, "moe_a2a_backend": "deepep"}),
    ("deepseek_v3", {**DP4, "moe_a2a_backend": "deepep", "deepep_mode": "normal"}),
    ("llama", {"tp_size": 4, "enable_two_batch_overlap": True}),
    ("llama", {**DP2, "enable_two_batch_overlap": True}),
    ("llama", {"tp_size": 2, "pp_size": 2, "speculative_algorithm": "EAGLE"}),
    ("llama", {"tp_size": 2, "moe_dense_tp_size": 2}),
    ("llama", {"tp_size": 4, "enable_dp_attention": True, "dp_size": 1}),
    ("llama", {"tp_size": 4, "enable_dp_attention": True, "dp_size": 1, "enable_dp_lm_head": True}),
    ("qwen3_moe", {"tp_size": 4, "moe_runner_backend": "intel_xpu"}),
    ("qwen3_moe", {"tp_size": 4, "moe_runner_backend": "lora_triton"}),
    ("qwen3_moe", {"tp_size": 4, "moe_a2a_backend": "deepep", "moe_runner_backend": "triton"}),
)


def probe(version: str) -> tuple[int, int]:
    """(agreeing, judged) for one release; prints a line per layout."""
    fields = frozenset(dump_flags(version)["fields"])
    items, meta = [], []
    for i, (model, cfg) in enumerate(PROBES):
        args, env, dropped = spell(version, cfg, fields)
        if not dropped:
            items.append({"id": i, "model": model, "args": args, "env": env})
            meta.append((model, cfg, args, env))
    out = resolve(version, items)
    agree = 0
    for (model, cfg, args, env), v in zip(meta, out, strict=True):
        rec = {"id": v["id"], "model": model, "config": cfg, "args": None if args == cfg else args}
        rec.update(env=env, accepted=v["accepted"], error=v["error"], step=v["step"])
        rec.update(site=v["site"], launch_error=v.get("launch_error"))
        rec.update(launch_site=v.get("launch_site"))
        if v["accepted"]:
            rec["resolved"] = v["resolved"]
        o = judge(rec, version)
        agree += not o.disagreements
        said = "accepts" if v["accepted"] else f"{v['step']}: {(v['error'] or '')[:60]}"
        if v.get("launch_error"):
            said += f" (launch: {v['launch_error'][:50]})"
        print(f"{version} #{v['id']:<2} {'ok ' if not o.disagreements else 'BAD'} SGLang {said}")
        print(
            f"      meshsat {o.errors or 'valid'} launch {o.launch_errors or '-'} {o.disagreements}"
        )
    print(f"{version}: {agree} / {len(items)} agree")
    return agree, len(items)


if __name__ == "__main__":
    results = [probe(v) for v in sys.argv[1:]]
    sys.exit(0 if all(a == n for a, n in results) else 1)
