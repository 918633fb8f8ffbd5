"""`--gpu`, `--gpu-memory`, `--context-length`, `--mem-fraction-static`, `--free-memory`:
the memory question asked beside a layout.

Declared once for the commands that show memory. With a GPU and a model, the report gains
a "does not fit" violation (`MEM-FIT`, with the arithmetic) when the weights and SGLang's
reserve exceed the GPU, and a warning (`MEM-ONE-REQUEST`) when the KV pool cannot hold one
request of the context length; the numbers are `meshsat.solver.memory.memory_of`'s. A
launch command's own memory flags (`--mem-fraction-static`, `--context-length`, ...:
`meshsat.solver.inputs.memory_flags`) size it too, under these options where given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from meshsat.solver.errors import InputError
from meshsat.solver.inputs.layout_input import LayoutInput
from meshsat.solver.memory import Memory, MemoryModel, Parallel, fit_violation, flag_options
from meshsat.solver.memory.gpus import Gpu, custom_gpu, gpu, parse_memory
from meshsat.solver.memory.state import DEFAULT_STATE_RATIO
from meshsat.solver.validation.report import Report, Violation

GpuOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu",
        metavar="NAME",
        help="GPU type (H100, H200, B200, A100-80, MI300X, ...): adds memory per rank and "
        "'does not fit' as a violation. Needs --model.",
        show_default=False,
    ),
]
GpuMemoryOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu-memory",
        metavar="SIZE",
        help="GPU memory instead of --gpu, e.g. 80GiB.",
        show_default=False,
    ),
]


def _context_length_option(default: str) -> Any:
    """`--context-length`, whose default the reading command says (`default`)."""
    return typer.Option(
        "--context-length",
        min=1,
        metavar="TOKENS",
        help="Tokens per request, for the requests that fit; at most the model's context "
        f"length [default: {default}].",
        show_default=False,
    )


ContextLengthOpt = Annotated[
    int | None, _context_length_option("4096, or the model's context length where shorter")
]
#: `--context-length` of a command that reads a launch command, whose own flag it defaults to.
LaunchContextLengthOpt = Annotated[
    int | None,
    _context_length_option(
        "the launch command's --context-length, else 4096 or the model's context length "
        "where shorter"
    ),
]


MemFractionOpt = Annotated[
    float | None,
    typer.Option(
        "--mem-fraction-static",
        metavar="F",
        help="SGLang's --mem-fraction-static (0 < F < 1) [default: the release's own, from "
        "the GPU and the layout].",
        show_default=False,
    ),
]
#: `--mem-fraction-static` of a command that reads a launch command, whose own flag it
#: defaults to (and overrides, with a note, when given).
LaunchMemFractionOpt = Annotated[
    float | None,
    typer.Option(
        "--mem-fraction-static",
        metavar="F",
        help="SGLang's --mem-fraction-static (0 < F < 1), over the launch command's own "
        "[default: the launch command's --mem-fraction-static, else the release's own, from "
        "the GPU and the layout].",
        show_default=False,
    ),
]
FreeMemoryOpt = Annotated[
    str | None,
    typer.Option(
        "--free-memory",
        metavar="SIZE",
        help="Free GPU memory before the weights load, as SGLang logs it ('Load weight "
        "begin. avail mem=78.81 GB' is 78.81GiB) [default: the GPU's memory less 1 GiB].",
        show_default=False,
    ),
]
QuantizationOpt = Annotated[
    str | None,
    typer.Option(
        "--quantization",
        metavar="METHOD",
        help="SGLang's --quantization, as `--set quantization=METHOD` takes it elsewhere: "
        "fp8 (or w8a8_fp8) on a 16-bit checkpoint quantizes it online (weights priced as "
        "FP8, the estimate's kernels FP8), and the commands carry it; a quantized checkpoint "
        "keeps its own scheme.",
        show_default=False,
    ),
]


def checked_quantization(text: str | None) -> str | None:
    """`--quantization`'s value checked as the `quantization` field is everywhere else
    (`--set`, launch commands), with the same one-line error."""
    if text is None:
        return None
    from meshsat.solver.inputs.convert import coerce

    value = coerce("quantization", text)
    return None if value is None else str(value)


def report_pack(sglang_version: str | None) -> str:
    """The release whose defaults size the pool: the pack the rules came from."""
    from meshsat.solver.packs import get_pack

    return get_pack(sglang_version).version


def sizing_options(
    g: Gpu, mem_fraction_static: float | None = None, free_memory: str | None = None
) -> dict[str, Any]:
    """`MemoryModel` keyword arguments for --mem-fraction-static and --free-memory."""
    options: dict[str, Any] = {}
    if mem_fraction_static is not None:
        if not 0 < mem_fraction_static < 1:
            raise InputError(f"--mem-fraction-static must be in (0, 1), got {mem_fraction_static}")
        options["mem_fraction_static"] = mem_fraction_static
    if free_memory is not None:
        free = parse_memory(free_memory) / 1024
        if free > g.memory_gib:
            raise InputError(
                f"--free-memory {free_memory} is more than the {g.memory_gib:.2f} GiB of a {g.name}"
            )
        options["context_gib"] = g.memory_gib - free
    return options


def fraction_flags(m: Memory, given: float | None) -> tuple[str, ...]:
    """`--mem-fraction-static F` where the row's memory is not the release's default: the
    user gave `F`, or the default leaves no KV pool and the estimate raised it
    (`MemoryModel(raise_default_fraction=True)`), which the command must then say, or
    SGLang refuses to start ("Raise --mem-fraction-static") and `validate --gpu` reports
    MEM-FIT for the command plan printed."""
    if given is None and m.raised_from_fraction is None:
        return ()
    return (f"--mem-fraction-static {m.mem_fraction_static:g}",)


def unknown_model_message(named: str | None) -> str:
    """Why --gpu has no model to size: none given, or the command's `--model-path` is not a
    local folder, not in the Hugging Face cache and not embedded (with the embedded ids its
    name is closest to: a revision such as DeepSeek-V3-0324 usually shares its base's
    config, but meshsat does not assume it)."""
    if named is None:
        return "--gpu needs --model: the weights and KV come from the model's config"
    import difflib

    from meshsat.solver.memory.models import CATALOGUE

    close = difflib.get_close_matches(named, list(CATALOGUE), n=2, cutoff=0.8)
    hint = f" (embedded and close: {', '.join(close)})" if close else ""
    return (
        f"--gpu needs the model's config: the command's --model-path {named} is not a local "
        "folder, not in the local Hugging Face cache and not embedded; give --model "
        f"CONFIG.json or an embedded repo id{hint}"
    )


def _priced(keyword: str, value: Any) -> bool:
    """Whether the memory model prices a launch's value: a `--kv-cache-dtype` it has no
    bytes for (nvfp4, mxfp8, ...) is left to the release's default (`sizing_notes` says so)
    rather than refusing a command SGLang accepts; a `--dtype` outside SGLang's choices is
    the parser's CMD-UNKNOWN-FLAG warning already, and sized at `auto`."""
    from meshsat.solver.memory.quant import DTYPE_BYTES, SERVED_DTYPE_BYTES

    known = {"kv_cache_dtype": DTYPE_BYTES, "dtype": SERVED_DTYPE_BYTES}.get(keyword)
    return known is None or value == "auto" or value in known


def launch_sizing(
    launch: Mapping[str, Any] | None,
    mem_fraction_static: float | None = None,
    context_length: int | None = None,
) -> dict[str, Any]:
    """The memory model's keywords from a launch command's memory flags
    (`LayoutInput.memory_flags`), with meshsat's own options, given explicitly, over them."""
    sizing = {k: v for k, v in (launch or {}).items() if _priced(k, v)}
    fraction = sizing.get("mem_fraction_static")
    if fraction is not None and not 0 < fraction < 1:
        raise InputError(f"the command's --mem-fraction-static must be in (0, 1), got {fraction}")
    cap = sizing.get("max_total_tokens")
    if cap is not None and cap < 1:
        raise InputError(
            f"the command's --max-total-tokens must be >= 1, got {cap} (SGLang pools at most "
            "that many tokens and stops: 'Not enough memory')"
        )
    return {**sizing, **_given(mem_fraction_static, context_length)}


def _given(mem_fraction_static: float | None, context_length: int | None) -> dict[str, Any]:
    """meshsat's own options that a launch command also spells, where given."""
    given = {"mem_fraction_static": mem_fraction_static, "context_length": context_length}
    return {k: v for k, v in given.items() if v is not None}


def sizing_notes(
    launch: Mapping[str, Any] | None,
    mem_fraction_static: float | None = None,
    context_length: int | None = None,
) -> list[str]:
    """What the memory verdict takes from a launch command other than as written: meshsat's
    own option over the command's differing flag, and a KV dtype the model cannot price."""
    from meshsat.solver.inputs.memory_flags import FLAG_OF

    launch = launch or {}
    notes = []
    for keyword, given in _given(mem_fraction_static, context_length).items():
        said = launch.get(keyword)
        if said is not None and given != said:
            flag = FLAG_OF[keyword]
            notes.append(f"{flag} {given} sizes memory; the command's {flag} {said} does not")
    dtype = launch.get("kv_cache_dtype")
    if dtype is not None and not _priced("kv_cache_dtype", dtype):
        notes.append(
            f"--kv-cache-dtype {dtype}: the memory model has no size for it; the KV pool is "
            "sized in the release's default KV dtype"
        )
    return notes


def memory_model(
    model: Path | str | Mapping[str, Any] | None,
    gpu_name: str | None,
    gpu_memory: str | None,
    context_length: int | None = None,
    pack: str | None = None,
    mem_fraction_static: float | None = None,
    free_memory: str | None = None,
    quantization: str | None = None,
    flags: Mapping[str, Any] | None = None,
    named: str | None = None,
    launch: Mapping[str, Any] | None = None,
) -> MemoryModel | None:
    """The model (a config path, repo id, or a config already read) on the GPU the options
    name, or None when no GPU is given; `flags`: the layout's fields, whose launch flags
    that size the pools (`meshsat.solver.memory.flag_options`) are read; `named`: the
    launch command's `--model-path` when it gave no model, for the error to say why;
    `launch`: the command's memory flags that are not layout fields
    (`LayoutInput.memory_flags`), under meshsat's own options (`launch_sizing`).
    `context_length` None: the command's, else `DEFAULT_CONTEXT_LENGTH` or the model's
    where shorter; given, it is refused beyond the model's (`checked_context_length`)."""
    if gpu_name is None and gpu_memory is None:
        if mem_fraction_static is not None or free_memory is not None:
            raise InputError("--mem-fraction-static and --free-memory need --gpu (or --gpu-memory)")
        return None
    if gpu_name is not None and gpu_memory is not None:
        raise InputError("give --gpu or --gpu-memory, not both")
    if model is None:
        raise InputError(unknown_model_message(named))
    from meshsat.solver.memory.models import model_config
    from meshsat.solver.memory.quantized_checkpoints import with_quantization_flag
    from meshsat.solver.perf.context import checked_context_length

    g = gpu(gpu_name) if gpu_name is not None else custom_gpu(str(gpu_memory))
    config = model if isinstance(model, Mapping) else model_config(str(model))
    config = with_quantization_flag(config, quantization)
    sizing = launch_sizing(launch, mem_fraction_static, context_length)
    options = sizing_options(g, sizing.pop("mem_fraction_static", None), free_memory)
    name = (named or "the model") if isinstance(model, Mapping) else str(model)
    # The command's own --context-length is the launch's business (SGLang refuses to start
    # with one too long); only the option given here is refused as bad input.
    length = sizing.pop("context_length", checked_context_length(config, context_length, name))
    if pack is not None:
        options["pack"] = pack
    if flags is not None:
        ratio = sizing.pop("mamba_full_memory_ratio", DEFAULT_STATE_RATIO)
        options.update(flag_options(flags, options.get("pack", "0.5.23"), ratio))
    return MemoryModel(config, g, context_length=length, **options, **sizing)


def layout_memory(
    layout: LayoutInput,
    model: Path | str | Mapping[str, Any] | None,
    gpu_name: str | None,
    gpu_memory: str | None,
    pack: str | None = None,
    mem_fraction_static: float | None = None,
    free_memory: str | None = None,
) -> MemoryModel | None:
    """`memory_model` for a layout read from the user's sources, as `fix` (CLI and web)
    sizes it: its quantization, its pool flags and its command's memory flags."""
    return memory_model(
        model,
        gpu_name,
        gpu_memory,
        pack=pack,
        mem_fraction_static=mem_fraction_static,
        free_memory=free_memory,
        quantization=getattr(layout.config, "quantization", None),
        flags=layout.config.model_dump(),
        named=layout.model_path,
        launch=layout.memory_flags,
    )


def beyond_every_gpu(
    layout: LayoutInput,
    model: Path | str | Mapping[str, Any] | None,
    report: Report,
    pack: str | None = None,
) -> str | None:
    """Without --gpu, `fix` weighs no memory: a note when the layout of `report` (a fix's,
    validated) puts more weights on each GPU than any catalogued GPU holds (DeepSeek-V3 at
    tp 2: about 315 GiB a GPU), which nothing said; None when one holds them, or without a
    model the memory model knows."""
    from meshsat.solver.memory.gpus import GPUS

    p = Parallel.from_resolved(report.resolved, report.derived)
    if model is None or not p.whole:
        return None
    catalogued = [g for g in GPUS.values() if g.catalogued]
    weights = []
    for g in catalogued:
        try:
            mm = layout_memory(layout, model, g.name, None, pack)
        except InputError:  # a model the memory model cannot size: nothing to say
            return None
        if mm is None or mm.of(p).weights_gib <= g.memory_gib:
            return None
        weights.append(mm.of(p).weights_gib)
    largest = max(catalogued, key=lambda g: g.memory_mib)
    return (
        f"this layout puts {min(weights):.0f} GiB of weights on each GPU, more than any "
        f"catalogued GPU holds (the largest, {largest.name}, {largest.memory_gib:.0f} GiB): "
        "it loads nowhere; pass --gpu NAME (or --gpu-memory) and fix proposes only layouts "
        "that load"
    )


def with_gpu_class(layout: LayoutInput, gpu_name: str | None) -> LayoutInput:
    """The layout with `--gpu`'s compute capability as its `gpu_sm`, which the rules that
    need a GPU class read (an all-to-all backend on the Marlin MoE runner, FlashInfer
    MegaMOE, the attention backends of one SM family), and an AMD GPU's `platform = hip`
    (the rules of ROCm builds); a field the layout sets itself is kept."""
    if gpu_name is None:
        return layout
    given = layout.config.user_set() | ({"gpu_sm"} if layout.config.gpu_sm is not None else set())
    fields = {k: v for k, v in gpu(gpu_name).layout_fields.items() if k not in given}
    if not fields:
        return layout
    return replace(layout, config=layout.config.model_copy(update=fields))


def with_memory(
    report: Report,
    model: Path | Mapping[str, Any] | None,
    gpu_name: str | None,
    gpu_memory: str | None,
    context_length: int | None,
    pack: str | None = None,
    mem_fraction_static: float | None = None,
    free_memory: str | None = None,
    named: str | None = None,
    launch: Mapping[str, Any] | None = None,
) -> tuple[Report, Memory | None]:
    """The report with the memory verdict folded in, and the figures (None without a GPU,
    or for a layout whose widths are not whole: the rules refuse it, and there is no
    engine to size); `launch`: the command's memory flags (`memory_model`)."""
    quantization = report.resolved.get("quantization")
    mm = memory_model(
        model,
        gpu_name,
        gpu_memory,
        context_length,
        pack,
        mem_fraction_static,
        free_memory,
        quantization=str(quantization) if quantization else None,
        named=named,
        launch=launch,
    )
    p = Parallel.from_resolved(report.resolved, report.derived)
    if mm is None or not p.whole:
        return report, None
    # The layout's own sizing flags, as resolved (the graph flags as typed: SGLang sizes
    # the default fraction before R-A2A-DISPATCH-MODE turns DeepEP normal mode's graphs
    # off), as fix, enumerate and plan read them (`MemoryModel.of_layout`).
    mem = mm.of_layout(report.resolved, report.derived, report.config.model_dump())
    too_big = fit_violation(mem)
    if too_big is not None:
        v = Violation(
            "MEM-FIT",
            too_big,
            ("tp_size", "pp_size", "ep_size"),
            "",
            "more GPUs per replica (tp, pp or ep), or a quantised model"
            if mem.swa_holds_a_request
            else "a larger --swa-full-tokens-ratio, or more GPUs per replica (tp, pp or ep)",
            "meshsat memory model",
        )
        report = replace(report, valid=False, violations=(*report.violations, v))
    elif not mem.fits_one_request:
        w = Violation(
            "MEM-ONE-REQUEST",
            f"the KV pool holds {mem.max_total_num_tokens} tokens per attention-DP rank, less "
            f"than one request of {mem.context_length}",
            ("tp_size", "dp_size"),
            "",
            "fewer attention-DP groups, more GPUs, or a shorter --context-length",
            "meshsat memory model",
            severity="warning",
        )
        report = replace(report, warnings=(*report.warnings, w))
    return report, mem


def checkpoint_line(model: Path | str | None, mem: Memory | float) -> str | None:
    """How far the weight count (a `Memory`'s, or GiB) is from the checkpoint's own byte
    count, when a `model.safetensors.index.json` sits beside the local config."""
    from meshsat.solver.memory.models import checkpoint_bytes

    size = None if model is None else checkpoint_bytes(str(model))
    if size is None:
        return None
    disk = size / (1 << 30)
    count = mem if isinstance(mem, float) else mem.model_weights_gib
    return (
        f"checkpoint: {disk:.2f} GiB in model.safetensors.index.json; the model's count "
        f"{count:.2f} GiB ({100 * (count / disk - 1):+.1f} %; "
        "MTP layers and towers SGLang does not load are in the file, not in the count)"
    )


def _raised(mem: Memory) -> str:
    if mem.raised_from_fraction is None:
        return ""
    return (
        f", raised from the default {mem.raised_from_fraction}, which leaves no KV pool: "
        f"launch with --mem-fraction-static {mem.mem_fraction_static}"
    )


def _state(mem: Memory) -> str:
    """A GatedDeltaNet hybrid's per-request state pool (SGLang's `max_mamba_cache_size`)."""
    if not mem.state_bytes_per_request:
        return ""
    return (
        f", state pool {mem.state_pool_gib:.2f} GiB = {mem.state_slots} request slots of "
        f"{mem.state_bytes_per_request / 2**20:.1f} MiB (max_mamba_cache_size)"
    )


def _multimodal(mem: Memory) -> str:
    """The release's multimodal reserve (`meshsat.solver.memory.multimodal`)."""
    if not mem.multimodal_reserve_gib:
        return ""
    return f", multimodal reserve {mem.multimodal_reserve_gib * 1024:.0f} MiB"


def memory_line(mem: Memory) -> str:
    return (
        f"memory per rank on {mem.gpu} ({mem.gpu_memory_gib:.0f} GiB): weights "
        f"{mem.weights_gib:.2f} GiB, KV pool {mem.kv_pool_gib:.2f} GiB = {mem.kv_tokens} tokens"
        f"{_state(mem)}{_multimodal(mem)} "
        f"(mem_fraction_static {mem.mem_fraction_static:.4g}{_raised(mem)}); max_total_num_tokens "
        f"{mem.max_total_num_tokens}; requests of {mem.context_length} tokens that fit: "
        f"{mem.max_requests}"
    )
