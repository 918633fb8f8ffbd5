"""Record what a real SGLang release's own layer constructors do with block-quantized
weights under a faked parallel world (tests/fixtures/weight_shapes/<version>.json).

Runs inside a release venv ($HOME/.cache/meshsat-fidelity/<version>, see fidelity/README.md):

    ~/.cache/meshsat-fidelity/0.5.23/bin/python fidelity/weight_shapes/probe.py 0.5.23

Each record builds one SGLang layer on the meta device (no memory, no GPU) with an FP8
`weight_block_size` [128, 128] config, after replacing the release's parallel-state
accessors with a world of the given sizes:
- `mlp`: `DeepseekV2MLP` (the dense MLP and the shared experts of DeepSeek/Kimi; GLM and
  Qwen's MLPs are the same pair of merged column + row linears), split over TP `tp` or
  replicated (`replicated`: `--moe-dense-tp-size 1` / an all-to-all backend);
- `moe`: `Fp8MoEMethod.create_weights` for a `FusedMoE` whose MoE TP width is `moe_tp`
  (the shard `FusedMoE.__init__` passes: `intermediate_size // moe_tp`);
- `mla_q`: MLA's `q_b_proj`, a column-parallel linear over the attention TP group `attn_tp`
  inside a TP group of `tp`;
- `linear_qkvz`, `linear_ba`, `linear_out` (0.5.18+, the releases with Qwen3-Next): the three
  quantized GatedDeltaNet linears built with `Qwen3GatedDeltaNet.__init__`'s arguments (the
  merged [key, key, value, value] and [value heads, value heads] column linears and the
  row-parallel value -> hidden linear, over `attn_tp`); the layer itself also builds a
  CUDA-only `RMSNormGated`, so its linears are built directly.
The record is the exception SGLang raised (type and message), or null: the layer loads.
`tests/test_weight_shapes.py` replays every record against meshsat's rules.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
importlib.import_module("stubs")  # the stand-ins, before any sglang import
import torch  # noqa: E402  (after the stand-ins)

TPS = (1, 2, 4, 8, 16, 32)
MLP_SIZES = (18432, 25600, 12288, 2048, 1536, 768, 512, 96)
MOE_SIZES = (2048, 1536, 768, 512, 2880)
BLOCK = [128, 128]


class _Group:
    def __init__(self, size: int) -> None:
        self.world_size = size
        self.rank_in_group = 0
        self.rank = 0
        self.ranks = list(range(size))


def _world(tp: int, attn_tp: int) -> Any:
    return types.SimpleNamespace(
        tp_group=_Group(tp),
        attn_tp_group=_Group(attn_tp),
        tp_size=tp,
        tp_rank=0,
        attn_tp_size=attn_tp,
        attn_tp_rank=0,
        moe_tp_size=tp,
        moe_ep_size=1,
    )


def _patch(tp: int, attn_tp: int) -> None:
    """Point every loaded sglang module's parallel-state accessor at the fake world."""
    world = _world(tp, attn_tp)
    accessors = {
        "get_parallel": lambda: world,
        "get_tensor_model_parallel_world_size": lambda *a: tp,
        "get_tensor_model_parallel_rank": lambda *a: 0,
        "get_attention_tp_size": lambda: attn_tp,
        "get_attention_tp_rank": lambda: 0,
        "get_tp_group": lambda: world.tp_group,
    }
    # 0.5.18's SiluAndMul reads the deterministic-inference settings (after the linears).
    activation = sys.modules.get("sglang.srt.layers.activation")
    if activation is not None and "get_exec" in vars(activation):
        det = types.SimpleNamespace(rl_on_policy_target=None)
        activation.get_exec = lambda: types.SimpleNamespace(deterministic=det)  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if not name.startswith("sglang") or module is None:
            continue
        for attr, fn in accessors.items():
            if attr in vars(module):
                setattr(module, attr, fn)


def _outcome(build: Any, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
    try:
        with torch.device("meta"):
            build(*args, **kwargs)
    except (ValueError, AssertionError) as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


def dump(version: str, records: list[dict[str, Any]]) -> str:
    """One record a line, so that a re-recording diffs by layer."""
    lines = ",\n".join(json.dumps(r, sort_keys=True) for r in records)
    head = json.dumps(version)
    return f'{{"version": {head}, "block": {json.dumps(BLOCK)}, "records": [\n{lines}\n]}}\n'


def main(version: str) -> None:
    # deepseek_v2 first: 0.4.6's layer modules import each other circularly otherwise.
    from sglang.srt.models import deepseek_v2  # isort: skip
    from sglang.srt.layers import linear  # isort: skip
    from sglang.srt.layers.quantization.fp8 import Fp8Config, Fp8MoEMethod  # isort: skip

    _patch(1, 1)  # 0.4.6 logs "on rank 0" while reading the config
    qc = Fp8Config.from_config(
        {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": BLOCK}
    )
    new_api = "parallel_group" in inspect.signature(deepseek_v2.DeepseekV2MLP).parameters

    def group(replicated: bool, width: int, name: str) -> dict[str, Any]:
        if new_api:
            return {"parallel_group": "replicated" if replicated else name}
        return {"tp_rank": 0, "tp_size": 1} if replicated else {"tp_rank": 0, "tp_size": width}

    records: list[dict[str, Any]] = []
    for size in MLP_SIZES:
        for tp in TPS:
            for replicated in (False, True):
                _patch(tp, tp)
                outcome = _outcome(
                    deepseek_v2.DeepseekV2MLP,
                    256,
                    size,
                    "silu",
                    quant_config=qc,
                    **group(replicated, tp, "tp"),
                )
                records.append(
                    {"family": "mlp", "size": size, "tp": tp, "replicated": replicated,
                     "error": outcome}
                )  # fmt: skip
    for size in MOE_SIZES:
        for tp in TPS:
            for moe_tp in (d for d in TPS if tp % d == 0):
                _patch(tp, tp)
                layer: Any = torch.nn.Module()
                layer.moe_tp_size = moe_tp
                layer.moe_runner_config = types.SimpleNamespace(is_gated=True)

                outcome = _outcome(
                    Fp8MoEMethod(qc).create_weights,
                    layer,
                    1,
                    256,
                    size // moe_tp,
                    torch.bfloat16,
                    weight_loader=lambda *a: None,
                )
                records.append(
                    {"family": "moe", "size": size, "tp": tp, "moe_tp": moe_tp, "error": outcome}
                )
    for heads in (128, 64):
        for tp in (*TPS, 64, 128):
            for attn_tp in (d for d in (*TPS, 64, 128) if tp % d == 0 and heads % d == 0):
                _patch(tp, attn_tp)
                outcome = _outcome(
                    linear.ColumnParallelLinear,
                    1536,
                    heads * 192,
                    bias=False,
                    quant_config=qc,
                    prefix="q_b_proj",
                    **group(False, attn_tp, "attn_tp"),
                )
                records.append(
                    {"family": "mla_q", "heads": heads, "head_dim": 192, "tp": tp,
                     "attn_tp": attn_tp, "error": outcome}
                )  # fmt: skip
    if "qwen3_next" in _models(linear):
        records += _linear_attention(linear, qc, group)
    out = Path(__file__).parents[2] / "tests" / "fixtures" / "weight_shapes" / f"{version}.json"
    out.write_text(dump(version, records))
    failed = sum(r["error"] is not None for r in records)
    print(f"{version}: {len(records)} layers built, {failed} refused -> {out}")


#: Qwen3-Next-80B-A3B (key 16 x 128, value 32 x 128, 32 value heads) and a narrower hybrid.
LINEAR_ATTN = ((2048, 4096, 32), (512, 1024, 64))


def _models(linear: Any) -> set[str]:
    """The release's model files, listed without importing them (sglang/srt/models)."""
    return {p.stem for p in (Path(linear.__file__).parents[1] / "models").glob("*.py")}


def _linear_attention(linear: Any, qc: Any, group: Any) -> list[dict[str, Any]]:
    hidden = 2048
    records: list[dict[str, Any]] = []
    for key, value, heads in LINEAR_ATTN:
        for tp in TPS:
            for attn_tp in (d for d in TPS if tp % d == 0 and heads % d == 0):
                _patch(tp, attn_tp)
                where = group(False, attn_tp, "attn_tp")
                layers = {
                    "linear_qkvz": (
                        linear.MergedColumnParallelLinear,
                        (hidden, [key, key, value, value]),
                        {},
                    ),
                    "linear_ba": (linear.MergedColumnParallelLinear, (hidden, [heads, heads]), {}),
                    "linear_out": (
                        linear.RowParallelLinear,
                        (value, hidden),
                        {"input_is_parallel": True, "reduce_results": False},
                    ),
                }
                for family, (cls, args, extra) in layers.items():
                    outcome = _outcome(
                        cls, *args, bias=False, quant_config=qc, prefix=family, **extra, **where
                    )
                    records.append(
                        {"family": family, "key": key, "value": value, "heads": heads,
                         "tp": tp, "attn_tp": attn_tp, "error": outcome}
                    )  # fmt: skip
    return records


if __name__ == "__main__":
    main(sys.argv[1])
