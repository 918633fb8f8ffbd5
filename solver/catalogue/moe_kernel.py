"""MoE runner kernels (handle_moe_kernel_config): which EP width and all-to-all backend each
FlashInfer runner takes. SGLang runs this handler before handle_a2a_moe, so it reads the
ep_size DWDP and the model overrides left (`ep_before_a2a`: the user's where neither set
it), not the all-to-all backend's ep_size = tp_size rewrite.

`QUANT_RULES` are the quantization each runner takes (0.5.23, `--quantization`);
a checkpoint's own quantization config is a model fact meshsat does not read, so a model
whose config.json names a quantization method is judged as its flag says."""

from __future__ import annotations

from meshsat.solver.catalogue.context_parallel import ep_before_a2a
from meshsat.solver.lang.derived import attn_dp
from meshsat.solver.lang.expr import FALSE, Expr, is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Resolution, Rule, assign

SRC = "handle_moe_kernel_config"
runner = F.moe_runner_backend
_EP_ONE_OR_TP = "The expert parallel size must be 1 or the same as the tensor parallel size"

#: Runners that take an EP width of 1 or tp_size only: (rule id, runner).
_EP_ONE_OR_TP_RUNNERS = (
    ("MOE-CUTLASS-EP", "flashinfer_cutlass"),
    ("MOE-CUTEDSL-EP", "flashinfer_cutedsl"),
)

RULES: tuple[Rule, ...] = (
    *(
        Rule(
            rule_id,
            runner == backend,
            (ep_before_a2a == 1) | (ep_before_a2a == F.tp_size),
            _EP_ONE_OR_TP,
            SRC,
            hint="use --ep-size 1 or the TP size",
        )
        for rule_id, backend in _EP_ONE_OR_TP_RUNNERS
    ),
    Rule(
        "MOE-CUTEDSL-A2A",
        runner == "flashinfer_cutedsl",
        one_of(F.moe_a2a_backend, "none", "deepep", "flashinfer"),
        "flashinfer_cutedsl supports moe_a2a_backend='none', 'deepep', or 'flashinfer', got "
        "'{moe_a2a_backend}'.",
        SRC,
    ),
)


#: An unquantized model as the MoE runner asserts see it: `--quantization unquant` is None
#: by then (0.5.18, 0.5.19 and 0.5.23 resolve it in _handle_missing_default_values, before
#: any layout handler; measured: flashinfer_cutlass, flashinfer_trtllm(_routed) and
#: experimental_sgl_trtllm with `unquant` are accepted, flashinfer_cutedsl refused).
_unquantized = ~is_set(F.quantization) | (F.quantization == "unquant")


def _quant_rule(rule_id: str, backend: str, allowed: tuple[str | None, ...], name: str) -> Rule:
    """handle_moe_kernel_config's assert that `backend` runs only these quantizations (or
    an unquantized bfloat16 model, `--quantization unquant` included, where `allowed` ends
    in None)."""
    plain = allowed[-1] is None
    methods = tuple(a for a in allowed if a is not None)
    ok = one_of(F.quantization, *methods)
    return Rule(
        rule_id,
        runner == backend,
        (ok | _unquantized) if plain else ok,
        f"Invalid quantization '{{quantization}}'. {name} supports only: "
        + ", ".join(methods)
        + (", or bfloat16 (None)." if plain else "."),
        SRC,
        hint="--quantization " + methods[0],
    )


#: (rule, runner, quantizations it takes, None last for "or unquantized"), in the order of
#: 0.5.23's handle_moe_kernel_config; each runner's quantization assert comes before its EP
#: width assert (MOE-CUTLASS-EP, MOE-CUTEDSL-EP).
QUANT_RULES: tuple[tuple[str, Rule], ...] = (
    (
        "MOE-CUTLASS-EP",
        _quant_rule(
            "MOE-CUTLASS-QUANT",
            "flashinfer_cutlass",
            ("modelopt_fp4", "modelopt_fp8", "modelopt_mixed", None),
            "FlashInfer Cutlass MOE",
        ),
    ),
    (
        "MOE-CUTEDSL-EP",
        _quant_rule(
            "MOE-CUTEDSL-QUANT",
            "flashinfer_cutedsl",
            ("modelopt_fp4", "modelopt_mixed", "nvfp4_online"),
            "FlashInfer CuteDSL MOE",
        ),
    ),
)
_TRTLLM_QUANTS = (
    "modelopt_fp4",
    "nvfp4_online",
    "fp8",
    "mxfp8",
    "modelopt_fp8",
    "modelopt_mixed",
    "compressed-tensors",
    None,
)
#: After MOE-CUTEDSL-A2A, in this order.
QUANT_RULES_AFTER: tuple[Rule, ...] = (
    # One assert serves both TRT-LLM runners.
    *(
        _quant_rule(rule_id, backend, _TRTLLM_QUANTS, "FlashInfer TRTLLM MOE")
        for rule_id, backend in (
            ("MOE-TRTLLM-QUANT", "flashinfer_trtllm"),
            ("MOE-SGL-TRTLLM-QUANT", "experimental_sgl_trtllm"),
        )
    ),
    _quant_rule(
        "MOE-TRTLLM-ROUTED-QUANT",
        "flashinfer_trtllm_routed",
        ("fp8", "mxfp8", "modelopt_fp4", "modelopt_mixed", "nvfp4_online", None),
        "FlashInfer TRTLLM routed MOE",
    ),
    # The resolved ep_size of this handler, not the a2a backend's ep = tp one step later:
    # 0.5.23's oracle takes `--tp 8 --moe-a2a-backend deepep --moe-runner-backend cutlass
    # --quantization fp8` and refuses it with `--ep-size 8` (or DWDP, or a model override
    # that sets ep = tp); the same order in 0.5.18 (__post_init__) and 0.5.19 (pipeline).
    Rule(
        "MOE-CUTLASS-FP8-EP",
        (runner == "cutlass") & one_of(F.quantization, "fp8", "mxfp8"),
        ep_before_a2a == 1,
        "FP8/MXFP8 Cutlass MoE is only supported with ep_size == 1",
        SRC,
        hint="--ep-size 1",
    ),
)

#: validate_experimental_sgl_marlin (after handle_elastic_ep, 0.5.23): on the resolved EP
#: width and all-to-all backend.
MARLIN_EP = Rule(
    "MOE-SGL-MARLIN-EP",
    (runner == "experimental_sgl_marlin") & (F.ep_size > 1),
    F.moe_a2a_backend == "none",
    "experimental_sgl_marlin EP requires --moe-a2a-backend none",
    "validate_experimental_sgl_marlin",
)


#: check_lora_moe_runner_args (check_server_args, 0.5.23): the LoRA MoE runners serve
#: adapter traffic on standard dispatch with trivial expert placement. They read the
#: resolved --enable-lora (R-LORA-PATHS: --lora-paths turns it on).
_lora = one_of(runner, "lora_cutedsl", "lora_triton", "lora_marlin")
_LORA_SRC = "check_server_args"
LORA_RULES: tuple[Rule, ...] = (
    Rule(
        "MOE-LORA-ENABLE",
        _lora,
        F.enable_lora,
        "--moe-runner-backend {moe_runner_backend} requires --enable-lora (or --lora-paths)",
        _LORA_SRC,
        hint="--enable-lora",
    ),
    Rule(
        "MOE-LORA-A2A",
        _lora,
        F.moe_a2a_backend == "none",
        "--moe-runner-backend {moe_runner_backend} requires Standard dispatch, got "
        "--moe-a2a-backend {moe_a2a_backend}",
        _LORA_SRC,
    ),
    Rule(
        "MOE-LORA-PLACEMENT",
        _lora,
        ~F.enable_eplb & (F.init_expert_location == "trivial") & (F.ep_num_redundant_experts == 0),
        "--moe-runner-backend {moe_runner_backend} currently requires trivial expert placement "
        "without EPLB or redundant experts",
        _LORA_SRC,
    ),
)

#: check_lora_server_args (0.5.18 to 0.5.23, at launch; before check_lora_moe_runner_args):
#: LoRA on with no adapter named at launch shapes its buffers from --max-lora-rank and
#: --lora-target-modules, so it asserts both (their truth: a rank of 0 or an empty module
#: list is none). --enable-lora as typed: --lora-paths turns it on only with adapters.
LORA_RANK_MODULES = Rule(
    "LORA-RANK-MODULES",
    F.enable_lora & ~F.lora_paths,
    is_set(F.max_lora_rank) & (F.max_lora_rank != 0) & F.lora_target_modules,
    "When no initial --lora-paths is provided, you need to specify both --max-lora-rank and "
    "--lora-target-modules for LoRA initialization.",
    _LORA_SRC,
    hint="--max-lora-rank and --lora-target-modules, or --lora-paths with an adapter",
)

#: _check_v2_lora_modes (lora_hook.py, 0.5.23): what the triton_v2 LoRA back-end cannot
#: run yet, as (rule suffix, holds, SGLang's name for the mode), in its order. Not
#: modelled: SGLANG_EXPERIMENTAL_LORA_OPTI (asked before ROCm; assumed unset).
_V2_MODES = (
    ("DP-ATTN", attn_dp <= 1, "DP-attention with --attn-dp-size > 1"),
    ("PDMUX", ~F.enable_pdmux, "PD-multiplexing"),
    ("TBO", ~F.enable_two_batch_overlap, "two-batch overlap"),
    ("ROCM", F.platform != "hip", "ROCm"),
)


def _v2_rules(prefix: str, when: Expr, option: str) -> tuple[Rule, ...]:
    """One rule per mode of _check_v2_lora_modes, which `option` (SGLang's words for what
    asked for triton_v2) does not support yet."""
    return tuple(
        Rule(
            f"{prefix}-{suffix}",
            when,
            holds,
            f"{option} does not yet support {mode}",
            _LORA_SRC,
        )
        for suffix, holds, mode in _V2_MODES
    )


#: check_lora_server_args (0.5.23), before check_lora_moe_runner_args: LoRA on the
#: triton_v2 back-end with any other MoE runner (for a lora_* runner the runner's own
#: check below asks the same).
LORA_V2_RULES: tuple[Rule, ...] = _v2_rules(
    "LORA-V2",
    F.enable_lora & (F.lora_backend == "triton_v2") & ~_lora,
    "--lora-backend triton_v2",
)
#: check_lora_moe_runner_args (0.5.23) after MOE-LORA-ENABLE, in its order: the lora_*
#: runners run on the triton_v2 back-end only, in its modes, on BF16, 128-block FP8 or
#: (lora_marlin alone) ModelOpt NVFP4 weights (`--quantization unquant` is None by then).
LORA_RUNNER_RULES: tuple[Rule, ...] = (
    Rule(
        "MOE-LORA-BACKEND",
        _lora,
        F.lora_backend == "triton_v2",
        "--moe-runner-backend {moe_runner_backend} requires --lora-backend triton_v2",
        _LORA_SRC,
        hint="--lora-backend triton_v2",
    ),
    *_v2_rules("MOE-LORA", _lora, "--moe-runner-backend {moe_runner_backend}"),
    Rule(
        "MOE-LORA-QUANT",
        _lora,
        one_of(F.quantization, "fp8", "modelopt_fp4") | _unquantized,
        "--moe-runner-backend {moe_runner_backend} supports unquantized BF16, 128-block FP8 "
        "and ModelOpt NVFP4 MoE, got --quantization {quantization}",
        _LORA_SRC,
    ),
    Rule(
        "MOE-LORA-NVFP4",
        _lora & (F.quantization == "modelopt_fp4"),
        runner == "lora_marlin",
        "--moe-runner-backend {moe_runner_backend} cannot run ModelOpt NVFP4 MoE; use "
        "--moe-runner-backend lora_marlin",
        _LORA_SRC,
        hint="--moe-runner-backend lora_marlin",
    ),
)
#: check_lora_moe_runner_args (0.5.23), between MOE-LORA-A2A and MOE-LORA-PLACEMENT.
LORA_EEP = Rule(
    "MOE-LORA-EEP",
    _lora,
    ~is_set(F.ep_join_mode),
    "--moe-runner-backend {moe_runner_backend} does not yet support elastic EP",
    _LORA_SRC,
)

#: 0.4.6.post5's check_server_args (at launch, between its multi-node DP and base GPU id
#: asserts): LoRA adapters run without the radix cache (later releases take both). A
#: refusal, not a silent change; a PD decode server's radix cache is off already
#: (R-DECODE-RADIX, __post_init__).
LORA_RADIX_0_4 = Rule(
    "LORA-PATHS-RADIX",
    F.lora_paths,
    F.disable_radix_cache,
    "compatibility of lora and cuda graph and radix attention is in progress",
    _LORA_SRC,
    hint="--disable-radix-cache",
)


# --- the SM100 model overrides' MoE runner (0.5.18, 0.5.19, 0.5.23) -------------------------
#: `_DEEPSEEK_FAMILY_ARCHS` (overrides.py), which `_deepseek_moe_quant_resolution` reads, as
#: 0.5.19 lists it (LongCat, also listed, never takes the runner: left out). Each release
#: declares its difference from this one below.
DEEPSEEK_FAMILY_ARCHS_0_5_19 = (
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "KimiK25ForConditionalGeneration",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
    "GlmMoeDsaForCausalLM",
    "Dots3NoteForCausalLM",
)
#: 0.5.18's list has no Dots3Note.
DEEPSEEK_FAMILY_ARCHS_0_5_18 = tuple(
    a for a in DEEPSEEK_FAMILY_ARCHS_0_5_19 if a != "Dots3NoteForCausalLM"
)
#: 0.5.23 adds GLM-5 Next and HunYuan V4 (with its NextN draft).
DEEPSEEK_FAMILY_ARCHS = (
    *DEEPSEEK_FAMILY_ARCHS_0_5_19,
    "Glm5NextForConditionalGeneration",
    "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN",
)
#: `_qwen3_moe_family_overrides`' registered architectures (arg_groups/overrides.py in
#: 0.5.18, model_overrides/qwen3_moe.py in 0.5.19: the same six).
QWEN3_MOE_FAMILY_ARCHS_0_5_19 = (
    "Qwen3MoeForCausalLM",
    "Qwen3VLMoeForConditionalGeneration",
    "Qwen3NextForCausalLM",
    "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration",
)
#: 0.5.23 registers Qwen4Exp too.
QWEN3_MOE_FAMILY_ARCHS = (*QWEN3_MOE_FAMILY_ARCHS_0_5_19, "Qwen4ExpForConditionalGeneration")
_IS_SM100 = (F.platform == "cuda") & is_set(F.gpu_sm) & one_of(F.gpu_sm, 100, 103)


def _quant_is(*methods: str, none: bool = True) -> Expr:
    """The quantization the override reads: the typed one, else the checkpoint's
    (`get_quantization_config`); `none`: no quantization at all counts too. A DeepSeek V3
    checkpoint that states none is read as fp8 or kept unquantized by its safetensors,
    both of which count where `none` does."""
    typed = is_set(F.quantization) & one_of(F.quantization, *methods)
    stated = ~is_set(F.quantization) & is_set(F.quant_method) & one_of(F.quant_method, *methods)
    unquantized = ~is_set(F.quantization) & ~is_set(F.quant_method)
    return typed | stated | (unquantized if none else FALSE)


_AUTO_NO_A2A = (F.moe_a2a_backend == "none") & (F.moe_runner_backend == "auto")


def sm100_moe_runner(deepseek: tuple[str, ...], qwen3: tuple[str, ...]) -> Resolution:
    """On SM100/SM103 (`is_sm100`: compute capability 10.x in all three releases) the DeepSeek
    family (not LongCat) and the Qwen3-MoE family run their MoE on flashinfer_trtllm when the
    runner is auto and no all-to-all backend is set (oracle 0.5.23 with B200 facts: 132 + 121
    configs of the s3 sweep that meshsat called auto). The conditions are the same in 0.5.18,
    0.5.19 and 0.5.23 (source read); the releases differ in the architecture lists only.
    Qwen3's quantization list (fp8, modelopt_fp4) is 0.5.18's and 0.5.19's whole list;
    0.5.23's also takes modelopt_mixed unless its MoE layers are W4A16 NVFP4 (then marlin),
    which meshsat cannot see: modelopt_mixed stays auto for Qwen3. Not modelled either: the
    Kimi K2 thinking INT4 recipe (compressed-tensors groups of 32), which DeepSeek's
    override also sends there."""
    return Resolution(
        "R-SM100-MOE-RUNNER",
        "handle_model_specific_adjustments",
        "on SM100 the DeepSeek and Qwen3-MoE model overrides turn the auto MoE runner into "
        "flashinfer_trtllm (no all-to-all backend, FP8/ModelOpt FP4 or unquantized weights)",
        (
            assign(
                _IS_SM100
                & _AUTO_NO_A2A
                & one_of(F.architecture, *deepseek)
                & _quant_is("fp8", "modelopt_fp8", "modelopt_fp4", "modelopt_mixed"),
                moe_runner_backend="flashinfer_trtllm",
            ),
            assign(
                _IS_SM100
                & _AUTO_NO_A2A
                & one_of(F.architecture, *qwen3)
                & _quant_is("fp8", "modelopt_fp4"),
                moe_runner_backend="flashinfer_trtllm",
            ),
        ),
    )


SM100_MOE_RUNNER_0_5_19 = sm100_moe_runner(
    DEEPSEEK_FAMILY_ARCHS_0_5_19, QWEN3_MOE_FAMILY_ARCHS_0_5_19
)
SM100_MOE_RUNNER_0_5_18 = sm100_moe_runner(
    DEEPSEEK_FAMILY_ARCHS_0_5_18, QWEN3_MOE_FAMILY_ARCHS_0_5_19
)
SM100_MOE_RUNNER = sm100_moe_runner(DEEPSEEK_FAMILY_ARCHS, QWEN3_MOE_FAMILY_ARCHS)
