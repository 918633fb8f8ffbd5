"""What SGLang keeps after loading on top of the parameters: the absorbed-MLA copies of
`kv_b_proj` and the FlashInfer MXFP4 experts' padding and float32 biases, per release.

Oracles: tensor shapes written out here from the release source, tensor by tensor, and the
caching allocator's segment arithmetic worked by hand:
- `DeepseekV2WeightLoaderMixin.post_load_weights` (0.5.23,
  `models/deepseek_common/deepseek_weight_loader.py`): `w_kc` `[heads, nope, kv_lora]` and
  `w_vc` `[heads, kv_lora, v]` per layer, contiguous, in the dtype `kv_b_proj` is split in;
- `Mxfp4MoEMethod.create_weights` / `process_weights_after_loading` (`quantization/mxfp4.py`):
  w13 `[E, 2I, H/2]` + `[E, 2I, H/32]`, w2 `[E, H, I/2]` + `[E, H, I/32]`, float32 biases
  `[E, 2I]` and `[E, H]` after FlashInfer's shuffle; I and H padded to 128 (0.5.18 on) or
  256 (before).
"""

from __future__ import annotations

import pytest

from meshsat.solver.memory import MemoryModel, Parallel, load_facts
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.mla import copy_width, kv_b_params
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.memory.mxfp4 import mxfp4_experts
from meshsat.solver.memory.weights import WeightModel

MIB = 1 << 20
#: nvidia/DeepSeek-R1-FP4's recipe as the log record has it: attention stays bf16.
_NVFP4_BF16_ATTENTION = {
    "quant_method": "modelopt",
    "quant_algo": "NVFP4",
    "exclude_modules": ["lm_head", "model.layers.*.self_attn*"],
}


def test_deepseek_r1_keeps_w_kc_and_w_vc_beside_kv_b_proj_at_tp4(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = {
        **catalogue_config("deepseek-ai/DeepSeek-R1"),
        "quantization_config": _NVFP4_BF16_ATTENTION,
    }
    facts = load_facts(config)
    # 128 heads of (128 nope + 128 v) over kv_lora_rank 512, split over 4 attention ranks:
    # w_kc [32, 128, 512] and w_vc [32, 512, 128] in bf16, 4 MiB each.
    assert kv_b_params(facts) == 512 * 128 * 256
    wm = WeightModel(facts, gpu("B200"))
    # Both are under 10 MiB, so they come from 20 MiB segments, five to a segment: 32
    # layers' 64 tensors fill 13 segments (260 MiB for 256 MiB), 4 MiB over 32 layers.
    want = 2 * 4 * MIB + 4 * MIB / 32
    assert wm.mla_copies(4) == want
    p = Parallel(tp=4, attn_tp=4, moe_tp=4)
    without_mla = WeightModel(facts, gpu("B200"))
    monkeypatch.setattr(without_mla, "mla_copies", lambda attn_tp: 0.0)
    extra = wm.stage(p, 0).overhead - without_mla.stage(p, 0).overhead
    assert extra == pytest.approx(facts.num_layers * want, rel=1e-12)


@pytest.mark.parametrize(("kv_b", "dequantized", "gpu_name", "width"), [
    (2.0, False, "B200", 2.0),  # bf16 kv_b_proj: split as is
    (1.0 + 4 / 128**2, False, "H200", 2.0),  # block FP8 on CUDA: block_quant_dequant to bf16
    (1.0 + 4 / 128**2, False, "MI300X", 1.0),  # block FP8 on ROCm: block_quant_to_tensor_quant
    (1.0, False, "H200", 1.0),  # per-channel FP8: channel_quant_to_tensor_quant
    (0.5 + 2.5 / 128, True, "H100", 2.0),  # AWQ: awq_dequantize first
])  # fmt: skip
def test_the_copies_take_the_dtype_kv_b_proj_is_split_in(
    kv_b: float, dequantized: bool, gpu_name: str, width: float
) -> None:
    assert copy_width(kv_b, 2.0, dequantized, gpu(gpu_name)) == width


def test_a_gqa_model_keeps_no_absorbed_copy() -> None:
    facts = load_facts("Qwen/Qwen3-32B")
    assert kv_b_params(facts) == 0
    assert WeightModel(facts, gpu("B200")).mla_copies(4) == 0.0


@pytest.mark.parametrize(("pack", "width", "hidden"), [
    ("legacy", 3072, 3072),  # before 0.5.18: round_up(I, 256), round_up(H, 256)
    ("0.5.18", 2944, 3072),  # round_up(I, 128); FusedMoE already rounded H to 256
    ("0.5.23", 2944, 3072),
])  # fmt: skip
def test_gpt_oss_20b_experts_on_b200_per_release(pack: str, width: int, hidden: int) -> None:
    e = mxfp4_experts(2880, 2880, 1, gpu("B200"), pack)
    assert (e.width, e.hidden) == (width, hidden)
    tensors = [
        2 * width * hidden // 2,  # w13_weight, uint8 (two FP4 a byte)
        2 * width * hidden // 32,  # w13_weight_scale, one E8M0 per 32
        2 * width * 4,  # w13_weight_bias, float32 after the shuffle
        hidden * width // 2,  # w2_weight
        hidden * width // 32,  # w2_weight_scale
        hidden * 4,  # w2_weight_bias, float32
    ]
    assert e.bytes_per_expert(bias=True) == sum(tensors)


def test_gpt_oss_20b_weights_follow_the_release() -> None:
    """The legacy padding adds 3·128·3072 FP4 elements (with scales) and 2·128 float32 bias
    elements to each of 32 experts in 24 layers."""
    p = Parallel()
    legacy = MemoryModel("openai/gpt-oss-20b", "B200", pack="legacy").of(p).weights_gib
    current = MemoryModel("openai/gpt-oss-20b", "B200", pack="0.5.23").of(p).weights_gib
    per_expert = 3 * 128 * 3072 * (0.5 + 1 / 32) + 2 * 128 * 4
    assert legacy - current == pytest.approx(24 * 32 * per_expert / 2**30, abs=0.01)
