"""SGLang's default `mem_fraction_static`, per release pack.

Why per pack: the default moved between releases. `0.5.23` follows that release's
`_handle_gpu_memory_settings` (memory_hook.py): GPU-size thresholds pick the chunked-prefill
size and the decode CUDA-graph batch size, then

    reserved MiB = max(512 + 1.5·activation + tp·pp/8·1024 + graph, 10 GiB if > 60 GiB)
    activation  = max(chunked, 2048); chunked prefill off: max(max_prefill_tokens, 2048);
                  a PD decode engine: max(running requests · draft tokens, 2048)
    graph       = 2·max_bs with decode graphs (+ 3·max_bs·dp, + 1.5·max_bs·dp above bs
                  300, with DP attention, except on a PD prefill engine)
                  + prefill-graph reserve (1.5 GiB for MLA, 8 MiB per captured size
                  otherwise; + 1 GiB with DeepEP on breakable graphs), not on a PD decode
                  engine
    fraction    = round((gpu - reserved) / gpu, 3)

plus 2 GiB for DeepEP all-to-all buffers when decode graphs are captured (not on a PD
prefill engine). `--disable-cuda-graph` drops both graph reserves. From 0.5.18 the prefill
CUDA graph is on by default (`default_prefill_backend`: breakable on CUDA; 0.5.18/0.5.19
`tc_piecewise` elsewhere, 0.5.23 none on ROCm), so its reserve is in the default unless the
release turns it off for the layout (`apply_cuda_graph_compatibility`: pipeline parallelism,
decode CP, attention CP, a model it serves as multimodal unless it lists the architecture as
keeping its prefill graphs (`multimodal_archs.py`: Qwen3.5 and Kimi-K2.5 do), DeepSeek-V4).
0.5.18 and 0.5.19 run the same arithmetic (`ServerArgs._handle_gpu_memory_settings` /
`arg_groups/memory_hook.py`) with one band of their own: from 20 to 35 GiB they pick chunked
prefill 2048 and decode graphs up to 24 (80 at tp ≥ 4), where 0.5.23 picks 4096 and 48
(160). 0.4.6.post5 (and `legacy`) uses the older table by `tp·pp` (0.88 … 0.79) on GPUs of
at most 80 GiB, 0.88 above, then on GPUs over 96 GiB raises it to `min(f + 48 GiB·(1 -
f)/gpu, (gpu - 18 GiB)/gpu)` (`ServerArgs.__post_init__`). Read from each release's source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshsat.solver.errors import InputError
from meshsat.solver.memory.multimodal_archs import (
    BREAKABLE_GRAPH_ARCHITECTURES,
    PIECEWISE_GRAPH_ARCHITECTURES,
)

PACKS: tuple[str, ...] = ("0.4.6.post5", "0.5.18", "0.5.19", "0.5.23", "legacy")
#: Releases whose fraction follows the old table.
_TABLE = ("0.4.6.post5", "legacy")
#: Releases with 0.5.18's 20-35 GiB band.
_OLD_BAND = ("0.5.18", "0.5.19")
#: `--max-prefill-tokens`' default (0.5.18 to 0.5.23), what the activations follow with
#: chunked prefill off.
DEFAULT_MAX_PREFILL_TOKENS = 16384


@dataclass(frozen=True)
class Defaults:
    chunked_prefill_size: int
    cuda_graph_max_bs: int


def gpu_defaults(gpu_mib: float, tp: int, pack: str = "0.5.23") -> Defaults:
    """Chunked-prefill size and decode CUDA-graph max batch SGLang picks for a GPU."""
    if gpu_mib < 20 * 1024:
        return Defaults(2048, 8)
    if gpu_mib < 35 * 1024 and pack in _OLD_BAND:
        return Defaults(2048, 24 if tp < 4 else 80)
    if gpu_mib < 35 * 1024:
        return Defaults(4096, 48 if tp < 4 else 160)
    if gpu_mib < 60 * 1024:
        return Defaults(4096, 32 if tp < 4 else 160)
    if gpu_mib < 160 * 1024:
        return Defaults(8192, 256 if tp < 4 else 512)
    return Defaults(16384, 512)


def _prefill_capture_sizes(max_bs: int) -> list[int]:
    """The prefill graph batch sizes SGLang captures up to `max_bs`."""
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1025, 64))
        + list(range(1280, 4097, 256))
        + list(range(4608, max_bs + 1, 512))
    )
    return [s for s in sizes if s <= max_bs]


def _prefill_graph_sizes(max_bs: int) -> int:
    return len(_prefill_capture_sizes(max_bs))


def _deepep_prefill_graph_sizes() -> int:
    """The prefill graph sizes with DeepEP on breakable graphs (`apply_deepep_adjustments`,
    0.5.18 to 0.5.23): the sizes up to 2,048 ("max_bs unresolved here") rounded up to
    multiples of 8, duplicates merged."""
    return len({-(-c // 8) * 8 for c in _prefill_capture_sizes(2048)})


def default_mem_fraction_static(
    gpu_mib: float,
    *,
    tp: int,
    pp: int = 1,
    dp_attention: bool = False,
    dp: int = 1,
    mla: bool = False,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    prefill_cuda_graph: bool = False,
    deepep: bool = False,
    pack: str = "0.5.23",
    decode_cuda_graph: bool = True,
    prefill_graph_breakable: bool = True,
    disaggregation_mode: str = "null",
    max_prefill_tokens: int = DEFAULT_MAX_PREFILL_TOKENS,
    max_running_requests: int | None = None,
    draft_tokens: int | None = None,
) -> float:
    """The `mem_fraction_static` SGLang picks when the user gives none (0.5.18 to 0.5.23:
    `_handle_gpu_memory_settings`, `reserve_for_graph_mb`, `reserve_for_deepep_a2a_mb`).

    `prefill_cuda_graph` / `decode_cuda_graph`: whether each phase captures CUDA graphs
    (`--disable-cuda-graph` turns both off); `prefill_graph_breakable`: the prefill graphs
    are the breakable backend (DeepEP's 1 GiB capture delta is reserved only for it);
    `deepep`: `--moe-a2a-backend deepep` (2 GiB for its buffers in the decode graph, above
    the 10 GiB floor). A PD decode engine (`disaggregation_mode` "decode") sizes its
    activations from its running requests (`max_running_requests`, else the decode graphs'
    largest batch, times `draft_tokens`; at least 2,048) and captures no prefill graphs; a
    prefill engine captures no decode graphs and keeps no DP-attention padding. With
    chunked prefill off (`chunked_prefill_size` <= 0) the activations follow
    `max_prefill_tokens` (SGLang's default 16,384)."""
    if pack not in PACKS:
        raise InputError(f"unknown SGLang pack {pack!r}; known: {', '.join(PACKS)}")
    if pack in _TABLE:
        return _table_fraction(gpu_mib, tp * pp)
    d = gpu_defaults(gpu_mib, tp, pack)
    chunked = chunked_prefill_size if chunked_prefill_size is not None else d.chunked_prefill_size
    max_bs = cuda_graph_max_bs if cuda_graph_max_bs is not None else d.cuda_graph_max_bs
    decode_graph = decode_cuda_graph and disaggregation_mode != "prefill"
    prefill_graph = prefill_cuda_graph and disaggregation_mode != "decode"
    if disaggregation_mode == "decode":
        running = max_running_requests or max_bs or 1
        activation = max(running * (draft_tokens or 1), 2048)
    elif chunked > 0:
        activation = max(chunked, 2048)
    else:
        activation = max(max_prefill_tokens, 2048)
    graph = max_bs * 2.0 if decode_graph else 0.0
    if dp_attention and disaggregation_mode != "prefill":
        graph += max_bs * dp * 3
        if max_bs > 300:
            graph += max_bs * dp * 1.5
    if prefill_graph:
        if mla:
            graph += 1.5 * 1024
        elif deepep and prefill_graph_breakable:
            # DeepEP's adjustments (before the sizes are read) align the breakable graphs'
            # sizes to multiples of 8, from their 2,048-token default.
            graph += _deepep_prefill_graph_sizes() * 8
        else:
            graph += _prefill_graph_sizes(chunked) * 8
        if deepep and prefill_graph_breakable:
            graph += 1024
    reserved = 512 + activation * 1.5 + tp * pp / 8 * 1024 + graph
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if deepep and decode_graph:
        reserved += 2 * 1024
    return round((gpu_mib - reserved) / gpu_mib, 3)


def max_raised_fraction(gpu_mib: float, *, tp: int, pp: int = 1) -> float:
    """The highest `mem_fraction_static` the memory model will raise the default to when
    the default leaves no KV pool: what is left after SGLang's own reserve formula at its
    smallest chunk (`512 + 1.5·2048 MiB + tp·pp/8 GiB`), without the decode/prefill graph
    reserves and without the 10 GiB floor. SGLang itself refuses to start at the default
    ("Raise --mem-fraction-static above ...", `_profile_available_bytes`), so a layout
    whose weights fit under this ceiling runs with an explicit `--mem-fraction-static`,
    as measured DeepSeek-R1 FP8 runs at tp 4 on B200 do (weights 157.8 GiB a rank against
    0.846 of 178 GiB at 0.5.23's default)."""
    reserved = 512 + 1.5 * 2048 + tp * pp / 8 * 1024
    return (gpu_mib - reserved) / gpu_mib


def highest_default_fraction(
    gpu_mib: float, *, tp: int, pp: int = 1, pack: str = "0.5.23"
) -> float:
    """The highest `mem_fraction_static` SGLang's default (`default_mem_fraction_static`)
    reaches for these widths, whatever the rest of the layout: its reserve at the smallest
    activation (a 2,048-token chunk), no graph term, with the 10 GiB floor of a GPU above
    60 GiB. Without a raise (`MemoryModel(raise_default_fraction=False)`, what `validate
    --gpu` and `fix --gpu` size with) this bounds a rank's room, where `highest_fraction`
    (the raise) left `fix` trying every Kimi-K2.5 layout at tp 8 on H100: weights 71.9 GiB
    a rank under a raise ceiling of 74.2 GiB, beyond the default's 68.7 GiB."""
    if pack in _TABLE:
        return _table_fraction(gpu_mib, tp * pp)
    reserved = 512 + 1.5 * 2048 + tp * pp / 8 * 1024
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return (gpu_mib - reserved) / gpu_mib


def highest_fraction(gpu_mib: float, *, tp: int, pp: int = 1, pack: str = "0.5.23") -> float:
    """The highest `mem_fraction_static` a layout of these widths runs at when the user
    gives none: the release's default or the raise (`max_raised_fraction`), whichever is
    higher. 0.5.x defaults reserve at least what the raise does, so the raise bounds
    them; 0.4.6.post5's table does not. An upper bound: weights above it at this
    fraction load under no default (fix excludes such widths before its search)."""
    f = max_raised_fraction(gpu_mib, tp=tp, pp=pp)
    if pack in _TABLE:
        f = max(f, _table_fraction(gpu_mib, tp * pp))
    return f


def raised_fraction(
    gpu_mib: float,
    pre_load_gib: float,
    context_length: int,
    weights_gib: float,
    cell_bytes: float,
    *,
    tp: int,
    pp: int = 1,
) -> float | None:
    """The fraction (to the next 0.001) whose pool holds one request of `context_length`
    beside `weights_gib`, or None when that passes `max_raised_fraction`."""
    need = (weights_gib + context_length * cell_bytes / (1 << 30)) / pre_load_gib
    raised = math.ceil(need * 1000 + 1e-9) / 1000
    if raised > max_raised_fraction(gpu_mib, tp=tp, pp=pp):
        return None
    return raised


def _table_fraction(gpu_mib: float, parallel: int) -> float:
    """0.4.6.post5's `ServerArgs.__post_init__` default."""
    table = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87))
    f = next((v for n, v in table if parallel >= n), 0.88) if gpu_mib <= 81920 else 0.88
    if gpu_mib > 96 * 1024:
        f = min(f + 48 * 1024 * (1 - f) / gpu_mib, (gpu_mib - 18 * 1024) / gpu_mib)
    return f


def prefill_graph_default(
    pack: str,
    vendor: str,
    *,
    pp: int = 1,
    dcp: int = 1,
    attn_cp: int = 1,
    multimodal: bool = False,
    architecture: str = "",
) -> bool:
    """Whether `pack` captures prefill CUDA graphs by default for this layout (and so
    reserves memory for them in its default fraction); `multimodal`: the release serves
    the model as multimodal (`multimodal.is_multimodal`)."""
    if pack in _TABLE:
        return False
    if pack == "0.5.23" and vendor != "nvidia":
        return False
    if pp > 1 or dcp > 1 or attn_cp > 1:
        return False
    if multimodal and architecture not in _graph_multimodal(pack, vendor):
        return False
    return architecture != "DeepseekV4ForCausalLM"


def _graph_multimodal(pack: str, vendor: str) -> frozenset[str]:
    """Multimodal architectures that keep their default prefill graphs: breakable on CUDA
    (0.5.18 and 0.5.19 move a piecewise-only one to `tc_piecewise` there), `tc_piecewise`
    elsewhere."""
    breakable = BREAKABLE_GRAPH_ARCHITECTURES.get(pack, frozenset())
    piecewise = PIECEWISE_GRAPH_ARCHITECTURES.get(pack, frozenset())
    if vendor != "nvidia":
        return piecewise
    return breakable if pack == "0.5.23" else breakable | piecewise


def prefill_graph_breakable(
    pack: str, vendor: str, *, multimodal: bool = False, architecture: str = ""
) -> bool:
    """Whether `pack`'s default prefill CUDA graphs (`prefill_graph_default`) are the
    breakable backend, the one DeepEP's 1 GiB capture delta is reserved for
    (`reserve_for_graph_mb`): on CUDA, except a multimodal architecture 0.5.18/0.5.19
    move to `tc_piecewise` there (on their piecewise list, not their breakable one);
    `tc_piecewise` elsewhere."""
    if vendor != "nvidia":
        return False
    if multimodal and pack != "0.5.23":
        return architecture in BREAKABLE_GRAPH_ARCHITECTURES.get(pack, frozenset())
    return True
