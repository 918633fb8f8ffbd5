"""Decode CP's KV pool on GQA/MHA models: what the `dcp` ranks of a group share.

SGLang (0.5.18 to 0.5.23, `ModelConfig.get_num_kv_heads(tp, dcp)`) shards KV heads over
`attn_tp // dcp` groups, the `dcp` ranks of a group holding the same heads and each a
`1/dcp` share of the tokens. So DCP widens the pool only where attention TP replicated
heads; meshsat once counted `dcp` times the tokens at `attn_tp`-sharded heads, e.g.
18,034,856 KV tokens for Llama-3.1-8B on 8 L40S at `--tp 8 --dcp 8` (2.2 TiB of KV on
360 GiB of GPUs).

Oracle: conservation. Every token of a pool keeps each layer's K and V of every KV head
somewhere in the deployment, so the pools' tokens times those bytes cannot exceed the
deployment's memory (hypothesis over GQA/MHA models, widths and GPUs). And where attention
TP splits the KV heads evenly (nothing replicated), DCP cannot add tokens beyond what a
different memory fraction gives.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.memory import MemoryModel, Parallel, gpu
from meshsat.solver.memory.models import model_config
from meshsat.solver.memory.quant import kv_dtype_bytes
from tests.cli_helpers import run_cli

#: GQA and MHA models of the catalogue (8, 8, 8 and 4 KV heads; no MLA, no sliding window).
MODELS = (
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-235B-A22B",
)
GPUS = ("H100", "H200", "L40S", "B200")


def unique_kv_bytes(mm: MemoryModel) -> float:
    """K and V of every KV head of every layer for one token, stored once."""
    f = mm.facts
    b = kv_dtype_bytes(mm.kv_cache_dtype, f.quant.unquantized)
    return f.num_layers * f.num_kv_heads * (f.head_dim + f.v_head_dim) * b


@settings(max_examples=40, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    gpu_name=st.sampled_from(GPUS),
    tp_log=st.integers(0, 4),
    dcp_log=st.integers(1, 4),
)
def test_the_pools_never_hold_more_kv_than_the_gpus(
    model: str, gpu_name: str, tp_log: int, dcp_log: int
) -> None:
    tp, dcp = 2**tp_log, 2 ** min(dcp_log, tp_log)
    mm = MemoryModel(model_config(model), gpu(gpu_name))
    m = mm.of(Parallel(tp=tp, attn_tp=tp, moe_tp=tp, dcp=dcp))
    if not m.fits:
        return
    held = m.max_total_num_tokens * m.pools * unique_kv_bytes(mm)
    assert held <= tp * gpu(gpu_name).memory_mib * 2**20


def test_dcp_adds_no_tokens_where_attention_tp_splits_the_heads() -> None:
    mm = MemoryModel(model_config("meta-llama/Llama-3.1-8B-Instruct"), gpu("L40S"))
    plain = mm.of(Parallel(tp=8, attn_tp=8, moe_tp=8))
    for dcp in (2, 4, 8):
        with_dcp = mm.of(Parallel(tp=8, attn_tp=8, moe_tp=8, dcp=dcp))
        # Each rank keeps dcp times the heads for a dcp-th of the tokens: the same bytes;
        # only the release's memory fraction (another with DCP) moves the count, by 1 %.
        assert with_dcp.kv_bytes_per_token == plain.kv_bytes_per_token * dcp
        assert with_dcp.max_total_num_tokens <= 1.05 * plain.max_total_num_tokens


def test_dcp_widens_the_pool_where_attention_tp_replicated_heads() -> None:
    """Qwen3-235B-A22B has 4 KV heads: at tp 8 each is on two ranks, and DCP 2 lets those
    two keep different tokens instead."""
    mm = MemoryModel(model_config("Qwen/Qwen3-235B-A22B"), gpu("H200"))
    plain = mm.of(Parallel(tp=8, attn_tp=8, moe_tp=8))
    dcp2 = mm.of(Parallel(tp=8, attn_tp=8, moe_tp=8, dcp=2))
    assert dcp2.kv_bytes_per_token == plain.kv_bytes_per_token
    assert dcp2.max_total_num_tokens > 1.5 * plain.max_total_num_tokens


def test_the_hybrid_swa_pool_never_widens_under_dcp(capsys: pytest.CaptureFixture[str]) -> None:
    """gpt-oss runs SGLang's hybrid SWA pool (0.5.18 on), which counts KV heads at
    attention TP and whose rows are request tokens whatever the DCP width
    (`logical_token_capacity`: "SWA allocators never widen under DCP"): 7.2M tokens at tp 8
    on H100 with or without DCP, not 11.9M at dcp 8. Enumerate's compiled columns say the
    same as the memory model."""
    mm = MemoryModel(model_config("openai/gpt-oss-120b"), gpu("H100"))
    plain = mm.of(Parallel(tp=8, attn_tp=8, ep=1, moe_tp=8))
    for dcp in (2, 8):
        m = mm.of(Parallel(tp=8, attn_tp=8, ep=1, moe_tp=8, dcp=dcp))
        assert m.kv_bytes_per_token == plain.kv_bytes_per_token
        assert m.max_total_num_tokens <= 1.05 * plain.max_total_num_tokens
    run = run_cli(
        capsys, "enumerate", "--gpus", "8", "--model", "openai/gpt-oss-120b", "--gpu", "H100",
        "--where", "tp == 8 and ep == 1 and attn_cp == 1 and pp == 1", "-f", "jsonl",
    )  # fmt: skip
    rows = [json.loads(line) for line in run.out.splitlines()]
    plain_rows = [r for r in rows if not r["enable_dp_attention"]]
    for column in ("kv_tokens", "max_requests"):  # a rank's rows; the requests they hold
        by_dcp = {int(r["dcp_size"]): int(r[column]) for r in plain_rows}
        assert {1, 2, 8} <= set(by_dcp)
        assert max(by_dcp.values()) <= 1.05 * min(by_dcp.values())
