"""The quantization SGLang finds for a checkpoint whose config.json does not state it.

Why: SGLang's `ModelConfig._parse_quant_hf_config` (0.5.23; recorded from the release by
`fidelity/quant_sources.py`, replayed by tests/test_checkpoint_files.py) takes
`quantization_config`, else the older `compression_config` key, else, for a local folder,
a ModelOpt `hf_quant_config.json` beside config.json; a ModelOpt scheme (`quant_method`
"modelopt" or none) is then named by its `quant_algo` ("modelopt_fp8", "modelopt_fp4",
...). NVIDIA's FP8 and NVFP4 checkpoints ship that way (nvidia/Llama-3.1-70B-Instruct-FP8,
nvidia/DeepSeek-V3.1-NVFP4, nvidia/Qwen3-235B-A22B-NVFP4, the Nemotron-3 family). Reading
config.json alone, meshsat priced such a folder's weights and KV cache in 16 bits: a local
copy of the 70B FP8 checkpoint "did not fit" the two H100s SGLang serves it on.

Both readers of a checkpoint folder go through `read_checkpoint_config`: the rules'
(`ModelSpec.from_file`) and the memory model's (`memory.models.model_config`), so the shape
rules and the sizing see the same scheme, read under the same bounds. The ModelOpt keys
beside `quant_algo` (`exclude_modules`, `kv_cache_quant_algo`, `group_size`,
`quantized_layers`) are kept: SGLang's quantization classes read them from the same file
when the model loads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.lang.limits import (
    MAX_CONFIG_BYTES,
    MAX_DEPTH,
    bracket_depth,
    check_shape,
    read_text,
)

#: ModelOpt's quantization file in a checkpoint folder (`_parse_quant_hf_config`).
HF_QUANT_CONFIG = "hf_quant_config.json"
#: Set on a config whose `quantization_config` meshsat rewrote: what config.json states
#: (None: nothing, the scheme came from HF_QUANT_CONFIG). The model loader reads the
#: stated one, under its own `quant_method`, apart from the file (`requant_source`).
QUANT_STATED_KEY = "meshsat_stated_quantization"


def read_checkpoint_config(path: str | Path) -> dict[str, Any]:
    """A checkpoint's config.json (`path`: the file or its folder) with the quantization
    SGLang serves it with (`with_sglang_quantization`). Bounded as every input is
    (`limits`): a refusal is one `InputError` line naming the file."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    text = read_text(p, "model config", MAX_CONFIG_BYTES)
    if bracket_depth(text) > MAX_DEPTH:
        raise InputError(f"model config {p} is nested deeper than {MAX_DEPTH} levels")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"model config {p} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise InputError(f"model config {p} is nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(f"model config {p} must be a JSON object")
    check_shape(data, f"model config {p}", finite=False)
    return dict(with_sglang_quantization(data, p.parent))


def unwrap_modelopt(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ModelOpt settings of `hf_quant_config.json` (`{"quantization": {...}}`, nested
    once more in some exports) or of a flat `quantization_config`, as SGLang's
    `unwrap_modelopt_quantization_config` finds them."""
    quantization = config.get("quantization", config)
    if not isinstance(quantization, Mapping):
        return {}
    nested = quantization.get("quantization")
    return nested if isinstance(nested, Mapping) else quantization


def modelopt_method(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """SGLang's `_parse_modelopt_quant_config`: the `quant_method` its `quant_algo` names
    (None: no algorithm SGLang recognises, so no quantization is found)."""
    settings = unwrap_modelopt(config)
    algo = settings.get("quant_algo")
    if not isinstance(algo, str) or not algo:
        return None
    if algo == "MIXED_PRECISION":
        layers = settings.get("quantized_layers") or {}
        nvfp4 = isinstance(layers, Mapping) and any(
            str(layer.get("quant_algo", "")).upper() in ("NVFP4", "W4A16_NVFP4")
            for layer in layers.values()
            if isinstance(layer, Mapping)
        )
        return {"quant_method": "modelopt_mixed" if nvfp4 else "w4afp8", "quant_algo": algo}
    if "FP4" in algo:
        return {"quant_method": "modelopt_fp4", "quant_algo": algo}
    if algo == "FP8":
        return {"quant_method": "modelopt_fp8", "quant_algo": algo}
    if algo == "MXFP8":
        parsed: dict[str, Any] = {
            "quant_method": "mxfp8",
            "quant_algo": algo,
            "activation_scheme": "dynamic",
            "weight_block_size": [1, settings.get("group_size", 32)],
            "scale_fmt": "ue8m0",
        }
        ignored = settings.get("exclude_modules", settings.get("ignore"))
        if ignored is not None:
            parsed["modules_to_not_convert"] = ignored
        return parsed
    return None


def with_sglang_quantization(hf: Mapping[str, Any], folder: Path | None) -> Mapping[str, Any]:
    """`hf` with the `quantization_config` SGLang serves the checkpoint with (`hf` itself
    when config.json states it whole). `folder`: the checkpoint's folder, where
    `hf_quant_config.json` may sit (None for a config that came without one, such as a
    pasted config.json)."""
    qc = hf.get("quantization_config")
    if isinstance(qc, Mapping):
        if qc.get("quant_method", "modelopt") != "modelopt":
            return hf
        parsed = modelopt_method({"quantization": qc})
        if parsed is None:
            return hf
        return {**hf, "quantization_config": {**qc, **parsed}, QUANT_STATED_KEY: qc}
    if qc is not None:
        return hf  # not a mapping: the readers say so with the key's name
    compression = hf.get("compression_config")
    if compression is not None:
        return {**hf, "quantization_config": compression}
    if folder is None:
        return hf
    path = folder / HF_QUANT_CONFIG
    try:
        present = path.is_file()
    except OSError:
        present = False
    if not present:
        return hf
    try:
        data = json.loads(read_text(path, "ModelOpt quantization config", MAX_CONFIG_BYTES))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "SGLang reads it as the checkpoint's quantization"
        ) from None
    if not isinstance(data, Mapping):
        raise InputError(f"{path} must be a JSON object")
    parsed = modelopt_method(data)
    if parsed is None:
        return hf
    return {
        **hf,
        "quantization_config": {**unwrap_modelopt(data), **parsed},
        QUANT_STATED_KEY: None,
    }
