"""The one place meshsat's resolved layout is put into AIConfigurator's vocabulary.

Why one module: AIConfigurator (`aiconfigurator-core`) names widths differently from SGLang,
and a mismatch silently estimates another layout. Its `tp_size` is the attention-TP width
of one attention-DP group (meshsat's `attn_tp`), `attention_dp_size` is meshsat's `attn_dp`,
and it insists that `tp_size * attention_dp_size == moe_tp_size * moe_ep_size` (one replica
of one pipeline stage); SGLang's `--tp-size` is that product. Quantization has its own
enums (`fp8_block`, `nvfp4`, ...), GPUs are "systems" (`h200_sxm`), and each system has
kernel databases per SGLang release ("database versions"). This module has no dependency
on the engine: it is plain data, tested on a table of layouts (tests/test_perf_mapping.py).

What it refuses (the estimator then uses the roofline, and says why): context parallelism
(prefill or decode CP), DWDP, a separate `moe_dense_tp_size`, a GPU or quantization the
engine has no SGLang data for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from meshsat.solver.memory.facts import ModelFacts
from meshsat.solver.memory.gpus import Gpu
from meshsat.solver.memory.layout import Parallel
from meshsat.solver.memory.quantized_checkpoints import online_quantized

#: meshsat GPU name -> AIConfigurator system with SGLang kernel data.
SYSTEMS: Mapping[str, str] = {
    "H100": "h100_sxm",
    "H200": "h200_sxm",
    "B200": "b200_sxm",
    "B300": "b300_sxm",
    "GB200": "gb200",
    "GB300": "gb300",
    "A100-80": "a100_sxm",
    "L40S": "l40s",
}

#: meshsat's quantization name (`memory.quant`, or `checkpoint_quant`'s finer one) ->
#: (GEMM mode, MoE mode) of the engine.
QUANT_MODES: Mapping[str, tuple[str, str]] = {
    "bfloat16": ("bfloat16", "bfloat16"),
    "bf16": ("bfloat16", "bfloat16"),
    "float16": ("bfloat16", "bfloat16"),
    # Block-scaled FP8 (DeepSeek, Qwen3-FP8: `weight_block_size`; compressed-tensors'
    # `block` strategy): AIConfigurator's `fp8_block`.
    "fp8": ("fp8_block", "fp8_block"),
    "nvfp4": ("nvfp4", "nvfp4"),
    "mxfp4": ("bfloat16", "w4a16_mxfp4"),
    # Per-tensor FP8 weight scales: a 16-bit checkpoint served with `--quantization fp8`
    # (`ONLINE_FP8_QUANT`), a ModelOpt FP8 checkpoint, an `fp8` one without blocks, or
    # compressed-tensors' `tensor` strategy: AIConfigurator's per-tensor `fp8` GEMM. Its
    # SGLang MoE tables hold no per-tensor FP8 kernel (fp8_block, bf16, int4 and FP4 only,
    # every system), so the experts are read from `fp8_block`: the same FP8 weight bytes
    # and tensor-core rate (`SUBSTITUTES` says so in the estimate's source).
    "fp8_online": ("fp8", "fp8_block"),
    "fp8_tensor": ("fp8", "fp8_block"),
    # Per-channel FP8 weight scales (compressed-tensors' `channel` strategy, GLM-4.5-FP8;
    # fbgemm_fp8): no per-channel table, so the per-tensor `fp8` GEMM, whose kernels read
    # the same FP8 operands (a scale per row is applied in the epilogue).
    "fp8_channel": ("fp8", "fp8_block"),
}
#: The `QUANT_MODES` name of online FP8 (the checkpoint's own name, `fp8`, stays the memory
#: model's: it prices the bytes, which a block checkpoint and an online one share).
ONLINE_FP8_QUANT = "fp8_online"
#: `QUANT_MODES` names whose modes stand in for a scheme the engine has no SGLang data for:
#: name -> (what the GEMM substitutes, what the MoE substitutes; None: the scheme's own).
#: The estimate's source names each (`EngineArgs.label`), the MoE one on MoE models only.
SUBSTITUTES: Mapping[str, tuple[str | None, str | None]] = {
    "fp8_online": (None, "fp8_block MoE for per-tensor FP8"),
    "fp8_tensor": (None, "fp8_block MoE for per-tensor FP8"),
    "fp8_channel": ("per-tensor fp8 GEMM for per-channel FP8", "fp8_block MoE for per-channel FP8"),
}

#: `--kv-cache-dtype` -> the engine's KV-cache and attention (FMHA) modes. `auto` keeps
#: the activation dtype (bf16), which is what SGLang does for FP8/FP4 checkpoints too.
KV_MODES: Mapping[str, tuple[str, str]] = {
    "auto": ("bfloat16", "bfloat16"),
    "bfloat16": ("bfloat16", "bfloat16"),
    "float16": ("bfloat16", "bfloat16"),
    "fp8_e4m3": ("fp8", "bfloat16"),
    "fp8_e5m2": ("fp8", "bfloat16"),
}

#: Model ids the engine bundles under another name (it resolves these without a network).
MODEL_ALIASES: Mapping[str, str] = {
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B-Instruct": "meta-llama/Meta-Llama-3.1-405B",
    "zhipuai/GLM-5": "zai-org/GLM-5-FP8",
}


@dataclass(frozen=True)
class EngineArgs:
    """Keyword arguments of `aiconfigurator_core.sdk.engine.compile_engine` (plain data)."""

    model_path: str
    system: str
    backend_version: str
    tp_size: int
    pp_size: int
    attention_dp_size: int
    moe_tp_size: int
    moe_ep_size: int
    gemm_quant_mode: str
    moe_quant_mode: str
    kvcache_quant_mode: str
    fmha_quant_mode: str
    #: The modes that stand in for the checkpoint's scheme (`SUBSTITUTES`), for the label.
    substitutes: tuple[str, ...] = ()

    def kwargs(self) -> dict[str, object]:
        """`compile_engine(model_path, system, "sglang", **kwargs)`."""
        return {
            "backend_version": self.backend_version,
            "tp_size": self.tp_size,
            "pp_size": self.pp_size,
            "attention_dp_size": self.attention_dp_size,
            "moe_tp_size": self.moe_tp_size,
            "moe_ep_size": self.moe_ep_size,
            "gemm_quant_mode": self.gemm_quant_mode,
            "moe_quant_mode": self.moe_quant_mode,
            "kvcache_quant_mode": self.kvcache_quant_mode,
            "fmha_quant_mode": self.fmha_quant_mode,
        }

    @property
    def label(self) -> str:
        """What every estimate from this engine says about its source."""
        said = f" (substitute: {'; '.join(self.substitutes)})" if self.substitutes else ""
        return f"aic {self.system} sglang-{self.backend_version}{said}"


@dataclass(frozen=True)
class Unsupported:
    """Why the engine cannot express a layout (the estimate falls back to the roofline)."""

    reason: str


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:4])


def nearest_version(pack_version: str, available: Sequence[str]) -> str:
    """The database version nearest to the pack's release: the newest not newer than the
    pack, else the oldest newer one (kernels change little between neighbouring releases,
    and an older database never claims a kernel the release lacks)."""
    if not available:
        raise ValueError("no database versions to choose from")
    key = _version_key(pack_version)
    ordered = sorted(available, key=_version_key)
    older = [v for v in ordered if _version_key(v) <= key]
    return older[-1] if older else ordered[0]


def engine_args(
    p: Parallel,
    facts: ModelFacts,
    gpu: Gpu,
    *,
    model_path: str,
    pack_version: str,
    database_versions: Mapping[str, Sequence[str]],
    kv_cache_dtype: str | None = None,
    quant: str | None = None,
    dwdp: bool = False,
) -> EngineArgs | Unsupported:
    """The engine's arguments for one resolved layout, or why it has none.

    `database_versions` maps each system to the SGLang database versions installed (the
    caller reads them from the engine's data directory; tests pass a table). `quant`
    overrides the checkpoint's quantization name (measured runs name theirs).
    """
    system = SYSTEMS.get(gpu.name)
    if system is None or not database_versions.get(system):
        return Unsupported(f"no SGLang kernel data for {gpu.name}")
    if p.attn_cp > 1:
        return Unsupported("attention (prefill) context parallelism")
    if p.dcp > 1:
        return Unsupported("decode context parallelism")
    if dwdp:
        return Unsupported("DWDP")
    if p.moe_dense_tp is not None and p.moe_dense_tp != p.tp:
        return Unsupported("moe_dense_tp_size differs from tp_size")
    if not facts.is_moe and p.attn_dp > 1:
        # SGLang runs a dense model's MLP over all of TP under DP attention (tokens gathered
        # from the attention-DP ranks); the engine's dense model prices the layout as plain
        # DP replicas of attention TP (Qwen3-32B on 8 H100, tp 8 with attention DP 2: the
        # same TTFT and TPOT as tp 4 dp 2, to the digit), which is not what runs.
        return Unsupported("DP attention on a dense model")
    qname = quant or facts.quant.name
    modes = QUANT_MODES.get(qname)
    if modes is None:
        return Unsupported(f"quantization {qname!r}")
    kv = KV_MODES.get(kv_cache_dtype or "auto")
    if kv is None:
        return Unsupported(f"kv_cache_dtype {kv_cache_dtype!r}")
    attn_width = p.attn_tp * p.attn_dp
    if facts.is_moe:
        moe_tp, moe_ep = p.moe_tp, p.ep
    else:  # dense MLPs are split over all of tp: the engine wants the product to match
        moe_tp, moe_ep = attn_width, 1
    if moe_tp * moe_ep != attn_width:
        return Unsupported(f"MoE widths {moe_tp}x{moe_ep} do not cover the {attn_width} ranks")
    gemm_for, moe_for = SUBSTITUTES.get(qname, (None, None))
    substitutes = tuple(
        note for note in (gemm_for, moe_for if facts.is_moe else None) if note is not None
    )
    return EngineArgs(
        model_path=MODEL_ALIASES.get(model_path, model_path),
        system=system,
        backend_version=nearest_version(pack_version, database_versions[system]),
        tp_size=p.attn_tp,
        pp_size=p.pp,
        attention_dp_size=p.attn_dp,
        moe_tp_size=moe_tp,
        moe_ep_size=moe_ep,
        gemm_quant_mode=modes[0],
        moe_quant_mode=modes[1],
        kvcache_quant_mode=kv[0],
        fmha_quant_mode=kv[1],
        substitutes=substitutes,
    )


def _quantization_config(hf: Mapping[str, Any]) -> Mapping[str, Any]:
    qc = hf.get("quantization_config")
    text = hf.get("text_config")
    if qc is None and isinstance(text, Mapping):
        qc = text.get("quantization_config")
    return qc if isinstance(qc, Mapping) else {}


def _compressed_tensors_fp8(qc: Mapping[str, Any]) -> str | None:
    """The FP8 scaling of a compressed-tensors checkpoint's weights (its groups agree in the
    catalogue's checkpoints; the first FP8 group decides), None when they are not FP8."""
    groups = qc.get("config_groups")
    for group in groups.values() if isinstance(groups, Mapping) else ():
        w = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(w, Mapping) or w.get("type") != "float" or w.get("num_bits") != 8:
            continue
        return {"block": "fp8", "tensor": "fp8_tensor", "channel": "fp8_channel"}.get(
            str(w.get("strategy", "tensor"))
        )
    return None


def checkpoint_quant(hf: Mapping[str, Any]) -> str | None:
    """The `QUANT_MODES` name of a config's FP8 scaling where the memory model's name does
    not tell it (its `fp8` prices the bytes, which blocks, per-tensor and per-channel
    scales share to within the scales), else None: the memory model's name maps as is.

    Block (`weight_block_size`, compressed-tensors `block`) -> `fp8`; per-tensor (ModelOpt
    FP8, an `fp8` checkpoint without blocks, compressed-tensors `tensor`, `--quantization
    fp8` on a 16-bit checkpoint) -> `fp8_tensor` / `fp8_online`; per-channel
    (compressed-tensors `channel`, fbgemm_fp8) -> `fp8_channel`."""
    if online_quantized(hf):  # `with_quantization_flag` on a 16-bit checkpoint
        return ONLINE_FP8_QUANT
    qc = _quantization_config(hf)
    method = str(qc.get("quant_method", "")).lower()
    algo = str(qc.get("quant_algo", "")).upper()
    if method == "compressed-tensors":
        return _compressed_tensors_fp8(qc)
    if method == "fbgemm_fp8" or (method == "modelopt" and algo == "FP8_PER_CHANNEL_PER_TOKEN"):
        return "fp8_channel"
    if method in ("fp8", "modelopt_fp8") or (method == "modelopt" and algo == "FP8"):
        return "fp8" if qc.get("weight_block_size") else "fp8_tensor"
    return None
