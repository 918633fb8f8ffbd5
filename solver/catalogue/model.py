"""What a model's shape allows (active only when a model config is given)."""

from __future__ import annotations

from meshsat.solver.lang.derived import attn_tp, attn_tp_whole
from meshsat.solver.lang.expr import divides, is_set, named, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

SRC = "model weight sharding"

#: The experts each MoE layer holds over EP: the model's (logical) experts plus the redundant
#: replicas EPLB places (`ExpertLocationMetadata._init_common`: `num_physical_experts %
#: ep_size == 0`, built at model load whatever --enable-eplb says, every release; the MoE
#: layer is built with as many, `FusedMoE` asserts the same split). An elastic EP deployment
#: with an initial size splits them over that size instead (`_compute_elastic_expert_layout`);
#: meshsat reads ep_size there too.
physical_experts = named("physical_experts", F.num_experts + F.ep_num_redundant_experts)

#: Where the model class builds attention over all of TP whatever DP attention says
#: (`attention_over_tp`: llama.py asserts `total_num_heads % tp_size == 0`) and that is
#: wider than attention TP: its heads split over TP.
_OVER_TP = F.attention_over_tp & (attn_tp != F.tp_size)


def marlin_a2a_rule(sm100_triton: bool) -> Rule:
    """The Marlin MoE runner has a fused function for no all-to-all backend
    (`moe_runner/runner.py` `MoeRunner.__init__`: "requires a fused func for a2a backend
    ..."), and compressed-tensors WNA16 experts (Kimi-K2.5's INT4) run on it on CUDA
    (`compressed_tensors.py`'s MoE scheme choice) unless the runner is `triton` (the Triton
    method), `flashinfer_trtllm` on MXINT4 weights, or, from 0.5.19 (`sm100_triton`), the
    auto runner on SM100/SM103 with weights the Triton method takes. SGLang 0.5.18 to
    0.5.23's builds of Kimi-K2.5 under DeepEP, answered as Hopper, raise it
    (tests/fixtures/weight_shapes/models/); a GPU class is needed (`gpu_sm`), else not
    checked."""
    runner = F.moe_runner_backend
    marlin = (
        F.quant_wna16_experts
        & (runner != "triton")
        & ~((runner == "flashinfer_trtllm") & F.quant_mxint4_experts)
    )
    cuda = (F.platform == "cuda") & is_set(F.gpu_sm)
    blackwell_auto = (runner == "auto") & one_of(F.gpu_sm, 100, 103) & F.quant_wna16_triton_experts
    return Rule(
        "MOE-MARLIN-A2A",
        marlin & cuda & ~blackwell_auto if sm100_triton else marlin & cuda,
        F.moe_a2a_backend == "none",
        "Runner backend MoeRunnerBackend.MARLIN requires a fused func for a2a backend "
        "{moe_a2a_backend}, but none is registered.",
        SRC,
        hint="drop the all-to-all backend (--moe-a2a-backend none; prefill CP forces deepep "
        "on MLA models), --moe-runner-backend triton, or the auto runner on SM100 (0.5.19+)",
    )


MARLIN_A2A = marlin_a2a_rule(sm100_triton=True)

#: From 0.5.19 the Triton WNA16 MoE refuses weights it has no kernel for (CUDA; ROCm
#: always takes Triton, MXINT4 under flashinfer_trtllm never reaches it).
TRITON_WNA16 = Rule(
    "MOE-TRITON-WNA16",
    F.quant_wna16_experts & (F.moe_runner_backend == "triton") & (F.platform == "cuda"),
    F.quant_wna16_triton_experts,
    "The Triton WNA16 MoE backend only supports symmetric INT4 group quantization with "
    "group_size=32 or 128 and no actorder.",
    SRC,
    hint="--moe-runner-backend auto (Marlin), or a checkpoint of 4-bit symmetric groups",
)


RULES: tuple[Rule, ...] = (
    Rule(
        "MODEL-HEADS",
        is_set(F.num_attention_heads) & attn_tp_whole,
        divides(attn_tp, F.num_attention_heads),
        "num_attention_heads ({num_attention_heads}) must be divisible by the attention TP "
        "width attn_tp",
        SRC,
    ),
    Rule(
        "MODEL-KV-HEADS",
        is_set(F.num_key_value_heads) & attn_tp_whole,
        divides(attn_tp, F.num_key_value_heads) | divides(F.num_key_value_heads, attn_tp),
        "num_key_value_heads ({num_key_value_heads}) must divide or be divisible by the "
        "attention TP width attn_tp (KV heads are split or replicated)",
        SRC,
    ),
    Rule(
        "MODEL-HEADS-TP",
        is_set(F.num_attention_heads) & is_set(F.num_key_value_heads) & _OVER_TP,
        divides(F.tp_size, F.num_attention_heads)
        & (divides(F.tp_size, F.num_key_value_heads) | divides(F.num_key_value_heads, F.tp_size)),
        "this model class splits attention over all of TP even under DP attention: "
        "num_attention_heads ({num_attention_heads}) must be divisible by tp_size ({tp_size}), "
        "and num_key_value_heads ({num_key_value_heads}) must divide or be divisible by it",
        SRC,
    ),
    Rule(
        "MODEL-EXPERTS",
        is_set(F.num_experts),
        divides(F.ep_size, physical_experts),
        "num_experts ({num_experts}) plus --ep-num-redundant-experts "
        "({ep_num_redundant_experts}) must be divisible by ep_size ({ep_size})",
        SRC,
    ),
    Rule(
        "MODEL-PP-LAYERS",
        is_set(F.num_hidden_layers),
        F.pp_size <= F.num_hidden_layers,
        "pp_size ({pp_size}) cannot exceed num_hidden_layers ({num_hidden_layers})",
        SRC,
    ),
    MARLIN_A2A,
    TRITON_WNA16,
)


#: 0.4.6.post5's model classes that build `EPMoE` under --enable-ep-moe without the
#: `layer_id` its constructor requires (`mixtral.py`, `qwen2_moe.py`, `grok.py`; DeepSeek and
#: Qwen3-MoE go through `get_moe_impl_class` and pass it): the class raises a TypeError as
#: the model is built (its build of Mixtral-8x7B at EP 4 and 8,
#: tests/fixtures/weight_shapes/models/0.4.6.post5.json). Under DeepEP they build `FusedMoE`.
EPMOE_WITHOUT_LAYER_ID_0_4 = (
    "MixtralForCausalLM",
    "Qwen2MoeForCausalLM",
    "Grok1ForCausalLM",
    "Grok1ModelForCausalLM",
)
EP_MOE_0_4 = Rule(
    "MODEL-EP-MOE-0-4",
    one_of(F.architecture, *EPMOE_WITHOUT_LAYER_ID_0_4) & (F.moe_a2a_backend == "none"),
    F.ep_size == 1,
    "EPMoE.__init__() missing 1 required positional argument: 'layer_id'",
    SRC,
    hint="drop --enable-ep-moe (the experts split over TP), or use --enable-deepep-moe",
)
