"""The launch flags that size a layout's pools beside its widths, read as SGLang resolves
them: one mapping per layout (`sizing_flags`), which every command's memory reads
(`MemoryModel.of_layout`, `MemoryModel.with_flags`, enumerate's streamed columns)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

#: The CUDA-graph flags as the user gave them: SGLang sizes the default fraction
#: (`handle_gpu_memory_settings`) before `handle_a2a_moe` turns DeepEP normal mode's graphs
#: off (R-A2A-DISPATCH-MODE), so its reserves count the graphs the launch asked for; the
#: value each takes when not given.
GRAPH_FLAGS: Mapping[str, Any] = {
    "disable_cuda_graph": False,
    "disable_decode_cuda_graph": False,
    "disable_prefill_cuda_graph": False,
    "cuda_graph_backend_decode": None,
    "cuda_graph_backend_prefill": None,
}
#: Every layout field `flag_options` reads (it refuses to read another): the launch flags
#: that size the pools beside the widths, read as SGLang resolves them (R-DECODE-RADIX's
#: radix cache, the speculative defaults, ...), the graph flags as typed (`GRAPH_FLAGS`).
SIZING_FIELDS: tuple[str, ...] = (
    "max_running_requests",
    "disable_radix_cache",
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "disable_overlap_schedule",
    "disaggregation_mode",
    "max_mamba_cache_size",
    "enable_multimodal",
    "language_model_only",
    "language_only",
    "max_prefill_tokens",
    *GRAPH_FLAGS,
)


def sizing_flags(
    resolved: Mapping[str, Any], typed: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The fields of one layout that size its pools (`SIZING_FIELDS`), as the memory
    model reads them: the `resolved` layout's (a `Report`'s `.resolved`, an enumerated
    `Layout.config`), with the graph flags `typed` (what the launch gave; an absent one
    is its default). Without `typed`, the resolved graph flags. Every command sizes a
    layout's memory from this one mapping (`MemoryModel.of_layout`), so validate, fix,
    enumerate and plan agree on a layout whose resolution changes one of them (a PD decode
    engine's radix cache off, which 0.5.23's request-capped SWA pool reads)."""
    flags = {n: resolved.get(n) for n in SIZING_FIELDS}
    if typed is not None:
        flags.update({n: typed.get(n, default) for n, default in GRAPH_FLAGS.items()})
    return flags


class Sizing(Mapping[str, Any]):
    """A read of `SIZING_FIELDS` only: `flag_options` reading a field outside it would
    make a layout's memory depend on a flag `sizing_flags` (and with it enumerate's
    per-row key) leaves out."""

    __slots__ = ("_flags",)

    _FIELDS = frozenset(SIZING_FIELDS)

    def __init__(self, flags: Mapping[str, Any]) -> None:
        self._flags = flags

    def __getitem__(self, name: str) -> Any:
        if name not in self._FIELDS:  # not a KeyError: `Mapping.get` would swallow it
            raise ValueError(f"flag_options read {name!r}, which SIZING_FIELDS does not list")
        return self._flags[name]

    def __iter__(self) -> Iterator[str]:
        return (n for n in SIZING_FIELDS if n in self._flags)

    def __len__(self) -> int:
        return sum(1 for _ in self)
