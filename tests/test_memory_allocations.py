"""What SGLang allocates beyond the checkpoint's tensors, and the fraction a launch needs.

Oracles: the tensor shapes `CompressedTensorsWNA16MoE.create_weights` allocates (SGLang
0.5.23, `compressed_tensors_wNa16_moe.py`), written out here tensor by tensor; SGLang's own
KV sizing arithmetic (`pool.pool_tokens`) for the smallest fraction that holds a request;
and the per-module prices of an online FP8 checkpoint.
"""

from __future__ import annotations

import pytest

from meshsat import solver
from meshsat.solver.errors import InputError
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import GIB, MemoryModel, Parallel, load_facts
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.memory.pool import pool_tokens
from meshsat.solver.memory.quantized_checkpoints import with_quantization_flag
from meshsat.solver.memory.weights import WeightModel
from tests.memory_rows import column_rows

_INT4 = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32},
        }
    },
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"],
}


def _wna16_index_tensors(experts: int, hidden: int, inter_per_rank: int) -> int:
    """Bytes of the tensors create_weights allocates besides weights and scales."""
    shapes = [
        ((experts, hidden), 4),  # w13_weight_g_idx, int32
        ((experts, inter_per_rank), 4),  # w2_weight_g_idx
        ((experts, hidden), 4),  # w13_g_idx_sort_indices
        ((experts, inter_per_rank), 4),  # w2_g_idx_sort_indices
        ((experts, 2), 4),  # w13_weight_shape, float32
        ((experts, 2), 4),  # w2_weight_shape
    ]
    return sum(a * b * size for (a, b), size in shapes)


@pytest.mark.parametrize(("gpu_name", "pack", "kept"), [
    ("MI355X", "0.5.23", True),  # ROCm: the Triton method keeps them
    ("B200", "0.5.23", True),  # SM100: Triton by default from 0.5.19
    ("B200", "0.5.18", False),  # 0.5.18 picks Marlin on SM100
    ("H100", "0.5.23", False),  # Marlin frees them after loading
])  # fmt: skip
def test_wna16_index_buffers_follow_the_moe_method(gpu_name: str, pack: str, kept: bool) -> None:
    config = {**catalogue_config("moonshotai/Kimi-K2-Instruct"), "quantization_config": _INT4}
    facts = load_facts(config)
    assert facts.quant.wna16_experts
    p = Parallel(tp=8, attn_tp=8, moe_tp=8)
    g = gpu(gpu_name)
    # The experts component: the allocator's rounding of the larger tensors is apart.
    with_index = WeightModel(facts, g, pack).stage(p, 0).experts
    without = WeightModel(facts, None, pack).stage(p, 0).experts
    per_layer = _wna16_index_tensors(
        facts.num_experts, facts.hidden_size, facts.moe_intermediate_size // 8
    )
    expected = facts.num_moe_layers * per_layer if kept else 0
    assert with_index - without == pytest.approx(expected, rel=1e-12, abs=1e-6)


def test_fp8_block_experts_are_not_wna16() -> None:
    facts = load_facts("deepseek-ai/DeepSeek-R1")
    assert not facts.quant.wna16_experts


def _parallel(model: str, values: dict[str, object]) -> Parallel:
    spec = ModelSpec.from_hf_config(catalogue_config(model))
    report = solver.validate(values, spec, explain=False)
    return Parallel.from_resolved(report.resolved, report.derived)


def test_deepseek_r1_fp8_tp4_on_b200_needs_a_raised_fraction() -> None:
    p = _parallel("deepseek-ai/DeepSeek-R1", {"tp_size": 4})
    default = MemoryModel("deepseek-ai/DeepSeek-R1", "B200", context_length=4096).of(p)
    assert not default.fits and default.raised_from_fraction is None
    mm = MemoryModel(
        "deepseek-ai/DeepSeek-R1", "B200", context_length=4096, raise_default_fraction=True
    )
    m = mm.of(p)
    assert m.fits and m.raised_from_fraction == default.mem_fraction_static
    # The smallest fraction, in SGLang's own pool arithmetic, that holds one request.
    cell = m.kv_bytes_per_token

    def tokens(f: float) -> int:
        return pool_tokens(m.pre_load_gib, m.weights_gib, f, cell)

    assert tokens(m.mem_fraction_static) >= 4096 > tokens(m.mem_fraction_static - 0.001)
    assert m.weights_gib * GIB > 0.85 * m.pre_load_gib * GIB  # above the default's budget


def test_the_column_reader_raises_the_fraction_as_of_does() -> None:
    model = "deepseek-ai/DeepSeek-R1"
    spec = ModelSpec.from_hf_config(catalogue_config(model))
    mm = MemoryModel(model, "B200", context_length=4096, raise_default_fraction=True)
    raised = 0
    for (_, tokens, _, fits), _, m in column_rows(mm, 4, spec):
        assert abs(tokens - m.kv_tokens) <= 1 and fits == m.fits
        raised += m.raised_from_fraction is not None
    assert raised, "no layout needed a raised fraction: the path was not exercised"


def test_online_fp8_prices_every_linear_at_one_byte() -> None:
    base = catalogue_config("meta-llama/Llama-3.1-8B-Instruct")
    q = load_facts(with_quantization_flag(base, "fp8")).quant
    assert (q.attention, q.dense_mlp, q.unquantized) == (1.0, 1.0, 2.0)
    # A quantized checkpoint keeps its own scheme whatever the flag says.
    fp8_ckpt = catalogue_config("Qwen/Qwen3-32B-FP8")
    assert with_quantization_flag(fp8_ckpt, "fp8") is fp8_ckpt
    with pytest.raises(InputError, match="not modelled"):
        with_quantization_flag(base, "awq")
