"""What SGLang changes silently, in the order it does so (docs/rules.md §3, §3b).

Every later rule reads the resolved values. Each step here is also what `fix` and
`enumerate` treat as a fixed point: a listed layout is one SGLang would not rewrite.
"""

from __future__ import annotations

from dataclasses import replace

from meshsat.solver.catalogue.attention_backend import MLA_MODEL
from meshsat.solver.catalogue.attention_default import default_backend, forced_backend
from meshsat.solver.catalogue.deterministic import DETERMINISTIC
from meshsat.solver.catalogue.page_size import resolution as page_resolution
from meshsat.solver.lang.config import A2A_BACKENDS
from meshsat.solver.lang.derived import attn_dp, elastic_scaling
from meshsat.solver.lang.expr import Expr, is_set, ite, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.model_spec import CP_V2_DEFAULT_ARCHITECTURES, MLA_ARCHITECTURES
from meshsat.solver.lang.rule import Resolution, assign

#: Every all-to-all backend but "none" and Ascend's TP path dispatches over all ranks (SGLang
#: sets ep = tp; `_A2A_EP_SPANNING_BACKENDS`, 0.5.23).
A2A_FORCING_EP = tuple(b for b in A2A_BACKENDS if b not in ("none", "ascend_tp"))


#: A DSA model's prefill CP where SGLang's DeepSeek-family override configures it.
_DSA_CP = F.is_deepseek_dsa & F.enable_prefill_cp & (F.platform != "npu")


def _strategy_of(mode: Expr) -> Expr:
    return ite(mode == "in-seq-split", "zigzag", "interleave")


def legacy_cp(dsa_default: bool) -> Resolution:
    """`dsa_default`: the DeepSeek-family override, which sets a DSA model's attention
    backend to dsa, runs before this step (0.5.19's pipeline; 0.5.18's `__post_init__`
    runs it after), so a DSA model's prefill CP takes the DSA spellings too."""
    legacy, dsa_legacy = F.enable_prefill_context_parallel, F.enable_dsa_prefill_context_parallel
    mirror = ~(legacy & dsa_legacy) & F.enable_prefill_cp & is_set(F.cp_strategy)
    use_dsa = dsa_legacy | one_of(F.attention_backend, "dsa", "dsv4")
    if dsa_default:
        use_dsa = use_dsa | (F.is_deepseek_dsa & ~is_set(F.attention_backend))
    mode = ite(F.cp_strategy == "zigzag", "in-seq-split", "round-robin-split")
    return Resolution(
        "R-LEGACY-CP",
        "handle_legacy_cp_arguments",
        "a legacy prefill-CP flag is set; --enable-prefill-cp with --cp-strategy is the "
        "current spelling",
        (
            assign(legacy | dsa_legacy, enable_prefill_cp=True),
            assign(legacy & ~is_set(F.cp_strategy), cp_strategy=_strategy_of(F.prefill_cp_mode)),
            assign(
                dsa_legacy & ~is_set(F.cp_strategy),
                cp_strategy=_strategy_of(F.dsa_prefill_cp_mode),
            ),
            assign(
                mirror & use_dsa,
                quiet=True,
                enable_dsa_prefill_context_parallel=True,
                enable_prefill_context_parallel=False,
            ),
            assign(mirror & ~use_dsa, quiet=True, enable_prefill_context_parallel=True),
            assign(mirror, quiet=True, dsa_prefill_cp_mode=mode, prefill_cp_mode=mode),
        ),
    )


#: --dcp-comm-backend unset: up to 0.5.19 its default is ag_rs (the flag's own default).
DCP_COMM_AG_RS = Resolution(
    "R-DCP-COMM",
    "handle_dcp_validation",
    "the decode-CP communication backend defaults to ag_rs",
    (assign(~is_set(F.dcp_comm_backend), quiet=True, dcp_comm_backend="ag_rs"),),
)

#: handle_a2a_moe's dispatch-mode defaults, in its order (0.5.18 to 0.5.23): MoRI runs
#: normal dispatch, pplx low-latency dispatch on DeepGEMM, DeepEP with the CuteDSL FP4 runner
#: low-latency dispatch (it has no normal handler); DeepEP's normal mode then turns off the
#: decode and prefill CUDA graphs ("Cuda graph is disabled because deepep_mode=`normal`").
#: MoRI EPv2's low_latency -> normal (0.5.23, SGLANG_MORI_EP_V2) is not modelled.
A2A_DISPATCH_MODE = Resolution(
    "R-A2A-DISPATCH-MODE",
    "handle_a2a_moe",
    "the all-to-all backend picks the DeepEP dispatch mode (MoRI normal, pplx and DeepEP "
    "with flashinfer_cutedsl low_latency) and pplx's DeepGEMM runner; DeepEP's normal mode "
    "runs without CUDA graphs",
    (
        assign((F.moe_a2a_backend == "mori") & (F.deepep_mode == "auto"), deepep_mode="normal"),
        assign(
            (F.moe_a2a_backend == "pplx") & (F.deepep_mode == "auto"), deepep_mode="low_latency"
        ),
        assign(
            (F.moe_a2a_backend == "pplx") & (F.moe_runner_backend == "auto"),
            moe_runner_backend="deep_gemm",
        ),
        assign(
            (F.moe_a2a_backend == "deepep")
            & (F.moe_runner_backend == "flashinfer_cutedsl")
            & (F.deepep_mode == "auto"),
            deepep_mode="low_latency",
        ),
        assign(
            (F.moe_a2a_backend == "deepep")
            & (F.deepep_mode == "normal")
            & ~(F.disable_decode_cuda_graph & F.disable_prefill_cuda_graph),
            disable_decode_cuda_graph=True,
            disable_prefill_cuda_graph=True,
        ),
    ),
)


#: handle_attention_backend_compatibility's own changes, in its order (0.5.18 to 0.5.23):
#: equal split back-ends become the base one (`_attention_backend_default`, which otherwise
#: fills an unset base with the default of the GPU and model: `attention_default`, where
#: meshsat knows both, with the model overrides' picks before it); a CuteDSL MLA decode
#: prefills with trtllm_mla (`_cutedsl_prefill_backend_fill`, once its checks pass: SM100
#: and the KV dtypes it takes, so never for an FP4 cache); FA3 takes FP8 only as e4m3, so
#: fp8_e5m2 runs on Triton (`_attention_backend_fa3_fp8_fallback`).
_P, _D = F.prefill_attention_backend, F.decode_attention_backend
_CUTEDSL_FILL = (
    ((F.attention_backend == "cutedsl_mla") | (_D == "cutedsl_mla"))
    & ~is_set(_P)
    & one_of(F.kv_cache_dtype, "fp8_e4m3", "bf16", "bfloat16", "auto")
    & (F.platform == "cuda")
    & (~is_set(F.gpu_sm) | one_of(F.gpu_sm, 100, 103))
)


def attn_backend(release: str) -> Resolution:
    """R-ATTN-BACKEND of a 0.5.x release ("0.5.18", "0.5.19", "0.5.23": the default differs
    for DFLASH and MiMo V2, `attention_default`). 0.5.23: after a failed NVFP4 handler (an
    nvfp4 cache whose decode back-end R-NVFP4-BACKENDS did not set) SGLang fills nothing, so
    the back-end its checks name stays the one it read."""
    default = default_backend(release)
    if release == "0.5.23":
        handled = (F.kv_cache_dtype != "nvfp4") | (is_set(_D) & (_D == "trtllm_mha"))
        default = replace(default, when=default.when & handled)
    return Resolution(
        "R-ATTN-BACKEND",
        "handle_attention_backend_compatibility",
        "equal --prefill-attention-backend and --decode-attention-backend are the attention "
        "backend, else an unset one is the GPU's and model's default; a cutedsl_mla decode "
        "prefills with trtllm_mla; FA3 with an fp8_e5m2 KV cache falls back to Triton",
        (
            assign(is_set(_P) & (_P == _D), attention_backend=_P),
            default,
            assign(_CUTEDSL_FILL, prefill_attention_backend="trtllm_mla"),
            assign(
                (F.attention_backend == "fa3") & (F.kv_cache_dtype == "fp8_e5m2"),
                attention_backend="triton",
            ),
        ),
    )


ATTN_BACKEND = attn_backend("0.5.19")

#: handle_pd_disaggregation (0.5.18 to 0.5.23): a PD decode server runs without its radix
#: cache ("Radix cache is disabled for decode server") unless
#: --disaggregation-decode-enable-radix-cache, which turns it on whatever
#: --disable-radix-cache says. HiCache then reads it (HICACHE-RADIX).
DECODE_RADIX = Resolution(
    "R-DECODE-RADIX",
    "handle_pd_disaggregation",
    "a PD decode server turns the radix cache off (on with "
    "--disaggregation-decode-enable-radix-cache)",
    (
        assign(
            F.disaggregation_mode == "decode",
            quiet=True,
            disable_radix_cache=~F.disaggregation_decode_enable_radix_cache,
        ),
    ),
)

#: _dsa_kv_cache_dtype_default (handle_model_specific_adjustments' DeepSeek-family branch,
#: 0.5.18 to 0.5.23; before MODEL-DSA-KV-DTYPE's assert and every attention check): a DSA
#: model's `auto` KV cache is fp8_e4m3 on compute capability 10 and later, bfloat16 below
#: (ROCm's Instinct GPUs report 9.x); `bf16` is spelled bfloat16. NPU keeps what was given;
#: on CUDA with no `gpu_sm` the choice is not known and `auto` stays. Not read: 0.5.23's
#: `learnable_sink` (it keeps bfloat16; no field). The memory model sizes the pool in this
#: step's answer (memory/kv.py `resolved_kv_cache_dtype` evaluates it from the pack).
_DSA_KV = F.is_deepseek_dsa & one_of(F.platform, "cuda", "hip")
_SM100 = (F.platform == "cuda") & is_set(F.gpu_sm) & (F.gpu_sm >= 100)
DSA_KV_DTYPE = Resolution(
    "R-DSA-KV-DTYPE",
    "handle_model_specific_adjustments",
    "a DeepSeek DSA model's KV cache defaults to bfloat16 (fp8_e4m3 on SM100 and later); "
    "bf16 is bfloat16",
    (
        assign(
            _DSA_KV & (F.kv_cache_dtype == "auto") & ((F.platform == "hip") | is_set(F.gpu_sm)),
            kv_cache_dtype=ite(_SM100, "fp8_e4m3", "bfloat16"),
        ),
        assign(_DSA_KV & (F.kv_cache_dtype == "bf16"), kv_cache_dtype="bfloat16"),
    ),
)


def pp_overlap(source: str) -> Resolution:
    """Pipeline parallelism turns the overlap scheduler off, in every release
    (`_pipeline_parallel_overlap_disable`, 0.5.18 to 0.5.23, after elastic EP and before the
    speculative handler; inline in 0.4.6.post5's `__post_init__`). The one place meshsat
    says so: check_server_args' PP and PD-Multiplexing asserts read the resolved flag."""
    return Resolution(
        "R-PP-OVERLAP",
        source,
        "pipeline parallelism is incompatible with the overlap scheduler (turned off)",
        (assign((F.pp_size > 1) & ~F.disable_overlap_schedule, disable_overlap_schedule=True),),
    )


RESOLUTIONS: tuple[Resolution, ...] = (
    # handle_mega_moe runs first in the pipeline (0.5.19 and 0.5.23; measured by a
    # targeted fidelity record).
    Resolution(
        "R-MEGAMOE-ALIAS",
        "handle_moe_runner_backend_alias",
        "--moe-runner-backend megamoe is an alias for --moe-a2a-backend megamoe",
        (
            assign(
                F.moe_runner_backend == "megamoe",
                moe_runner_backend="auto",
                moe_a2a_backend="megamoe",
            ),
        ),
    ),
    legacy_cp(dsa_default=True),
    Resolution(
        "R-GRAPH-BACKEND",
        "cuda_graph_config",
        "--cuda-graph-backend-{decode,prefill} disabled is the phase's --disable-*-cuda-graph",
        (
            assign(
                F.cuda_graph_backend_decode == "disabled",
                quiet=True,
                disable_decode_cuda_graph=True,
            ),
            assign(
                F.cuda_graph_backend_prefill == "disabled",
                quiet=True,
                disable_prefill_cuda_graph=True,
            ),
        ),
    ),
    DECODE_RADIX,
    DCP_COMM_AG_RS,
    Resolution(
        "R-DWDP",
        "handle_dwdp",
        "dwdp_size > 1 makes every rank its own DP-attention group with EP over all of them",
        (
            assign(
                F.dwdp_size > 1,
                dp_size=F.dwdp_size,
                enable_dp_attention=True,
                enable_dp_lm_head=True,
                moe_dense_tp_size=1,
                ep_size=F.dwdp_size,
                moe_dp_size=1,
                moe_a2a_backend="none",
                disable_cuda_graph=True,
            ),
        ),
    ),
    Resolution(
        "R-CP-MODEL-DPATTN",
        "DeepSeek model overrides (prefill CP)",
        "MLA and DSA models run prefill CP with DP attention (SGLang's model overrides turn it "
        "on before the data-parallel handler)",
        (
            assign(
                MLA_MODEL & F.enable_prefill_cp & (F.dp_size > 1) & ~F.enable_dp_attention,
                enable_dp_attention=True,
            ),
        ),
    ),
    # DeepSeek V4's model override names dsv4 whatever the user named.
    Resolution(
        "R-ATTN-MODEL",
        "handle_model_specific_adjustments",
        "DeepSeek V4 runs the dsv4 attention back-end (its model override)",
        (forced_backend(),),
    ),
    DSA_KV_DTYPE,
    # handle_deterministic_inference runs right before the attention handler.
    DETERMINISTIC,
    ATTN_BACKEND,
    Resolution(
        "R-DP1",
        "_data_parallelism_defaults",
        "dp_size is 1, so there is nothing for DP attention to split (an elastic scale "
        "joiner keeps its flags: it adopts the primary's DP width)",
        (
            assign(
                (F.dp_size == 1) & (F.ep_join_mode != "scale"),
                enable_dp_attention=False,
                enable_dp_lm_head=False,
            ),
        ),
    ),
    Resolution(
        "R-DPATTN",
        "handle_data_parallelism",
        "DP attention is on: each DP group schedules its own share",
        (
            assign(
                F.enable_dp_attention, schedule_conservativeness=F.schedule_conservativeness * 0.3
            ),
            assign(
                F.enable_dp_attention & is_set(F.chunked_prefill_size),
                chunked_prefill_size=F.chunked_prefill_size // F.dp_size,
            ),
        ),
    ),
    Resolution(
        "R-CP-MLA",
        "DeepSeek MLA model overrides",
        "MLA models (DeepSeek V2/V3, Kimi K2.5) run prefill CP over the whole attention-TP "
        "group with DeepEP",
        (
            assign(
                one_of(F.architecture, *MLA_ARCHITECTURES) & F.enable_prefill_cp,
                attn_cp_size=F.tp_size // attn_dp,
                moe_a2a_backend="deepep",
                ep_size=F.tp_size,
                moe_dense_tp_size=1,
            ),
        ),
    ),
    Resolution(
        "R-CP-DSA",
        "DeepSeek sparse-attention model overrides",
        "DSA models (DeepSeek V3.2, GLM-5) run prefill CP over the whole attention-TP group "
        "with a replicated dense MLP (zigzag also with DeepEP over all ranks)",
        (
            # `_deepseek_family_overrides` (0.5.18, 0.5.19): on a GPU or CPU, not NPU; the
            # dense-MLP width for either strategy (0.5.23: zigzag only).
            assign(
                _DSA_CP,
                attn_cp_size=F.tp_size // attn_dp,
                moe_dense_tp_size=1,
            ),
            assign(
                _DSA_CP & (F.cp_strategy == "zigzag"),
                moe_a2a_backend="deepep",
                ep_size=F.tp_size,
            ),
        ),
    ),
    Resolution(
        "R-A2A-EP",
        "MoE all-to-all backend defaults",
        "an all-to-all MoE backend dispatches over every rank of the engine",
        (assign(one_of(F.moe_a2a_backend, *A2A_FORCING_EP), ep_size=F.tp_size),),
    ),
    Resolution(
        "R-ASCEND-TP",
        "handle_a2a_moe",
        "--moe-a2a-backend ascend_tp runs the MoE as plain TP (SGLang resets it to none)",
        (assign(F.moe_a2a_backend == "ascend_tp", moe_a2a_backend="none"),),
    ),
    A2A_DISPATCH_MODE,
    Resolution(
        "R-CPV2",
        "handle_context_parallelism",
        "this architecture uses CP-v2 by default (DSA models only with prefill CP and interleave)",
        (
            assign(
                one_of(F.architecture, *CP_V2_DEFAULT_ARCHITECTURES)
                & ~is_set(F.env_enable_cp_v2)
                & (~F.is_deepseek_dsa | (F.enable_prefill_cp & (F.cp_strategy == "interleave"))),
                env_enable_cp_v2=True,
            ),
        ),
    ),
    Resolution(
        "R-EPLB-RECORDER",
        "handle_eplb_and_dispatch",
        "EPLB needs expert statistics",
        (
            assign(
                F.enable_eplb & ~is_set(F.expert_distribution_recorder_mode),
                expert_distribution_recorder_mode="stat",
            ),
        ),
    ),
    Resolution(
        "R-DISPATCH",
        "handle_eplb_and_dispatch",
        "EPLB or a non-trivial expert placement needs a dispatch algorithm (rank-invariant "
        "'dynamic' without an all-to-all backend)",
        (
            assign(
                (F.enable_eplb | (F.init_expert_location != "trivial"))
                & ~is_set(F.ep_dispatch_algorithm),
                ep_dispatch_algorithm=ite(F.moe_a2a_backend == "none", "dynamic", "static"),
            ),
        ),
    ),
    Resolution(
        "R-ELASTIC-REJOIN",
        "handle_elastic_ep",
        "--elastic-ep-rejoin is the deprecated spelling of --elastic-ep-join-mode recover",
        (assign(F.elastic_ep_rejoin & ~is_set(F.ep_join_mode), ep_join_mode="recover"),),
    ),
    Resolution(
        "R-ELASTIC-EPLB",
        "handle_elastic_ep",
        "elastic EP needs the elasticity-aware EPLB algorithm",
        (
            assign(
                is_set(F.elastic_ep_backend) & F.enable_eplb & (F.eplb_algorithm == "auto"),
                eplb_algorithm="elasticity_aware",
            ),
        ),
    ),
    Resolution(
        "R-ELASTIC-INIT",
        "handle_elastic_ep",
        "an elastic EP primary starts at its launch-time TP size",
        (
            assign(
                elastic_scaling & (F.ep_join_mode != "scale") & ~is_set(F.elastic_ep_initial_size),
                elastic_ep_initial_size=F.tp_size,
            ),
        ),
    ),
    Resolution(
        "R-METRICS",
        "handle_expert_distribution_metrics",
        "the balancedness report and the recorder need a recorder mode and buffer size",
        (
            assign(
                (F.expert_balancedness_report_mode != "off")
                & ~is_set(F.expert_distribution_recorder_mode),
                expert_distribution_recorder_mode="stat",
            ),
            # Bookkeeping on every config (the period defaults to 1000): not listed.
            assign(
                ~is_set(F.expert_distribution_recorder_buffer_size)
                & is_set(F.eplb_rebalance_num_iterations),
                quiet=True,
                expert_distribution_recorder_buffer_size=F.eplb_rebalance_num_iterations,
            ),
            assign(
                ~is_set(F.expert_distribution_recorder_buffer_size)
                & is_set(F.expert_distribution_recorder_mode),
                expert_distribution_recorder_buffer_size=1000,
            ),
        ),
    ),
    pp_overlap("_pipeline_parallel_overlap_disable"),
    # Where SGLang resolves it (post-process passes after the model overrides) it changes
    # only the page size, which no other step reads.
    page_resolution("0.5.19"),
    # check_lora_server_args (check_server_args, 0.5.18 on): "--enable-lora is set to True
    # because --lora-paths is provided" (a flag the CLI cannot turn off: store_true on None).
    # The LoRA checks after it (MOE-LORA-*, LORA-V2-*) read the resolved value.
    Resolution(
        "R-LORA-PATHS",
        "check_lora_server_args",
        "--lora-paths names adapters: LoRA is on (--enable-lora)",
        (assign(F.lora_paths & ~F.enable_lora, enable_lora=True),),
    ),
)
