"""Model facts that prune layouts, read from a Hugging Face `config.json`.

Only the handful of facts the rules read are kept. Key names vary between model
families (`n_routed_experts` for DeepSeek, `num_local_experts` for Mixtral, ...), so the
reader tries the usual spellings and looks inside `text_config` for multimodal wrappers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from meshsat.solver.errors import InputError
from meshsat.solver.lang.limits import MAX_DEPTH, bracket_depth, check_shape, read_text, shown

MLA_ARCHITECTURES = (
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "KimiK25ForConditionalGeneration",
)
DSA_ARCHITECTURES = ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")
MIMO_V2_ARCHITECTURES = ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")
CP_V2_DEFAULT_ARCHITECTURES = (
    "DeepseekV32ForCausalLM",
    "GlmMoeDsaForCausalLM",
    "MiMoV2FlashForCausalLM",
    "MiMoV2ForCausalLM",
    "Qwen3MoeForCausalLM",
    "DeepseekV3ForCausalLM",
)

_HEADS = ("num_attention_heads", "n_head", "num_heads")
_KV_HEADS = ("num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num")
_EXPERTS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
_MULTIMODAL_KEYS = ("vision_config", "vision_tower", "audio_config", "vision_encoder")


class ModelSpec(BaseModel):
    """The model facts the layout rules read; every one is optional."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    architecture: str | None = Field(None, description="First entry of `architectures`.")
    is_multimodal: bool = Field(False, description="Has a vision or audio tower.")
    is_deepseek_dsa: bool = Field(False, description="DeepSeek sparse attention (V3.2, GLM-5).")
    num_attention_heads: int | None = Field(None, ge=1)
    num_key_value_heads: int | None = Field(None, ge=1)
    num_experts: int | None = Field(None, ge=1, description="Routed experts (MoE models).")
    num_hidden_layers: int | None = Field(None, ge=1)

    @classmethod
    def from_hf_config(cls, hf: Mapping[str, Any]) -> ModelSpec:
        """The facts of a Hugging Face config; a malformed one raises `InputError`
        (a fact that is present but not a positive integer is refused, not dropped:
        dropping it would validate layouts the model cannot run)."""
        archs = hf.get("architectures")
        if archs is None:
            archs = []
        if not isinstance(archs, list | tuple) or not all(isinstance(a, str) for a in archs):
            raise InputError(
                f"model config: architectures must be a list of strings, got {shown(archs)}"
            )
        arch = archs[0] if archs else None
        text = hf.get("text_config")
        if text is None:
            text = hf.get("language_config")
        if text is None:
            text = {}
        if not isinstance(text, Mapping):
            raise InputError(f"model config: text_config must be a mapping, got {shown(text)}")

        def first(keys: tuple[str, ...], *, zero_is_none: bool = False) -> int | None:
            for source in (hf, text):
                for k in keys:
                    v = source.get(k)
                    if v is None or (zero_is_none and v == 0 and not isinstance(v, bool)):
                        continue
                    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                        raise InputError(
                            f"model config: {k} must be a positive integer, got {shown(v)}"
                        )
                    return v
            return None

        heads = first(_HEADS)
        kv = first(_KV_HEADS) or heads
        dsa = arch in DSA_ARCHITECTURES or "index_topk" in hf or "index_topk" in text
        multimodal = any(k in hf for k in _MULTIMODAL_KEYS)
        return cls(
            architecture=arch,
            is_multimodal=multimodal,
            is_deepseek_dsa=dsa,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            # Dense models sometimes say `num_experts: 0`: no routed experts.
            num_experts=first(_EXPERTS, zero_is_none=True),
            num_hidden_layers=first(_LAYERS),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ModelSpec:
        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        text = read_text(p, "model config")
        if bracket_depth(text) > MAX_DEPTH:
            raise InputError(f"model config {p} is nested deeper than {MAX_DEPTH} levels")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"model config {p} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg})"
            ) from None
        except RecursionError:
            raise InputError(f"model config {p} is nested too deeply") from None
        if not isinstance(data, dict):
            raise InputError(f"model config {p} must be a JSON object")
        check_shape(data, f"model config {p}", finite=False)
        return cls.from_hf_config(data)


MODEL_FACT_NAMES: tuple[str, ...] = tuple(ModelSpec.model_fields)
