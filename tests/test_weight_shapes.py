"""Will it start: the weight-shape rules (docs/weight-shapes.md) against real launches,
against a second implementation of SGLang's checks, and through every feature."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from meshsat.solver import enumerate as enumerate_layouts
from meshsat.solver import fix, validate
from meshsat.solver.cli.plan_cmd import plan_layouts
from meshsat.solver.enumeration.space import DEFAULT_VARY as ENUMERATE_VARY
from meshsat.solver.errors import InputError
from meshsat.solver.lang.checkpoint_quant import read_checkpoint_quant
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.models import model_config
from tests.cli_helpers import run_cli

SHAPE_RULES = frozenset(
    {
        "QUANT-BLOCK-LINEAR-ATTN",
        "QUANT-BLOCK-LINEAR-ATTN-OUT",
        "QUANT-BLOCK-LINEAR-ATTN-BA",
        "QUANT-GROUP-DENSE-MLP",
        "QUANT-GROUP-EXPERTS",
        "WEIGHT-DENSE-MLP-SPLIT",
        "WEIGHT-SHARED-EXPERT-SPLIT",
        "WEIGHT-EXPERTS-SPLIT",
        "QUANT-BLOCK-DENSE-MLP",
        "QUANT-BLOCK-SHARED-EXPERT",
        "QUANT-BLOCK-EXPERTS",
        "QUANT-BLOCK-MLA-Q",
        "QUANT-NVFP4-DENSE-MLP",
        "WEIGHT-VISION-HEADS",
        "WEIGHT-VISION-MLP",
        "WEIGHT-VISION-TP-REDUCE",
        "WEIGHT-VISION-TP-REDUCE-CP",
    }
)
R1 = "deepseek-ai/DeepSeek-R1"
#: The catalogue's Qwen3-Next FP8 config written out, under the path the recorded model-class
#: oracle (tests/fixtures/weight_shapes/models/) names it by.
_CONFIGS = Path(__file__).parent / "fixtures" / "weight_shapes" / "configs"
QWEN3_NEXT = str(_CONFIGS / "Qwen3-Next-80B-A3B-Instruct-FP8.json")
QWEN3_NEXT_ID = "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8"
#: Catalogued from their published configs (solver/memory/bundled_models.py).
GLM5 = "zai-org/GLM-5-FP8"
STEP35 = "stepfun-ai/Step-3.5-Flash-FP8"


def shape_violations(config: dict[str, Any], model: str | dict[str, Any], version: str) -> set[str]:
    hf = model_config(model) if isinstance(model, str) else model
    report = validate(config, hf, explain=False, sglang_version=version)
    return {v.rule for v in report.violations} & SHAPE_RULES


# --- the acceptance example -----------------------------------------------------------------


def test_r1_at_tp32_is_rejected_with_sglangs_words_and_the_arithmetic() -> None:
    report = validate({"tp_size": 32, "nnodes": 4}, model_config(R1), explain=False)
    assert not report.valid
    first = report.violations[0]
    assert first.rule == "QUANT-BLOCK-DENSE-MLP"
    assert first.message == (
        "Weight output_partition_size = 576 is not divisible by weight quantization block_n = 128."
    )
    assert "18432 / 32 = 576, not a multiple of 128" in first.detail
    assert first.stage == "launch"
    experts = next(v for v in report.violations if v.rule == "QUANT-BLOCK-EXPERTS")
    assert "2048 / 32 = 64" in experts.detail


def test_fix_repairs_r1_at_tp32_into_a_layout_that_loads() -> None:
    result = fix({"tp_size": 32, "nnodes": 4}, model_config(R1), timeout_s=20).best
    assert result is not None
    again = validate(result.config, model_config(R1), explain=False)
    assert again.valid, [v.rule for v in again.violations]
    assert {"QUANT-BLOCK-DENSE-MLP", "QUANT-BLOCK-EXPERTS"} <= set(result.repairs)


def test_enumerate_r1_on_32_gpus_lists_no_layout_that_cannot_load() -> None:
    """Every listed layout passes an independent check: SGLang's arithmetic, recomputed here
    from the resolved widths (`reference_failures`), not meshsat's rules."""
    facts = ModelSpec.from_hf_config(model_config(R1))
    rows = list(enumerate_layouts(32, model=facts))
    assert rows
    tp32 = 0
    for row in rows:
        cfg = dict(row.config)
        assert reference_failures(cfg, facts, "0.5.23") == set(), cfg
        tp32 += cfg["tp_size"] == 32
    # TP 32 still loads where the MLPs are replicated and experts whole (SGLang's
    # large-scale EP recipe): the rules prune shapes, not a width.
    assert tp32 > 0


# --- real launches (public reports; docs/weight-shapes.md cites each) -------------------------

#: (model, layout, pack, loads): launches whose outcome a public report states.
LAUNCHES: tuple[tuple[str, dict[str, Any], str, bool], ...] = (
    # sgl-project/sglang#3491 and SGLang's DeepSeek docs (troubleshooting): 576 vs 128.
    (R1, {"tp_size": 32, "nnodes": 4}, "0.5.23", False),
    (R1, {"tp_size": 32, "nnodes": 4}, "0.4.6.post5", False),
    # SGLang's DeepSeek docs: TP 8 on one H200 node, TP 16 on two H100 nodes.
    (R1, {"tp_size": 8}, "0.5.23", True),
    (R1, {"tp_size": 16, "nnodes": 2}, "0.5.23", True),
    (R1, {"tp_size": 16, "nnodes": 2}, "0.4.6.post5", True),
    # SGLang's large-scale EP recipe: DP attention, DeepEP, dense MLP replicated.
    (
        R1,
        {
            "tp_size": 32,
            "dp_size": 32,
            "enable_dp_attention": True,
            "moe_a2a_backend": "deepep",
            "ep_size": 32,
            "moe_dense_tp_size": 1,
            "nnodes": 4,
        },
        "0.5.23",
        True,
    ),
    # A slime/Qwen3 RL run: 1536 / 8 = 192 failed at SGLang init, TP 4 ran.
    ("Qwen/Qwen3-235B-A22B-FP8", {"tp_size": 8}, "0.5.23", False),
    ("Qwen/Qwen3-235B-A22B-FP8", {"tp_size": 4}, "0.5.23", True),
    # EP keeps experts whole (the usual repair in those reports).
    ("Qwen/Qwen3-235B-A22B-FP8", {"tp_size": 8, "ep_size": 8}, "0.5.23", True),
    # MiniMax-M2 FP8 at TP 8: 1536 / 8 = 192 (same kernel check); EP 8 loads.
    ("MiniMaxAI/MiniMax-M2", {"tp_size": 8}, "0.5.23", False),
    ("MiniMaxAI/MiniMax-M2", {"tp_size": 8, "ep_size": 8}, "0.5.23", True),
    # flashinfer_trtllm pads the MoE shard to 128 before the check (FusedMoE.__init__).
    (
        "MiniMaxAI/MiniMax-M2",
        {"tp_size": 8, "moe_runner_backend": "flashinfer_trtllm"},
        "0.5.23",
        True,
    ),
    # Qwen3-Next FP8 (hybrid linear attention): experts and shared expert 512 / 8 = 64; the
    # shared expert is fused into the routed MoE (qwen2_moe.py can_fuse_shared_expert), so
    # EP keeps both whole.
    (QWEN3_NEXT, {"tp_size": 8}, "0.5.23", False),
    (QWEN3_NEXT, {"tp_size": 4}, "0.5.23", True),
    (QWEN3_NEXT, {"tp_size": 8, "ep_size": 8}, "0.5.23", True),
    # GatedDeltaNet's merged in_proj_qkvz over attention TP 32: key rows 2048 / 32 = 64.
    (QWEN3_NEXT, {"tp_size": 32, "ep_size": 32, "nnodes": 4}, "0.5.23", False),
    (QWEN3_NEXT, {"tp_size": 16, "ep_size": 16, "nnodes": 2}, "0.5.23", True),
    (QWEN3_NEXT, {"tp_size": 1}, "0.5.19", True),
    # sgl-project/sglang#26107: Step-3.5-Flash FP8 at TP 4 / EP 4, share_expert split by
    # the global TP, 1280 / 4 = 320; TP 2 keeps 640. 0.5.23 replicates it under DeepEP.
    (STEP35, {"tp_size": 4, "ep_size": 4}, "0.5.23", False),
    (STEP35, {"tp_size": 4, "ep_size": 4}, "0.5.19", False),
    (STEP35, {"tp_size": 2}, "0.5.23", True),
    (STEP35, {"tp_size": 4, "ep_size": 4, "moe_a2a_backend": "deepep"}, "0.5.23", True),
    # GLM-5 FP8: TP 8 (its model card's command) loads; TP 32 leaves 2048 / 32 = 64 rows.
    (GLM5, {"tp_size": 8}, "0.5.23", True),
    (GLM5, {"tp_size": 32, "nnodes": 4}, "0.5.23", False),
    # gpt-oss: MXFP4 pads; GLM-4.5-FP8: per-channel scales, TP 8 is the model card's.
    ("openai/gpt-oss-120b", {"tp_size": 8}, "0.5.23", True),
    ("zai-org/GLM-4.5-FP8", {"tp_size": 8}, "0.5.23", True),
)


@pytest.mark.parametrize(("model", "layout", "version", "loads"), LAUNCHES)
def test_real_launches(model: str, layout: dict[str, Any], version: str, loads: bool) -> None:
    assert (shape_violations(layout, model, version) == set()) == loads


def test_a_quantized_in_proj_ba_cannot_load() -> None:
    """sgl-project/sglang#19045: Qwen3.5-397B-A17B-FP8 at TP 8 refused in a
    Qwen3_5GatedDeltaNet projection, "output_partition_size = 8" (64 value heads / 8), where
    that release quantized in_proj_b / in_proj_a. The merged in_proj_ba of the packs is
    checked at every TP, so a config that does not exempt it is refused even unsplit."""
    hf = json.loads(Path(QWEN3_NEXT).read_text())
    assert shape_violations({"tp_size": 4}, hf, "0.5.23") == set()
    qc = {**hf["quantization_config"], "modules_to_not_convert": ["lm_head"]}
    quantized = {**hf, "quantization_config": qc}
    report = validate({"tp_size": 8, "ep_size": 8}, quantized, explain=False)
    ba = [v for v in report.violations if v.rule == "QUANT-BLOCK-LINEAR-ATTN-BA"]
    assert ba and "output_partition_size = 4 is not divisible" in ba[0].message
    assert shape_violations({"tp_size": 1}, quantized, "0.5.19") == {"QUANT-BLOCK-LINEAR-ATTN-BA"}


def test_the_qwen3_next_fixture_is_the_catalogue_entry() -> None:
    """The oracle's records were taken on the fixture; validate reads the catalogue. One
    config, so a fix to either cannot leave the other behind."""
    assert json.loads(Path(QWEN3_NEXT).read_text()) == json.loads(
        json.dumps(dict(model_config(QWEN3_NEXT_ID)))
    )


def test_qwen3_next_fp8_keeps_what_its_config_names_in_bf16() -> None:
    """Qwen3-Next-80B-A3B-Instruct-FP8's published `modules_to_not_convert`: every
    linear-attention layer's fused `in_proj_ba` (and no full-attention layer's), every
    layer's router and shared-expert gate, and the MTP `fc`; block 128 for the rest."""
    qc = model_config(QWEN3_NEXT_ID)["quantization_config"]
    kept = qc["modules_to_not_convert"]
    ba = {int(m.split(".")[2]) for m in kept if m.endswith("in_proj_ba")}
    assert ba == {i for i in range(48) if i % 4 != 3}
    assert all(f"model.layers.{i}.mlp.shared_expert_gate" in kept for i in range(48))
    assert "mtp.fc" in kept and "model.embed_tokens" not in kept
    facts = read_checkpoint_quant(model_config(QWEN3_NEXT_ID))
    assert (facts.block_n, facts.block_k, facts.linear_attn_ba) == (128, 128, False)
    assert facts.linear_attention and facts.experts and facts.shared_experts


@pytest.mark.parametrize(
    "model", ["zai-org/GLM-4.5-FP8", "zai-org/GLM-4.6-FP8", "zai-org/GLM-4.5-Air-FP8"]
)
def test_glm4_moe_fp8_is_per_channel_so_no_width_is_refused_for_its_blocks(model: str) -> None:
    """GLM-4.5-FP8's published config: compressed-tensors, channel-wise FP8 weights, no
    block. Every TP / EP width the heads allow leaves its shards loadable."""
    facts = read_checkpoint_quant(model_config(model))
    assert (facts.method, facts.block_n, facts.group_k, facts.not_checked) == (
        "compressed-tensors",
        None,
        None,
        None,
    )
    for tp in (1, 2, 4, 8, 16, 32):
        layout = {"tp_size": tp, "nnodes": max(1, tp // 8)}
        assert shape_violations(layout, model, "0.5.23") == set()
        assert shape_violations({**layout, "ep_size": tp}, model, "0.5.23") == set()


def test_a_bf16_checkpoint_has_no_block_to_align() -> None:
    """SGLang's own advice for the 576 error on a BF16 copy: drop quantization_config."""
    hf = dict(model_config(R1))
    del hf["quantization_config"]
    assert shape_violations({"tp_size": 32, "nnodes": 4}, hf, "0.5.23") == set()


def test_attention_checks_differ_between_releases() -> None:
    """Before 0.5.23 the FP8 linear check compares with the global TP size, so an attention
    projection split over a smaller attention TP group is not checked; 0.5.23 checks the
    layer's own group (fp8.py validate_block_quant_shapes)."""
    layout = {
        "tp_size": 128,
        "dp_size": 2,
        "enable_dp_attention": True,
        "moe_a2a_backend": "deepep",
        "ep_size": 128,
        "moe_dense_tp_size": 1,
        "nnodes": 16,
    }
    kimi = "moonshotai/Kimi-K2-Instruct"  # 64 heads: attention TP 64 leaves one per rank
    assert shape_violations(layout, kimi, "0.5.19") == set()
    assert shape_violations(layout, kimi, "0.5.23") == {"QUANT-BLOCK-MLA-Q"}


# --- a second implementation of SGLang's checks ------------------------------------------------


def reference_failures(cfg: dict[str, Any], m: ModelSpec, version: str) -> set[str]:
    """SGLang's shape checks written from its source, family by family, on resolved widths:
    fp8.py (validate_block_quant_shapes, Fp8MoEMethod), FusedMoE.__init__, linear.py divide."""
    out: set[str] = set()
    tp, ep = cfg["tp_size"], cfg["ep_size"]
    a2a = cfg["moe_a2a_backend"] != "none"
    moe_tp = tp // (ep * cfg["moe_dp_size"])
    attn_dp = cfg["dp_size"] if cfg["enable_dp_attention"] else 1
    attn_tp = tp // (attn_dp * cfg["attn_cp_size"])
    bn, bk = m.quant_block_n, m.quant_block_k
    block = bn is not None and bk is not None

    def linear(family: str, size: int | None, width: int, quantized: bool) -> None:
        if size is None:
            return
        if size % width:
            out.add(f"WEIGHT-{family}-SPLIT")
            return
        shard = size // width
        if block and quantized:
            assert bn is not None and bk is not None
            if shard % bn or (width > 1 and shard % bk):
                out.add(f"QUANT-BLOCK-{family}")
        if m.quant_group_k and quantized and family == "DENSE-MLP" and shard % m.quant_group_k:
            out.add("QUANT-NVFP4-DENSE-MLP")

    dense_tp = 1 if cfg["moe_dense_tp_size"] == 1 and m.dense_mlp_fully_dp else tp
    linear("DENSE-MLP", m.dense_intermediate_size, dense_tp, m.quant_dense_mlp)
    fusion = m.shared_experts_fusion
    fused = fusion == "any_ep" or (fusion == "when_ep_1" and (ep == 1 or version == "0.4.6.post5"))
    shared_tp = 1 if a2a else (moe_tp if fused else tp)
    linear("SHARED-EXPERT", m.shared_expert_intermediate_size, shared_tp, m.quant_shared_experts)
    padded = cfg["moe_runner_backend"] in ("flashinfer_trtllm", "flashinfer_trtllm_routed")
    if m.moe_intermediate_size is not None and moe_tp >= 1:
        if m.moe_intermediate_size % moe_tp:
            out.add("WEIGHT-EXPERTS-SPLIT")
        elif block and m.quant_experts and not padded:
            assert bn is not None and bk is not None
            shard = m.moe_intermediate_size // moe_tp
            row = moe_tp > 1 if version == "0.5.23" else tp > 1
            if shard % bn or (row and shard % bk):
                out.add("QUANT-BLOCK-EXPERTS")
    heads = m.num_attention_heads
    if m.mla_q_head_dim and heads and block and m.quant_attention and attn_tp >= 1:
        assert bn is not None
        checked = attn_tp > 1 if version == "0.5.23" else (tp > 1 and attn_tp == tp)
        if heads % attn_tp == 0 and checked and (heads // attn_tp * m.mla_q_head_dim) % bn:
            out.add("QUANT-BLOCK-MLA-Q")
    # GatedDeltaNet (qwen3_next.py): merged in_proj_qkvz is checked at any TP (several
    # output partitions); the row-parallel out_proj like any attention-TP linear.
    kd, vd = m.linear_attn_key_dim, m.linear_attn_value_dim
    if kd and vd and block and m.quant_linear_attention and attn_tp >= 1:
        assert bn is not None and bk is not None
        if kd % attn_tp == 0 and vd % attn_tp == 0:
            if (kd // attn_tp) % bn or (vd // attn_tp) % bn:
                out.add("QUANT-BLOCK-LINEAR-ATTN")
            checked = attn_tp > 1 if version == "0.5.23" else (tp > 1 and attn_tp == tp)
            if checked and (vd // attn_tp) % bk:
                out.add("QUANT-BLOCK-LINEAR-ATTN-OUT")
    vh = m.linear_attn_value_heads
    if vh and block and m.quant_linear_attn_ba and attn_tp >= 1 and vh % attn_tp == 0:
        assert bn is not None
        out.update({"QUANT-BLOCK-LINEAR-ATTN-BA"} if (vh // attn_tp) % bn else set())
    # AWQ / GPTQ (awq.py, gptq.py, marlin_utils.py): a split down_proj input is whole
    # groups; AWQ experts fall back to moe_wna16, which halves the group down to 32.
    g = m.quant_group_size
    dense = m.dense_intermediate_size
    if g and dense and m.quant_dense_mlp and dense_tp > 1 and dense % dense_tp == 0:
        out.update({"QUANT-GROUP-DENSE-MLP"} if (dense // dense_tp) % g else set())
    awq = m.quant_method in ("awq", "awq_marlin")
    moe = m.moe_intermediate_size
    if g and moe and m.quant_experts and awq and moe_tp >= 1 and moe % moe_tp == 0:
        shard, group = moe // moe_tp, g
        while shard % group and group >= 32:
            group //= 2
        out.update({"QUANT-GROUP-EXPERTS"} if group < 32 or shard % group else set())
    # Vision towers (layers/attention/vision.py, siglip.py, dp_attention.py): the heads over
    # attention TP (all of TP in 0.4.6), 1 when the class builds the tower data-parallel;
    # SigLIP's MLP over TP; from 0.5.23 an attention TP strictly between 1 and TP refused.
    heads_tp = tp if version == "0.4.6.post5" else attn_tp
    if m.vision_dp_encoder and cfg["mm_enable_dp_encoder"] and version != "0.4.6.post5":
        heads_tp = 1
    built_heads = version == "0.4.6.post5" or not m.vision_needs_multimodal
    if m.vision_num_heads and (built_heads or cfg["enable_multimodal"]):
        out.update({"WEIGHT-VISION-HEADS"} if m.vision_num_heads % heads_tp else set())
    # Llama 4 builds its tower only with --enable-multimodal (from 0.5.18).
    built = not m.vision_needs_multimodal or cfg["enable_multimodal"]
    if m.vision_intermediate_size and built and m.vision_intermediate_size % tp:
        out.add("WEIGHT-VISION-MLP")
    # From 0.5.23 an attention TP strictly inside TP is refused where the tower reduces over
    # all of TP: SigLIP / Llama 4 always, Qwen3.5 / Kimi-K2.5 without DP attention.
    dp_capable = m.vision_num_heads and m.vision_dp_encoder and not cfg["mm_enable_dp_encoder"]
    reduces = (m.vision_intermediate_size and built) or (dp_capable and attn_dp == 1)
    if reduces and version == "0.5.23" and 1 < attn_tp < tp:
        cp = cfg["attn_cp_size"] > 1
        out.add("WEIGHT-VISION-TP-REDUCE-CP" if cp else "WEIGHT-VISION-TP-REDUCE")
    return out


_SIZES = (1, 2, 4, 8, 16, 32)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], str]:
    tp = draw(st.sampled_from(_SIZES))
    ep = draw(st.sampled_from([d for d in _SIZES if tp % d == 0]))
    dpa = draw(st.booleans())
    dp = draw(st.sampled_from([d for d in _SIZES if tp % d == 0])) if dpa else 1
    cp = draw(st.sampled_from([c for c in (1, 1, 2) if tp % (dp * c) == 0]))
    cfg = {
        "tp_size": tp,
        "ep_size": ep,
        "dp_size": dp,
        "attn_cp_size": cp,
        "enable_dp_attention": dpa and dp > 1,
        "moe_dense_tp_size": draw(st.sampled_from([None, 1])),
        "moe_a2a_backend": draw(st.sampled_from(["none", "none", "deepep"])),
        "moe_runner_backend": draw(st.sampled_from(["auto", "auto", "flashinfer_trtllm"])),
        "mm_enable_dp_encoder": draw(st.booleans()),
        "enable_multimodal": draw(st.booleans()),
    }
    block = draw(st.sampled_from([(128, 128), (128, 64), None]))
    group = None if block else draw(st.sampled_from([None, 128, 64, 32]))
    model = {
        "num_attention_heads": draw(st.sampled_from([16, 64, 128])),
        "num_experts": 256,
        "dense_intermediate_size": draw(st.sampled_from([None, 18432, 1536, 96, 29568])),
        "dense_mlp_fully_dp": draw(st.booleans()),
        "moe_intermediate_size": draw(st.sampled_from([None, 2048, 1536, 512, 768, 96])),
        "shared_expert_intermediate_size": draw(st.sampled_from([None, 2048, 512])),
        "shared_experts_fusion": draw(st.sampled_from([None, "when_ep_1", "any_ep"])),
        "mla_q_head_dim": draw(st.sampled_from([None, 192])),
        # Qwen3-Next (2048 / 4096) and a narrower hybrid whose shards fall below a block.
        "linear_attn_key_dim": draw(st.sampled_from([None, 2048, 512])),
        "linear_attn_value_dim": draw(st.sampled_from([None, 4096, 1024])),
        "quant_linear_attention": draw(st.booleans()),
        "linear_attn_value_heads": draw(st.sampled_from([None, 32, 256])),
        "quant_linear_attn_ba": draw(st.booleans()),
        "quant_block_n": block[0] if block else None,
        "quant_block_k": block[1] if block else None,
        "quant_group_k": None if block or group else draw(st.sampled_from([None, 16])),
        "quant_group_size": group,
        "quant_method": draw(st.sampled_from(["awq", "gptq"])) if group else None,
        "quant_attention": draw(st.booleans()),
        "quant_dense_mlp": True,
        "quant_experts": True,
        "quant_shared_experts": draw(st.booleans()),
        # Qwen3.5's tower (16 heads, data-parallel under --mm-enable-dp-encoder) and Gemma
        # 3's SigLIP (16 heads, MLP 4304 over TP).
        **draw(
            st.sampled_from(
                [
                    {},
                    {"vision_num_heads": 16, "vision_dp_encoder": True},
                    {"vision_num_heads": 16, "vision_intermediate_size": 4304},
                    {
                        "vision_num_heads": 16,
                        "vision_intermediate_size": 4304,
                        "vision_needs_multimodal": True,
                    },
                ]
            )
        ),
    }
    return cfg, model, draw(st.sampled_from(["0.4.6.post5", "0.5.19", "0.5.23"]))


#: The vision towers' attention-TP refusals (0.5.23) at layouts the draws reach rarely:
#: Qwen3.5's tower under attention CP (refused) and under DP attention over half of TP
#: (built), Gemma 3's under the same DP attention (refused).
_PLAIN = {"ep_size": 1, "moe_dense_tp_size": None, "moe_a2a_backend": "none",
          "moe_runner_backend": "auto", "mm_enable_dp_encoder": False,
          "enable_multimodal": False}  # fmt: skip
_QWEN35_TOWER = {"vision_num_heads": 16, "vision_dp_encoder": True}
_GEMMA3_TOWER = {"vision_num_heads": 16, "vision_intermediate_size": 4304}
_CP2 = {**_PLAIN, "tp_size": 8, "dp_size": 1, "enable_dp_attention": False, "attn_cp_size": 2}
_DPA2 = {**_PLAIN, "tp_size": 8, "dp_size": 2, "enable_dp_attention": True, "attn_cp_size": 1}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_cases())
@example((_CP2, _QWEN35_TOWER, "0.5.23"))
@example((_DPA2, _QWEN35_TOWER, "0.5.23"))
@example((_DPA2, _GEMMA3_TOWER, "0.5.23"))
def test_rules_match_a_second_implementation(case: tuple[dict[str, Any], Any, str]) -> None:
    cfg, model, version = case
    if version == "0.4.6.post5":  # 0.4.6 has neither flag
        cfg = {**cfg, "moe_runner_backend": "auto", "mm_enable_dp_encoder": False}
    spec = ModelSpec(**model)
    report = validate(cfg, spec, explain=False, sglang_version=version)
    resolved = {k: report.resolved_env[k] for k in report.resolved_env}
    got = {v.rule for v in report.violations} & SHAPE_RULES
    assert got == reference_failures(resolved, spec, version)


# --- reading quantization_config ------------------------------------------------------------


@pytest.mark.parametrize(
    ("qc", "key"),
    [
        ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
        ({"quant_method": "fp8", "weight_block_size": [128, 0]}, "weight_block_size"),
        ({"quant_method": "fp8", "weight_block_size": "128x128"}, "weight_block_size"),
        ({"quant_method": 8}, "quant_method"),
        ({"weight_block_size": [128, 128]}, "quant_method"),
        ("fp8", "quantization_config"),
        ({"quant_method": "fp8", "modules_to_not_convert": "lm_head"}, "modules_to_not_convert"),
        ({"quant_method": "compressed-tensors"}, "config_groups"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"strategy": "block"}}},
            },
            "block_structure",
        ),
    ],
)
def test_a_malformed_quantization_config_names_the_key(qc: Any, key: str) -> None:
    with pytest.raises(InputError, match=key):
        read_checkpoint_quant({"quantization_config": qc})


def test_unknown_scheme_is_said_never_passed_silently() -> None:
    hf = {**model_config(R1), "quantization_config": {"quant_method": "gguf"}}
    report = validate({"tp_size": 32, "nnodes": 4}, hf, explain=False)
    assert report.valid
    [warning] = [w for w in report.warnings if w.rule == "QUANT-NOT-CHECKED"]
    assert "unknown quantization scheme gguf" in warning.message


def test_not_converted_modules_are_not_checked() -> None:
    gpt_oss = ModelSpec.from_hf_config(model_config("openai/gpt-oss-120b"))
    assert not gpt_oss.quant_attention  # model.layers.*.self_attn is not converted
    one_layer = read_checkpoint_quant(
        {"quantization_config": {"quant_method": "fp8", "ignored_layers": ["model.layers.3.mlp"]}}
    )
    assert one_layer.dense_mlp and one_layer.experts  # other layers are still quantized
    every_mlp = read_checkpoint_quant(
        {"quantization_config": {"quant_method": "fp8", "ignored_layers": ["mlp"]}}
    )
    assert not (every_mlp.dense_mlp or every_mlp.experts or every_mlp.shared_experts)


def test_regular_expressions_exempt_only_where_sglang_reads_them() -> None:
    """compressed-tensors reads `re:` patterns; SGLang's FP8 reader matches dotted module
    paths only (quantization/utils.py `_module_path_match`), so there a regular expression
    exempts nothing (Qwen3.5 FP8 built with `re:.*in_proj_b$` still quantized in_proj_ba
    in 0.5.23: tests/fixtures/weight_shapes/models/)."""
    group = {"g": {"weights": {"strategy": "channel"}}}
    ct = {"quant_method": "compressed-tensors", "config_groups": group, "ignore": ["re:.*mlp$"]}
    assert not read_checkpoint_quant({"quantization_config": ct}).dense_mlp
    fp8 = {"quant_method": "fp8", "modules_to_not_convert": ["re:.*linear_attn.in_proj_b$"]}
    assert read_checkpoint_quant({"quantization_config": fp8}).linear_attn_ba
    dotted = {"quant_method": "fp8", "modules_to_not_convert": ["linear_attn.in_proj_b"]}
    assert not read_checkpoint_quant({"quantization_config": dotted}).linear_attn_ba


def test_cli_malformed_config_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    block = {"quant_method": "fp8", "weight_block_size": [1]}
    bad = {**model_config(R1), "quantization_config": block}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(bad))
    run = run_cli(capsys, "validate", "--model", str(path), "--set", "tp_size=8")
    assert run.code == 2
    assert run.err.strip().count("\n") == 0
    assert "quantization_config.weight_block_size" in run.err
    assert run.out == ""


def test_where_can_read_the_shard_widths() -> None:
    """`--where` names the widths the rules read; every layout listed loads, so asking
    for a shard that is not whole blocks finds none."""
    facts = ModelSpec.from_hf_config(model_config("Qwen/Qwen3-235B-A22B-FP8"))
    assert facts.moe_intermediate_size == 1536
    shards = [
        1536 // r.derived["moe_tp"]
        for r in enumerate_layouts(8, model=facts, where=["moe_expert_shard >= 384"])
    ]
    assert shards and all(s >= 384 for s in shards)
    assert not list(enumerate_layouts(8, model=facts, where=["moe_expert_shard % 128 != 0"]))


def test_where_reads_each_release_s_own_widths() -> None:
    """0.5.23 redefined `shared_tp`: Step-3.5's shared expert is whole under an all-to-all
    backend there, split over TP before (both recorded). `--where` names the release's
    definition, as its rules do, not one copy for all releases."""
    facts = ModelSpec.from_hf_config(model_config(STEP35))
    vary = (*ENUMERATE_VARY, "moe_a2a_backend")

    def whole(version: str, where: str) -> set[tuple[Any, ...]]:
        rows = enumerate_layouts(8, model=facts, vary=vary, where=[where], sglang_version=version)
        return {tuple(sorted(r.config.items())) for r in rows}

    for version, replicated in (("0.5.19", False), ("0.5.23", True)):
        found = whole(version, "shared_tp == 1 and tp > 1")
        with_a2a = whole(version, "moe_a2a_backend != 'none' and tp > 1")
        assert with_a2a and found == (with_a2a if replicated else set())


@pytest.mark.parametrize("version", ["0.5.19", "0.5.23"])
def test_a_memory_filter_reads_the_same_widths(
    capsys: pytest.CaptureFixture[str], version: str
) -> None:
    """A filter that also reads a memory column runs after the loops, on the extended rows:
    it names the release's `shared_tp` and reads the model's facts it depends on, so it
    keeps what the same conditions keep as two filters (it raised KeyError on the facts)."""
    base = ("enumerate", "--gpus", "8", "--model", STEP35, "--gpu", "H200",
            "--vary", "moe_a2a_backend", "--sglang-version", version, "--count")  # fmt: skip
    one = run_cli(capsys, *base, "--where", "shared_tp == 1 and tp > 1 and kv_tokens > 0")
    two = run_cli(capsys, *base, "--where", "shared_tp == 1 and tp > 1", "--where", "kv_tokens > 0")
    assert (one.code, one.out, one.err) == (two.code, two.out, two.err)
    assert (int(one.out) > 0) == (version == "0.5.23")  # the count exits 1 when it is 0


# --- SGLang's own layer constructors (fidelity/weight_shapes/probe.py) -----------------------

FIXTURES = Path(__file__).parent / "fixtures" / "weight_shapes"
FP8_FACTS = {"quant_method": "fp8", "quant_block_n": 128, "quant_block_k": 128}


def _recorded() -> list[Any]:
    paths = sorted(FIXTURES.glob("*.json"))
    return [pytest.param(p, id=json.loads(p.read_text())["version"]) for p in paths]


def _as_meshsat(rec: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    """The layouts and model facts under which meshsat's rules see the recorded layer,
    with the rule id that SGLang's error corresponds to."""
    tp = rec["tp"]
    if rec["family"] == "mlp":
        dense = {
            **FP8_FACTS,
            "dense_intermediate_size": rec["size"],
            "quant_dense_mlp": True,
            "dense_mlp_fully_dp": True,  # DeepseekV2MLP reads --moe-dense-tp-size
        }
        shared = {
            **FP8_FACTS,
            "shared_expert_intermediate_size": rec["size"],
            "quant_shared_experts": True,
        }
        dense_layout = {"tp_size": tp, "moe_dense_tp_size": 1 if rec["replicated"] else None}
        shared_layout = (
            {"tp_size": tp, "moe_a2a_backend": "deepep", "ep_size": tp}
            if rec["replicated"]
            else {"tp_size": tp}
        )
        return [
            (dense_layout, dense, "DENSE-MLP"),
            (shared_layout, shared, "SHARED-EXPERT"),
        ]
    if rec["family"] == "moe":
        model = {**FP8_FACTS, "moe_intermediate_size": rec["size"], "quant_experts": True}
        return [({"tp_size": tp, "ep_size": tp // rec["moe_tp"]}, model, "EXPERTS")]
    attn_dp = tp // rec["attn_tp"]
    layout = {"tp_size": tp, "dp_size": attn_dp, "enable_dp_attention": attn_dp > 1}
    if rec["family"].startswith("linear_"):
        # One quantized GatedDeltaNet linear at a time, the others left unquantized.
        widths = {
            "linear_attn_key_dim": rec["key"],
            "linear_attn_value_dim": rec["value"],
            "linear_attn_value_heads": rec["heads"],
        }
        ba = rec["family"] == "linear_ba"
        model = {
            **FP8_FACTS,
            **widths,
            "quant_linear_attention": not ba,
            "quant_linear_attn_ba": ba,
        }
        rule = {"linear_qkvz": "LINEAR-ATTN", "linear_ba": "LINEAR-ATTN-BA"}
        family = rule.get(rec["family"], "LINEAR-ATTN-OUT")
        return [(layout, model, family)]
    model = {
        **FP8_FACTS,
        "num_attention_heads": rec["heads"],
        "mla_q_head_dim": rec["head_dim"],
        "quant_attention": True,
    }
    return [(layout, model, "MLA-Q")]


def _disagreement(version: str, rec: dict[str, Any]) -> str | None:
    for layout, facts, family in _as_meshsat(rec):
        report = validate(layout, ModelSpec(**facts), explain=False, sglang_version=version)
        got = [(v.rule, v.message) for v in report.violations if v.rule in SHAPE_RULES]
        if family.startswith("LINEAR"):  # one recorded linear of the three the facts cover
            got = [g for g in got if g[0] == f"QUANT-BLOCK-{family}"]
        error = rec["error"]
        if error is None:
            want = []
        else:
            prefix = "WEIGHT" if error["type"] == "AssertionError" else "QUANT-BLOCK"
            want = [(f"{prefix}-{family}", error["message"])]
        if got != want:
            return f"{family} {rec}: meshsat {got}, SGLang {want}"
    return None


@pytest.mark.parametrize("path", _recorded())
def test_rules_agree_with_sglangs_own_layers(path: Path) -> None:
    """Each layer a release built (or refused) on the meta device: meshsat's rule for that
    family fires exactly when SGLang raised, with SGLang's message (the dense MLP records
    also stand for the shared experts, which SGLang builds with the same class)."""
    data = json.loads(path.read_text())
    wrong = [_disagreement(data["version"], rec) for rec in data["records"]]
    assert [w for w in wrong if w] == []
    # 272 layers in every pack, plus 126 GatedDeltaNet linears where Qwen3-Next exists.
    assert len(wrong) == (272 if data["version"] == "0.4.6.post5" else 398)


def test_fixtures_cover_every_pack_and_both_verdicts() -> None:
    versions = {json.loads(p.read_text())["version"] for p in FIXTURES.glob("*.json")}
    assert versions == {"0.4.6.post5", "0.5.18", "0.5.19", "0.5.23"}
    for path in FIXTURES.glob("*.json"):
        errors = [r["error"] is None for r in json.loads(path.read_text())["records"]]
        assert any(errors) and not all(errors)


# --- plan and the command reader ----------------------------------------------------------------


def test_plan_r1_on_32_gpus_ranks_no_layout_that_cannot_load(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command

    run = run_cli(
        capsys, "plan", "--model", R1, "--gpu", "H100", "--gpus", "32", "--format", "json",
        "--top", "100",
    )  # fmt: skip
    assert run.code == 0
    layouts = json.loads(run.out)["layouts"]
    assert layouts
    facts = ModelSpec.from_hf_config(model_config(R1))
    for row in layouts:
        values = parse_sglang_command(row["command"]).values
        report = validate(values, facts, explain=False)
        assert not {v.rule for v in report.violations} & SHAPE_RULES, row["command"]
        resolved = dict(report.resolved_env)
        assert reference_failures(resolved, facts, "0.5.23") == set(), row["command"]


def test_the_command_reader_takes_the_model_from_model_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = f"python -m sglang.launch_server --model-path {R1} --tp 32 --nnodes 4 --node-rank 0"
    run = run_cli(capsys, "validate", "--json", "--sglang", command)
    assert run.code == 1
    report = json.loads(run.out)
    assert report["first"] == "QUANT-BLOCK-DENSE-MLP"
    assert all(v["stage"] == "launch" for v in report["violations"])


def test_enumerate_says_when_weight_shapes_go_unchecked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hf = {**model_config("Qwen/Qwen3-32B"), "quantization_config": {"quant_method": "w4afp8"}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf))
    run = run_cli(capsys, "enumerate", "--gpus", "4", "--model", str(path), "--count")
    assert run.code == 0
    assert "weight shapes not checked: the group-size alignment of w4afp8" in run.err


def test_awq_group_size_is_read_and_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Qwen3-32B's dense MLP (25600) under AWQ group 128: TP 8 leaves 3200 = 25 groups per
    rank; a 4-bit export with group 256 leaves 12.5 and is refused (awq.py create_weights).
    A config without group_size is refused naming the key, as AWQConfig.from_config does."""
    base = model_config("Qwen/Qwen3-32B")
    for group, ok in ((128, True), (256, False)):
        qc = {"quant_method": "awq", "bits": 4, "group_size": group}
        got = shape_violations({"tp_size": 8}, {**base, "quantization_config": qc}, "0.5.23")
        assert got == (set() if ok else {"QUANT-GROUP-DENSE-MLP"})
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, "quantization_config": {"quant_method": "awq"}}))
    run = run_cli(capsys, "validate", "--model", str(path), "--set", "tp_size=8")
    assert run.code == 2
    assert run.err.strip() == (
        "meshsat: error: model config: quantization_config.group_size must be a positive "
        "integer or -1, got None"
    )


#: Launch commands as pasted (the shapes of the public reports above), read with the model
#: their --model-path names: (command, the first weight-shape rule it breaks, or None).
_L = "python3 -m sglang.launch_server --trust-remote-code"
COMMANDS: tuple[tuple[str, str | None], ...] = (
    (
        f"{_L} --model-path {R1} --tp 32 --dist-init-addr 10.0.0.1:5000 --nnodes 4 "
        "--node-rank 0",
        "QUANT-BLOCK-DENSE-MLP",
    ),
    (
        f"{_L} --model-path {R1} --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 "
        "--node-rank 1",
        None,
    ),
    (
        f"{_L} --model-path deepseek-ai/DeepSeek-V3 --tp 16 --dp 16 --enable-dp-attention "
        "--moe-a2a-backend deepep --moe-dense-tp-size 1 --nnodes 2 --node-rank 0 "
        "--dist-init-addr 10.0.0.1:5000",
        None,
    ),
    ("sglang serve --model-path Qwen/Qwen3-235B-A22B-FP8 --tp 8", "QUANT-BLOCK-EXPERTS"),
    ("sglang serve --model-path Qwen/Qwen3-235B-A22B-FP8 --tp 8 --ep-size 8", None),
    (f"CUDA_VISIBLE_DEVICES=0,1,2,3 {_L} --model-path Qwen/Qwen3-30B-A3B-FP8 --tp 4",
     "QUANT-BLOCK-EXPERTS"),
)  # fmt: skip


@pytest.mark.parametrize(("command", "rule"), COMMANDS)
def test_pasted_commands_read_the_checkpoint(command: str, rule: str | None) -> None:
    from meshsat.solver.inputs.layout_input import LayoutSources, load_layout

    layout = load_layout(LayoutSources(sglang=command), catalogue=model_config)
    assert layout.model is not None
    report = validate(layout.config, layout.model, explain=False)
    shapes = [v.rule for v in report.violations if v.rule in SHAPE_RULES]
    assert (shapes[0] if shapes else None) == rule


# --- malformed quantization configs (a space of inputs) ----------------------------------------

_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.one_of(st.integers(-2, 256), st.text(max_size=6), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=2),
)
_METHODS = st.one_of(
    st.sampled_from(
        ["fp8", "FP8", "compressed-tensors", "modelopt", "awq", "gptq", "mxfp4", "w4afp8",
         "blockwise_int8", "mxfp8", "gguf", ""]
    ),
    _JUNK,
)  # fmt: skip
_KEYS = (
    "weight_block_size", "modules_to_not_convert", "ignored_layers", "ignore",
    "exclude_modules", "group_size", "q_group_size", "quant_algo", "config_groups",
)  # fmt: skip


@st.composite
def _quant_configs(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(_JUNK)  # not even a mapping
    qc: dict[str, Any] = {}
    if draw(st.integers(0, 5)):  # mostly present; sometimes missing
        qc["quant_method"] = draw(_METHODS)
    for key in draw(st.lists(st.sampled_from(_KEYS), max_size=4, unique=True)):
        qc[key] = draw(_JUNK)
    if draw(st.booleans()):
        qc["weight_block_size"] = draw(st.lists(st.integers(-1, 256), min_size=0, max_size=3))
    return qc


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_quant_configs())
def test_any_quantization_config_is_read_or_refused_naming_the_key(qc: Any) -> None:
    """Whatever `quantization_config` holds, the reader returns facts (a known scheme, or
    "not checked" with the reason) or raises `InputError` naming the offending key; it never
    fails any other way (which the CLI would show as a traceback)."""
    hf = {**model_config("Qwen/Qwen3-32B"), "quantization_config": qc}
    try:
        spec = ModelSpec.from_hf_config(hf)
    except InputError as exc:
        assert "quantization_config" in str(exc)
        assert "\n" not in str(exc)
        return
    if qc is None:  # `"quantization_config": null`: an unquantized checkpoint
        assert spec.quant_method is None
        return
    known = spec.quant_block_n or spec.quant_group_k or spec.quant_group_size
    assert known or spec.quant_not_checked or spec.quant_method in (
        "fp8", "mxfp4", "modelopt_fp8", "blockwise_int8", "compressed-tensors", "awq", "gptq",
        "w8a8_fp8", "w8a8_int8", "fbgemm_fp8", "fp8_e4m3",
    )  # fmt: skip


@pytest.mark.parametrize(
    "qc",
    [{"quant_method": "fp8", "weight_block_size": [128, 1.5]}, {"quant_method": "tq2"}, [1, 2]],
)
def test_cli_quantization_config_never_tracebacks(
    qc: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**model_config(R1), "quantization_config": qc}))
    run = run_cli(capsys, "validate", "--model", str(path), "--set", "tp_size=8")
    assert "Traceback" not in run.err
    if run.code == 2:
        assert run.err.startswith("meshsat: error: ") and "quantization_config" in run.err
        assert run.err.strip().count("\n") == 0
    else:
        assert "not checked: unknown quantization scheme tq2" in run.out + run.err


KIMI_K25 = "tests/fixtures/weight_shapes/configs/Kimi-K2.5.json"
LARGE_EP_8 = ("--set", "tp_size=8", "--set", "ep_size=8", "--set", "moe_a2a_backend=deepep",
              "--set", "enable_dp_attention=true", "--set", "dp_size=8",
              "--set", "moe_dense_tp_size=1")  # fmt: skip


@pytest.mark.parametrize(
    ("gpu", "extra", "refused"),
    [("H200", (), True), ("B200", (), False), ("H200", ("--set", "gpu_sm=100"), False)],
)
def test_validate_gpu_names_the_gpu_class_the_runner_rules_read(
    capsys: pytest.CaptureFixture[str], gpu: str, extra: tuple[str, ...], refused: bool
) -> None:
    """`--gpu` sets `gpu_sm` unless the layout does: Kimi-K2.5's INT4 experts under DeepEP
    do not start on Hopper (the Marlin runner, as SGLang's builds of it refuse), but do on
    B200 (the Triton method from 0.5.19)."""
    run = run_cli(capsys, "validate", "--model", KIMI_K25, "--gpu", gpu, *LARGE_EP_8, *extra,
                  "--sglang-version", "0.5.23", "--format", "json")  # fmt: skip
    rules = [v["rule"] for v in json.loads(run.out)["violations"]]
    assert ("MOE-MARLIN-A2A" in rules) == refused, rules


@pytest.mark.parametrize(
    ("name", "cc"),
    [("H100", 90), ("H200", 90), ("B200", 100), ("GB300", 103), ("L40S", 89), ("A100-80", 80),
     ("A10", 86), ("RTX5090", 120)],
)  # fmt: skip
def test_gpu_compute_capability(name: str, cc: int) -> None:
    """NVIDIA's published compute capabilities, as the rules' `gpu_sm` reads them."""
    assert gpu(name).compute_capability == cc


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_an_int4_checkpoint_takes_only_its_own_quantization(version: str) -> None:
    """`ModelConfig._verify_quantization` as each release's build of Kimi-K2.5 INT4 showed:
    --quantization mxfp8 or fp8 refused while the arguments resolve, its own name or a
    compatible method (w8a8_int8) accepted."""
    spec = ModelSpec.from_hf_config(model_config(KIMI_K25))
    for quantization, refused in (("mxfp8", True), ("fp8", True), ("compressed-tensors", False),
                                  ("w8a8_int8", False)):  # fmt: skip
        report = validate(
            {"tp_size": 8, "quantization": quantization}, spec, explain=False,
            sglang_version=version,
        )  # fmt: skip
        found = {v.rule: v for v in report.violations}
        assert ("QUANT-CHECKPOINT-MISMATCH" in found) == refused, quantization
        if refused:
            v = found["QUANT-CHECKPOINT-MISMATCH"]
            assert v.stage == "resolution" and f"argument ({quantization})" in v.message


@pytest.mark.parametrize(("runner", "refused"), [("deep_gemm", True), ("triton", False),
                                                  ("flashinfer_trtllm", False)])  # fmt: skip
def test_the_marlin_rule_follows_the_runner_the_scheme_picks(runner: str, refused: bool) -> None:
    """Under DeepEP on Hopper, 0.5.23's build of Kimi-K2.5 INT4 refuses with the deep_gemm
    runner (the WNA16 scheme still takes Marlin) and builds with triton (the Triton method)
    and flashinfer_trtllm (MXINT4)."""
    spec = ModelSpec.from_hf_config(model_config(KIMI_K25))
    layout = {"tp_size": 8, "ep_size": 8, "dp_size": 8, "enable_dp_attention": True,
              "moe_dense_tp_size": 1, "moe_a2a_backend": "deepep", "gpu_sm": 90,
              "moe_runner_backend": runner}  # fmt: skip
    report = validate(layout, spec, explain=False, sglang_version="0.5.23")
    assert ("MOE-MARLIN-A2A" in {v.rule for v in report.violations}) == refused


@pytest.mark.parametrize(("name", "planned"), [("H200", False), ("B200", True)])
def test_plan_reads_the_gpu_class_as_validate_does(name: str, planned: bool) -> None:
    """`plan --gpu` sets `gpu_sm` on every layout it enumerates: Kimi-K2.5's INT4 experts
    under MLA prefill CP (the all-to-all path) take the Marlin runner on Hopper, which
    SGLang refuses, so no such layout is planned on H200; on B200 (Triton) they are."""
    rows = plan_layouts(KIMI_K25, gpu(name), 16, top=3, where=["enable_prefill_cp"],
                        sglang_version="0.5.23")  # fmt: skip
    assert bool(rows) == planned
    for row in rows:
        assert "gpu" not in row.command  # a field no SGLang flag spells


def test_enumerate_reads_the_gpu_class_unless_only_its_memory_is_known(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`enumerate --gpu A100-80` drops `--moe-a2a-backend megamoe`, which needs an SM90 or
    SM100-class GPU (`MEGAMOE-GPU`); `--gpu-memory 80GiB` (no class) checks none of the
    GPU-class rules, as no `--gpu` does."""
    args = ("enumerate", "--gpus", "8", "--model", "deepseek-ai/DeepSeek-V3", "--vary",
            "moe_a2a_backend", "--vary", "moe_runner_backend", "--count")  # fmt: skip
    counts = {
        extra: int(run_cli(capsys, *args, *extra).out.split()[-1])
        for extra in ((), ("--gpu", "A100-80"), ("--gpu-memory", "80GiB"), ("--gpu", "H100"))
    }
    assert counts[()] == counts[("--gpu-memory", "80GiB")] == counts[("--gpu", "H100")]
    assert 0 < counts[("--gpu", "A100-80")] < counts[()]
