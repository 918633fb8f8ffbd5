"""The cache and scheduling checks (solver/catalogue/serving.py, A2A-FLASHINFER-CHUNKED,
DCP-DSA-HICACHE) against SGLang's own answers.

The resolution corpus (tests/fixtures/fidelity/) predates these fields, so the answers of
SGLang 0.5.23's own resolution and launch checks (the shared oracle, `oracle.py --launch`,
platform cuda, on the recorder's models: fidelity/models/) are kept here, and the other
releases are held to the conditions read from their sources (0.5.18's server_args.py,
0.5.19's arg_groups/hicache_hook.py, kv_cache_hook.py and validation_hook.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from fidelity.compare import model
from meshsat.solver import validate
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command
from meshsat.solver.lang.config import Config
from tests.sglang_answers import assert_sglang_answer, rule_ids

#: (config, recorder model, the start of SGLang 0.5.23's first error or None, the step that
#: raised it: a resolution handler, or check_server_args at launch)
ORACLE_0_5_23: tuple[tuple[dict[str, Any], str, str | None, str | None], ...] = (
    # radix
    (
        {"tp_size": 2, "enable_hierarchical_cache": True, "disable_radix_cache": True},
        "llama",
        "The arguments enable-hierarchical-cache and disable-radix-ca",
        "handle_cache_compatibility",
    ),
    # radix-ok
    ({"tp_size": 2, "enable_hierarchical_cache": True}, "llama", None, None),
    # decode
    (
        {"tp_size": 2, "enable_hierarchical_cache": True, "disaggregation_mode": "decode"},
        "llama",
        "The arguments enable-hierarchical-cache and disable-radix-ca",
        "handle_cache_compatibility",
    ),
    # decode-radix
    (
        {
            "tp_size": 2,
            "enable_hierarchical_cache": True,
            "disaggregation_mode": "decode",
            "disaggregation_decode_enable_radix_cache": True,
        },
        "llama",
        None,
        None,
    ),
    # decode-radix-off
    (
        {
            "tp_size": 2,
            "enable_hierarchical_cache": True,
            "disaggregation_mode": "decode",
            "disaggregation_decode_enable_radix_cache": True,
            "disable_radix_cache": True,
        },
        "llama",
        None,
        None,
    ),
    # buffer
    (
        {
            "tp_size": 2,
            "enable_hierarchical_cache": True,
            "hicache_host_memory_mode": "buffer_only",
        },
        "llama",
        "--hicache-host-memory-mode buffer_only requires a storage ba",
        "handle_hicache",
    ),
    # buffer-storage
    (
        {
            "tp_size": 2,
            "enable_hierarchical_cache": True,
            "hicache_host_memory_mode": "buffer_only",
            "hicache_storage_backend": "file",
        },
        "llama",
        None,
        None,
    ),
    # buffer-nohicache
    ({"tp_size": 2, "hicache_host_memory_mode": "buffer_only"}, "llama", None, None),
    # buffer-decode
    (
        {"tp_size": 2, "disaggregation_mode": "decode", "hicache_host_memory_mode": "buffer_only"},
        "llama",
        "--hicache-host-memory-mode buffer_only requires a storage ba",
        "handle_hicache",
    ),
    # buffer-decode-cpu-tensor
    (
        {
            "tp_size": 2,
            "disaggregation_mode": "decode",
            "hicache_host_memory_mode": "buffer_only",
            "disaggregation_decode_retraction_backup": "cpu_tensor",
        },
        "llama",
        None,
        None,
    ),
    # buffer-decode-storage
    (
        {
            "tp_size": 2,
            "disaggregation_mode": "decode",
            "hicache_host_memory_mode": "buffer_only",
            "hicache_storage_backend": "file",
        },
        "llama",
        "--hicache-host-memory-mode buffer_only is not supported on d",
        "handle_hicache",
    ),
    # dsa-dcp
    (
        {"tp_size": 8, "dcp_size": 2, "enable_hierarchical_cache": True},
        "deepseek_v32",
        "DSA DCP does not support HiSparse or HiCache.",
        "handle_model_specific_adjustments",
    ),
    # dsa-dcp-ok
    ({"tp_size": 8, "dcp_size": 2}, "deepseek_v32", None, None),
    # llama-dcp
    (
        {"tp_size": 8, "dcp_size": 2, "enable_hierarchical_cache": True},
        "llama",
        "HiCache with --dcp-size > 1 is only supported for MLA models",
        "handle_hicache",
    ),
    # qwen-dcp
    (
        {"tp_size": 8, "dcp_size": 2, "enable_hierarchical_cache": True},
        "qwen3_moe",
        "HiCache with --dcp-size > 1 is only supported for MLA models",
        "handle_hicache",
    ),
    # v3-dcp
    ({"tp_size": 8, "dcp_size": 2, "enable_hierarchical_cache": True}, "deepseek_v3", None, None),
    # v3-dcp-storage
    (
        {
            "tp_size": 8,
            "dcp_size": 2,
            "enable_hierarchical_cache": True,
            "hicache_storage_backend": "file",
        },
        "deepseek_v3",
        None,
        None,
    ),
    # v3-dcp-storage-buffer
    (
        {
            "tp_size": 8,
            "dcp_size": 2,
            "enable_hierarchical_cache": True,
            "hicache_storage_backend": "file",
            "hicache_host_memory_mode": "buffer_only",
        },
        "deepseek_v3",
        "HiCache L3 with DCP does not support buffer_only host memory",
        "handle_hicache",
    ),
    # v3-dcp-eagle
    (
        {
            "tp_size": 8,
            "dcp_size": 2,
            "enable_hierarchical_cache": True,
            "speculative_algorithm": "EAGLE",
        },
        "deepseek_v3",
        "HiCache with --dcp-size > 1 only supports DSPARK speculative",
        "handle_hicache",
    ),
    # hostpool-prefill
    (
        {"tp_size": 2, "disaggregation_decode_retraction_backup": "host_pool"},
        "llama",
        "--disaggregation-decode-retraction-backup=host_pool is only ",
        "handle_cache_compatibility",
    ),
    # hostpool-dcp
    (
        {
            "tp_size": 4,
            "dcp_size": 2,
            "disaggregation_mode": "decode",
            "disaggregation_decode_retraction_backup": "host_pool",
        },
        "deepseek_v3",
        "--disaggregation-decode-retraction-backup=host_pool does not",
        "handle_cache_compatibility",
    ),
    # hostpool-priority
    (
        {
            "tp_size": 2,
            "disaggregation_mode": "decode",
            "disaggregation_decode_retraction_backup": "host_pool",
            "enable_priority_scheduling": True,
        },
        "llama",
        "--disaggregation-decode-retraction-backup=host_pool requires",
        "handle_cache_compatibility",
    ),
    # hostpool-priority-ok
    (
        {
            "tp_size": 2,
            "disaggregation_mode": "decode",
            "disaggregation_decode_retraction_backup": "host_pool",
            "enable_priority_scheduling": True,
            "disable_priority_preemption": True,
        },
        "llama",
        None,
        None,
    ),
    # priority-lpm
    (
        {"enable_priority_scheduling": True, "schedule_policy": "lpm"},
        "llama",
        "To use priority scheduling, schedule_policy must be 'fcfs' o",
        "check_server_args",
    ),
    # priority-lof
    ({"enable_priority_scheduling": True, "schedule_policy": "lof"}, "llama", None, None),
    # retraction
    (
        {"retraction_policy": "priority"},
        "llama",
        "--retraction-policy priority requires --enable-priority-sche",
        "check_server_args",
    ),
    # retraction-ok
    ({"retraction_policy": "priority", "enable_priority_scheduling": True}, "llama", None, None),
    # micro0
    (
        {"pp_max_micro_batch_size": 0},
        "llama",
        "pp_max_micro_batch_size must be a positive integer or None (",
        "check_server_args",
    ),
    # micro4
    ({"tp_size": 2, "pp_size": 2, "pp_max_micro_batch_size": 4}, "llama", None, None),
    # compile-padding
    (
        {"disable_cuda_graph_padding": True, "enable_torch_compile": True},
        "llama",
        "--disable-cuda-graph-padding is incompatible with --enable-t",
        "check_server_args",
    ),
    # slots-pp
    (
        {"tp_size": 2, "pp_size": 2, "min_free_slots_delay": 4},
        "llama",
        "--min-free-slots-delay is not supported with pipeline parall",
        "check_server_args",
    ),
    # slots
    ({"min_free_slots_delay": 4}, "llama", None, None),
    # pdmux-pp
    (
        {
            "tp_size": 2,
            "pp_size": 2,
            "enable_pdmux": True,
            "chunked_prefill_size": -1,
            "disable_overlap_schedule": True,
        },
        "llama",
        "PD-Multiplexing is only supported with pipeline parallelism ",
        "check_server_args",
    ),
    # pdmux-chunked
    (
        {"tp_size": 2, "enable_pdmux": True},
        "llama",
        "PD-Multiplexing is not compatible with chunked prefill.",
        "check_server_args",
    ),
    # pdmux-disagg
    (
        {
            "tp_size": 2,
            "enable_pdmux": True,
            "chunked_prefill_size": -1,
            "disaggregation_mode": "prefill",
            "disable_overlap_schedule": True,
        },
        "llama",
        "PD-Multiplexing is not compatible with disaggregation mode.",
        "check_server_args",
    ),
    # pdmux-overlap
    (
        {"tp_size": 2, "enable_pdmux": True, "chunked_prefill_size": -1},
        "llama",
        "PD-Multiplexing is not compatible with overlap schedule.",
        "check_server_args",
    ),
    # pdmux-ok
    (
        {
            "tp_size": 2,
            "enable_pdmux": True,
            "chunked_prefill_size": -1,
            "disable_overlap_schedule": True,
        },
        "llama",
        None,
        None,
    ),
    # fi-chunked
    (
        {
            "tp_size": 8,
            "attn_dp_size": 8,
            "ep_size": 8,
            "moe_a2a_backend": "flashinfer",
            "moe_runner_backend": "flashinfer_cutlass",
            "chunked_prefill_size": -1,
        },
        "qwen3_moe",
        "FlashInfer MoE A2A requires chunked prefill: eager prefill d",
        "validate_flashinfer_a2a_token_budget",
    ),
    # fi-decode
    (
        {
            "tp_size": 8,
            "attn_dp_size": 8,
            "ep_size": 8,
            "moe_a2a_backend": "flashinfer",
            "moe_runner_backend": "flashinfer_cutlass",
            "chunked_prefill_size": -1,
            "disaggregation_mode": "decode",
        },
        "qwen3_moe",
        None,
        None,
    ),
    # fi-ok
    (
        {
            "tp_size": 8,
            "attn_dp_size": 8,
            "ep_size": 8,
            "moe_a2a_backend": "flashinfer",
            "moe_runner_backend": "flashinfer_cutlass",
        },
        "qwen3_moe",
        None,
        None,
    ),
    # _validate_prefill_complete's items the new fields reach (PD handler, first).
    *(
        (
            {
                "disaggregation_mode": role,
                "disaggregation_decode_allocation_policy": "prefill_complete",
                **flags,
            },
            "llama",
            "--disaggregation-decode-allocation-policy prefill_complete does not yet support "
            + item,
            "handle_pd_disaggregation",
        )
        for role, flags, item in (
            ("decode", {"enable_pdmux": True}, "PD multiplexing"),
            ("decode", {"enable_hierarchical_cache": True}, "decode radix cache or decode HiCache"),
            (
                "decode",
                {"disaggregation_decode_enable_radix_cache": True},
                "decode radix cache or decode HiCache",
            ),
        )
    ),
    (
        {
            "disaggregation_mode": "prefill",
            "disaggregation_decode_enable_radix_cache": True,
            "disaggregation_decode_allocation_policy": "prefill_complete",
        },
        "llama",
        None,
        None,
    ),
)


@pytest.mark.parametrize("config,name,error,step", ORACLE_0_5_23)
def test_0_5_23_refuses_what_it_refuses(
    config: dict[str, Any], name: str, error: str | None, step: str | None
) -> None:
    report = validate(Config(**config), model(name), explain=False, sglang_version="0.5.23")
    assert_sglang_answer(report, error, step)


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_before_0_5_23_decode_cp_refuses_any_storage_backend(version: str) -> None:
    """0.5.18 and 0.5.19 raise "--hicache-storage-backend (L3) with --dcp-size > 1 is not
    supported yet" for any storage backend; 0.5.23 only with buffer_only host memory."""
    storage = {
        "tp_size": 8,
        "dcp_size": 2,
        "enable_hierarchical_cache": True,
        "hicache_storage_backend": "file",
    }
    assert rule_ids(storage, "deepseek_v3", version) == ["HICACHE-DCP-STORAGE"]
    assert rule_ids(storage, "deepseek_v3", "0.5.23") == []
    assert rule_ids({**storage, "hicache_storage_backend": None}, "deepseek_v3", version) == []


def test_0_5_18_has_no_host_memory_mode_and_0_4_6_no_checks() -> None:
    """0.5.18's parser has no --hicache-host-memory-mode; 0.4.6.post5 has HiCache and the
    radix flag but checks neither (nor priority scheduling, which it lacks)."""
    buffer = {"enable_hierarchical_cache": True, "hicache_host_memory_mode": "buffer_only"}
    assert rule_ids(buffer, "llama", "0.5.18") == ["FLAG-ABSENT-HICACHE-HOST-MEMORY-MODE"]
    assert rule_ids(buffer, "llama", "0.5.19") == ["HICACHE-BUFFER-STORAGE"]
    both = {"enable_hierarchical_cache": True, "disable_radix_cache": True}
    assert rule_ids(both, "llama", "0.4.6.post5") == []
    assert rule_ids(both, "llama", "0.5.18") == ["HICACHE-RADIX"]
    priority = {"enable_priority_scheduling": True}
    assert rule_ids(priority, "llama", "0.4.6.post5") == ["FLAG-ABSENT-ENABLE-PRIORITY-SCHEDULING"]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_none_is_a_retraction_backup_from_0_5_23(version: str) -> None:
    none = {"disaggregation_mode": "decode", "disaggregation_decode_retraction_backup": "none"}
    assert rule_ids(none, "llama", version) == [
        "FLAG-CHOICE-DISAGGREGATION-DECODE-RETRACTION-BACKUP"
    ]
    assert rule_ids(none, "llama", "0.5.23") == []


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
def test_before_0_5_23_a_decode_with_decode_cp_runs_a_chunk_cache(version: str) -> None:
    """0.5.18 and 0.5.19's PD handler: decode CP on a decode server needs Mooncake or NIXL
    (0.5.19: or fake), and takes no decode radix cache nor HiCache; a decode's radix cache
    takes no speculative decoding (0.5.23: only EAGLE, EAGLE3, NEXTN and DSPARK)."""
    dcp = {"tp_size": 8, "dcp_size": 2, "disaggregation_mode": "decode"}
    fake = {**dcp, "disaggregation_transfer_backend": "fake"}
    assert rule_ids(fake, "deepseek_v3", version) == (
        ["PD-DCP-BACKEND"] if version == "0.5.18" else []
    )
    hicache = {**dcp, "enable_hierarchical_cache": True}
    assert rule_ids(hicache, "deepseek_v3", version)[0] == "PD-DCP-HICACHE"
    assert rule_ids(hicache, "deepseek_v3", "0.5.23") == ["HICACHE-RADIX"]
    radix = {**dcp, "disaggregation_decode_enable_radix_cache": True}
    assert rule_ids(radix, "deepseek_v3", version) == ["PD-DCP-RADIX"]
    assert rule_ids(radix, "deepseek_v3", "0.5.23") == []
    spec = {
        "tp_size": 8,
        "disaggregation_mode": "decode",
        "disaggregation_decode_enable_radix_cache": True,
        "speculative_algorithm": "EAGLE",
    }
    assert rule_ids(spec, "deepseek_v3", version) == ["PD-DECODE-RADIX-SPEC"]
    assert rule_ids(spec, "deepseek_v3", "0.5.23") == []
    ngram = {**spec, "speculative_algorithm": "NGRAM"}
    assert rule_ids(ngram, "deepseek_v3", "0.5.23") == ["PD-DECODE-RADIX-SPEC"]


def test_0_5_23_only_checks_are_its_own() -> None:
    """DSA decode CP's HiCache refusal and FlashInfer's chunked prefill are new in 0.5.23."""
    dsa = {"tp_size": 8, "dcp_size": 2, "enable_hierarchical_cache": True}
    assert rule_ids(dsa, "deepseek_v32", "0.5.23") == ["DCP-DSA-HICACHE"]
    assert "DCP-DSA-HICACHE" not in rule_ids(dsa, "deepseek_v32", "0.5.19")
    fi = {
        "tp_size": 8,
        "enable_dp_attention": True,
        "dp_size": 8,
        "ep_size": 8,
        "moe_a2a_backend": "flashinfer",
        "moe_runner_backend": "flashinfer_cutlass",
        "chunked_prefill_size": -1,
    }
    assert rule_ids(fi, "qwen3_moe", "0.5.23") == ["A2A-FLASHINFER-CHUNKED"]
    assert rule_ids(fi, "qwen3_moe", "0.5.19") == []


def test_launch_checks_are_launch_stage() -> None:
    report = validate(
        Config(enable_priority_scheduling=True, schedule_policy="lpm"),
        explain=False,
        sglang_version="0.5.23",
    )
    assert [(v.rule, v.stage) for v in report.violations] == [
        ("PRIORITY-SCHEDULE-POLICY", "launch")
    ]


def test_a_pasted_command_reads_the_flags() -> None:
    """QA's launches: the flags were "not checked by meshsat" and the layout valid."""
    line = (
        "python -m sglang.launch_server --tp 8 --pp-size 2 --enable-hicache "
        "--disable-radix-cache --hicache-host-memory-mode buffer_only "
        "--hicache-storage-backend file --enable-priority-scheduling --schedule-policy lof "
        "--retraction-policy priority --pp-max-micro-batch-size 0 --min-free-slots-delay 4 "
        "--enable-pdmux --disable-overlap-schedule --enable-torch-compile "
        "--disable-cuda-graph-padding --disaggregation-decode-enable-radix-cache "
        "--disaggregation-decode-retraction-backup host_pool --disable-priority-preemption"
    )
    parsed = parse_sglang_command(line)
    assert parsed.values == {
        "tp_size": 8,
        "pp_size": 2,
        "enable_hierarchical_cache": True,
        "disable_radix_cache": True,
        "hicache_host_memory_mode": "buffer_only",
        "hicache_storage_backend": "file",
        "enable_priority_scheduling": True,
        "schedule_policy": "lof",
        "retraction_policy": "priority",
        "pp_max_micro_batch_size": 0,
        "min_free_slots_delay": 4,
        "enable_pdmux": True,
        "disable_overlap_schedule": True,
        "enable_torch_compile": True,
        "disable_cuda_graph_padding": True,
        "disaggregation_decode_enable_radix_cache": True,
        "disaggregation_decode_retraction_backup": "host_pool",
        "disable_priority_preemption": True,
    }
    assert parsed.ignored == []


def test_a_decode_server_turns_the_radix_cache_off() -> None:
    """R-DECODE-RADIX: SGLang's PD handler, quietly; --disaggregation-decode-enable-radix-cache
    keeps it on whatever --disable-radix-cache says."""
    decode = validate(Config(disaggregation_mode="decode"), explain=False, sglang_version="0.5.23")
    assert decode.resolved_env["disable_radix_cache"] is True
    kept = validate(
        Config(
            disaggregation_mode="decode",
            disable_radix_cache=True,
            disaggregation_decode_enable_radix_cache=True,
        ),
        explain=False,
        sglang_version="0.5.23",
    )
    assert kept.resolved_env["disable_radix_cache"] is False
    assert not decode.notes and not kept.notes
