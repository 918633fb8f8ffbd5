"""The documented bounds on what meshsat accepts, and the one bounded way to read a file.

Why a single place: every input (layout files, model configs, `--set`, `--where`,
`--sglang`, API arguments) must fail in well under a second with one readable line,
whatever a hostile or careless user hands over, instead of hanging on a FIFO, reading
`/dev/zero` until memory runs out, or expanding a YAML alias bomb. The limits are far
above any real SGLang deployment and far below what makes the tool slow:

- `MAX_FILE_BYTES` (1 MiB): layout files are a few hundred bytes.
- `MAX_CONFIG_BYTES` (16 MiB) for a checkpoint's `config.json` and `hf_quant_config.json`:
  most are tens of kilobytes, but a ModelOpt MIXED_PRECISION export lists every quantized
  layer (nvidia/MiniMax-M3-NVFP4: 3.1 MB each, 67,000 values).
- `MAX_DEPTH` (32) nesting levels and `MAX_NODES` (100,000) values after alias
  expansion: a layout is a flat mapping with one `model:` entry.
- `MAX_GPUS` (2**20): no machine has a million GPUs; every size, and the GPU count
  of `enumerate`/`fix`/`groups`, is refused above it before any work starts.
- `plan --gpus` is bounded by `MAX_GPUS` too and answers in seconds anywhere below it (the
  legal layouts are few, 876 for DeepSeek-V3 at 2^20 GPUs, and no rank map is built);
  `MAX_PLAN_TOP` (1,000) rows is its longest listing; `--timeout S` stops it.
- `MAX_TIMEOUT_S` (one day): a larger `--timeout` is capped, not an overflow.
- `MAX_SHOWN` (60) characters of a user value quoted in an error line.
- Pasted launch commands (`meshsat.solver.inputs.launch`): at most 1 MiB, and at most
  128 KiB of text with shell syntax in it, which only the (slow) shell parser reads.
- `MAX_ITEMS_SHOWN` (8) items of a list quoted in one line (the flags of a pasted command
  that SGLang would refuse or that do not concern the layout); the rest are counted.
- A model config's sizes (`check_model_sizes`, `MODEL_SIZE_LIMITS`): at most 10,000 layers,
  a width (hidden size, head or rank dim, image or patch size) of 1,048,576, an MLP width of
  4,194,304, 65,536 heads, 65,536 experts, a vocabulary of 16,777,216 and 1,073,741,824
  positions. The largest published models are 50 to 500 times below each (126 layers,
  hidden 16,384, MLP 53,248, 128 heads, 512 experts, vocabulary 262,144, 10,485,760
  positions); a config.json with 10^6 layers took 33 s and 1.4 GB before a traceback, and a
  hidden size of 10^30 overflowed a float.
"""

from __future__ import annotations

import math
import os
import reprlib
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from meshsat.solver.errors import InputError

MAX_FILE_BYTES = 1 << 20
MAX_CONFIG_BYTES = 16 << 20
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_GPUS = 1 << 20
#: Longest `plan` listing (`--top`): each row costs a full memory figure and a command.
MAX_PLAN_TOP = 1000
MAX_SHOWN = 60
#: Longest solver timeout honoured (a day); larger ones, up to 1e308, are capped to it.
MAX_TIMEOUT_S = 86_400.0
#: Longest choice list quoted in full in an error line.
MAX_CHOICES_SHOWN = 6
#: Most items of a list (flags of a pasted command) quoted in one line.
MAX_ITEMS_SHOWN = 8

#: A model config's largest sizes (`check_model_sizes`), each 50-500x the largest published.
MAX_MODEL_LAYERS = 10_000
MAX_MODEL_WIDTH = 1 << 20
MAX_MODEL_MLP_WIDTH = 1 << 22
MAX_MODEL_HEADS = 1 << 16
MAX_MODEL_EXPERTS = 1 << 16
MAX_MODEL_VOCAB = 1 << 24
MAX_MODEL_POSITIONS = 1 << 30
#: The kinds of size a model config states, each with its bound and its keys (every
#: spelling meshsat reads, top level or in a nested config such as `text_config` or
#: `vision_config`).
MODEL_SIZE_LIMITS: tuple[tuple[str, int, frozenset[str]], ...] = (
    (
        "layers",
        MAX_MODEL_LAYERS,
        frozenset({
            "num_hidden_layers", "n_layer", "n_layers", "num_layers", "depth",
            "vt_num_hidden_layers", "num_nextn_predict_layers", "first_k_dense_replace",
            "full_attention_interval", "decoder_sparse_step", "interleave_moe_layer_step",
            "moe_layer_freq",
        }),
    ),
    (
        "width",
        MAX_MODEL_WIDTH,
        frozenset({
            "hidden_size", "n_embd", "d_model", "vt_hidden_size", "out_hidden_size", "head_dim",
            "kv_channels", "v_head_dim", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim",
            "qk_rope_head_dim", "mla_q_head_dim", "index_head_dim", "swa_head_dim",
            "swa_v_head_dim", "linear_key_head_dim", "linear_value_head_dim",
            "linear_attn_key_dim", "linear_attn_value_dim", "linear_conv_kernel_dim",
            "rotary_dim", "projector_input_dim", "projector_output_dim", "vision_output_dim",
            "image_size", "patch_size", "num_channels", "in_channels", "temporal_patch_size",
            "spatial_merge_size", "init_pos_emb_height", "init_pos_emb_width",
        }),
    ),
    (
        "MLP width",
        MAX_MODEL_MLP_WIDTH,
        frozenset({
            "intermediate_size", "moe_intermediate_size", "ffn_hidden_size",
            "intermediate_size_mlp", "shared_expert_intermediate_size", "share_expert_dim",
            "dense_intermediate_size", "vt_intermediate_size",
        }),
    ),
    (
        "heads",
        MAX_MODEL_HEADS,
        frozenset({
            "num_attention_heads", "n_head", "num_heads", "num_key_value_heads", "n_head_kv",
            "num_kv_heads", "multi_query_group_num", "num_attention_groups",
            "vt_num_attention_heads", "index_n_heads", "swa_num_key_value_heads",
            "linear_num_key_heads", "linear_num_value_heads", "linear_attn_value_heads",
        }),
    ),
    (
        "experts",
        MAX_MODEL_EXPERTS,
        frozenset({
            "n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts",
            "num_experts_per_tok", "experts_per_token", "moe_topk", "moe_top_k",
            "n_shared_experts", "num_shared_experts",
        }),
    ),
    ("vocabulary", MAX_MODEL_VOCAB, frozenset({"vocab_size", "padded_vocab_size"})),
    (
        "positions",
        MAX_MODEL_POSITIONS,
        frozenset({
            "max_position_embeddings", "original_max_position_embeddings", "sliding_window",
            "num_position_embeddings", "index_topk",
        }),
    ),
)  # fmt: skip
_MODEL_SIZE_LIMIT = {key: (kind, limit) for kind, limit, keys in MODEL_SIZE_LIMITS for key in keys}
#: Nested configs not walked: the quantization settings hold no model size, and a ModelOpt
#: export lists tens of thousands of layers there (`MAX_CONFIG_BYTES`).
_NOT_SIZES = frozenset({"quantization_config", "compression_config", "quantization"})

_repr = reprlib.Repr()
_repr.maxstring = MAX_SHOWN
_repr.maxother = MAX_SHOWN
_repr.maxlong = 24
_repr.maxlevel = 3
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 4


def shown(value: Any) -> str:
    """A user value for an error line: repr, cut to a bounded length (alias bombs,
    megabyte strings and 10,000-digit integers included)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits>"
    text = _repr.repr(value)
    return text if len(text) <= MAX_SHOWN + 8 else text[:MAX_SHOWN] + "..."


def clipped(text: str) -> str:
    """User text quoted as it is (no repr quotes), cut to `MAX_SHOWN` characters."""
    return text if len(text) <= MAX_SHOWN + 8 else text[:MAX_SHOWN] + "..."


def listed(items: Sequence[str], sep: str = " ", *, clip: bool = True) -> str:
    """The first `MAX_ITEMS_SHOWN` items, each `clipped`, then "and N more": a pasted
    megabyte of flags is one readable line, not a megabyte of note. `clip=False` for items
    the caller has bounded itself (user text clipped, meshsat's own words whole)."""
    cut = [clipped(t) if clip else t for t in items[:MAX_ITEMS_SHOWN]]
    rest = len(items) - len(cut)
    return sep.join(cut) + (f"{sep}and {rest} more" if rest else "")


def read_text(path: str | Path, what: str, limit: int = MAX_FILE_BYTES) -> str:
    """A regular file's UTF-8 text, refused at once if it is not a regular file
    (FIFO, device, socket) or larger than `limit` bytes."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{what} not found: {p}") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {what} {p}: {exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {p} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {p} is not a regular file (a pipe or device is refused)")
    if st.st_size > limit:
        raise InputError(f"{what} {p} is {st.st_size} bytes; the limit is {limit} bytes")
    try:
        with open(p, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{what} {p} is over the limit of {limit} bytes")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {p} is not UTF-8 text (byte {exc.start})") from None


def bracket_depth(text: str) -> int:
    """The deepest nesting of brackets and braces: a cheap guard before a parser recurses
    (brackets inside strings count too, which only errs on the side of refusing)."""
    depth = deepest = 0
    for ch in "".join(c for c in text if c in "[]{}"):
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(depth - 1, 0)
    return deepest


def check_shape(data: Any, what: str, *, finite: bool = True) -> None:
    """Refuse nesting deeper than `MAX_DEPTH` or more than `MAX_NODES` values, counting a
    shared (aliased) value every time it is reached, and (with `finite`) NaN/infinity."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise InputError(f"{what} holds more than {MAX_NODES} values (aliases expanded)")
        if depth > MAX_DEPTH:
            raise InputError(f"{what} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
            stack.extend((k, depth + 1) for k in value if not isinstance(k, str))
        elif isinstance(value, list | tuple | set | frozenset):
            stack.extend((v, depth + 1) for v in value)
        elif finite and isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{what} holds a non-finite number ({value})")


def check_model_sizes(config: Any, what: str = "model config") -> None:
    """Refuse a model config that states a size no model has (`MODEL_SIZE_LIMITS`) with
    one `InputError` naming the key, its value and the bound, before anything reads it.
    Why here and not where each size is used: the memory model and the rules loop and
    multiply over these numbers (a list per layer, a parameter count as a float), so
    10^6 layers cost half a minute and a gigabyte, and 10^30 overflowed; every reader of a
    config (a file, a pasted one, the catalogue's) passes through this first."""
    stack: list[tuple[Any, str, int]] = [(config, "", 0)]
    while stack:
        node, prefix, depth = stack.pop()
        if not isinstance(node, Mapping) or depth > MAX_DEPTH:
            continue
        for key, value in node.items():
            if not isinstance(key, str) or key in _NOT_SIZES:
                continue
            if isinstance(value, Mapping):
                stack.append((value, f"{prefix}{key}.", depth + 1))
                continue
            bound = _MODEL_SIZE_LIMIT.get(key)
            if bound is None or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            kind, limit = bound
            if not value <= limit:  # NaN too
                raise InputError(
                    f"{what}: {prefix}{key} is {shown(value)}; at most {limit:,} ({kind}: "
                    "far above any published model)"
                )


def items_of(value: Any, argument: str, kinds: tuple[type, ...] = (str,)) -> tuple[Any, ...]:
    """An API argument that takes several values, checked where it enters: `None`, a bare
    string (which would iterate its characters) or a non-iterable is a `TypeError` that
    names the argument, not an AttributeError from deep inside."""
    names = " or ".join(k.__name__ for k in kinds)
    if value is None or isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise TypeError(f"{argument} must be a list of {names} values, got {type(value).__name__}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, kinds):
            raise TypeError(
                f"{argument} must hold {names} values, got {type(item).__name__} {shown(item)}"
            )
    return items


def flag_of(value: Any, argument: str) -> bool:
    """A boolean API argument: `up_to="x"` is a TypeError, not silently true."""
    if not isinstance(value, bool):
        raise TypeError(f"{argument} must be True or False, got {shown(value)}")
    return value
