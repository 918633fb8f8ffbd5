"""The weight count follows the checkpoint (issue 24): per-module precision matched by name
as SGLang 0.5.23's loaders match (`sglang/srt/layers/quantization/utils.py`
`is_layer_skipped`, `compressed_tensors/utils.py`), per-release defaults read from each
release's source, the hybrid SWA pool, and the logged KV cells of real start-ups."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.memory import MemoryModel, Parallel, load_facts
from meshsat.solver.memory.fraction import default_mem_fraction_static
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.kv import kv_bytes_per_token
from meshsat.solver.memory.models import CATALOGUE
from meshsat.solver.memory.precision import MXFP4
from tests.cli_helpers import run_cli

FP8_BLOCK = 1 + 4 / 128**2
LOGS = json.loads((Path(__file__).parents[1] / "benchmarks" / "memory_logs.json").read_text())


def _with(repo: str, **kw: Any) -> dict[str, Any]:
    return {**CATALOGUE[repo], **kw}


def _fp8(*ignored: str) -> dict[str, Any]:
    return {
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
        "modules_to_not_convert": list(ignored),
    }


def test_a_listed_norm_leaves_the_attention_projections_quantized() -> None:
    # Qwen3-30B-A3B-FP8's list names norms and routers: no projection is skipped.
    q = load_facts(
        _with(
            "Qwen/Qwen3-30B-A3B",
            quantization_config=_fp8(
                "lm_head", "model.layers.0.post_attention_layernorm", "model.layers.0.mlp.gate"
            ),
        )
    ).quant
    assert q.attention == FP8_BLOCK and q.experts == FP8_BLOCK


def test_a_listed_module_path_skips_that_layer_only() -> None:
    f = load_facts(
        _with("Qwen/Qwen3-30B-A3B", quantization_config=_fp8("model.layers.0.self_attn"))
    )
    # one of 48 layers' attention in bf16, weighted by parameters (all layers alike)
    assert f.quant.attention == pytest.approx((47 * FP8_BLOCK + 2.0) / 48)
    assert f.quant.experts == FP8_BLOCK


def test_mlp_gate_does_not_match_gate_up_proj() -> None:
    # `mlp.gate` is an MoE router name; a dense model's `mlp.gate_up_proj` is not under it.
    q = load_facts(_with("Qwen/Qwen3-8B", quantization_config=_fp8("mlp.gate"))).quant
    assert q.dense_mlp == FP8_BLOCK


def test_a_fused_module_is_skipped_when_all_its_shards_are() -> None:
    shards = [
        f"model.layers.{i}.self_attn.{p}" for i in range(36) for p in ("q_proj", "k_proj", "v_proj")
    ]
    f = load_facts(_with("Qwen/Qwen3-8B", quantization_config=_fp8(*shards)))
    o = f.num_heads * f.v_head_dim * f.hidden_size
    qkv = f.attn_sharded_params() - o
    assert f.quant.attention == pytest.approx((qkv * 2.0 + o * FP8_BLOCK) / (qkv + o))


def test_expert_dtype_fp4_prices_the_experts_as_mxfp4() -> None:
    q = load_facts(_with("deepseek-ai/DeepSeek-V3", expert_dtype="fp4")).quant
    assert q.experts == MXFP4 and q.attention == FP8_BLOCK and q.shared_bytes == FP8_BLOCK


def test_compressed_tensors_int4_experts_with_an_ignore_list() -> None:
    qc = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32},
            }
        },
        "ignore": [
            "lm_head",
            "re:.*self_attn.*",
            "re:.*shared_experts.*",
            r"re:.*mlp\.(gate|up|gate_up|down)_proj.*",
        ],
    }
    q = load_facts(_with("moonshotai/Kimi-K2-Instruct", quantization_config=qc)).quant
    assert q.experts == 0.5 + 2 / 32
    assert q.attention == q.attention_whole_bytes == q.shared_bytes == q.dense_mlp == 2.0


def test_modelopt_globs_exclude_attention_only() -> None:
    qc = {
        "quant_method": "modelopt",
        "quant_algo": "NVFP4",
        "exclude_modules": ["lm_head", "model.layers.*.self_attn*"],
    }
    q = load_facts(_with("deepseek-ai/DeepSeek-R1", quantization_config=qc)).quant
    assert q.attention == 2.0 and q.experts == 0.5 + 1 / 16


# ---- per-release defaults ------------------------------------------------------------


def test_release_defaults_differ_where_the_sources_do() -> None:
    h200, rtx = gpu("H200").memory_mib, gpu("RTX4090").memory_mib
    # 0.4.6.post5: 0.88 above 80 GiB, raised on GPUs over 96 GiB and capped at gpu - 18 GiB.
    assert default_mem_fraction_static(h200, tp=8, pack="0.4.6.post5") == pytest.approx(
        (143771 - 18 * 1024) / 143771
    )
    assert default_mem_fraction_static(81559, tp=8, pack="0.4.6.post5") == 0.81
    # 0.5.19's 20-35 GiB band: chunked 2048, graphs to 24 -> 512 + 3072 + 128 + 48 MiB.
    assert default_mem_fraction_static(rtx, tp=1, pack="0.5.19") == round(
        (24564 - (512 + 2048 * 1.5 + 1024 / 8 + 24 * 2)) / 24564, 3
    )
    assert default_mem_fraction_static(rtx, tp=1, pack="0.5.23") == round(
        (24564 - (512 + 4096 * 1.5 + 1024 / 8 + 48 * 2)) / 24564, 3
    )


def test_dsa_kv_auto_is_fp8_on_blackwell_as_logged() -> None:
    rec = next(r for r in LOGS["records"] if r["id"] == "dsv32-tp8-dp8-b200")
    logged_cell = rec["logged"]["kv_gb"] * 2**30 / rec["logged"]["tokens"]
    p = Parallel(tp=8, attn_tp=1, attn_dp=8, dp_attention=True, moe_tp=8)
    on_b200 = MemoryModel("deepseek-ai/DeepSeek-V3.2-Exp", "B200")  # kv_cache_dtype auto
    assert on_b200.kv_cache_dtype == "fp8_e4m3"
    # The log (sglang PR 11309) predates `trtllm` as Blackwell's FP8 DSA default: it ran
    # the scaled layout (656-byte latent), which flashmla_kv still reads. From 0.5.18 the
    # default backends are `trtllm` and the latent is the raw 576-byte row
    # (`calculate_mla_kv_cache_dim`; tests/test_memory_dsa_layout.py).
    as_logged = MemoryModel(
        "deepseek-ai/DeepSeek-V3.2-Exp",
        "B200",
        dsa_prefill_backend="flashmla_kv",
        dsa_decode_backend="flashmla_kv",
    )
    assert as_logged.of(p).kv_bytes_per_token == pytest.approx(logged_cell, rel=2e-3)
    assert on_b200.of(p).kv_bytes_per_token == (576 + 132) * 61
    assert MemoryModel("deepseek-ai/DeepSeek-V3.2-Exp", "H200").kv_cache_dtype == "bfloat16"
    assert (
        MemoryModel("deepseek-ai/DeepSeek-V3.2-Exp", "B200", pack="0.4.6.post5").kv_cache_dtype
        is None
    )


def test_hybrid_swa_pool_charges_sliding_layers_at_the_ratio() -> None:
    f = load_facts("openai/gpt-oss-120b")
    full = kv_bytes_per_token(f, Parallel(), 0)
    hybrid = MemoryModel(f, "H200").of(Parallel()).kv_bytes_per_token
    old = MemoryModel(f, "H200", pack="0.4.6.post5").of(Parallel()).kv_bytes_per_token
    half = full / 2  # 18 of 36 layers slide
    assert old == full and hybrid == pytest.approx(half + 0.8 * half)
    assert MemoryModel(f, "H200", swa_full_tokens_ratio=0.5).of(Parallel()).kv_bytes_per_token == (
        pytest.approx(half * 1.5)
    )


# ---- the CLI -----------------------------------------------------------------------------


def test_fraction_and_free_memory_reach_the_figures(capsys: pytest.CaptureFixture[str]) -> None:
    m = "meta-llama/Llama-3.1-8B-Instruct"
    r = run_cli(
        capsys, "validate", "--model", m, "--gpu", "H100", "--set", "tp_size=1",
        "--mem-fraction-static", "0.88", "--free-memory", "78.81GiB", "--json",
    )  # fmt: skip
    data = json.loads(r.out)["memory"]
    want = MemoryModel(
        m, "H100", mem_fraction_static=0.88, context_gib=gpu("H100").memory_gib - 78.81
    )
    assert data["kv_tokens"] == want.of(Parallel()).kv_tokens
    assert data["mem_fraction_static"] == 0.88 and data["pre_load_gib"] == pytest.approx(78.81)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--mem-fraction-static", "1.5"), "must be in (0, 1)"),
        (("--free-memory", "200GiB"), "more than"),
    ],
)
def test_bad_sizing_input_is_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], says: str
) -> None:
    r = run_cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "1", *args)
    assert r.code == 2 and says in r.err and r.err.count("\n") == 1


def test_the_checkpoint_size_is_reported_beside_a_local_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(dict(CATALOGUE["Qwen/Qwen3-8B"])))
    size = 16_381_470_720
    index = {"metadata": {"total_size": size}, "weight_map": {}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    r = run_cli(
        capsys,
        "validate",
        "--model",
        str(tmp_path),
        "--gpu",
        "H100",
        "--set",
        "tp_size=1",
        "--json",
    )
    mem = json.loads(r.out)["memory"]
    assert mem["checkpoint_gib"] == size / 2**30
    # the size given is 2 bytes per parameter of the count (8.19B): the two agree
    assert mem["model_weights_gib"] == pytest.approx(size / 2**30, rel=0.01)


def test_the_default_fraction_holds_the_prefill_graph_reserve_as_logged() -> None:
    # 0.5.23-era log, defaults: the pool and the weights take (29.15 + 35.98) of 78.48 GB.
    rec = next(r for r in LOGS["records"] if r["id"] == "qwen3-30b-a3b-fp8-tp1-h100")
    logged = rec["logged"]
    implied = (logged["weights_gb"] + logged["kv_gb"]) / rec["pre_load_gib"]
    config = {**CATALOGUE[rec["model"]], **rec["config_overrides"]}
    fraction = MemoryModel(config, "H100").of(Parallel()).mem_fraction_static
    assert fraction == pytest.approx(implied, abs=1e-3)
    # without the prefill-graph reserve (0.5.23 on ROCm, or pp > 1) the default is higher
    assert MemoryModel(config, "H100").default_fraction(1, pp=2) > fraction


@pytest.mark.parametrize("repo", sorted(CATALOGUE))
def test_the_named_modules_hold_every_linear_parameter(repo: str) -> None:
    """The module list the precision is matched over covers each component's parameters
    exactly as the facts count them (so a weighted mean is a mean over all of them)."""
    from meshsat.solver.memory.modules import model_modules

    f = load_facts(repo)
    kind = str(CATALOGUE[repo].get("text_config", CATALOGUE[repo]).get("model_type", ""))
    total: dict[str, int] = {}
    for m in model_modules(f, kind):
        total[m.component] = total.get(m.component, 0) + m.params
    L, M, G = f.num_layers, f.num_moe_layers, f.num_linear_layers
    assert total.get("attention", 0) == (L - G) * f.attn_sharded_params()
    assert total.get("attention_whole", 0) == (L - G) * f.attn_replicated_params()
    assert total.get("linear_attention", 0) == G * f.linear_attn_sharded_params()
    assert total.get("dense_mlp", 0) == (L - M) * f.dense_mlp_params()
    assert total.get("experts", 0) == M * f.num_experts * f.expert_params()
    assert total.get("shared", 0) == M * f.shared_expert_params()


def test_moonvit_shards_only_its_attention() -> None:
    # SGLang's kimi_k25.py: VisionAttention over TP; MLP2 and the projector ReplicatedLinear.
    cfg = _with("moonshotai/Kimi-K2-Instruct", model_type="kimi_k25", vision_config={})
    f = load_facts(cfg)
    v = f.vision
    d, i = 1152, 4304
    assert v.attn_sharded_params() == 27 * (4 * d * d + 3 * d)
    assert v.mlp_sharded_params() == 0
    assert v.replicated_params() > 27 * 2 * d * i  # the MLPs are whole on every rank
    from meshsat.solver.memory.weights import WeightModel

    wm = WeightModel(f)
    at = {tp: wm.stage(Parallel(tp=tp, attn_tp=tp, moe_tp=tp), 0).vision for tp in (1, 8)}
    assert at[1] - at[8] == pytest.approx(v.attn_sharded_params() * 2 * (1 - 1 / 8))


def test_a_checkpoint_with_fp8_kv_quantization_gets_an_fp8_pool_from_0_5_18() -> None:
    qc = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
    cfg = _with("meta-llama/Llama-3.1-8B-Instruct", quantization_config=qc)
    new, old = MemoryModel(cfg, "H100"), MemoryModel(cfg, "H100", pack="0.4.6.post5")
    assert new.kv_cache_dtype == "fp8_e4m3" and old.kv_cache_dtype is None
    assert new.of(Parallel()).kv_bytes_per_token * 2 == old.of(Parallel()).kv_bytes_per_token


def test_mimo_v2_style_hybrid_pool_uses_the_sliding_layers_own_shapes() -> None:
    # MiMo-V2-Flash's published shapes: 48 layers, full layers every 6th from 0 with 4 KV
    # heads, sliding layers with 8; K 192 and V 128 wide. SGLang's HybridSWAPoolConfigurator:
    # cell = full_layers·full + ratio·swa_layers·swa.
    pattern = [0 if i % 6 == 0 else 1 for i in range(48)]
    cfg = {
        "architectures": ["MiMoV2FlashForCausalLM"],
        "model_type": "mimo_v2_flash",
        "hidden_size": 4096,
        "num_hidden_layers": 48,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "swa_num_key_value_heads": 8,
        "head_dim": 192,
        "v_head_dim": 128,
        "swa_head_dim": 192,
        "swa_v_head_dim": 128,
        "hybrid_layer_pattern": pattern,
        "n_routed_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048,
        "intermediate_size": 16384,
        "moe_layer_freq": [0] + [1] * 47,
        "vocab_size": 152576,
    }
    f = load_facts(cfg)
    assert f.num_moe_layers == 47 and len(f.swa_layer_ids) == 40
    for tp in (1, 4, 8):
        cell = MemoryModel(f, "H200").of(Parallel(tp=tp, attn_tp=tp, moe_tp=tp))
        full = max(1, 4 // tp) * (192 + 128) * 2
        swa = max(1, 8 // tp) * (192 + 128) * 2
        assert cell.kv_bytes_per_token == pytest.approx(8 * full + 0.8 * 40 * swa)
