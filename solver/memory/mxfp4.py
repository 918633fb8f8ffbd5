"""MXFP4 expert weights as SGLang allocates them: padded to what the MoE kernel needs.

Why: gpt-oss's checkpoint stores its experts unpadded (hidden 2880, width 2880), but SGLang
allocates the expert buffers at the kernel's alignment before loading into them, so the
memory a rank holds is that of the padded shapes. The alignment depends on the MoE runner,
which SGLang picks from the GPU for gpt-oss (0.5.23,
`sglang/srt/arg_groups/model_overrides/gpt_oss.py`: `flashinfer_mxfp4` on SM100, the
triton_kernels path elsewhere on NVIDIA):

- `FusedMoE.__init__` (`sglang/srt/layers/moe/fused_moe_triton/layer.py`) rounds the hidden
  size up to a multiple of 256 for MXFP4 under `flashinfer_mxfp4`;
- `Mxfp4MoEMethod.create_weights` (`sglang/srt/layers/quantization/mxfp4.py`) rounds each
  MoE-TP rank's expert width up to a multiple of 128 on SM100 with FlashInfer (and the
  hidden size to 128, already met) from 0.5.18 on, or to a multiple of 64 on the
  triton_kernels path. Releases before 0.5.18 (pack `legacy`) rounded both the width and
  the hidden size up to 256 under FlashInfer ("padded to multiple of 256", the method's
  first version of 2025-08; the 0.5.18 source says the 256 was "overly conservative");
- `process_weights_after_loading` under FlashInfer (every release) converts both biases to
  float32 (`w13_bias = layer.w13_weight_bias.data.to(torch.float32)`) and keeps the
  shuffled float32 copies as `w13_weight_bias`/`w2_weight_bias`: 4 bytes per bias element
  where the checkpoint stores 2.

AMD with `SGLANG_USE_AITER` (both sizes to 256) is an opt-in environment setting and is not
modelled: AMD GPUs get the triton_kernels rule.

Buffers per expert: w13 `[2·I, H/2]` FP4 bytes plus `[2·I, H/32]` E8M0 scales and a bias
of 2·I; w2 `[H, I/2]` plus `[H, I/32]` scales and a bias of H (bf16, float32 after
FlashInfer's processing). gpt-oss-20b (H = I = 2880, 32 experts, 24 layers) on a B200 at
tp 1: 10.78 GiB of experts before 0.5.18 (3072 × 3072), 10.34 GiB from 0.5.18 (2944 × 3072).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshsat.solver.memory.gpus import Gpu

#: GPUs SGLang's `get_platform().is_sm100` is true on (compute capability 10.x).
SM100 = frozenset({"B200", "B300", "GB200", "GB300"})
#: Packs whose FlashInfer MXFP4 method pads the expert width to 128 (earlier ones: 256).
_PAD_128_PACKS = ("0.5.18", "0.5.19", "0.5.23")


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


@dataclass(frozen=True)
class Mxfp4Experts:
    """The padded expert shapes on one MoE-TP rank, for one MoE runner."""

    hidden: int
    #: Expert width on one MoE-TP rank, padded.
    width: int
    #: Bytes of one bias element as kept after loading (FlashInfer: float32).
    bias_bytes: float = 2.0

    def bytes_per_expert(self, bias: bool) -> float:
        """FP4 values (half a byte) and one E8M0 scale byte per 32, for w13 and w2."""
        weights = 3 * self.width * self.hidden * (0.5 + 1 / 32)
        return weights + ((2 * self.width + self.hidden) * self.bias_bytes if bias else 0.0)


def mxfp4_experts(
    hidden: int, width: int, moe_tp: int, gpu: Gpu, pack: str = "0.5.23"
) -> Mxfp4Experts:
    """What `Mxfp4MoEMethod.create_weights` allocates for an expert of `hidden` × `width`
    split over `moe_tp` on `gpu` (FusedMoE passes `width // moe_tp` per rank), as `pack`'s
    release keeps it after loading."""
    per_rank = width // moe_tp
    if gpu.vendor == "nvidia" and gpu.name in SM100:  # flashinfer_mxfp4
        align = 128 if pack in _PAD_128_PACKS else 256
        padded_hidden = _round_up(_round_up(hidden, 256), align)
        return Mxfp4Experts(padded_hidden, _round_up(per_rank, align), bias_bytes=4.0)
    # triton_kernels (the default elsewhere): the width to 64, the hidden size as stored.
    return Mxfp4Experts(hidden, _round_up(per_rank, 64))
