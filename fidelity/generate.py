"""Generate layouts in meshsat's field vocabulary and spell them for one SGLang release.

Why this shape: the fixtures must reach every rule of the catalogue and still hold a good
share of valid layouts (at least 20 %). Uniform sampling over ~50 fields gives almost no
valid layout, so each config starts from a *family* (plain TP, DP attention, prefill CP,
decode CP, expert parallel, EPLB, DWDP, elastic EP) that builds a mostly coherent layout
around the rules of that area, and then a random number of single-field perturbations
(drawn from every field's domain) pushes it across rule boundaries. The generator knows
field names and domains only, never meshsat's rules, so it cannot bias the comparison
towards meshsat's own verdicts. Rules this random corpus does not reach get records of
their own, appended after it (`targets.py`).

Translation (`spell`) maps meshsat's vocabulary onto a release's ServerArgs fields, the
way a user of that release would write the same layout: for 0.5.23 `--enable-dp-attention
--dp-size N` becomes `--attn-dp-size N` and the legacy CP flags become `--enable-prefill-cp
--cp-strategy`; for 0.4.x the all-to-all backend becomes `--enable-deepep-moe`. Fields a
release does not have are dropped and listed, so every record says what was asked of it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

Config = dict[str, Any]

MODELS = ("llama", "deepseek_v3", "qwen3_moe")
SIZES = (1, 1, 2, 2, 4, 4, 8, 8, 16, 3, 6, 0)

# Every field's domain, for the perturbations.
DOMAINS: dict[str, tuple[Any, ...]] = {
    "tp_size": (1, 2, 4, 8, 16, 3, 6, 12),
    "pp_size": (1, 1, 2, 4, 3),
    "dp_size": (1, 2, 4, 8, 3, 16),
    "nnodes": (1, 1, 2, 4, 3),
    "node_rank": (0, 0, 1, 2),
    "enable_dp_attention": (False, True),
    "enable_dp_lm_head": (False, True),
    "attn_cp_size": (1, 2, 4, 8, 3),
    "enable_prefill_cp": (False, True),
    "cp_strategy": (None, "zigzag", "interleave"),
    "enable_prefill_context_parallel": (False, True),
    "prefill_cp_mode": ("in-seq-split", "round-robin-split"),
    "enable_dsa_prefill_context_parallel": (False, True),
    "dsa_prefill_cp_mode": ("in-seq-split", "round-robin-split"),
    "attention_backend": (None, "fa3", "flashinfer", "triton", "torch_native", "dsa"),
    "enable_aiter_allreduce_fusion": (False, True),
    "chunked_prefill_size": (None, 4096, 8192, 1000),
    "mm_enable_dp_encoder": (False, True),
    "language_only": (False, True),
    "dcp_size": (1, 2, 4, 8, 3),
    "dcp_comm_backend": (None, "ag_rs", "a2a", "fi_a2a"),
    "dcp_replicate_q_proj": (None, False, True),
    "ep_size": (1, 2, 4, 8, 16, 3),
    "moe_dp_size": (1, 2, 4, 8),
    "moe_dense_tp_size": (None, 1, 2),
    "moe_a2a_backend": (
        "none",
        "deepep",
        "mooncake",
        "nixl",
        "mori",
        "flashinfer",
        "pplx",
        "deepep_v2",
        "megamoe",
        "ascend_tp",
        "flashinfer_megamoe",
    ),
    "moe_runner_backend": ("auto", "deep_gemm", "flashinfer_cutlass", "flashinfer_cutedsl"),
    "quantization": (None, "fp8", "mxfp8", "modelopt_fp4"),
    "deepep_mode": ("auto", "normal", "low_latency"),
    "enable_eplb": (False, True),
    "eplb_algorithm": ("auto", "deepseek", "elasticity_aware"),
    "ep_dispatch_algorithm": (None, "static", "dynamic", "fake", "lp"),
    "init_expert_location": ("trivial", "/tmp/expert_location.json"),
    "expert_distribution_recorder_mode": (None, "stat", "per_pass", "per_token"),
    "expert_distribution_recorder_buffer_size": (None, 100, 1000),
    "eplb_rebalance_num_iterations": (None, 500),
    "expert_balancedness_report_mode": ("off", "server_log", "prometheus"),
    "dwdp_size": (1, 2, 4, 8),
    "disaggregation_mode": ("null", "prefill", "decode"),
    "speculative_algorithm": (None, "EAGLE", "NEXTN"),
    "enable_two_batch_overlap": (False, True),
    "elastic_ep_backend": (None, "mooncake", "nixl", "none"),
    "cuda_graph_backend_decode": (None, "full", "breakable", "disabled"),
    "cuda_graph_backend_prefill": (None, "full", "disabled"),
    "elastic_ep_rejoin": (False, True),
    "ep_join_mode": (None, "scale", "recover"),
    "ep_join_rank_offset": (0, 8),
    "max_ep_size": (None, 16, 8),
    "elastic_ep_initial_size": (None, 8, 4),
    "tokenizer_worker_num": (1, 2),
    "use_ray": (False, True),
    "load_balance_method": ("auto", "round_robin", "total_requests"),
    "disable_cuda_graph": (False, True),
    "env_enable_cp_v2": (None, False, True),
    "env_enable_eplb_balancedness_metric": (False, True),
}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] or [1]


def _plain(r: random.Random) -> Config:
    return {"tp_size": r.choice((1, 2, 4, 8)), "pp_size": r.choice((1, 1, 2))}


def _dp_attention(r: random.Random) -> Config:
    tp = r.choice((2, 4, 8, 16))
    c: Config = {"tp_size": tp, "enable_dp_attention": True, "dp_size": r.choice(_divisors(tp))}
    if r.random() < 0.4:
        c["enable_dp_lm_head"] = True
    if tp == 16 and r.random() < 0.6:
        c["nnodes"] = 2
    return c


def _prefill_cp(r: random.Random) -> Config:
    tp = r.choice((2, 4, 8))
    c: Config = {"tp_size": tp, "attn_cp_size": r.choice(_divisors(tp))}
    style = r.random()
    if style < 0.6:
        c.update(enable_prefill_cp=True, cp_strategy=r.choice(("zigzag", "interleave", None)))
    elif style < 0.8:
        c.update(
            enable_prefill_context_parallel=True,
            prefill_cp_mode=r.choice(DOMAINS["prefill_cp_mode"]),
        )
    else:
        c.update(
            enable_dsa_prefill_context_parallel=True,
            dsa_prefill_cp_mode=r.choice(DOMAINS["dsa_prefill_cp_mode"]),
        )
    if r.random() < 0.3:
        c.update(enable_dp_attention=True, dp_size=r.choice(_divisors(tp)))
    if r.random() < 0.3:
        c["moe_dp_size"] = r.choice(_divisors(tp))
        c["ep_size"] = tp // c["moe_dp_size"]
    return c


def _decode_cp(r: random.Random) -> Config:
    tp = r.choice((2, 4, 8))
    c: Config = {"tp_size": tp, "dcp_size": r.choice(_divisors(tp))}
    c["dcp_comm_backend"] = r.choice((None, None, "ag_rs", "a2a", "a2a", "fi_a2a"))
    if r.random() < 0.4:
        c["dcp_replicate_q_proj"] = True
    return c


def _expert(r: random.Random) -> Config:
    tp = r.choice((2, 4, 8, 16))
    c: Config = {"tp_size": tp}
    moe_dp = r.choice(_divisors(tp)) if r.random() < 0.3 else 1
    c["moe_dp_size"] = moe_dp
    c["ep_size"] = r.choice(_divisors(tp // moe_dp))
    c["moe_a2a_backend"] = r.choice(("none", "none", "deepep", "mooncake", "flashinfer", "nixl"))
    if r.random() < 0.4:
        c.update(enable_dp_attention=True, dp_size=r.choice(_divisors(tp)))
    if r.random() < 0.2:
        c["moe_dense_tp_size"] = r.choice((1, 2))
    return c


def _eplb(r: random.Random) -> Config:
    c = _expert(r)
    c["enable_eplb"] = r.random() < 0.8
    for f in ("ep_dispatch_algorithm", "expert_distribution_recorder_mode", "init_expert_location"):
        if r.random() < 0.4:
            c[f] = r.choice(DOMAINS[f])
    if r.random() < 0.3:
        c["expert_distribution_recorder_buffer_size"] = r.choice((100, 1000))
    if r.random() < 0.3:
        c["eplb_rebalance_num_iterations"] = 500
    if r.random() < 0.3:
        c["expert_balancedness_report_mode"] = r.choice(("server_log", "prometheus"))
    return c


def _dwdp(r: random.Random) -> Config:
    tp = r.choice((2, 4, 8))
    c: Config = {"tp_size": tp, "dwdp_size": r.choice((tp, tp, 2, 4))}
    c["disaggregation_mode"] = r.choice(("null", "prefill", "prefill", "decode"))
    return c


def _elastic(r: random.Random) -> Config:
    tp = r.choice((4, 8))
    c: Config = {"tp_size": tp, "elastic_ep_backend": r.choice(("mooncake", "nixl", None))}
    c["ep_size"] = r.choice((tp, tp, 1))
    if r.random() < 0.5:
        c["max_ep_size"] = r.choice((16, tp))
    if r.random() < 0.4:
        c["ep_join_mode"] = r.choice(("scale", "recover"))
    if r.random() < 0.3:
        c["elastic_ep_rejoin"] = True
    if r.random() < 0.3:
        c["enable_eplb"] = True
    if r.random() < 0.4:
        c.update(
            enable_dp_attention=True,
            dp_size=tp,
            enable_dp_lm_head=True,
            moe_a2a_backend="nixl",
            load_balance_method="round_robin",
            disable_cuda_graph=True,
        )
    if r.random() < 0.3:
        c["node_rank"] = 1
        c["ep_join_rank_offset"] = r.choice((0, 8))
        c["elastic_ep_initial_size"] = r.choice((None, 4, 8))
    return c


FAMILIES: tuple[tuple[str, float, Callable[[random.Random], Config]], ...] = (
    ("plain", 0.12, _plain),
    ("dp_attention", 0.16, _dp_attention),
    ("prefill_cp", 0.2, _prefill_cp),
    ("decode_cp", 0.1, _decode_cp),
    ("expert", 0.14, _expert),
    ("eplb", 0.1, _eplb),
    ("dwdp", 0.08, _dwdp),
    ("elastic", 0.1, _elastic),
)


def sample(r: random.Random) -> tuple[str, Config]:
    """One (model, config) pair; the config lists only the fields it sets."""
    model = r.choices(MODELS, weights=(0.4, 0.35, 0.25))[0]
    names = [f[0] for f in FAMILIES]
    fam = r.choices(FAMILIES, weights=[f[1] for f in FAMILIES])[0]
    assert fam[0] in names
    c = fam[2](r)
    # 0 perturbations keeps the family's coherent layout: the share of valid configs.
    for _ in range(r.choices((0, 1, 2, 3), weights=(0.45, 0.3, 0.15, 0.1))[0]):
        field = r.choice(sorted(DOMAINS))
        c[field] = r.choice(DOMAINS[field])
    return model, c


def configs(n: int, seed: int = 0) -> Iterator[tuple[str, Config]]:
    r = random.Random(seed)
    for _ in range(n):
        yield sample(r)


LEGACY_MODE = {"in-seq-split": "zigzag", "round-robin-split": "interleave"}


#: The adapter a record's --lora-paths names (meshsat's `lora_paths`: any adapter at all).
LORA_ADAPTER = "meshsat=/tmp/meshsat-lora"
#: The modules a record's --lora-target-modules names (meshsat's `lora_target_modules`: any).
LORA_MODULES = ["q_proj", "v_proj"]
#: The draft adapter a record's --uno-lora-path gives (meshsat's `uno_lora_path`: one given).
UNO_LORA = "/tmp/meshsat-uno-lora"


def spell(
    release: str, config: Config, fields: frozenset[str], *, keep_absent: bool = False
) -> tuple[Config, Config, list[str]]:
    """(ServerArgs kwargs, environment variables, dropped meshsat fields) for one release.

    `keep_absent` passes fields the release has no flag for as flags, which its parser
    refuses (the targeted records of `FLAG-ABSENT-*` rules); otherwise they are dropped."""
    # None is "flag left out": a command line cannot pass it (and a release whose field
    # default is not None, 0.5.19's --dcp-comm-backend ag_rs, would read None as a value).
    c = {k: v for k, v in config.items() if v is not None}
    env: Config = {}
    v = c.pop("env_enable_cp_v2", None)
    if v is not None:
        env["SGLANG_ENABLE_CP_V2"] = "1" if v else "0"
    if c.pop("env_enable_eplb_balancedness_metric", False):
        env["SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC"] = "1"
    if c.pop("lora_paths", False):
        # meshsat reads only whether --lora-paths names an adapter: one, by name (resolution
        # reads no adapter file).
        c["lora_paths"] = [LORA_ADAPTER]
    if c.pop("lora_target_modules", False):
        c["lora_target_modules"] = list(LORA_MODULES)
    if c.pop("uno_lora_path", False):
        c["uno_lora_path"] = UNO_LORA
    major = tuple(int(x) for x in release.split(".")[:3] if x.isdigit())
    if "attn_dp_size" in fields and c.get("enable_dp_attention"):
        # 0.5.23: `--attn-dp-size N` is what `--enable-dp-attention --dp-size N` became.
        c["attn_dp_size"] = c.pop("dp_size", 1)
        c.pop("enable_dp_attention")
    elif "attn_dp_size" in fields:
        c.pop("enable_dp_attention", None)
    if "enable_prefill_context_parallel" not in fields and not keep_absent:
        # The legacy CP flags are gone: spell them as their replacement.
        # Each legacy mode flag has its own default (as in the seed's flag table).
        for flag, mode, default in (
            ("enable_prefill_context_parallel", "prefill_cp_mode", "in-seq-split"),
            ("enable_dsa_prefill_context_parallel", "dsa_prefill_cp_mode", "round-robin-split"),
        ):
            m = c.pop(mode, None)
            if c.pop(flag, False):
                c["enable_prefill_cp"] = True
                if c.get("cp_strategy") is None:
                    c["cp_strategy"] = LEGACY_MODE[m or default]
    if major < (0, 5) and c.get("load_balance_method") == "auto":
        # meshsat's "auto" is its unset value (the 0.4 pack says so): 0.4's parser has no
        # such choice, and a user of 0.4 leaves the flag out for its round_robin default.
        del c["load_balance_method"]
    if major < (0, 5) and "moe_a2a_backend" not in fields:
        backend = c.pop("moe_a2a_backend", "none")
        if backend == "deepep":
            c["enable_deepep_moe"] = True
        elif c.get("ep_size", 1) > 1:
            c["enable_ep_moe"] = True
    for tool in ("platform", "gpus_per_node", "gpu_sm"):
        c.pop(tool, None)
    dropped = [] if keep_absent else sorted(k for k in c if k not in fields)
    for k in dropped:
        del c[k]
    return c, env, dropped


def native(n: int, fields: frozenset[str], seed: int = 1) -> Iterator[tuple[str, Config]]:
    """Layouts meshsat's vocabulary cannot spell, in the release's own fields.

    From 0.5.23 on, `dp_size` (independent replicas) and `attn_dp_size` (DP attention
    inside the TP group) are separate, so "replicas *and* DP attention" is a layout the
    seed's single `dp_size` cannot express. These records have no meshsat-vocabulary
    config; the replay judges them in the release's own spelling (`args`, which the 0.5.23
    pack reads through `--attn-dp-size`), so the release's rules about the pair are measured.
    """
    if "attn_dp_size" not in fields:
        return
    r = random.Random(seed)
    for _ in range(n):
        model = r.choices(MODELS, weights=(0.4, 0.35, 0.25))[0]
        tp = r.choice((2, 4, 8, 16))
        c: Config = {"tp_size": tp}
        c["attn_dp_size"] = r.choice(_divisors(tp))
        c["dp_size"] = r.choice((1, 1, 2, 3, 4))
        if r.random() < 0.4:
            c["attn_cp_size"] = r.choice(_divisors(tp))
            c["enable_prefill_cp"] = True
            c["cp_strategy"] = r.choice(("zigzag", "interleave"))
        if r.random() < 0.4:
            c["ep_size"] = r.choice(_divisors(tp))
            c["moe_a2a_backend"] = r.choice(("none", "deepep", "flashinfer"))
        if r.random() < 0.3:
            c["enable_dp_lm_head"] = True
        if r.random() < 0.2:
            c["dcp_size"] = r.choice((1, 2))
        if r.random() < 0.2:
            c["nnodes"] = 2
        yield model, c


def sweep(table: dict[str, Any], seed: int) -> Iterator[tuple[str, Config]]:
    """Every choice of every flag in the release's own table that is a meshsat field, each
    given explicitly (the default too, and every string spelling such as "none"), on a
    layout of a random family, once per model the recorder has (every family the packs
    name: dense, MLA, DSA, Qwen MoE). Generated from the release, not from examples."""
    from meshsat.solver.lang.fields import CONFIG_SPECS

    r = random.Random(seed)
    fields = set(table["fields"])
    models = [*MODELS, *(("deepseek_v32",) if "attn_dp_size" in fields else ())]
    for option in sorted(table["flags"], key=lambda o: o["dest"]):
        name = option["dest"]
        spec = CONFIG_SPECS.get(name)
        if spec is None or spec.tool_only or not option.get("field"):
            continue
        values: list[Any] = list(option["choices"] or [])
        if option["action"] in ("_StoreTrueAction", "BooleanOptionalAction"):
            values = [True, False]
        if option["default"] is not None and option["default"] not in values:
            values.append(option["default"])
        for value in values:
            for model in models:
                _, c = sample(r)
                c[name] = value
                yield model, c
