"""Bytes per weight of each linear module, as the checkpoint's `quantization_config` sets it.

Why per module, matched by name: checkpoints are mixed. FP8 releases keep the router and a
few layers in 16 bit, NVFP4 releases often keep attention in 16 bit, MXFP4 and INT4
releases quantize only the routed experts, and DeepSeek-V4 stores its experts in FP4
(`expert_dtype: fp4`) beside FP8 linears. Which module is which is decided by SGLang's
loaders from names, and each loader matches names its own way (SGLang 0.5.23,
`sglang/srt/layers/quantization/`):

- `fp8` (also `fbgemm_fp8`, `modelopt_fp8`'s `ignore`): `utils.is_layer_skipped` matches
  whole dotted module paths (`ignored == prefix`, `prefix` under `ignored`, or `ignored` a
  dotted sub-path of `prefix`), checks each checkpoint shard of a fused module, and adds the
  `model.`-less / `model.`-prefixed variant of every listed name (`Fp8Config.from_config`);
  a listed `post_attention_layernorm` therefore names that norm and no projection;
- `modelopt` (`exclude_modules`, or `ignore`): glob patterns (`*`), matched against the
  whole prefix or against any one dotted part of it (`ModelOptQuantConfig.is_layer_excluded`);
- `awq`/`gptq`: `modules_to_not_convert` entries are substrings of the prefix
  (`is_layer_skipped_awq`);
- `compressed-tensors`: `ignore` and each config group's `targets` are exact names, dotted
  suffixes, `re:` regexes (`re.match`) or the class name `Linear`
  (`compressed_tensors/utils.py`); a `FusedMoE` is looked up as `<experts>.0.gate_proj`
  (`get_moe_scheme`);
- `mxfp4`: only the routed experts are MXFP4 on NVIDIA; linears are unquantized.

Scales are charged at the density the scheme stores them: one float32 per 128×128 block for
block FP8, one FP8 per 16 values for NVFP4, one E8M0 byte per 32 for MXFP4, a 16-bit scale
(and a zero point when asymmetric) per group for INT4.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.lang.checkpoint_quant import is_wna16_group
from meshsat.solver.memory.modules import LinearModule

#: The `quant_method` values modelled, for the error message on any other.
MODELLED_METHODS: tuple[str, ...] = (
    "fp8",
    "modelopt",
    "modelopt_fp4",
    "modelopt_fp8",
    "modelopt_mixed",
    "mxfp4",
    "awq",
    "gptq",
    "fbgemm_fp8",
    "compressed-tensors",
)

FP8_PER_TENSOR = 1.0
NVFP4 = 0.5 + 1.0 / 16  # FP4 values + one FP8 scale per 16
MXFP4 = 0.5 + 1.0 / 32  # FP4 values + one E8M0 scale per 32

#: A module's bytes per weight, from its name and component.
Pricer = Callable[[LinearModule], float]


def _names(qc: Mapping[str, Any], *keys: str) -> list[str]:
    for key in keys:
        v = qc.get(key)
        if isinstance(v, Sequence) and not isinstance(v, str):
            return [str(x) for x in v]
    return []


# ---- the loaders' name matching ----------------------------------------------------------


def path_match(ignored: str, prefix: str) -> bool:
    """`_module_path_match`: a whole dotted module path, never a substring."""
    ignored, prefix = ignored.rstrip("."), prefix.rstrip(".")
    return (
        ignored == prefix
        or prefix.startswith(ignored + ".")
        or ("." + ignored + ".") in ("." + prefix + ".")
    )


def fp8_skipped(m: LinearModule, ignored: Sequence[str]) -> bool:
    """`is_layer_skipped` for a module: every shard of a fused one; experts also when a
    listed name holding `experts` contains the experts' prefix."""
    if m.is_experts:
        return any(path_match(i, m.name) for i in ignored) or any(
            m.name in i for i in ignored if "experts" in i
        )
    return all(any(path_match(i, s) for i in ignored) for s in m.shard_names())


def with_model_variants(names: Sequence[str]) -> list[str]:
    """`Fp8Config.from_config`: each name with and without its leading `model.`."""
    out: list[str] = []
    for n in names:
        base = n.removeprefix("model.")
        out += [base, f"model.{base}"]
    return out


@functools.lru_cache(maxsize=64)
def _alternation(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """The globs as one regular expression: a checkpoint excluding hundreds of modules
    (GLM-5-NVFP4 lists about 470) is matched once per name, not once per glob."""
    globs = (p.replace(".", r"\.").replace("*", ".*") for p in patterns)
    return re.compile("|".join(f"(?:{g})" for g in globs) or r"(?!)")


def glob_excluded(m: LinearModule, patterns: Sequence[str]) -> bool:
    """ModelOpt's exclusion: a glob matching the whole prefix or one dotted part of it, for
    the module or (fused) each of its shards. A pattern under a wrapper's `language_model.`
    also names meshsat's module, which starts at the text model: SGLang builds the stack at
    `language_model.model.layers` (Kimi-K2.5's `ignore` lists
    `language_model.model.layers.N.self_attn*`: read without the wrapper, no attention
    module was excluded and 61 layers of MLA were priced as NVFP4)."""
    unwrapped = [p.removeprefix("language_model.") for p in patterns]
    any_pattern = _alternation(tuple(dict.fromkeys([*patterns, *unwrapped])))
    names = (m.name,) if m.is_experts else (m.name, *m.shard_names())

    def hit(name: str) -> bool:
        variants = (name, name.removeprefix("language_model."))
        return any(
            any_pattern.fullmatch(v) or any(any_pattern.fullmatch(p) for p in v.split("."))
            for v in variants
        )

    return hit(names[0]) or (len(names) > 1 and all(hit(n) for n in names[1:]))


def substring_skipped(m: LinearModule, names: Sequence[str]) -> bool:
    """`is_layer_skipped_awq`: a listed name anywhere in the prefix."""
    return any(n in m.name for n in names)


def ct_match(name: str, targets: Sequence[str]) -> bool:
    """compressed-tensors' `check_equal_or_regex_match`, plus the `Linear` class target."""
    for t in targets:
        if t.startswith("re:"):
            if re.match(t[3:], name):
                return True
        elif t == name or name.endswith("." + t) or t == "Linear":
            return True
    return False


# ---- schemes -------------------------------------------------------------------------------


def _int_bytes(bits: int, group: int, symmetric: bool = True) -> float:
    if group <= 0:  # per-channel: one scale per output row, negligible per weight
        return bits / 8
    zero = 0.0 if symmetric else bits / 8
    return bits / 8 + (2.0 + zero) / group


def _gptq_awq(qc: Mapping[str, Any], method: str) -> float:
    bits = qc.get("bits", qc.get("w_bit", 4))
    if bits not in (4, 8):
        raise InputError(f"quantization {method} with {bits} bits is not modelled (4 or 8)")
    group = qc.get("group_size", qc.get("q_group_size", 128))
    if not isinstance(group, int) or group == 0:
        raise InputError(f"quantization_config.group_size must be an integer, got {group!r}")
    return _int_bytes(int(bits), group, symmetric=False)


def _fp8_block(qc: Mapping[str, Any]) -> float:
    block = qc.get("weight_block_size")
    if isinstance(block, Sequence) and len(block) == 2:
        return 1.0 + 4.0 / (int(block[0]) * int(block[1]))
    return FP8_PER_TENSOR  # per-tensor or per-channel scales: negligible per weight


def _ct_weights(scheme: Mapping[str, Any]) -> float:
    """Bytes per weight of one compressed-tensors `weights` block."""
    bits = int(scheme.get("num_bits", 8))
    kind = str(scheme.get("type", "int"))
    strategy = str(scheme.get("strategy", "tensor"))
    group = scheme.get("group_size") or 0
    if kind == "float" and bits == 4:
        return NVFP4 if group == 16 else MXFP4
    if strategy == "block":
        b = scheme.get("block_structure") or [128, 128]
        return bits / 8 + 4.0 / (int(b[0]) * int(b[1]))
    if strategy == "group" and isinstance(group, int):
        return _int_bytes(bits, group, bool(scheme.get("symmetric", True)))
    return bits / 8


def _ct_scheme(qc: Mapping[str, Any], base: float) -> tuple[Pricer, Callable[[LinearModule], bool]]:
    """The module pricer, and whether a module's scheme is WNA16 (integer weights, 16-bit
    activations: the MoE methods that keep `g_idx` buffers, `weights.py`)."""
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, Mapping):
        raise InputError("quantization_config.config_groups must be a JSON object")
    ignore = _names(qc, "ignore")
    plans: list[tuple[list[str], float, bool]] = []
    for g in groups.values():
        if isinstance(g, Mapping) and isinstance(g.get("weights"), Mapping):
            plans.append((_names(g, "targets"), _ct_weights(g["weights"]), is_wna16_group(g)))

    def plan(m: LinearModule) -> tuple[float, bool]:
        names = (f"{m.name}.0.gate_proj",) if m.is_experts else m.shard_names()
        if all(ct_match(n, ignore) for n in names):
            return base, False
        for targets, per_weight, wna16 in plans:
            if ct_match(names[0], targets):
                return per_weight, wna16
        return base, False

    return (lambda m: plan(m)[0]), (lambda m: plan(m)[1])


def mixed_name(name: str) -> str:
    """A module name as SGLang's MIXED_PRECISION lookup meets it, whichever wrapper prefix
    the checkpoint or the model class uses (`ModelOptMixedPrecisionConfig.
    _quantized_layer_prefix_candidates`: `language_model.model.`, `model.language_model.`
    and `model.` name the same text stack) and with MiniMax's `block_sparse_moe` as the
    model class names it, `mlp` (MiniMax-M3's `hf_to_sglang_mapper`). Both sides of the
    lookup are read this way: nvidia/MiniMax-M3-NVFP4 keys its 21,888 NVFP4 experts
    `language_model.model.layers.N.block_sparse_moe.experts...`, and matched by the raw
    name none of them was found, so the whole checkpoint was priced in 16 bits."""
    for wrapper in ("language_model.model.", "model.language_model."):
        if name.startswith(wrapper):
            name = "model." + name[len(wrapper) :]
            break
    return name.replace(".block_sparse_moe.", ".mlp.")


def _mixed_pricer(qc: Mapping[str, Any], base: float) -> Pricer:
    """ModelOpt MIXED_PRECISION: `quantized_layers` names each quantized module's algo
    (a fused module by its shards, an expert group by any expert under it)."""
    layers = qc.get("quantized_layers") or {}
    algos = {mixed_name(str(k)): str(v.get("quant_algo", "")).upper()
             for k, v in layers.items() if isinstance(v, Mapping)}  # fmt: skip
    #: Expert group -> the algo of its first listed expert (one lookup, not a scan of
    #: every key per group: MiniMax-M3 lists 21,888 expert projections).
    groups: dict[str, str] = {}
    for key, algo in algos.items():
        head, sep, _tail = key.partition(".experts.")
        if sep:
            groups.setdefault(head + ".experts", algo)

    def algo_bytes(algo: str) -> float:
        return NVFP4 if "FP4" in algo else FP8_PER_TENSOR if "FP8" in algo else base

    def price(m: LinearModule) -> float:
        if m.is_experts:
            name = mixed_name(m.name)
            algo = algos.get(name) or groups.get(name)
            return base if algo is None else algo_bytes(algo)
        for n in (m.name, *m.shard_names()):
            algo = algos.get(mixed_name(n))
            if algo is not None:
                return algo_bytes(algo)
        return base

    return price


def _never(m: LinearModule) -> bool:
    return False


@dataclass(frozen=True)
class Scheme:
    """A config's name for the report and its per-module price."""

    name: str
    price: Pricer
    #: Whether a module is quantized by a WNA16 scheme (compressed-tensors integer weights
    #: with 16-bit activations), whose MoE method allocates `g_idx` buffers.
    wna16: Callable[[LinearModule], bool] = _never


def scheme_of(hf: Mapping[str, Any], base: float) -> Scheme:
    """The pricing of every linear module of a config (16-bit `base` bytes for the rest).

    A `quant_method` that is not modelled raises `InputError` rather than guessing."""
    qc = hf.get("quantization_config")
    expert_fp4 = str(hf.get("expert_dtype", "")).lower() == "fp4"
    if not qc:
        if expert_fp4:
            return Scheme("fp4-experts", lambda m: MXFP4 if m.is_experts else base)
        return Scheme(str(hf.get("torch_dtype") or hf.get("dtype") or "bfloat16"), lambda m: base)
    if not isinstance(qc, Mapping):
        raise InputError("quantization_config must be a JSON object")
    method = str(qc.get("quant_method", "")).lower()
    algo = str(qc.get("quant_algo", "")).upper()
    if method == "modelopt" and algo:
        method = (
            "modelopt_mixed"
            if "MIXED" in algo
            else "modelopt_fp4"
            if "FP4" in algo
            else "modelopt_fp8"
            if "FP8" in algo
            else method
        )
    inner: Pricer
    wna16: Callable[[LinearModule], bool] = _never
    if method in ("fp8", "fbgemm_fp8"):
        per_weight, skip = (
            _fp8_block(qc),
            with_model_variants(_names(qc, "ignored_layers", "modules_to_not_convert")),
        )
        inner, name = (lambda m: base if fp8_skipped(m, skip) else per_weight), "fp8"
    elif method in ("modelopt_fp8", "modelopt_fp4"):
        per_weight = _fp8_block(qc) if method == "modelopt_fp8" else NVFP4
        patterns = _names(qc, "exclude_modules", "ignore")
        inner = lambda m: base if glob_excluded(m, patterns) else per_weight  # noqa: E731
        name = "fp8" if method == "modelopt_fp8" else "nvfp4"
    elif method == "modelopt_mixed":
        inner, name = _mixed_pricer(qc, base), "mixed"
    elif method == "mxfp4":
        inner, name = (lambda m: MXFP4 if m.is_experts else base), "mxfp4"
    elif method in ("awq", "gptq"):
        per_weight, skip = _gptq_awq(qc, method), _names(qc, "modules_to_not_convert")
        inner = lambda m: base if substring_skipped(m, skip) else per_weight  # noqa: E731
        name = f"int{qc.get('bits', qc.get('w_bit', 4))}-{method}"
    elif method == "compressed-tensors":
        (inner, wna16), name = _ct_scheme(qc, base), "compressed-tensors"
    else:
        known = ", ".join(MODELLED_METHODS)
        raise InputError(
            f"quantization_config.quant_method {method or '(missing)'!r} is not modelled "
            f"(modelled: {known})"
        )
    if expert_fp4:
        return Scheme(f"{name}+fp4-experts", lambda m: MXFP4 if m.is_experts else inner(m))
    return Scheme(name, inner, wna16)
