"""Which checkpoints `--quantization quark_mxfp4` requantizes when the model loads.

Why a fact of its own: `ModelConfig._verify_quantization` takes an online requantization
method beside any checkpoint (catalogue.quantization.REQUANTIZATION), but the model loader
then builds the Quark config from the checkpoint's stated quantization
(`model_loader/weight_utils.py get_quant_config` -> `QuarkConfig.from_config`), and that
accepts only three sources: NVFP4 (ModelOpt or Quark), FP8 with dynamic activations, and a
ModelOpt mixed-precision map of NVFP4 and FP8 layers. Anything else (AWQ, GPTQ, MXFP4,
MXFP8, ModelOpt FP8, FBGEMM FP8, compressed-tensors, static FP8) raises
`NotImplementedError` before a weight is read. The same code in 0.5.18, 0.5.19 and 0.5.23;
recorded by fidelity/quant_args.py, replayed by tests/test_quant_args.py.

A checkpoint whose quantization only a ModelOpt `hf_quant_config.json` states (no
`quantization_config` in config.json) takes the other branch of `get_quant_config`: FP4
there is requantized, anything else quantized online from the stored weights, and neither
raises at that step. Both are read from what config.json states, before meshsat names a
ModelOpt export after its algorithm (`checkpoint_files.QUANT_STATED_KEY`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from meshsat.solver.lang.checkpoint_files import QUANT_STATED_KEY

#: `_detect_nvfp4_source`: the methods it reads as ModelOpt NVFP4 beside these algorithms.
_MODELOPT = ("modelopt", "modelopt_fp4", "nvfp4")
_NVFP4_ALGOS = ("", "NVFP4", "FP4")
#: `_build_mixed_precision_layer_quant_config`: NVFP4 layers are requantized, FP8 kept.
_MIXED_NVFP4 = ("NVFP4", "W4A16_NVFP4")
_MIXED_KEPT = ("FP8",)
_LAYER_INDEX = re.compile(r"\.layers\.\d+\.")


def _stated(hf: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The quantization config.json states (`resolve_checkpoint_quant_spec`'s order), as
    it states it."""
    if QUANT_STATED_KEY in hf:
        stated = hf[QUANT_STATED_KEY]
        return stated if isinstance(stated, Mapping) else None
    if isinstance(hf.get("quantization_config"), Mapping):
        return hf["quantization_config"]  # type: ignore[no-any-return]
    text = hf.get("text_config")
    if isinstance(text, Mapping) and isinstance(text.get("quantization_config"), Mapping):
        return text["quantization_config"]  # type: ignore[no-any-return]
    return None


def _mixed(layers: Mapping[str, Any]) -> bool:
    """A ModelOpt mixed-precision map requantizes when every layer group (the name after
    `.layers.N.`) has one algorithm, NVFP4 or FP8, and at least one is NVFP4."""
    groups: dict[str, set[str]] = {}
    for name, info in layers.items():
        algo = str(info.get("quant_algo", "")).upper() if isinstance(info, Mapping) else ""
        groups.setdefault(_LAYER_INDEX.split(str(name), maxsplit=1)[-1], set()).add(algo)
    algos = [next(iter(a)) for a in groups.values() if len(a) == 1]
    if len(algos) != len(groups) or any(a not in (*_MIXED_NVFP4, *_MIXED_KEPT) for a in algos):
        return False
    return any(a in _MIXED_NVFP4 for a in algos)


def _quark_nvfp4(qc: Mapping[str, Any]) -> bool:
    """A Quark export of NVFP4: FP4 weights in groups of 16 with a per-tensor FP8 scale."""
    gqc = qc.get("global_quant_config")
    weight = gqc.get("weight") if isinstance(gqc, Mapping) else None
    if not isinstance(weight, list | tuple) or len(weight) != 2:
        return False
    w0, w1 = weight
    return (
        isinstance(w0, Mapping)
        and w0.get("dtype") == "fp4"
        and w0.get("qscheme") == "per_group"
        and w0.get("group_size") == 16
        and not w0.get("is_dynamic")
        and isinstance(w1, Mapping)
        and w1.get("dtype") == "fp8_e4m3"
        and w1.get("qscheme") == "per_tensor"
        and not w1.get("is_dynamic")
    )


def mxfp4_requantizable(hf: Mapping[str, Any]) -> bool:
    """Whether the loader's Quark config takes `hf`'s checkpoint as the source of
    `--quantization quark_mxfp4` (True where config.json states no quantization). A
    stated config without `quant_method` is refused too (a KeyError in the releases)."""
    qc = _stated(hf)
    if qc is None:
        return True
    algo = str(qc.get("quant_algo") or "").upper()
    layers = qc.get("quantized_layers")
    if algo == "MIXED_PRECISION" and isinstance(layers, Mapping) and layers:
        return _mixed(layers)
    method = qc.get("quant_method")
    if method in _MODELOPT and algo in _NVFP4_ALGOS:
        return True
    if method == "quark" and _quark_nvfp4(qc):
        return True
    return method == "fp8" and qc.get("activation_scheme") == "dynamic"
