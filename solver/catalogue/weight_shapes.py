"""Will it start: the per-rank weight shapes SGLang checks while it builds the model.

SGLang's argument resolution accepts layouts whose weight shards then fail minutes later,
in a quantization method's `create_weights` (after a multi-node job has pulled the
checkpoint). Each rule here is one linear family SGLang builds, the group that splits it
and the alignment its quantization method checks; the model facts come from the
checkpoint's own config (`meshsat.solver.lang.checkpoint_quant`). Every rule cites the
release source it encodes (docs/weight-shapes.md has the table per release).

Which group splits which family (SGLang's model files, every pack's release):
- dense MLP (`DeepseekV2MLP`, `LlamaMLP`, `Qwen2MoeMLP`, ...): the global TP group, or
  replicated with `--moe-dense-tp-size 1` (`enable_moe_dense_fully_dp`);
- routed experts (`FusedMoE`): the MoE TP group, `intermediate_size // moe_tp_size`;
- shared experts: the global TP group, replicated with any all-to-all backend
  (`_shared_expert_use_tp1` / `parallel_group="replicated"`), or fused into the routed
  MoE (DeepSeek V3/R1 and GLM-4.5 when EP is 1, Qwen3-Next with any EP);
- MLA's `q_b_proj`: the attention TP group;
- GatedDeltaNet (Qwen3-Next / Qwen3.5 `linear_attn`): the attention TP group
  (`attn_tp_size` in 0.5.18/0.5.19, `parallel_group="attn_tp"` in 0.5.23): the merged
  `in_proj_qkvz` (key, key, value, value rows) and the row-parallel `out_proj` (value columns).
"""

from __future__ import annotations

from meshsat.solver.lang.derived import attn_dp, attn_tp, attn_tp_whole, moe_tp
from meshsat.solver.lang.expr import (
    TRUE,
    Expr,
    Field,
    Named,
    divides,
    is_set,
    ite,
    named,
    one_of,
)
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

#: Launch-stage sources: the functions that raise (before 0.5.23's renames).
FP8_LINEAR = "quantization/fp8.py Fp8LinearMethod.create_weights"
FP8_MOE = "quantization/fp8.py Fp8MoEMethod.create_weights"
NVFP4_LINEAR = "quantization/modelopt_quant.py ModelOptFp4LinearMethod.create_weights"
INT_GROUP_LINEAR = (
    "quantization/awq.py AWQLinearMethod.create_weights, gptq.py GPTQLinearMethod.create_weights, "
    "marlin_utils.py verify_marlin_supports_shape"
)
AWQ_MOE = "quantization/moe_wna16.py MoeWNA16Method.create_weights (AWQ MoE fallback)"
#: The GatedDeltaNet projections go through the same FP8 linear check.
FP8_LINEAR_ATTN = "models/qwen3_next.py Qwen3GatedDeltaNet -> " + FP8_LINEAR
LINEAR_SPLIT = "layers/linear.py (divide)"
MOE_SPLIT = "fused_moe_triton/layer.py FusedMoE.__init__"
NOT_CHECKED = "meshsat: quantization_config"
#: 0.5.23 moved the FP8 MoE weights into a static helper (same check).
FP8_MOE_0_5_23 = "quantization/fp8.py Fp8MoEMethod.create_fp8_moe_weight_"
VISION_SPLIT = "layers/attention/vision.py VisionAttention.__init__ (divide)"
VISION_REDUCE = "layers/dp_attention.py reject_attn_tp_shard_with_tp_reduce"
SOURCES: tuple[str, ...] = (
    NOT_CHECKED,
    VISION_SPLIT,
    VISION_REDUCE,
    LINEAR_SPLIT,
    MOE_SPLIT,
    FP8_LINEAR,
    FP8_MOE,
    FP8_MOE_0_5_23,
    NVFP4_LINEAR,
    FP8_LINEAR_ATTN,
    INT_GROUP_LINEAR,
    AWQ_MOE,
)

#: The dense MLP's width: replicated with --moe-dense-tp-size 1 in the model files that
#: read it (`ModelSpec.dense_mlp_fully_dp`), else the global TP.
mlp_tp = named(
    "mlp_tp",
    ite(
        is_set(F.moe_dense_tp_size) & (F.moe_dense_tp_size == 1) & F.dense_mlp_fully_dp,
        1,
        F.tp_size,
    ),
)
_FUSED_OR_TP = ite(
    (F.shared_experts_fusion == "any_ep")
    | ((F.shared_experts_fusion == "when_ep_1") & (F.ep_size == 1)),
    moe_tp,
    F.tp_size,
)
#: Step-3.5's `share_expert` (step3p5.py `Step3p5MoEMLP`) is replicated under an all-to-all
#: backend from 0.5.23 on; 0.5.18 and 0.5.19 split it over TP whatever the backend (both
#: recorded: tests/fixtures/weight_shapes/models/).
STEP35 = "Step3p5ForCausalLM"
#: Llama 4's `shared_expert` is a plain `LlamaMLP` (llama4.py `Llama4MoE`): over TP under
#: any backend (SGLang 0.5.23's build under DeepEP: tests/test_weight_bytes.py).
LLAMA4 = ("Llama4ForConditionalGeneration", "Llama4ForCausalLM")
_A2A = (F.moe_a2a_backend != "none") & ~one_of(F.architecture, *LLAMA4)
#: The shared experts' width (see the module docstring), 0.5.18 and 0.5.19.
shared_tp = named("shared_tp", ite(_A2A & (F.architecture != STEP35), 1, _FUSED_OR_TP))
#: 0.5.23: every model file with shared experts but Llama 4's replicates them under an
#: all-to-all backend.
shared_tp_0_5_23 = named("shared_tp", ite(_A2A, 1, _FUSED_OR_TP))
#: 0.4.6.post5 fuses DeepSeek V3/R1's shared expert whatever the EP size (deepseek_v2.py
#: determine_n_share_experts_fusion: only DeepEP turns it off); it has no Qwen3-Next.
shared_tp_0_4 = named(
    "shared_tp",
    ite(_A2A, 1, ite(is_set(F.shared_experts_fusion), moe_tp, F.tp_size)),
)

dense_mlp_shard = named("dense_mlp_shard", F.dense_intermediate_size // mlp_tp)
moe_expert_shard = named("moe_expert_shard", F.moe_intermediate_size // moe_tp)
mla_q_shard = named("mla_q_shard", (F.num_attention_heads // attn_tp) * F.mla_q_head_dim)
linear_key_shard = named("linear_key_shard", F.linear_attn_key_dim // attn_tp)
linear_value_shard = named("linear_value_shard", F.linear_attn_value_dim // attn_tp)
linear_ba_shard = named("linear_ba_shard", F.linear_attn_value_heads // attn_tp)
#: The first `in_proj_qkvz` partition SGLang finds misaligned (key rows come first).
linear_qkvz_partition = named(
    "linear_qkvz_partition",
    ite(divides(F.quant_block_n, linear_key_shard), linear_value_shard, linear_key_shard),
)


def _or_zero(width: Named, *facts: Field) -> Named:
    """The width for `--where`, reading 0 where the model lacks a fact it needs (the rules
    themselves are guarded by `is_set`)."""
    known = is_set(facts[0])
    for fact in facts[1:]:
        known = known & is_set(fact)
    return named(width.name, ite(known, width.body, 0))


#: The widths `--where` may name (`moe_expert_shard % 128 == 0`).
NAMED: tuple[Named, ...] = (
    mlp_tp,
    shared_tp,
    _or_zero(dense_mlp_shard, F.dense_intermediate_size),
    _or_zero(moe_expert_shard, F.moe_intermediate_size),
    _or_zero(mla_q_shard, F.num_attention_heads, F.mla_q_head_dim),
    _or_zero(linear_key_shard, F.linear_attn_key_dim),
    _or_zero(linear_value_shard, F.linear_attn_value_dim),
    _or_zero(linear_ba_shard, F.linear_attn_value_heads),
)

_BLOCK = is_set(F.quant_block_n) & is_set(F.quant_block_k)
#: flashinfer_trtllm rounds the MoE shard up to 128 before the quantization method sees it
#: (FusedMoE.__init__, 0.5.18 to 0.5.23), so the block check passes there.
_PADDED_MOE = one_of(F.moe_runner_backend.as_raw, "flashinfer_trtllm", "flashinfer_trtllm_routed")

_HINT_DENSE = (
    "a smaller TP (with DP attention for the attention), or --moe-dense-tp-size 1 to "
    "replicate the dense MLP"
)
_HINT_SHARED = (
    "a smaller TP, or an all-to-all backend (--moe-a2a-backend deepep) that replicates it"
)
_HINT_MOE = "expert parallelism (--ep-size) so each rank holds whole experts, or a smaller TP"


def _blocks(shard: Named, row_split: Expr) -> Expr:
    """SGLang's two checks on a merged gate/up + down pair: the gate/up shard is whole
    `block_n` rows always (merged weights), the down shard whole `block_k` columns when the
    layer is split (`row_split`)."""
    # With a square block (every catalogued checkpoint) the second check follows from the
    # first; saying so keeps a report to the one check SGLang raises.
    square = F.quant_block_k == F.quant_block_n
    return divides(F.quant_block_n, shard) & (square | ~row_split | divides(F.quant_block_k, shard))


def _mlp_rules(
    family: str, size: Field, quantized: Field, width: Named, hint: str
) -> tuple[Rule, Rule]:
    """A gate/up + down pair (`DeepseekV2MLP` and its kin): `linear.py`'s split, then the
    FP8 check on the shard (`Weight output_partition_size = ...`)."""
    shard = named(f"{family.lower().replace('-', '_')}_shard", size // width)
    return (
        Rule(
            f"WEIGHT-{family}-SPLIT",
            is_set(size),
            divides(width, size),
            f"{{{size.name}}} is not divisible by {{{width.name}}}",
            LINEAR_SPLIT,
            hint=hint,
        ),
        Rule(
            f"QUANT-BLOCK-{family}",
            is_set(size) & _BLOCK & quantized & divides(width, size),
            _blocks(shard, width > 1),
            f"Weight output_partition_size = {{{shard.name}}} is not divisible by weight "
            "quantization block_n = {quant_block_n}.",
            FP8_LINEAR,
            hint=hint,
        ),
    )


def _shared_rules(width: Named) -> tuple[Rule, Rule]:
    return _mlp_rules(
        "SHARED-EXPERT", F.shared_expert_intermediate_size, F.quant_shared_experts, width,
        _HINT_SHARED,
    )  # fmt: skip


def _moe_rule(row_split: Expr, source: str) -> Rule:
    return Rule(
        "QUANT-BLOCK-EXPERTS",
        is_set(F.moe_intermediate_size)
        & _BLOCK
        & F.quant_experts
        & divides(moe_tp, F.moe_intermediate_size)
        & ~_PADDED_MOE,
        _blocks(moe_expert_shard, row_split),
        "The output_size of gate's and up's weight = {moe_expert_shard} is not divisible by "
        "weight quantization block_n = {quant_block_n}.",
        source,
        hint=_HINT_MOE,
    )


def _mla_rule(checked: Expr) -> Rule:
    return Rule(
        "QUANT-BLOCK-MLA-Q",
        is_set(F.mla_q_head_dim)
        & is_set(F.num_attention_heads)
        & _BLOCK
        & F.quant_attention
        & attn_tp_whole
        & (attn_tp >= 1)
        & divides(attn_tp, F.num_attention_heads)
        & checked,
        divides(F.quant_block_n, mla_q_shard),
        "Weight output_partition_size = {mla_q_shard} is not divisible by weight "
        "quantization block_n = {quant_block_n}.",
        FP8_LINEAR,
        hint="an attention TP width that leaves an even number of heads per rank "
        "(DP attention, or a smaller TP)",
    )


_HINT_LINEAR = (
    "an attention TP width that leaves whole 128-row blocks of the GatedDeltaNet key and "
    "value projections per rank (DP attention, or a smaller TP)"
)
_LINEAR_SPLIT = (
    is_set(F.linear_attn_key_dim)
    & is_set(F.linear_attn_value_dim)
    & _BLOCK
    & F.quant_linear_attention
    & attn_tp_whole
    & (attn_tp >= 1)
    & divides(attn_tp, F.linear_attn_key_dim)
    & divides(attn_tp, F.linear_attn_value_dim)
)
#: `in_proj_qkvz` is a merged column-parallel layer ([key, key, value, value]): with more
#: than one output partition `validate_block_quant_shapes` checks every partition whatever
#: the TP size, in every release.
_LINEAR_QKVZ = Rule(
    "QUANT-BLOCK-LINEAR-ATTN",
    _LINEAR_SPLIT,
    # Key rows fail first; when they are whole blocks the partition shown is the value's.
    divides(F.quant_block_n, linear_qkvz_partition),
    "Weight output_partition_size = {linear_qkvz_partition} is not divisible by weight "
    "quantization block_n = {quant_block_n}.",
    FP8_LINEAR_ATTN,
    hint=_HINT_LINEAR,
)


#: `in_proj_ba` merges [value heads, value heads]: checked at any TP like `in_proj_qkvz`;
#: 32 or 64 rows can never be whole 128-row blocks, so only a checkpoint that leaves it
#: unquantized loads (sgl-project/sglang#19045: Qwen3.5-397B-A17B-FP8 at TP 8 on 0.5.8,
#: "output_partition_size = 8", 64 heads / 8, where that release quantized it).
_LINEAR_BA = Rule(
    "QUANT-BLOCK-LINEAR-ATTN-BA",
    is_set(F.linear_attn_value_heads)
    & _BLOCK
    & F.quant_linear_attn_ba
    & attn_tp_whole
    & (attn_tp >= 1)
    & divides(attn_tp, F.linear_attn_value_heads),
    divides(F.quant_block_n, linear_ba_shard),
    "Weight output_partition_size = {linear_ba_shard} is not divisible by weight "
    "quantization block_n = {quant_block_n}.",
    FP8_LINEAR_ATTN,
    hint="a checkpoint that leaves linear_attn.in_proj_b / in_proj_a unquantized "
    "(quantization_config.modules_to_not_convert)",
)


def _linear_out_rule(checked: Expr) -> Rule:
    """`out_proj` is row-parallel over the value width: its input shard must be whole
    `block_k` columns when the check runs (the same release difference as MLA's)."""
    return Rule(
        "QUANT-BLOCK-LINEAR-ATTN-OUT",
        _LINEAR_SPLIT & checked,
        divides(F.quant_block_k, linear_value_shard),
        "Weight input_size_per_partition = {linear_value_shard} is not divisible by weight "
        "quantization block_k = {quant_block_k}.",
        FP8_LINEAR_ATTN,
        hint=_HINT_LINEAR,
    )


#: The smallest group `MoeWNA16Method.create_weights` halves down to (`assert group_size >=
#: 32`); AWQ MoE layers that marlin cannot take fall back to it (awq.py get_quant_method).
WNA16_MIN_GROUP = 32

_INT_GROUP_RULES: tuple[Rule, ...] = (
    Rule(
        "QUANT-GROUP-DENSE-MLP",
        is_set(F.dense_intermediate_size)
        & is_set(F.quant_group_size)
        & F.quant_dense_mlp
        & (mlp_tp > 1)
        & divides(mlp_tp, F.dense_intermediate_size),
        divides(F.quant_group_size, dense_mlp_shard),
        "The input size is not aligned with the quantized weight shape. This can be caused "
        "by too large tensor parallel size. (down_proj input {dense_mlp_shard} per rank, "
        "group_size {quant_group_size})",
        INT_GROUP_LINEAR,
        hint=_HINT_DENSE,
    ),
    Rule(
        "QUANT-GROUP-EXPERTS",
        is_set(F.moe_intermediate_size)
        & is_set(F.quant_group_size)
        & F.quant_experts
        & one_of(F.quant_method, "awq", "awq_marlin")
        & (moe_tp >= 1)
        & divides(moe_tp, F.moe_intermediate_size),
        divides(F.quant_group_size, moe_expert_shard)
        | ((F.quant_group_size >= WNA16_MIN_GROUP) & divides(WNA16_MIN_GROUP, moe_expert_shard)),
        "AssertionError (group_size >= 32): the expert shard {moe_expert_shard} is not a "
        "multiple of group_size {quant_group_size} nor of any halving of it down to 32",
        AWQ_MOE,
        hint=_HINT_MOE,
    ),
)

_DENSE_SPLIT, _DENSE_BLOCK = _mlp_rules(
    "DENSE-MLP", F.dense_intermediate_size, F.quant_dense_mlp, mlp_tp, _HINT_DENSE
)
_SHARED_SPLIT, _SHARED_BLOCK = _shared_rules(shared_tp)

_HINT_VISION = (
    "an attention TP width that divides the vision tower's heads (DP attention, a smaller "
    "TP, or --mm-enable-dp-encoder where the model supports it)"
)


#: The tower is built: Llama 4's only with --enable-multimodal (0.5.18 on).
_VISION_BUILT = ~F.vision_needs_multimodal | F.enable_multimodal


def _vision_heads_rule(width: Field | Named, whole: Expr) -> Rule:
    """`VisionAttention` divides the tower's heads by its TP width (layers/attention/vision.py:
    `attn_tp_size`, 1 where the class honours --mm-enable-dp-encoder and it is set; all of
    TP in 0.4.6.post5, which builds Llama 4's tower always): Qwen3.5's and Gemma 3's
    16-head towers refuse attention TP 32 before any text layer is built
    (fidelity/weight_shapes/models.py)."""
    return Rule(
        "WEIGHT-VISION-HEADS",
        is_set(F.vision_num_heads)
        & ~(F.mm_enable_dp_encoder & F.vision_dp_encoder)
        & whole
        & (width >= 1),
        divides(width, F.vision_num_heads),
        "{vision_num_heads} is not divisible by {" + width.name + "}",
        VISION_SPLIT,
        hint=_HINT_VISION,
    )


def _vision_mlp_rule(built: Expr) -> Rule:
    """SigLIP's and Llama 4's vision MLP (`ColumnParallelLinear` over the TP group): Gemma
    3's 4,304 columns refuse TP 32 even at attention TP 1."""
    return Rule(
        "WEIGHT-VISION-MLP",
        is_set(F.vision_intermediate_size) & built & (F.tp_size >= 1),
        divides(F.tp_size, F.vision_intermediate_size),
        "{vision_intermediate_size} is not divisible by {tp_size}",
        LINEAR_SPLIT,
        hint="a TP width that divides the vision MLP's intermediate size",
    )


_VISION_HEADS = _vision_heads_rule(attn_tp, attn_tp_whole & _VISION_BUILT)
_VISION_MLP = _vision_mlp_rule(_VISION_BUILT)


#: The tower's attention all-reduces over all of TP: always for the towers of
#: `ModelSpec.vision_intermediate_size` (SigLIP, Llama 4's), and without DP attention for
#: the data-parallel-capable ones (`qwen3_vl.py`, `kimi_k25.py`:
#: `use_dp_attention_reduce=is_dp_attention_enabled()`) unless --mm-enable-dp-encoder
#: replicates them (0.5.23's build of Qwen3.5-397B at TP 8 with attention CP 2 refuses,
#: with DP attention 2 too it builds).
_VISION_REDUCES_OVER_TP = (is_set(F.vision_intermediate_size) & _VISION_BUILT) | (
    is_set(F.vision_num_heads) & F.vision_dp_encoder & ~F.mm_enable_dp_encoder & (attn_dp <= 1)
)


def _vision_reduce_rule(rule_id: str, narrowed: Expr, flag: str) -> Rule:
    """0.5.23's `VisionAttention` refuses to shard over an attention TP group narrower than
    TP when it all-reduces over TP (`reject_attn_tp_shard_with_tp_reduce`,
    `_VISION_REDUCES_OVER_TP`), where the tower runs on this worker (not a PD decode server,
    not `--language-only` or `--language-model-only`: `multimodal_encoder_runs_here`; a
    language-only server with --enable-adaptive-dispatch-to-encoder runs it too, a flag
    meshsat does not model). SGLang names the flag that narrows the group, so DP attention
    and attention CP are two rules, each with its wording (both at once: the CP one, SGLang
    then names both)."""
    return Rule(
        rule_id,
        _VISION_REDUCES_OVER_TP
        & attn_tp_whole
        & narrowed
        & ~F.language_only
        & ~F.language_model_only
        & (F.disaggregation_mode != "decode"),
        (attn_tp <= 1) | (attn_tp >= F.tp_size),
        "VisionAttention shards over the attention TP group ({attn_tp} ranks) but "
        "all-reduces over the full TP group ({tp_size} ranks), so it does not support "
        f"{flag} yet. Use --attn-dp-size equal to --tp-size, or drop {flag}, or "
        "--mm-enable-dp-encoder where the model supports it.",
        VISION_REDUCE,
        hint="DP attention over all of TP (attention TP 1), or none (attention TP = TP)",
    )


VISION_TP_REDUCE = (
    _vision_reduce_rule(
        "WEIGHT-VISION-TP-REDUCE", (attn_dp > 1) & (F.attn_cp_size == 1), "--attn-dp-size {attn_dp}"
    ),
    _vision_reduce_rule(
        "WEIGHT-VISION-TP-REDUCE-CP", F.attn_cp_size > 1, "--attn-cp-size {attn_cp_size}"
    ),
)

RULES: tuple[Rule, ...] = (
    Rule(
        "QUANT-NOT-CHECKED",
        is_set(F.quant_not_checked),
        ~is_set(F.quant_not_checked),
        "not checked: {quant_not_checked} (the per-rank weight shapes may still fail to load)",
        NOT_CHECKED,
        severity="warning",
    ),
    _VISION_HEADS,
    _VISION_MLP,
    _DENSE_SPLIT,
    _SHARED_SPLIT,
    Rule(
        "WEIGHT-EXPERTS-SPLIT",
        is_set(F.moe_intermediate_size) & (moe_tp >= 1),
        divides(moe_tp, F.moe_intermediate_size),
        "AssertionError (a bare assert: intermediate_size % moe_tp_size == 0): "
        "moe_intermediate_size ({moe_intermediate_size}) must be divisible by the MoE TP "
        "width moe_tp",
        MOE_SPLIT,
        hint=_HINT_MOE,
    ),
    _DENSE_BLOCK,
    _SHARED_BLOCK,
    # Up to 0.5.22 the FP8 linear check compares against the global TP size
    # (`get_parallel().tp_size`): an attention projection split over a smaller attention
    # TP group (DP attention) is not checked; 0.5.23 checks against the layer's own group.
    _mla_rule((F.tp_size > 1) & (attn_tp == F.tp_size)),
    _LINEAR_QKVZ,
    _LINEAR_BA,
    _linear_out_rule((F.tp_size > 1) & (attn_tp == F.tp_size)),
    # ... and the MoE's down-projection check reads the global TP size before 0.5.23.
    _moe_rule(F.tp_size > 1, FP8_MOE),
    *_INT_GROUP_RULES,
    Rule(
        "QUANT-NVFP4-DENSE-MLP",
        is_set(F.dense_intermediate_size)
        & is_set(F.quant_group_k)
        & F.quant_dense_mlp
        & divides(mlp_tp, F.dense_intermediate_size),
        divides(F.quant_group_k, dense_mlp_shard),
        "Unsupported model when in features size is not multiple of 16 "
        "(down_proj input {dense_mlp_shard})",
        NVFP4_LINEAR,
        hint=_HINT_DENSE,
    ),
)

#: 0.5.23: `validate_block_quant_shapes` reads the layer's own group (`layer.tp_group`), and
#: `create_fp8_moe_weight_` the MoE TP size (`layer.moe_tp_size`).
RULES_0_5_23: tuple[Rule, ...] = (
    *_shared_rules(shared_tp_0_5_23),
    _mla_rule(attn_tp > 1),
    _linear_out_rule(attn_tp > 1),
    _moe_rule(moe_tp > 1, FP8_MOE_0_5_23),
)
#: 0.4.6.post5's shared-expert fusion (see `shared_tp_0_4`), and its `VisionAttention`
#: splits over all of TP (its build of gemma-3-27b-it at tp 32 with DP attention 32).
RULES_0_4: tuple[Rule, ...] = (
    *_shared_rules(shared_tp_0_4),
    # ... and builds Llama 4's tower whether or not multimodal serving is enabled.
    _vision_heads_rule(F.tp_size, F.tp_size >= 1),
    _vision_mlp_rule(TRUE),
)
