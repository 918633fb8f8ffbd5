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

from meshsat.solver.memory.facts import ModelFacts
from meshsat.solver.memory.gpus import Gpu
from meshsat.solver.memory.layout import Parallel

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

#: meshsat's quantization name (`memory.quant`) -> (GEMM mode, MoE mode) of the engine.
QUANT_MODES: Mapping[str, tuple[str, str]] = {
    "bfloat16": ("bfloat16", "bfloat16"),
    "bf16": ("bfloat16", "bfloat16"),
    "float16": ("bfloat16", "bfloat16"),
    "fp8": ("fp8_block", "fp8_block"),
    "nvfp4": ("nvfp4", "nvfp4"),
    "mxfp4": ("bfloat16", "w4a16_mxfp4"),
    # A 16-bit checkpoint served with `--quantization fp8` (`ONLINE_FP8_QUANT`): per-tensor
    # weight scales, AIConfigurator's per-tensor `fp8` GEMM. Its SGLang MoE tables hold no
    # per-tensor FP8 kernel (fp8_block, bf16, int4 and FP4 only, every system), so the
    # experts are read from `fp8_block`: the same FP8 weight bytes and tensor-core rate.
    "fp8_online": ("fp8", "fp8_block"),
}
#: The `QUANT_MODES` name of online FP8 (the checkpoint's own name, `fp8`, stays the memory
#: model's: it prices the bytes, which a block checkpoint and an online one share).
ONLINE_FP8_QUANT = "fp8_online"

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
        return f"aic {self.system} sglang-{self.backend_version}"


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
    )
