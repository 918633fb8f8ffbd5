"""The absorbed-MLA copies of `kv_b_proj` that SGLang keeps beside it on every rank.

Why: after loading, `DeepseekV2WeightLoaderMixin.post_load_weights`
(`sglang/srt/models/deepseek_common/deepseek_weight_loader.py` in 0.5.23;
`DeepseekV2ForCausalLM.post_load_weights` in `models/deepseek_v2.py` in 0.4.6.post5) splits
each layer's `kv_b_proj` weight into `w_kc` and `w_vc` for the absorbed decode path and
binds them with `.contiguous()`: two new tensors that together hold the whole shard of
`kv_b_proj` once more, while `kv_b_proj` stays for the prefill (MHA) path. So every rank
holds its attention-TP shard of `kv_b_proj` twice, in `w`'s dtype:

- a 16-bit `kv_b_proj`, and AWQ/GPTQ ones (dequantized first): 16-bit;
- FP8 with 128×128 block scales on CUDA: `block_quant_dequant` to bf16 (2 bytes); on ROCm
  `block_quant_to_tensor_quant` keeps FP8 (1 byte);
- FP8 per tensor or per channel: `channel_quant_to_tensor_quant`, FP8 (1 byte);
- anything else is split as stored (its storage width).

DeepSeek-R1 (128 heads, `kv_lora_rank` 512, 128 + 128 head dims) at tp 4: 4 MiB for each of
`w_kc` and `w_vc` a layer, 61 layers: 0.477 GiB a rank, what the NVFP4 tp-4 log shows above
the tensors. DeepSeek-V4 builds its attention elsewhere (`deepseek_v4.py`) and is left out.
"""

from __future__ import annotations

from meshsat.solver.memory.allocator import STEADY_LAYERS, run_rounding
from meshsat.solver.memory.facts import ModelFacts
from meshsat.solver.memory.gpus import Gpu

#: Architectures whose attention is not built by the DeepSeek-V2 MLA code.
_OTHER_ATTENTION = ("DeepseekV4ForCausalLM",)


def copy_width(kv_b_bytes: float, base: float, dequantized: bool, gpu: Gpu | None) -> float:
    """Bytes per element of `w_kc`/`w_vc` for a `kv_b_proj` priced `kv_b_bytes` a weight
    (scales included); `dequantized`: the scheme's weights are dequantized first (AWQ,
    GPTQ)."""
    if dequantized or kv_b_bytes >= base:
        return base
    width = next((w for w in (2.0, 1.0, 0.5) if kv_b_bytes >= w), kv_b_bytes)
    block_fp8 = width == 1.0 and kv_b_bytes > width
    rocm = gpu is not None and gpu.vendor == "amd"
    return 2.0 if block_fp8 and not rocm else width


def kv_b_params(f: ModelFacts) -> int:
    """Elements of one layer's whole `kv_b_proj`; 0 when SGLang keeps no absorbed copy."""
    if not f.is_mla or f.architecture in _OTHER_ATTENTION:
        return 0
    return f.kv_lora_rank * f.num_heads * (f.qk_nope_head_dim + f.v_head_dim)


def copies_per_layer(f: ModelFacts, width: float, attn_tp: int) -> float:
    """Bytes of one layer's `w_kc` and `w_vc` on a rank, with the caching allocator's
    rounding of the two tensors (allocated layer after layer once loading is done)."""
    params = kv_b_params(f)
    if not params:
        return 0.0
    shard = params // attn_tp
    nope = int(shard * f.qk_nope_head_dim // (f.qk_nope_head_dim + f.v_head_dim) * width)
    v = int(shard * width) - nope
    return nope + v + run_rounding((nope, v), STEADY_LAYERS) / STEADY_LAYERS
