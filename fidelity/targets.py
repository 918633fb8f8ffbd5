"""Records aimed at every rule of a pack, after the random corpus.

Why: the random corpus (`generate.configs`) knows field names and domains but no rule, so
it measures meshsat without bias, yet it never reaches rules whose condition is a rare
combination (elastic EP's scale-up checks, a flag the release lacks, DeepSeek V3.2's CP
strategy). This module aims at each rule of the pack in turn: it starts from a layout that
breaks the rule (the catalogue's rule cases, `tests/rule_cases.py`, or, for the generated
flag rules, the flag itself), perturbs unrelated fields as the corpus does, spells it for
the release and keeps it only if meshsat, judging the release's spelling, says the rule is
broken. Where to look is chosen with meshsat's rules; what SGLang answers is recorded as
for every other record, so a wrong rule shows up as a disagreement.

Rules no record can reach are listed by `unreachable()` with the reason.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from fidelity.generate import DOMAINS, MODELS, Config, sample, spell
from meshsat.solver.catalogue.speculative_dflash_uno import UNO_0_5_23
from meshsat.solver.errors import InputError
from meshsat.solver.lang.config import Config as MeshsatConfig
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import get_pack
from meshsat.solver.packs.pack import ABSENT_PREFIX, CHOICE_PREFIX, Pack
from meshsat.solver.validation.validate import validate

#: Rule-case model facts -> the recorder's model directory (fidelity/models/<name>). The
#: recorder's DeepSeek V3.2 stands in for GLM-5 (both DSA); a record is kept only where the
#: rule still breaks with the stand-in.
ARCHITECTURES = {
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "GlmMoeDsaForCausalLM": "deepseek_v32",
}
#: Model-fact rules, broken with the recorder's own models (the rule cases use made-up facts).
MODEL_SEEDS: dict[str, list[tuple[str | None, Config]]] = {
    "MODEL-PP-LAYERS": [("llama", {"tp_size": 1, "pp_size": 64})],
    "MODEL-HEADS": [("llama", {"tp_size": 3}), ("qwen3_moe", {"tp_size": 6})],
    "MODEL-KV-HEADS": [("llama", {"tp_size": 6}), ("qwen3_moe", {"tp_size": 3})],
    "MODEL-EXPERTS": [
        ("qwen3_moe", {"tp_size": 6, "ep_size": 6}),
        ("deepseek_v3", {"tp_size": 3, "ep_size": 3}),
    ],
    "TOPO-MOE-TP": [(None, {"tp_size": 4, "ep_size": 8}), (None, {"tp_size": 6, "ep_size": 4})],
}
#: Rules only later releases have (no row in tests/rule_cases.py, which holds the base
#: catalogue): a layout that breaks each, on one of the recorder's models (None: any).
_FI_MEGA: Config = {
    "tp_size": 8,
    "enable_dp_attention": True,
    "dp_size": 8,
    "moe_a2a_backend": "flashinfer_megamoe",
    "quantization": "mxfp8",
}
#: LoRA adapters on the triton_v2 back-end (--lora-paths turns LoRA on: R-LORA-PATHS).
_LORA_V2: Config = {"lora_paths": True, "lora_backend": "triton_v2"}
#: PD-Multiplexing with what it needs (chunked prefill and the overlap scheduler off).
_PDMUX: Config = {
    "enable_pdmux": True,
    "chunked_prefill_size": -1,
    "disable_overlap_schedule": True,
}
RELEASE_SEEDS: dict[str, list[tuple[str | None, Config]]] = {
    "MEGAMOE-OVERLAP": [
        (
            "deepseek_v3",
            {"tp_size": 8, "moe_a2a_backend": "megamoe", "enable_two_batch_overlap": True},
        ),
        (
            "qwen3_moe",
            {"tp_size": 8, "moe_runner_backend": "megamoe", "enable_single_batch_overlap": True},
        ),
    ],
    "MEGAMOE-GPU": [("deepseek_v3", {"tp_size": 8, "moe_runner_backend": "megamoe"})],
    "A2A-MORI-DISPATCH": [
        ("qwen3_moe", {"tp_size": 8, "moe_a2a_backend": "mori", "chunked_prefill_size": 8192}),
        (
            "qwen3_moe",
            {
                "tp_size": 8,
                "enable_dp_attention": True,
                "dp_size": 8,
                "moe_a2a_backend": "mori",
                "chunked_prefill_size": 65536,
            },
        ),
    ],
    "KV4-NVFP4-BLACKWELL": [("llama", {"tp_size": 2, "kv_cache_dtype": "nvfp4"})],
    "KV4-NVFP4-PREFILL-BACKEND": [
        ("llama", {"tp_size": 2, "kv_cache_dtype": "nvfp4", "attention_backend": "triton"})
    ],
    "KV4-NVFP4-DECODE-GPU": [("llama", {"tp_size": 2, "kv_cache_dtype": "nvfp4"})],
    "KV-MXFP8-BLACKWELL": [("llama", {"tp_size": 2, "kv_cache_dtype": "mxfp8"})],
    "KV4-CUDA": [("llama", {"tp_size": 2, "kv_cache_dtype": "fp4_mx_block16"})],
    "KV4-MHA-BACKEND": [
        ("llama", {"tp_size": 2, "kv_cache_dtype": "fp4_mx_block16", "attention_backend": "fa3"}),
        ("qwen3_moe", {"tp_size": 4, "kv_cache_dtype": "fp4_mx_block16"}),
    ],
    "KV4-MLA-BACKEND": [
        ("deepseek_v3", {"tp_size": 8, "kv_cache_dtype": "fp4_mx_block16"}),
        (
            "deepseek_v3",
            {"tp_size": 8, "kv_cache_dtype": "fp4_mx_block16", "attention_backend": "triton"},
        ),
    ],
    "QUANT-METHOD": [(None, {"tp_size": 2, "quantization": "gptq"})],
    "QUANT-NVFP4-ONLINE-SM100": [("qwen3_moe", {"tp_size": 4, "quantization": "nvfp4_online"})],
    "ATTN-CUTEDSL-MLA-SM100": [
        ("deepseek_v3", {"tp_size": 8, "attention_backend": "cutedsl_mla"}),
        ("deepseek_v3", {"tp_size": 8, "decode_attention_backend": "cutedsl_mla"}),
    ],
    "ATTN-TRTLLM-MLA-BLACKWELL": [
        ("deepseek_v3", {"tp_size": 8, "attention_backend": "trtllm_mla"}),
        (
            "deepseek_v3",
            {
                "tp_size": 8,
                "prefill_attention_backend": "fa3",
                "decode_attention_backend": "trtllm_mla",
            },
        ),
    ],
    # QA sweep s2 (0.5.23's answers on an H100): refused in the attention handler.
    "ATTN-FLEX-SPEC": [
        (
            "llama",
            {"tp_size": 1, "speculative_algorithm": "NGRAM", "attention_backend": "flex_attention"},
        ),
        (
            "qwen3_moe",
            {
                "tp_size": 2,
                "speculative_algorithm": "EAGLE",
                "speculative_num_steps": 3,
                "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": 4,
                "attention_backend": "flex_attention",
            },
        ),
    ],
    "ATTN-TRTLLM-MHA-GPU": [
        ("llama", {"tp_size": 2, "attention_backend": "trtllm_mha"}),
        (
            "llama",
            {
                "tp_size": 2,
                "prefill_attention_backend": "trtllm_mha",
                "decode_attention_backend": "triton",
            },
        ),
    ],
    # The split back-ends (0.5.18 on; the oracle's answers on CPU, measured: each refused
    # with the rule's words).
    "ATTN-CUTEDSL-MLA-PREFILL": [
        ("llama", {"tp_size": 2, "prefill_attention_backend": "cutedsl_mla"}),
        (
            "deepseek_v3",
            {
                "tp_size": 8,
                "prefill_attention_backend": "cutedsl_mla",
                "decode_attention_backend": "cutedsl_mla",
            },
        ),
    ],
    "ATTN-TRTLLM-MHA-DECODE-GPU": [
        ("llama", {"tp_size": 2, "decode_attention_backend": "trtllm_mha"})
    ],
    "ATTN-TOKENSPEED-MLA-BLACKWELL": [
        ("deepseek_v3", {"tp_size": 8, "attention_backend": "tokenspeed_mla"}),
        ("deepseek_v3", {"tp_size": 8, "decode_attention_backend": "tokenspeed_mla"}),
    ],
    "KV4-NVFP4-DECODE-BACKEND": [
        (
            "llama",
            {
                "tp_size": 2,
                "kv_cache_dtype": "nvfp4",
                "prefill_attention_backend": "flashinfer",
                "decode_attention_backend": "triton",
            },
        )
    ],
    "KV4-NVFP4-NATIVE-SM100": [
        ("llama", {"tp_size": 2, "kv_cache_dtype": "nvfp4", "attention_backend": "trtllm_mha"}),
        (
            "llama",
            {"tp_size": 2, "kv_cache_dtype": "nvfp4", "prefill_attention_backend": "trtllm_mha"},
        ),
    ],
    "A2A-FI-MEGAMOE-ARCH": [("llama", {**_FI_MEGA})],
    "A2A-FI-MEGAMOE-QUANT": [("deepseek_v3", {**_FI_MEGA, "quantization": "fp8"})],
    "A2A-FI-MEGAMOE-ATTN-DP": [("qwen3_moe", {**_FI_MEGA, "dp_size": 4})],
    "A2A-FI-MEGAMOE-RUNNER": [("qwen3_moe", {**_FI_MEGA, "moe_runner_backend": "deep_gemm"})],
    "A2A-FI-MEGAMOE-SM100": [("qwen3_moe", {**_FI_MEGA})],
    "A2A-DEEPEP-CUTEDSL-NORMAL": [
        (
            "qwen3_moe",
            {
                "tp_size": 4,
                "moe_a2a_backend": "deepep",
                "moe_runner_backend": "flashinfer_cutedsl",
                "quantization": "modelopt_fp4",
                "deepep_mode": "normal",
            },
        )
    ],
    "A2A-DEEPEP-V2-ARCH": [("llama", {"tp_size": 4, "moe_a2a_backend": "deepep_v2"})],
    "A2A-DEEPEP-V2-OVERLAP": [
        (
            "qwen3_moe",
            {"tp_size": 4, "moe_a2a_backend": "deepep_v2", "enable_two_batch_overlap": True},
        )
    ],
    "A2A-DEEPEP-V2-DIRECT-NODES": [
        ("qwen3_moe", {"tp_size": 16, "nnodes": 2, "moe_a2a_backend": "deepep_v2"})
    ],
    "A2A-PPLX-NORMAL": [
        (
            "qwen3_moe",
            {
                "tp_size": 4,
                "enable_dp_attention": True,
                "dp_size": 4,
                "moe_a2a_backend": "pplx",
                "deepep_mode": "normal",
            },
        )
    ],
    "MOE-CUTLASS-QUANT": [
        (
            "qwen3_moe",
            {"tp_size": 4, "moe_runner_backend": "flashinfer_cutlass", "quantization": "fp8"},
        )
    ],
    "MOE-CUTEDSL-QUANT": [
        ("qwen3_moe", {"tp_size": 4, "moe_runner_backend": "flashinfer_cutedsl"})
    ],
    "MOE-TRTLLM-QUANT": [
        (
            "qwen3_moe",
            {"tp_size": 4, "moe_runner_backend": "flashinfer_trtllm", "quantization": "awq"},
        )
    ],
    "MOE-SGL-TRTLLM-QUANT": [
        (
            "qwen3_moe",
            {"tp_size": 4, "moe_runner_backend": "experimental_sgl_trtllm", "quantization": "awq"},
        )
    ],
    "MOE-TRTLLM-ROUTED-QUANT": [
        (
            "qwen3_moe",
            {"tp_size": 4, "moe_runner_backend": "flashinfer_trtllm_routed", "quantization": "awq"},
        )
    ],
    "MOE-CUTLASS-FP8-EP": [
        (
            "qwen3_moe",
            {"tp_size": 4, "ep_size": 4, "moe_runner_backend": "cutlass", "quantization": "fp8"},
        )
    ],
    "MOE-SGL-MARLIN-EP": [
        (
            "qwen3_moe",
            {
                "tp_size": 4,
                "ep_size": 4,
                "moe_a2a_backend": "deepep",
                "moe_runner_backend": "experimental_sgl_marlin",
            },
        )
    ],
    "DCP-DSA-PD": [
        ("deepseek_v32", {"tp_size": 8, "dcp_size": 2, "disaggregation_mode": "decode"})
    ],
    # 0.5.23's CPU recorder refuses it (fidelity/runner.py, measured; 0.5.18/0.5.19 take it).
    "DCP-DSA-TOPK": [
        (
            "deepseek_v32",
            {
                "tp_size": 8,
                "dcp_size": 2,
                "attention_backend": "fa3",
                "speculative_algorithm": "EAGLE",
                "speculative_num_steps": 1,
                "speculative_eagle_topk": 2,
                "speculative_num_draft_tokens": 4,
            },
        )
    ],
    "A2A-DEEPEP-V2-SPEC": [
        (
            "qwen3_moe",
            {"tp_size": 8, "moe_a2a_backend": "deepep_v2", "speculative_algorithm": "EAGLE"},
        )
    ],
    "A2A-DEEPEP-V2-BUDGET": [("qwen3_moe", {"tp_size": 8, "moe_a2a_backend": "deepep_v2"})],
    # A decode server's graph of 256 requests per DP rank (the recorder's own default, 160,
    # is refused too).
    "A2A-DEEPEP-V2-DECODE-BUDGET": [
        (
            "qwen3_moe",
            {
                "tp_size": 4,
                "enable_dp_attention": True,
                "dp_size": 4,
                "moe_a2a_backend": "deepep_v2",
                "disaggregation_mode": "decode",
                "cuda_graph_max_bs_decode": 256,
            },
        )
    ],
    # pplx's budget takes --cuda-graph-max-bs-decode as typed beside the chunk (0.5.18 to
    # 0.5.23; 0.5.23's oracle refuses this one, takes it with 128).
    "A2A-PPLX-DISPATCH": [
        (
            "deepseek_v3",
            {
                "tp_size": 8,
                "enable_dp_attention": True,
                "dp_size": 8,
                "ep_size": 8,
                "moe_a2a_backend": "pplx",
                "chunked_prefill_size": 64,
                "cuda_graph_max_bs_decode": 256,
            },
        )
    ],
    # A typed --enable-multi-layer-eagle on a model no override makes multi-layer (0.5.23's
    # oracle refuses it at launch; 0.5.18 and 0.5.19 refuse PP with any algorithm).
    "TOPO-PP-SPEC": [
        (
            "deepseek_v3",
            {
                "tp_size": 4,
                "pp_size": 2,
                "disaggregation_mode": "prefill",
                "speculative_algorithm": "EAGLE",
                "enable_multi_layer_eagle": True,
            },
        )
    ],
    # No chunk typed: the recorder's default 4096 over DP attention 3 is 1365.
    "KV-CHUNK-DEFAULT-PAGE-CERTAIN": [
        (None, {"tp_size": 3, "enable_dp_attention": True, "dp_size": 3, "page_size": 16})
    ],
    "ATTN-TRTLLM-MHA-CP-SM100": [
        (
            "llama",
            {
                "tp_size": 4,
                "attn_cp_size": 2,
                "enable_prefill_cp": True,
                "cp_strategy": "zigzag",
                "attention_backend": "trtllm_mha",
            },
        )
    ],
    # The PD handler's own checks: a prefill on the fake backend, and 0.5.23's
    # prefill_complete allocation policy (tests/test_pd_server_rules.py, from the oracle).
    "PD-PREFILL-FAKE-BACKEND": [
        (None, {"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "fake"})
    ],
    "PD-PREFILL-COMPLETE-ROLE": [
        (None, {"disaggregation_decode_allocation_policy": "prefill_complete"})
    ],
    "PD-PREFILL-COMPLETE-BACKEND": [
        (
            None,
            {
                "disaggregation_mode": "decode",
                "disaggregation_transfer_backend": "nixl",
                "disaggregation_decode_allocation_policy": "prefill_complete",
            },
        )
    ],
    "PD-PREFILL-COMPLETE-PP-CP": [
        (
            "llama",
            {
                "disaggregation_mode": "decode",
                "pp_size": 2,
                "disaggregation_decode_allocation_policy": "prefill_complete",
            },
        )
    ],
    "PD-PREFILL-COMPLETE-ATTN-TP": [
        (
            None,
            {
                "disaggregation_mode": "prefill",
                "tp_size": 2,
                "disaggregation_decode_allocation_policy": "prefill_complete",
            },
        )
    ],
    # Speculative decoding (handle_speculative_decoding; the base cases are in
    # tests/rule_cases.py): 0.4.6.post5 compares an unset top-k only over pages, and has
    # neither NGRAM nor STANDALONE (argparse's choices).
    "SPEC-EAGLE-TOPK-SET": [
        (None, {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "page_size": 16})
    ],
    "FLAG-CHOICE-SPECULATIVE-ALGORITHM": [
        (None, {"speculative_algorithm": "NGRAM"}),
        (None, {"speculative_algorithm": "STANDALONE", "tp_size": 2}),
    ],
    # 0.5.23's DFLASH and DSPARK handlers open with the device (the CPU recorder's).
    "SPEC-DFLASH-DEVICE": [(None, {"speculative_algorithm": "DFLASH"})],
    "SPEC-UNO-DEVICE": [
        (None, {"speculative_algorithm": "UNO", "uno_lora_path": True}),
        (None, {"speculative_algorithm": "uno", "speculative_num_draft_tokens": 4}),
    ],
    "SPEC-DSPARK-DEVICE": [(None, {"speculative_algorithm": "dspark", "tp_size": 2})],
    # 0.4.6.post5's check_server_args: LoRA adapters without the radix cache.
    "LORA-PATHS-RADIX": [(None, {"lora_paths": True}), (None, {"lora_paths": True, "tp_size": 2})],
    # LoRA on with no adapter named at launch: a rank alone, modules alone, neither.
    "LORA-RANK-MODULES": [
        (None, {"enable_lora": True}),
        (None, {"enable_lora": True, "max_lora_rank": 8}),
        (None, {"enable_lora": True, "lora_target_modules": True, "tp_size": 2}),
    ],
    "SPEC-NGRAM-PAGE": [
        ("deepseek_v32", {"tp_size": 8, "speculative_algorithm": "NGRAM"}),
        ("llama", {"speculative_algorithm": "NGRAM", "page_size": 64}),
    ],
    "SPEC-EAGLE-PAGE-TREE": [
        (
            "deepseek_v3",
            {
                "tp_size": 8,
                "speculative_algorithm": "EAGLE",
                "speculative_num_steps": 3,
                "speculative_eagle_topk": 4,
                "speculative_num_draft_tokens": 8,
                "attention_backend": "flashmla",
            },
        ),
        ("llama", {"speculative_algorithm": "EAGLE", "page_size": 16}),
    ],
    # The cache and scheduling checks (catalogue/serving.py); SGLang 0.5.23's answers to
    # these are replayed in tests/test_serving_rules.py until the corpus is recorded again.
    "DCP-DSA-HICACHE": [
        ("deepseek_v32", {"tp_size": 8, "dcp_size": 2, "enable_hierarchical_cache": True})
    ],
    # 0.5.23 takes a storage backend under decode CP, only not with buffer_only memory.
    "HICACHE-DCP-STORAGE": [
        (
            "deepseek_v3",
            {
                "tp_size": 8,
                "dcp_size": 2,
                "enable_hierarchical_cache": True,
                "hicache_storage_backend": "file",
                "hicache_host_memory_mode": "buffer_only",
            },
        )
    ],
    "HICACHE-DCP-MLA": [
        ("llama", {"tp_size": 8, "dcp_size": 2, "enable_hierarchical_cache": True}),
        ("qwen3_moe", {"tp_size": 8, "dcp_size": 2, "enable_hierarchical_cache": True}),
    ],
    "A2A-FLASHINFER-CHUNKED": [
        (
            "qwen3_moe",
            {
                "tp_size": 8,
                "enable_dp_attention": True,
                "dp_size": 8,
                "ep_size": 8,
                "moe_a2a_backend": "flashinfer",
                "moe_runner_backend": "flashinfer_cutlass",
                "chunked_prefill_size": -1,
            },
        )
    ],
    **{
        rule: [
            (
                "deepseek_v3",
                {"tp_size": 8, "dcp_size": 2, "disaggregation_mode": "decode", flag: True},
            )
        ]
        for rule, flag in (
            ("PD-DCP-RADIX", "disaggregation_decode_enable_radix_cache"),
            ("PD-DCP-HICACHE", "enable_hierarchical_cache"),
        )
    },
    "PD-DCP-BACKEND": [
        (
            "deepseek_v3",
            {
                "tp_size": 8,
                "dcp_size": 2,
                "disaggregation_mode": "decode",
                "disaggregation_transfer_backend": backend,
            },
        )
        for backend in ("ascend", "fake")
    ],
    "PD-DECODE-RADIX-FAKE": [
        (
            None,
            {
                "disaggregation_mode": "decode",
                "disaggregation_decode_enable_radix_cache": True,
                "disaggregation_transfer_backend": "fake",
            },
        )
    ],
    "PD-DECODE-RADIX-SPEC": [
        (
            "deepseek_v3",
            {
                "tp_size": 8,
                "disaggregation_mode": "decode",
                "disaggregation_decode_enable_radix_cache": True,
                "speculative_algorithm": algorithm,
            },
        )
        for algorithm in ("EAGLE", "NGRAM")
    ],
    "PD-PREFILL-COMPLETE-PDMUX": [
        (
            None,
            {
                "disaggregation_mode": "decode",
                "enable_pdmux": True,
                "disaggregation_decode_allocation_policy": "prefill_complete",
            },
        )
    ],
    "PD-PREFILL-COMPLETE-DECODE-CACHE": [
        (
            None,
            {
                "disaggregation_mode": "decode",
                "enable_hierarchical_cache": True,
                "disaggregation_decode_allocation_policy": "prefill_complete",
            },
        )
    ],
    "MOE-LORA-ENABLE": [("qwen3_moe", {"tp_size": 2, "moe_runner_backend": "lora_triton"})],
    **{
        rule: [("qwen3_moe", {**_LORA_V2, "tp_size": 2, "moe_runner_backend": "lora_triton", **c})]
        for rule, c in (
            ("MOE-LORA-A2A", {"ep_size": 2, "moe_a2a_backend": "deepep"}),
            ("MOE-LORA-PLACEMENT", {"ep_size": 2, "enable_eplb": True}),
            ("MOE-LORA-BACKEND", {"lora_backend": "csgmv"}),
            ("MOE-LORA-DP-ATTN", {"enable_dp_attention": True, "dp_size": 2}),
            ("MOE-LORA-TBO", {"enable_two_batch_overlap": True}),
            ("MOE-LORA-QUANT", {"quantization": "w8a8_fp8"}),
            ("MOE-LORA-NVFP4", {"quantization": "modelopt_fp4"}),
            ("MOE-LORA-EEP", {"elastic_ep_backend": "mooncake", "ep_join_mode": "recover"}),
        )
    },
    # LoRA on triton_v2 with another MoE runner (check_lora_server_args).
    "LORA-V2-DP-ATTN": [
        (None, {**_LORA_V2, "tp_size": 4, "enable_dp_attention": True, "dp_size": 2})
    ],
    # The page the chunk must divide is the resolved one: DeepSeek V3.2's 64 (set on CPU
    # too), flashmla's 64 (0.4.6.post5 asserts on the typed page, 1: no record there), and
    # under DP attention the chunk divided by the DP width (192 is a multiple of 64, 96 not).
    "KV-CHUNK-PAGE": [
        ("deepseek_v32", {"chunked_prefill_size": 1000}),
        ("deepseek_v3", {"attention_backend": "flashmla", "chunked_prefill_size": 1000}),
        (
            "deepseek_v3",
            {
                "tp_size": 2,
                "enable_dp_attention": True,
                "dp_size": 2,
                "attention_backend": "flashmla",
                "chunked_prefill_size": 192,
            },
        ),
        ("llama", {"page_size": 16, "chunked_prefill_size": -1}),
    ],
    "LORA-V2-TBO": [(None, {**_LORA_V2, "tp_size": 2, "enable_two_batch_overlap": True})],
    # PD-Multiplexing (chunked prefill and the overlap scheduler off, as it needs them).
    "LORA-V2-PDMUX": [(None, {**_LORA_V2, "tp_size": 2, **_PDMUX})],
    "MOE-LORA-PDMUX": [
        ("qwen3_moe", {**_LORA_V2, "tp_size": 2, "moe_runner_backend": "lora_triton", **_PDMUX})
    ],
    # 0.5.23's LMCache checks (handle_cache_compatibility), each broken alone (the shared
    # oracle's answers: tests/test_cache_hooks.py).
    "LMCACHE-HICACHE": [("llama", {"enable_lmcache": True, "enable_hierarchical_cache": True})],
    "LMCACHE-RADIX": [
        ("llama", {"enable_lmcache": True, "disable_radix_cache": True}),
        ("llama", {"enable_lmcache": True, "disaggregation_mode": "decode"}),
    ],
    "LMCACHE-SPEC": [("llama", {"enable_lmcache": True, "speculative_algorithm": "NGRAM"})],
    "LMCACHE-DP-ATTN": [
        ("llama", {"tp_size": 2, "enable_lmcache": True, "enable_dp_attention": True, "dp_size": 2})
    ],
    "LMCACHE-DCP": [("deepseek_v3", {"tp_size": 4, "dcp_size": 2, "enable_lmcache": True})],
    "LMCACHE-BUFFER-ONLY": [
        (
            "llama",
            {
                "enable_lmcache": True,
                "hicache_host_memory_mode": "buffer_only",
                "hicache_storage_backend": "file",
            },
        )
    ],
    "LMCACHE-PD": [("llama", {"enable_lmcache": True, "disaggregation_mode": "prefill"})],
    "PD-DECODE-RADIX-HISPARSE": [
        (
            "deepseek_v32",
            {
                "tp_size": 8,
                "disaggregation_mode": "decode",
                "disaggregation_decode_enable_radix_cache": True,
                "enable_hisparse": True,
            },
        )
    ],
}

#: The models the recorder can load in every release; DeepSeek V3.2 from 0.5.18 on.
TARGET_MODELS = (*MODELS, "deepseek_v32")

#: Rules no generated record can reach through a release's resolution, and why
#: (`RULE@version` where only one release's spelling makes it unreachable).
UNREACHABLE = {
    "HISPARSE-MIXED-CHUNK": "--enable-hisparse and --enable-mixed-chunk, which the corpus "
    "never sets (it predates the fields): 0.5.23's answer replayed in "
    "tests/test_nvfp4_v4_hisparse.py",
    # Measured (oracle, deepseek_v32, EAGLE top-k 4): the DSA model's page override (64)
    # makes the speculative handler refuse the tree over pages first; the other HiSparse
    # models (DeepSeek V4, MiniMax M3) are not among the recorder's.
    "HISPARSE-SPEC-TOPK": "behind the speculative handler's top-k-over-pages check on a DSA "
    "model (its page size is 64); tests/test_nvfp4_v4_hisparse.py holds the condition",
    # KV4's CUDA branch: the CPU recorder takes the KV4-CUDA / nvfp4 prefill refusals first
    # (0.5.23's answers on SM100/SM120 facts in tests/test_nvfp4_v4_hisparse.py).
    "KV4-UNIFIED-MEMORY": (
        "the FP4 unified-memory check is in handle_kv4_compatibility's CUDA branch; the CPU "
        "recorder is refused before it (tests/test_nvfp4_v4_hisparse.py)"
    ),
    # The recorder runs each release on CPU, whose platform refuses an FP4 KV cache first
    # (fp4_mx_block16: KV4-CUDA, "KV4 is not tested on non-CUDA platforms"; nvfp4: the
    # prefill back-end the CPU platform picks, intel_amx, KV4-NVFP4-PREFILL-BACKEND), so
    # the checks of the CUDA back-end and GPU behind them are never reached there; they are
    # tested against the releases' source conditions (tests/test_qa_oracle_b.py).
    "KV4-MHA-BACKEND": "behind KV4-CUDA on the CPU recorder (tests/test_qa_oracle_b.py)",
    "KV4-MLA-BACKEND": "behind KV4-CUDA on the CPU recorder (tests/test_qa_oracle_b.py)",
    "KV4-NVFP4-BLACKWELL": (
        "behind the CPU platform's nvfp4 checks on the recorder (tests/test_qa_oracle_b.py)"
    ),
    # The SM100 native-NVFP4 refusals need an SM100 GPU (and the nvfp4 checks the CPU
    # recorder fails first); 0.5.23's answers with SM100/SM103/SM120 facts are replayed.
    **dict.fromkeys(
        (
            "KV4-NVFP4-NATIVE-PD",
            "KV4-NVFP4-NATIVE-HICACHE",
            "KV4-NVFP4-NATIVE-SPEC-PREFIX",
            "KV4-NVFP4-NATIVE-SPEC-ALGORITHM",
            "KV4-NVFP4-NATIVE-NGRAM-BREADTH",
        ),
        "needs an SM100 GPU: the recorder runs on CPU (0.5.23's answers with SM100 facts in "
        "tests/test_nvfp4_v4_hisparse.py)",
    ),
    # The attention handler's dtype and SM120 checks come after its GPU-class checks, which
    # the CPU recorder fails first; held to the releases' source in
    # tests/test_attention_split.py (with 0.5.23's answers on an H100).
    **dict.fromkeys(
        ("ATTN-TRTLLM-MLA-KV", "ATTN-CUTEDSL-MLA-KV", "ATTN-TOKENSPEED-MLA-KV"),
        "behind the back-end's Blackwell check on the CPU recorder (tests/test_attention_split.py)",
    ),
    **dict.fromkeys(
        (
            "FLAG-ABSENT-PREFILL-ATTENTION-BACKEND@0.4.6.post5",
            "FLAG-ABSENT-DECODE-ATTENTION-BACKEND@0.4.6.post5",
        ),
        "argparse's refusal of a flag 0.4.6.post5 lacks (its flag table has no split "
        "attention back-ends; tests/test_attention_split.py); the corpus predates the fields",
    ),
    "ATTN-TRTLLM-MHA-SM120-FP8": "needs an SM120 GPU: the recorder runs on CPU "
    "(tests/test_attention_split.py)",
    **dict.fromkeys(
        ("KV4-FA4-MHA-BACKEND", "KV4-FA4-MLA-BACKEND"),
        "behind KV4-CUDA on the CPU recorder (0.5.23's answers on an H100 in "
        "tests/test_attention_split.py)",
    ),
    "DCP-MIN": "needs dcp_size < 1, which meshsat's Config refuses as bad input (exit 2)",
    "DWDP-MIN": "needs dwdp_size < 1, which meshsat's Config refuses as bad input (exit 2)",
    "TOPO-POSITIVE": "needs a size < 1, which meshsat's Config refuses as bad input (exit 2)",
    "FLAG-CHOICE-MOE-A2A-BACKEND@0.4.6.post5": "0.4.6.post5 has no --moe-a2a-backend: a user "
    "writes the backend as --enable-deepep-moe or --enable-ep-moe, which hold no other value",
    "CP-HIP-DSV4": "needs a HIP device: the recorder runs on CPU",
    **dict.fromkeys(
        ("LORA-V2-ROCM", "MOE-LORA-ROCM"),
        "needs a HIP device: the recorder runs on CPU (the triton_v2 mode check, "
        "tests/test_lora.py)",
    ),
    "SPEC-NGRAM-DEVICE": "needs an Ascend NPU: the recorder runs on CPU (the releases' "
    "_handle_ngram device check, tests/test_speculative_rules.py)",
    # The DFLASH and DSPARK handlers' layout checks follow their device check, which the
    # CPU recorder fails first; SGLang 0.5.23's answers with H100 facts (shared oracle) are
    # replayed in tests/test_speculative_rules.py.
    **dict.fromkeys(
        (
            "SPEC-DFLASH-DP-LM-HEAD",
            "SPEC-DFLASH-DP-CP",
            "SPEC-DFLASH-PP",
            "SPEC-DSPARK-DP-LM-HEAD",
            "SPEC-DSPARK-DP-A2A",
            "SPEC-DSPARK-DP-CP",
            "SPEC-DSPARK-PP",
        ),
        "behind SPEC-DFLASH-DEVICE / SPEC-DSPARK-DEVICE on the CPU recorder (0.5.23's "
        "answers on an H100 in tests/test_speculative_rules.py)",
    ),
    # UNO's layout checks follow its device check likewise.
    **{
        rule.id: "behind SPEC-UNO-DEVICE on the CPU recorder (0.5.23's answers on an H100 in "
        "tests/test_speculative_rules.py)"
        for rule in UNO_0_5_23[1:]
    },
    "DCP-NPU-DSA": "needs an Ascend NPU: the recorder runs on CPU (0.5.23's answers as an NPU, "
    "through its platform override, are replayed in tests/test_dcp_platforms.py)",
    # --context-length, --kv-cache-dtype and --swa-full-tokens-ratio became fields after the
    # corpus was recorded; SGLang 0.5.23's own answers (shared oracle) on the recorder's
    # models are replayed by tests/test_kv_cache_rules.py until it is recorded again.
    **dict.fromkeys(
        ("MODEL-CONTEXT-LENGTH", "MODEL-CONTEXT-LENGTH-OVERRIDE"),
        "ModelConfig._derive_context_length on a --context-length the corpus never sets (it "
        "predates the field; 0.4.6.post5 builds the model config only at launch): 0.5.23's "
        "answers replayed in tests/test_kv_cache_rules.py",
    ),
    "FLAG-ABSENT-SWA-FULL-TOKENS-RATIO@0.4.6.post5": "argparse's refusal of a flag 0.4.6.post5 "
    "lacks (fidelity/flags/0.4.6.post5.json has no swa_full_tokens_ratio); the corpus "
    "predates the field",
    **dict.fromkeys(
        ("MODEL-DSA-KV-DTYPE", "SWA-RATIO-RANGE"),
        "--kv-cache-dtype / --swa-full-tokens-ratio, which the corpus never sets (it predates "
        "the fields): 0.5.23's answers replayed in tests/test_kv_cache_rules.py",
    ),
    # The cache and scheduling flags (catalogue/serving.py) became fields after the corpus
    # was recorded: their targets (rule cases, RELEASE_SEEDS) wait for the next recording,
    # and SGLang 0.5.23's own answers (shared oracle) are replayed meanwhile.
    **dict.fromkeys(
        (
            "HICACHE-BUFFER-STORAGE",
            "HICACHE-BUFFER-DECODE",
            "HICACHE-DCP-STORAGE",
            "HICACHE-DCP-SPEC",
            "HICACHE-DCP-MLA",
            "HOST-POOL-DECODE",
            "HOST-POOL-DCP",
            "HOST-POOL-PRIORITY",
            "HICACHE-RADIX",
            "DCP-DSA-HICACHE",
            "A2A-FLASHINFER-CHUNKED",
            "PP-MICRO-BATCH",
            "GRAPH-PADDING-COMPILE",
            "PP-MIN-FREE-SLOTS",
            "PDMUX-PP",
            "PDMUX-CHUNKED",
            "PDMUX-DISAGG",
            "PDMUX-OVERLAP",
            "PRIORITY-SCHEDULE-POLICY",
            "PRIORITY-RETRACTION",
            "PD-PREFILL-COMPLETE-PDMUX",
            "PD-PREFILL-COMPLETE-DECODE-CACHE",
            "PD-DCP-RADIX",
            "PD-DCP-HICACHE",
            "PD-DECODE-RADIX-FAKE",
            "PD-DECODE-RADIX-SPEC",
            "PD-DCP-BACKEND",
        ),
        "HiCache, radix-cache, scheduling, PD-Multiplexing, torch.compile or FlashInfer "
        "chunked-prefill flags the corpus never sets (it predates the fields): 0.5.23's "
        "answers replayed in tests/test_serving_rules.py",
    ),
    # LMCache, a PD decode's KV offload and HiSparse became fields after the corpus was
    # recorded (QA s2 against 0.5.23): targets wait for the next recording.
    **dict.fromkeys(
        (
            "HICACHE-DCP-LMCACHE",
            "HICACHE-DCP-HISPARSE",
            "DECODE-OFFLOAD-DECODE",
            "DECODE-OFFLOAD-STORAGE",
            "DECODE-OFFLOAD-HOST-POOL",
            "LMCACHE-HICACHE",
            "LMCACHE-RADIX",
            "LMCACHE-SPEC",
            "LMCACHE-DP-ATTN",
            "LMCACHE-DCP",
            "LMCACHE-BUFFER-ONLY",
            "LMCACHE-PD",
            "PD-DECODE-RADIX-HISPARSE",
            "HISPARSE-MODEL",
            "HISPARSE-RADIX",
        ),
        "--enable-lmcache, --disaggregation-decode-enable-offload-kvcache or --enable-hisparse, "
        "which the corpus never sets (it predates the fields): 0.5.23's answers replayed in "
        "tests/test_cache_hooks.py",
    ),
    **{
        f"FLAG-ABSENT-{name}@0.4.6.post5": "argparse's refusal of a flag 0.4.6.post5 lacks "
        "(fidelity/flags/0.4.6.post5.json); the corpus predates the field"
        for name in (
            "HICACHE-HOST-MEMORY-MODE",
            "HICACHE-STORAGE-BACKEND",
            "DISAGGREGATION-DECODE-ENABLE-RADIX-CACHE",
            "DISAGGREGATION-DECODE-RETRACTION-BACKUP",
            "ENABLE-PRIORITY-SCHEDULING",
            "DISABLE-PRIORITY-PREEMPTION",
            "RETRACTION-POLICY",
            "PP-MAX-MICRO-BATCH-SIZE",
            "MIN-FREE-SLOTS-DELAY",
            "ENABLE-PDMUX",
            "ENABLE-LMCACHE",
            "DISAGGREGATION-DECODE-ENABLE-OFFLOAD-KVCACHE",
            "ENABLE-HISPARSE",
        )
    },
    "FLAG-ABSENT-HICACHE-HOST-MEMORY-MODE@0.5.18": "argparse's refusal of a flag 0.5.18 lacks "
    "(fidelity/flags/0.5.18.json); the corpus predates the field",
    **dict.fromkeys(
        (
            "FLAG-CHOICE-DISAGGREGATION-DECODE-RETRACTION-BACKUP@0.5.18",
            "FLAG-CHOICE-DISAGGREGATION-DECODE-RETRACTION-BACKUP@0.5.19",
        ),
        "argparse's refusal of 'none', a choice from 0.5.23 (fidelity/flags/); the corpus "
        "predates the field",
    ),
    # --base-gpu-id / --gpu-id-step became fields after the corpus was recorded; until it is
    # recorded again, fidelity/gpu_ids.py records these commands through the same runner.
    **dict.fromkeys(
        ("TOPO-BASE-GPU-ID", "TOPO-GPU-ID-STEP"),
        "check_server_args' assert on --base-gpu-id / --gpu-id-step: recorded by "
        "fidelity/gpu_ids.py in tests/fixtures/gpu_ids/ (the corpus predates the fields)",
    ),
    "TOPO-STAGE-GPUS": "meshsat's advice on the GPU ids the launcher gives (no release checks "
    "them: resolution and check_server_args() accept --tp 4 --pp 2 --gpu-id-step 2 in all four); "
    "the corpus predates --gpu-id-step: judged against the recorded launches of "
    "tests/fixtures/placement/ (tests/test_stage_gpus.py)",
    "TOPO-GPU-ID-RANGE": "a CUDA start-up failure (torch.cuda.set_device: invalid device "
    "ordinal) that no check of SGLang raises and no CPU run reaches: the GPU ids are "
    "recorded from the launchers in tests/fixtures/placement/",
    "TOPO-NODE-RANK": "no release checks --node-rank against --nnodes (0.5.23's resolution and "
    "check_server_args() accept --tp 4 --nnodes 2 --node-rank 2, measured): the node's "
    "schedulers take ranks past the world size when torch.distributed forms the process "
    "group, which no CPU run of the recorder reaches",
    "CP-MIMO-ZIGZAG": "needs a MiMo-V2-Flash config the recorder can load offline",
    "CP-MIMO-TEXT": "needs a MiMo-V2-Flash config the recorder can load offline",
    # Weight shapes (solver/catalogue/weight_shapes.py): the resolution recorder's model
    # configs carry no quantization_config, and SGLang raises these only while it builds the
    # model. tests/fixtures/weight_shapes/ records the layers themselves instead.
    **dict.fromkeys(
        (
            "QUANT-BLOCK-DENSE-MLP",
            "QUANT-BLOCK-SHARED-EXPERT",
            "QUANT-BLOCK-EXPERTS",
            "QUANT-BLOCK-MLA-Q",
            "QUANT-BLOCK-LINEAR-ATTN",
            "QUANT-BLOCK-LINEAR-ATTN-OUT",
            "QUANT-BLOCK-LINEAR-ATTN-BA",
        ),
        "a block-quantized weight check while the model is built: recorded from SGLang's "
        "own layers on the meta device in tests/fixtures/weight_shapes/",
    ),
    **dict.fromkeys(
        ("WEIGHT-VISION-HEADS", "WEIGHT-VISION-MLP", "WEIGHT-VISION-TP-REDUCE"),
        "a vision tower's split while the model is built (the resolution recorder's configs "
        "have no vision tower): recorded from whole Qwen3.5 and Gemma 3 model classes in "
        "tests/fixtures/weight_shapes/models/",
    ),
    "QUANT-CHECKPOINT-MISMATCH": "a quantized checkpoint's config (the resolution recorder's "
    "configs are unquantized): recorded from each release's build of Kimi-K2.5 INT4 with "
    "--quantization mxfp8 and fp8 (fidelity/weight_shapes/models.py build), and pair by "
    "pair by each release's _verify_quantization (fidelity/quant_args.py)",
    "QUANT-CHECKPOINT-METHOD": "a quantized checkpoint's config: recorded by each release's "
    "_verify_quantization on 127 checkpoints (fidelity/quant_args.py; Llama 4 Maverick's "
    "FBGEMM FP8)",
    "QUANT-REQUANT-SOURCE": "a quantized checkpoint's config, read when the model loads: "
    "recorded by each release's get_quant_config for --quantization quark_mxfp4 on the same "
    "127 checkpoints (fidelity/quant_args.py)",
    "MODEL-ARCH-SUPPORTED": "the model registry, read when the model loads (the recorder's "
    "models are in every release's registry): recorded per release from its own "
    "models/*.py EntryClass names (fidelity/model_archs.py, tests/test_model_archs.py)",
    "MOE-TRITON-WNA16": "a model class's MoE scheme (the resolution recorder builds no model): "
    "the release's own WNA16 kernel predicates on 28 weight schemes "
    "(fidelity/wna16_kernels.py, tests/test_wna16_kernels.py)",
    "MOE-MARLIN-A2A": "a model class's MoE runner under an all-to-all backend (the resolution "
    "recorder builds no model): recorded from Kimi-K2.5's INT4 experts in "
    "tests/fixtures/weight_shapes/models/",
    "MODEL-EP-MOE-0-4": "a model class's build under --enable-ep-moe (the resolution recorder "
    "builds no model): recorded from 0.4.6.post5's Mixtral in "
    "tests/fixtures/weight_shapes/models/",
    "WEIGHT-VISION-TP-REDUCE-CP": "a vision tower's split under attention CP while the "
    "model is built: encoded from dp_attention.py reject_attn_tp_shard_with_tp_reduce (the "
    "model-class records hold no attention-CP layout)",
    "QUANT-NVFP4-DENSE-MLP": "an NVFP4 weight check while the model is built: encoded from "
    "modelopt_quant.py ModelOptFp4LinearMethod.create_weights (no recorded layer)",
    **dict.fromkeys(
        ("QUANT-GROUP-DENSE-MLP", "QUANT-GROUP-EXPERTS"),
        "an AWQ/GPTQ group-size check while the model is built: encoded from awq.py and "
        "gptq.py create_weights and moe_wna16.py (no recorded layer)",
    ),
}


def _domain(name: str) -> tuple[Any, ...]:
    """Values to perturb a field with: the corpus's domain, or one from the field's type."""
    if name in DOMAINS:
        return tuple(DOMAINS[name])
    spec = CONFIG_SPECS[name]
    if spec.kind == "bool":
        return (False, True)
    if spec.kind == "enum" and spec.choices:
        return tuple(spec.choices)
    if spec.size:
        return (1, 2, 4, 8, 16)
    if spec.kind == "int":
        return tuple(dict.fromkeys((spec.default, 0, 1, 2, 8, 600)))
    return ()


@cache
def _domains(version: str) -> dict[str, tuple[Any, ...]]:
    """Every config field some rule of the pack reads, with values to perturb it with."""
    read = {f for r in get_pack(version).rules for f in r.fields if f in CONFIG_SPECS}
    out = {name: _domain(name) for name in sorted(read | set(DOMAINS))}
    return {k: v for k, v in out.items() if v and not CONFIG_SPECS[k].tool_only}


def _seeds(rule_id: str, pack: Pack) -> list[tuple[str | None, Config]]:
    """Layouts that break the rule: (model directory or None for any, config)."""
    if rule_id.startswith(ABSENT_PREFIX):
        name = next(f for f in pack.absent_fields if rule_id == _absent_id(f))
        spec = CONFIG_SPECS[name]
        values = [v for v in _domain(name) if v != spec.default]
        return [(None, {name: v}) for v in values]
    if rule_id.startswith(CHOICE_PREFIX):
        name, allowed = next(c for c in pack.choices if rule_id == _choice_id(c[0]))
        values = [v for v in CONFIG_SPECS[name].choices if v is not None and v not in allowed]
        # An open field (any string) lists no choices: its seeds name the values.
        return [(None, {name: v}) for v in values] + RELEASE_SEEDS.get(rule_id, [])
    from tests.rule_cases import CASES

    out: list[tuple[str | None, Config]] = [
        *MODEL_SEEDS.get(rule_id, []),
        *RELEASE_SEEDS.get(rule_id, []),
    ]
    for case in CASES:
        if case.rule != rule_id or case.raw_only:
            continue
        arch = case.model.get("architecture")
        if arch is not None and arch not in ARCHITECTURES:
            continue
        if set(case.model) - {"architecture", "is_deepseek_dsa"}:
            continue  # model-fact rules: the recorder's models have their own facts
        out.append((ARCHITECTURES.get(arch or ""), dict(case.config)))
    return out


def _default(name: str) -> Any:
    spec = CONFIG_SPECS.get(name)
    return spec.default if spec is not None else object()


def _absent_id(name: str) -> str:
    return ABSENT_PREFIX + name.upper().replace("_", "-")


def _choice_id(name: str) -> str:
    return CHOICE_PREFIX + name.upper().replace("_", "-")


@cache
def _model(name: str) -> ModelSpec:
    from fidelity.compare import model

    return model(name)


def broken(version: str, model: str, config: Config, args: Config) -> frozenset[str]:
    """The rules meshsat says the release's spelling breaks (errors, advice and launch
    checks alike), as the replay judges it."""
    from fidelity.compare import release_config

    cfg = release_config({"config": config, "args": args})
    cfg["platform"] = "cpu"
    try:
        report = validate(
            MeshsatConfig(**cfg), _model(model), explain=False, sglang_version=version
        )
    except (InputError, ValueError):
        return frozenset()
    return frozenset(v.rule for v in (*report.violations, *report.warnings))


def targeted(
    version: str,
    fields: frozenset[str],
    *,
    per_rule: int = 12,
    attempts: int = 400,
    seed: int = 2,
    rules: frozenset[str] | None = None,
) -> Iterator[tuple[str, str, Config, Config, Config, list[str]]]:
    """(rule, model, config, args, env, dropped) records, up to `per_rule` per rule of the
    pack that errors or advises, in the pack's order; rules in `UNREACHABLE` are skipped.
    `rules`: only these (records appended for rules added after the fixture was made)."""
    pack = get_pack(version)
    r = random.Random(seed)
    domains = _domains(version)
    release = tuple(int(x) for x in version.split(".")[:2])
    models = [m for m in TARGET_MODELS if m != "deepseek_v32" or release >= (0, 5)]
    for rule in pack.constraints:
        if why_unreachable(rule.id, version) or (rules is not None and rule.id not in rules):
            continue
        seeds = _seeds(rule.id, pack)
        seen: set[str] = set()
        for _ in range(attempts):
            if len(seen) >= per_rule:
                break
            if seeds and r.random() < 0.8:
                model, base = r.choice(seeds)
                model = model or r.choice(models)
                config = dict(base)
            else:
                model, config = sample(r)
            if model not in models:
                continue
            for _ in range(r.choice((0, 1, 1, 2))):
                name = r.choice(sorted(domains))
                if name not in rule.fields:
                    config[name] = r.choice(domains[name])
            keep = rule.id.startswith(ABSENT_PREFIX) or r.random() < 0.1
            if keep:  # at its default a field is unset: its user leaves the flag out
                config = {k: v for k, v in config.items() if k in fields or v != _default(k)}
            args, env, dropped = spell(version, config, fields, keep_absent=keep)
            key = repr((model, sorted(config.items(), key=str), keep))
            if key in seen or rule.id not in broken(version, model, config, args):
                continue
            seen.add(key)
            yield rule.id, model, config, args, env, dropped


def reached(version: str, records: Iterable[dict[str, Any]]) -> set[str]:
    """The rules of the pack that some record breaks, in meshsat's judgement of the
    release's spelling (errors, advice and launch checks)."""
    out: set[str] = set()
    for rec in records:
        out |= broken(version, rec["model"], rec["config"] or {}, rec.get("args", rec["config"]))
    return out


def unreached(version: str, reached: set[str]) -> dict[str, str]:
    """Rules of the pack no record breaks, each with the reason (`UNREACHABLE`) or
    "not reached" where the search found none."""
    return {
        rule.id: why_unreachable(rule.id, version) or "not reached"
        for rule in get_pack(version).constraints
        if rule.id not in reached
    }


def why_unreachable(rule_id: str, version: str) -> str | None:
    return UNREACHABLE.get(f"{rule_id}@{version}") or UNREACHABLE.get(rule_id)
