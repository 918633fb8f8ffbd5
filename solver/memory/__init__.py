"""Memory model: will a layout load, and how much KV cache is left on each GPU.

Everything is arithmetic from the model's config facts (`facts`), the resolved layout
widths (`layout.Parallel`, read from `meshsat.solver.validate(...)`), the GPU (`gpus`) and SGLang's
own sizing rules (`fraction`, `pool`). One call returns one frozen `Memory` of plain numbers.

Entry points:
- `MemoryModel(model, gpu, ...)`: built once per model and GPU; `.of(parallel)` costs about
  a dictionary lookup per layout after the first of its widths (for enumerate's columns).
- `memory_of(report, model, gpu, ...)`: one validated layout.
- `load_facts(model)`: a config.json path or an embedded catalogue repo id.
- `fit_violation(mem)`: the "does not fit" message with its arithmetic, or None.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.memory.facts import ModelFacts, facts_from_config
from meshsat.solver.memory.fraction import (
    DEFAULT_MAX_PREFILL_TOKENS,
    default_mem_fraction_static,
    gpu_defaults,
    prefill_graph_breakable,
    prefill_graph_default,
    raised_fraction,
)
from meshsat.solver.memory.gpus import GIB, Gpu, custom_gpu, gpu
from meshsat.solver.memory.kv import (
    SwaRequestCap,
    dcp_widening,
    dsa_backends,
    dsa_raw_layout,
    hybrid_swa_ratio,
    kv_bytes_per_token,
    resolved_kv_cache_dtype,
    swa_holds_a_request,
    swa_pool_tokens,
    swa_request_cap,
    swa_window,
)
from meshsat.solver.memory.layout import Parallel
from meshsat.solver.memory.models import CATALOGUE, model_config
from meshsat.solver.memory.multimodal import (
    default_fraction_factor,
    is_multimodal,
    runtime_reserve_mib,
)
from meshsat.solver.memory.page import resolved_page_size
from meshsat.solver.memory.pool import GIB as POOL_GIB
from meshsat.solver.memory.pool import capped_tokens, pool_tokens, requests_that_fit
from meshsat.solver.memory.sizing import GRAPH_FLAGS, SIZING_FIELDS, Sizing, sizing_flags
from meshsat.solver.memory.state import (
    DEFAULT_STATE_RATIO,
    StateFlags,
    split_rest,
    state_bytes_per_request,
    state_flags,
)
from meshsat.solver.memory.weights import WeightModel, stage_widths

#: GiB the CUDA context, NCCL and allocator hold before weights load (SGLang logs show
#: "Load weight begin. avail mem" about 1 GiB under the device total on H100/H200).
DEFAULT_CONTEXT_GIB = 1.0

__all__ = [
    "CATALOGUE",
    "GRAPH_FLAGS",
    "SIZING_FIELDS",
    "Gpu",
    "Memory",
    "MemoryModel",
    "ModelFacts",
    "Parallel",
    "custom_gpu",
    "fit_violation",
    "flag_options",
    "gpu",
    "load_facts",
    "memory_of",
    "sizing_flags",
]


@dataclass(frozen=True)
class Memory:
    """Memory of one layout on one GPU type; sizes in GiB unless named otherwise."""

    gpu: str
    gpu_memory_gib: float
    pre_load_gib: float
    model_weights_gib: float
    #: Weights on the fullest rank.
    weights_gib: float
    #: KV bytes one token costs on the rank with the most layers.
    kv_bytes_per_token: float
    mem_fraction_static: float
    #: What SGLang keeps back from the pre-load free memory: pre_load·(1 - fraction).
    reserve_gib: float
    kv_pool_gib: float
    #: Tokens in one rank's pool (`KV Cache is allocated. #tokens`).
    kv_tokens: int
    #: SGLang's `max_total_num_tokens` for one attention-DP rank (× dcp with decode CP).
    max_total_num_tokens: int
    #: Independent pools in the deployment: attention-DP ranks × engine replicas.
    pools: int
    context_length: int
    max_requests: int
    #: GatedDeltaNet hybrids (`state.py`): bytes one request's state slot costs a rank,
    #: the slots in one rank's state pool (SGLang's `max_mamba_cache_size`, per
    #: attention-DP rank) and the pool's GiB (the padding slot included); 0 otherwise.
    state_bytes_per_request: int = 0
    state_slots: int = 0
    state_pool_gib: float = 0.0
    #: What the release keeps back from the pool for a multimodal model (`multimodal.py`).
    multimodal_reserve_gib: float = 0.0
    #: The release's default fraction for this layout, when none was given and it left no
    #: KV pool so `mem_fraction_static` was raised to what one request needs (the value a
    #: launch must pass as `--mem-fraction-static`); None otherwise.
    raised_from_fraction: float | None = None
    #: A hybrid SWA pool's tokens on one rank (`kv.swa_pool_tokens`, or 0.5.23's
    #: request-capped pool, `kv.SwaRequestCap`), the sliding window SGLang checks it
    #: against (`kv.swa_window`; 0: no check, as for the capped pool) and the pool's page.
    swa_tokens: int = 0
    swa_window: int = 0
    page_size: int = 1

    @property
    def fits(self) -> bool:
        return (
            self.kv_tokens > 0
            and (self.state_slots > 0 or not self.state_bytes_per_request)
            and self.swa_holds_a_request
        )

    @property
    def swa_holds_a_request(self) -> bool:
        """Whether the hybrid SWA pool passes SGLang's start-up check (`kv.swa_holds_a_request`)."""
        return swa_holds_a_request(self.swa_tokens, self.swa_window, self.page_size)

    @property
    def fits_one_request(self) -> bool:
        return self.max_total_num_tokens >= self.context_length

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["fits"] = self.fits
        d["fits_one_request"] = self.fits_one_request
        return d


def load_facts(
    model: str | Path | Mapping[str, Any] | ModelFacts, dtype: str | None = None
) -> ModelFacts:
    """Facts from a config mapping, a config.json path / model directory, or a repo id,
    served in SGLang's `--dtype` (None or `auto`: the release's choice from the config)."""
    if isinstance(model, ModelFacts):
        if dtype not in (None, "auto"):
            # The served dtype prices every module from the config: facts are already priced.
            raise InputError(f"--dtype {dtype} needs the model's config, not its facts")
        return model
    if isinstance(model, Mapping):
        return facts_from_config(model, dtype)
    return facts_from_config(model_config(str(model)), dtype)


def flag_options(
    resolved: Mapping[str, Any], pack: str, mamba_full_memory_ratio: float = DEFAULT_STATE_RATIO
) -> dict[str, Any]:
    """`MemoryModel` keyword arguments from the launch flags of a resolved layout (a
    `Report`'s `.resolved`, or any mapping of config fields; `sizing_flags` picks them)
    that size the pools beside the widths: `--enable-multimodal`, `--language-model-only`,
    `--language-only` and
    `--disaggregation-mode` (`multimodal.py`, and the default fraction's reserves),
    `--max-prefill-tokens` (the default fraction's activations with chunked prefill off,
    the one place SGLang's memory sizing reads it), the CUDA-graph flags
    (`graph_options`), a hybrid's state-pool flags (`state.state_flags`, with the
    launch's `--mamba-full-memory-ratio`, which is not a layout field) and 0.5.23's
    request-capped SWA pool (`kv.swa_request_cap`: `--max-running-requests` with the radix
    cache off). It reads `SIZING_FIELDS` only."""
    resolved = Sizing(resolved)
    max_prefill = resolved.get("max_prefill_tokens")
    return {
        "swa_cap": swa_request_cap(resolved, pack),
        "state": state_flags(resolved, pack, mamba_full_memory_ratio),
        "enable_multimodal": bool(resolved.get("enable_multimodal")),
        "language_model_only": bool(resolved.get("language_model_only")),
        "language_only": bool(resolved.get("language_only")),
        "disaggregation_mode": str(resolved.get("disaggregation_mode") or "null"),
        "max_prefill_tokens": DEFAULT_MAX_PREFILL_TOKENS
        if max_prefill is None
        else int(max_prefill),
        **graph_options(resolved),
    }


def graph_options(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """`MemoryModel`'s CUDA-graph keywords from a resolved layout, as the releases'
    `cuda_graph_hook` orders the flags (0.5.18 to 0.5.23): `--disable-cuda-graph` turns both
    phases off, `--disable-{prefill,decode}-cuda-graph` one, and a phase's
    `--cuda-graph-backend-*` wins over both (`disabled` turns it off)."""
    out: dict[str, Any] = {}
    for phase in ("decode", "prefill"):
        backend = resolved.get(f"cuda_graph_backend_{phase}")
        off = bool(
            resolved.get("disable_cuda_graph") or resolved.get(f"disable_{phase}_cuda_graph")
        )
        if backend is not None:
            off = str(backend) == "disabled"
            if phase == "prefill" and not off:
                out["prefill_graph_backend"] = str(backend)
        out[f"{phase}_cuda_graph"] = not off
    return out


def fit_violation(m: Memory) -> str | None:
    """'does not fit' with the arithmetic, or None when the pool has room; for a hybrid SWA
    pool too small for its window, SGLang's own refusal with the full pool it came from."""
    if m.fits:
        return None
    if m.kv_tokens > 0 and not m.swa_holds_a_request:
        return (
            f"does not fit: SWA pool ({m.swa_tokens} tokens) cannot hold even one request: "
            f"the prefill admission floor is sliding_window_size ({m.swa_window}) + "
            f"page_size ({m.page_size}). Increase --swa-full-tokens-ratio or the total KV "
            f"budget. (The full pool beside it: {m.kv_tokens} tokens a rank on a {m.gpu}.)"
        )
    return (
        f"does not fit: weights {m.weights_gib:.2f} GiB + reserve "
        f"{m.reserve_gib + m.multimodal_reserve_gib:.2f} GiB "
        f"> {m.pre_load_gib:.2f} GiB free on a {m.gpu} before loading "
        f"(mem_fraction_static {m.mem_fraction_static:.4g})"
    )


class MemoryModel:
    """The memory arithmetic for one model on one GPU type, cached per width tuple."""

    def __init__(
        self,
        model: str | Path | Mapping[str, Any] | ModelFacts,
        gpu_type: str | Gpu,
        *,
        context_length: int = 4096,
        kv_cache_dtype: str | None = None,
        page_size: int | None = None,
        mem_fraction_static: float | None = None,
        context_gib: float = DEFAULT_CONTEXT_GIB,
        pack: str = "0.5.23",
        swa_full_tokens_ratio: float | None = None,
        raise_default_fraction: bool = False,
        mamba_full_memory_ratio: float = DEFAULT_STATE_RATIO,
        state: StateFlags | None = None,
        enable_multimodal: bool = False,
        language_model_only: bool = False,
        language_only: bool = False,
        disaggregation_mode: str = "null",
        max_total_tokens: int | None = None,
        cpu_offload_gb: int = 0,
        dtype: str | None = None,
        decode_cuda_graph: bool = True,
        prefill_cuda_graph: bool = True,
        prefill_graph_backend: str | None = None,
        max_prefill_tokens: int = DEFAULT_MAX_PREFILL_TOKENS,
        dsa_prefill_backend: str | None = None,
        dsa_decode_backend: str | None = None,
        swa_cap: SwaRequestCap | None = None,
    ) -> None:
        #: `dtype`: SGLang's `--dtype` (`quant.served_bytes`): unquantized weights, and the
        #: KV cache at `kv_cache_dtype` auto, in it.
        self.facts = load_facts(model, dtype)
        self.gpu = gpu_type if isinstance(gpu_type, Gpu) else gpu(gpu_type)
        if context_length < 1:
            raise InputError(f"context length must be >= 1, got {context_length}")
        if page_size is not None and page_size < 1:
            raise InputError(f"page size must be >= 1, got {page_size}")
        if max_total_tokens is not None and max_total_tokens < 1:
            # SGLang pools min(profiled, N) tokens and stops at 0 ("Not enough memory").
            raise InputError(f"max_total_tokens must be >= 1, got {max_total_tokens}")
        self.context_length = context_length
        #: `--max-total-tokens`: the cap on each rank's pool (`pool.capped_tokens`).
        self.max_total_tokens = max_total_tokens
        #: `--cpu-offload-gb`: the decoder-layer bytes each rank keeps in host memory
        #: (`weights.WeightModel.offloaded`), GiB as SGLang counts them; <= 0 is none.
        self.cpu_offload_gb = cpu_offload_gb
        #: The dtype the pool is built in: `auto` resolved as `pack` does on this GPU.
        self.kv_cache_dtype = resolved_kv_cache_dtype(self.facts, kv_cache_dtype, self.gpu, pack)
        #: The page of a layout that carries none of its own (`Parallel.page_size`, the
        #: resolved page, wins): `--page-size` as the release resolves it for this model on
        #: this GPU (`page.resolved_page_size`: a DSA model's 64 on CUDA, trtllm_mha's 64
        #: for an MHA model on SM100, ...).
        self.page_size = resolved_page_size(self.facts, self.gpu, pack, page_size)
        #: A DSA model's pool layout: its FP8 latent as the raw row where its attention
        #: backends read it so (`kv.dsa_raw_layout`), its indexer key replicated on every
        #: decode-CP rank (0.5.23).
        self._dsa_backends = dsa_backends(
            self.facts, self.kv_cache_dtype, self.gpu, dsa_prefill_backend, dsa_decode_backend
        )
        self.indexer_dcp = pack == "0.5.23"
        self.fraction = mem_fraction_static
        #: With no fraction given, raise a default that leaves no KV pool to what one
        #: request needs (`fraction.raised_fraction`), as a launch with an explicit
        #: `--mem-fraction-static` does; off, such a layout does not fit (SGLang's default
        #: refuses to start).
        self.raise_default_fraction = raise_default_fraction
        self.pack = pack
        #: The hybrid SWA pool's ratio where `pack` builds one for this model, else None.
        self.swa_ratio = hybrid_swa_ratio(self.facts, pack, swa_full_tokens_ratio)
        #: The window SGLang checks that pool against at start-up (0: none).
        self.swa_window = swa_window(self.facts, self.swa_ratio)
        self.pre_load_gib = self.gpu.memory_gib - context_gib
        #: This model under other sizing flags (`with_flags`), by their values: one dict
        #: shared by every model derived from this one.
        self._siblings: dict[tuple[Any, ...], MemoryModel] = {}
        self._flags_key: tuple[Any, ...] | None = None
        self._set_flags(
            swa_cap=swa_cap,
            state=state or state_flags({}, pack, mamba_full_memory_ratio),
            enable_multimodal=enable_multimodal,
            language_model_only=language_model_only,
            language_only=language_only,
            disaggregation_mode=disaggregation_mode,
            decode_cuda_graph=decode_cuda_graph,
            prefill_cuda_graph=prefill_cuda_graph,
            prefill_graph_backend=prefill_graph_backend,
            max_prefill_tokens=max_prefill_tokens,
        )
        # Validate the dtype once, not per layout.
        kv_bytes_per_token(self.facts, Parallel(), 0, self.kv_cache_dtype)

    def _set_flags(
        self,
        *,
        swa_cap: SwaRequestCap | None,
        state: StateFlags,
        enable_multimodal: bool,
        language_model_only: bool,
        language_only: bool,
        disaggregation_mode: str,
        decode_cuda_graph: bool,
        prefill_cuda_graph: bool,
        max_prefill_tokens: int,
        prefill_graph_backend: str | None = None,
    ) -> None:
        """What the launch flags beside the widths set (`flag_options`' keywords), and
        empty caches: `__init__`'s, and `with_flags`' for a layout's own flags."""
        #: The launch's CUDA graphs as the default fraction reserves for them
        #: (`fraction.default_mem_fraction_static`): decode graphs captured; prefill graphs
        #: not turned off (the release's default for the layout decides whether they are
        #: captured, `fraction.prefill_graph_default`); the prefill backend named, if any
        #: (DeepEP's capture delta is for breakable graphs only).
        self.decode_cuda_graph = decode_cuda_graph
        self.prefill_cuda_graph = prefill_cuda_graph
        self.prefill_graph_backend = prefill_graph_backend
        #: `--disaggregation-mode`: a PD engine's default fraction leaves out the other
        #: phase's graphs, and a decode engine's activations follow its running requests.
        self.disaggregation_mode = disaggregation_mode
        #: A DSA model's pool layout: its FP8 latent as the raw row where its attention
        #: backends read it so (`kv.dsa_raw_layout`), its indexer key replicated on every
        #: decode-CP rank (0.5.23).
        self.dsa_raw = dsa_raw_layout(self.pack, *self._dsa_backends, disaggregation_mode)
        #: `--max-prefill-tokens`: the default fraction's activations with chunked prefill
        #: off (`_handle_gpu_memory_settings`, 0.5.18 to 0.5.23). Nothing else SGLang sizes
        #: before the KV pool reads it: the scheduler's prefill budget, FlashInfer's
        #: autotune and the attention backends' workspaces come after the pool, inside the
        #: reserve (0.4.6.post5 reads it in the scheduler only).
        self.max_prefill_tokens = max_prefill_tokens
        #: 0.5.23 sizes the SWA pool for `--max-running-requests` instead, with the radix
        #: cache off (`kv.SwaRequestCap`), where the model has a window and full layers.
        self.swa_cap = swa_cap if self.swa_window else None
        #: The flags that size a hybrid's state pool (`state.split_rest`); without `state`,
        #: the release's defaults with `--mamba-full-memory-ratio`.
        self.state = state
        #: Whether the release serves the model as multimodal, and the GiB it keeps back
        #: from each rank's pool for it (`multimodal.py`).
        self.multimodal = is_multimodal(
            self.facts, self.pack, language_model_only, enable_multimodal=enable_multimodal
        )
        self.multimodal_reserve_gib = runtime_reserve_mib(self.pack, self.multimodal) / 1024
        #: What the release multiplies its default fraction by for this model and launch.
        self.fraction_factor = default_fraction_factor(
            self.facts.vision_fraction_factor,
            self.multimodal,
            self.pack,
            language_only=language_only,
            language_model_only=language_model_only,
            disaggregation_mode=disaggregation_mode,
        )
        self.weights = WeightModel(
            self.facts, self.gpu, self.pack, enable_multimodal=enable_multimodal
        )
        self.model_gib = self.weights.model_bytes() / GIB
        self._cache: dict[tuple[Any, ...], Memory] = {}
        self._stages_cache: dict[
            tuple[Any, ...], tuple[int | None, float, float, int, int | None, float]
        ] = {}
        #: The column reader's caches (`meshsat.solver.memory.columns`), shared by its readers.
        self.column_cache: dict[str, Any] = {}

    def with_flags(self, flags: Mapping[str, Any]) -> MemoryModel:
        """This model (the same model, GPU and launch options) for a layout whose sizing
        flags are `flags` (`sizing_flags`): its own where they are the ones it was built
        with, else one built once per distinct value of them and kept. Why per value: a
        layout's resolution can change what sizes its pools (a PD decode engine's radix
        cache, which R-DECODE-RADIX turns off, gives 0.5.23's request-capped SWA pool), so
        the flags of the launch as typed are not the layout's; and an enumeration's layouts
        share a handful of values, so each costs one dictionary lookup."""
        key = tuple(flags.get(n) for n in SIZING_FIELDS)
        if key == self._flags_key:
            return self
        hit = self._siblings.get(key)
        if hit is None:
            hit = copy.copy(self)
            hit._set_flags(**flag_options(flags, self.pack, self.state.ratio))
            hit._flags_key = key
            self._siblings[key] = hit
        return hit

    def of_layout(
        self,
        resolved: Mapping[str, Any],
        derived: Mapping[str, Any],
        typed: Mapping[str, Any] | None = None,
    ) -> Memory:
        """Memory of one resolved layout (a `Report`'s `.resolved` and `.derived`, an
        enumerated `Layout`'s `.config` and `.derived`) with its own sizing flags
        (`sizing_flags(resolved, typed)`, `typed`: what the launch gave, for the graph
        flags): what validate, fix and plan read, and what enumerate's columns stream."""
        model = self.with_flags(sizing_flags(resolved, typed))
        return model.of(Parallel.from_resolved(resolved, derived))

    def of(self, p: Parallel) -> Memory:
        # Every width `_compute` reads: attention CP too, which moves the default
        # fraction (`default_fraction`, through the prefill CUDA graph's default); a
        # resolved layout's follows from its other widths, but the API takes any.
        key = (
            p.tp, p.pp, p.attn_tp, p.attn_dp, p.ep, p.moe_tp, p.dcp, p.moe_dense_tp,
            p.dp_attention, p.dp_lm_head, p.replicas, p.chunked_prefill_size, p.attn_cp,
            p.moe_a2a_backend, p.redundant_experts, p.page_size,
        )  # fmt: skip
        m = self._cache.get(key)
        if m is None:
            m = self._cache[key] = self._compute(p)
        return m

    def row_reader(
        self,
        config_index: Mapping[str, int],
        constant: Mapping[str, Any],
        derived_index: Mapping[str, int],
        *,
        extend: bool = False,
        weights_digits: int | None = None,
        typed: Mapping[str, Any] | None = None,
        vary: Iterable[str] = (),
    ) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
        """Enumerate's columns (weights_gib, kv_tokens, max_requests, fits) per layout row,
        at streaming speed (with `extend`, the row with them appended; with
        `weights_digits`, weights_gib rounded); see `meshsat.solver.memory.columns`. With
        `typed` (the launch's fields beside the varied ones, `vary`: an enumeration's
        base), each row is sized by its own flags as `of_layout` sizes the layout; without,
        by this model's."""
        from meshsat.solver.memory.columns import column_reader

        return column_reader(
            self,
            config_index,
            constant,
            derived_index,
            extend=extend,
            weights_digits=weights_digits,
            typed=typed,
            vary=vary,
        )

    def row_extender(
        self,
        config_index: Mapping[str, int],
        constant: Mapping[str, Any],
        derived_index: Mapping[str, int],
        *,
        weights_digits: int | None = None,
        typed: Mapping[str, Any] | None = None,
        vary: Iterable[str] = (),
    ) -> Callable[[Iterable[tuple[Any, ...]]], Iterator[tuple[Any, ...]]]:
        """`row_reader(..., extend=True)` over a whole stream of rows, as one generator:
        what enumerate streams (see `meshsat.solver.memory.columns.column_rows`)."""
        from meshsat.solver.memory.columns import column_rows

        return column_rows(
            self,
            config_index,
            constant,
            derived_index,
            weights_digits=weights_digits,
            typed=typed,
            vary=vary,
        )

    def default_fraction(
        self,
        tp: int,
        pp: int = 1,
        dp_attention: bool = False,
        attn_dp: int = 1,
        chunked_prefill_size: int | None = None,
        dcp: int = 1,
        attn_cp: int = 1,
        moe_a2a_backend: str = "none",
    ) -> float:
        """The release's default `mem_fraction_static` for these widths on this GPU, times
        its vision factor for a multimodal model (`multimodal.default_fraction_factor`),
        with the launch's graphs, PD role and DeepEP reserves."""
        f = self.facts
        prefill_graph = self.prefill_cuda_graph and prefill_graph_default(
            self.pack,
            self.gpu.vendor,
            pp=pp,
            dcp=dcp,
            attn_cp=attn_cp,
            multimodal=self.multimodal,
            architecture=f.architecture,
        )
        backend = self.prefill_graph_backend
        breakable = (
            backend == "breakable"
            if backend is not None
            else prefill_graph_breakable(
                self.pack,
                self.gpu.vendor,
                multimodal=self.multimodal,
                architecture=f.architecture,
            )
        )
        return self.fraction_factor * default_mem_fraction_static(
            self.gpu.memory_mib,
            tp=tp,
            pp=pp,
            dp_attention=dp_attention,
            dp=attn_dp,
            mla=f.is_mla,
            chunked_prefill_size=chunked_prefill_size,
            prefill_cuda_graph=prefill_graph,
            deepep=moe_a2a_backend == "deepep",
            pack=self.pack,
            decode_cuda_graph=self.decode_cuda_graph,
            prefill_graph_breakable=breakable,
            disaggregation_mode=self.disaggregation_mode,
            max_prefill_tokens=self.max_prefill_tokens,
            max_running_requests=self.state.max_running_requests,
            draft_tokens=self.state.draft_tokens,
        )

    def _compute(self, p: Parallel) -> Memory:
        f = self.fraction
        if f is not None:
            return self._at_fraction(p, f)
        default = self.default_fraction(
            p.tp,
            p.pp,
            p.dp_attention,
            p.attn_dp,
            p.chunked_prefill_size,
            p.dcp,
            p.attn_cp,
            p.moe_a2a_backend,
        )
        m = self._at_fraction(p, default)
        # Raised only for an empty pool, as enumerate's columns raise it: a hybrid SWA
        # pool too small for its window (a tiny `--swa-full-tokens-ratio`, a
        # `--max-total-tokens` cap) is the launch's own choice, refused as it stands.
        if m.kv_tokens > 0 or not self.raise_default_fraction:
            return m
        # The default leaves no pool: SGLang refuses to start and asks for a higher
        # `--mem-fraction-static`. Raise it (to the next 0.001) to what one request of
        # `context_length` needs, if that stays under the ceiling (`max_raised_fraction`).
        raised = raised_fraction(
            self.gpu.memory_mib,
            self.pre_load_gib,
            self.context_length,
            m.weights_gib + self.multimodal_reserve_gib,
            m.kv_bytes_per_token,
            tp=p.tp,
            pp=p.pp,
        )
        if raised is None:
            return m
        return replace(self._at_fraction(p, raised), raised_from_fraction=default)

    def page(self, p: Parallel) -> int:
        """The page `p`'s pool is rounded to: its resolved page, else this model's."""
        return p.page_size or self.page_size

    def swa_capped_tokens(self, p: Parallel, page: int) -> int:
        """0.5.23's request-capped SWA pool of `p` (`kv.SwaRequestCap`), 0 where the ratio
        sizes it. An unset chunk is the GPU's default (`fraction.gpu_defaults`), divided
        by the attention-DP width as DP attention divides it (`_handle_data_parallelism`)."""
        if self.swa_cap is None:
            return 0
        chunk = p.chunked_prefill_size
        if chunk is None:
            chunk = gpu_defaults(self.gpu.memory_mib, p.tp, self.pack).chunked_prefill_size
            chunk //= p.attn_dp if p.dp_attention else 1
        return self.swa_cap.tokens(self.swa_window, page, p.attn_dp, p.attn_dp * p.replicas, chunk)

    def _at_fraction(self, p: Parallel, f: float) -> Memory:
        page = self.page(p)
        fixed = self.swa_capped_tokens(p, page)
        key = (f, p.attn_dp, p.pp, p.dcp, page, fixed, *stage_widths(p))
        stages = self._stages_cache.get(key)
        if stages is None:
            stages = self._stages_cache[key] = self._stages(p, f, page, fixed)
        profiled, weights, cell_max, per_request, slots, swa_cell = stages
        tokens = capped_tokens(profiled or 0, self.max_total_tokens, page)
        swa = self._swa_tokens(tokens, page)
        if fixed:
            # `calculate_pool_sizes_from_max_tokens`: a cap below the profiled pool
            # leaves the SWA pool at most the cap.
            cap = self.max_total_tokens
            swa = fixed if cap is None or cap >= (profiled or 0) else min(fixed, cap)
        total = tokens * dcp_widening(self.swa_ratio, p.dcp)
        pools = p.attn_dp * p.replicas
        requests = requests_that_fit(total, self.context_length, pools)
        slots = max(slots or 0, 0)
        if per_request:
            requests = min(requests, pools * (slots // self.state.slots_per_request))
        return Memory(
            gpu=self.gpu.name,
            gpu_memory_gib=self.gpu.memory_gib,
            pre_load_gib=self.pre_load_gib,
            model_weights_gib=self.model_gib,
            weights_gib=weights,
            kv_bytes_per_token=cell_max,
            mem_fraction_static=f,
            reserve_gib=self.pre_load_gib * (1 - f),
            kv_pool_gib=(tokens * cell_max + (swa * swa_cell if fixed else 0)) / GIB,
            kv_tokens=tokens,
            max_total_num_tokens=total,
            pools=pools,
            context_length=self.context_length,
            max_requests=requests,
            state_bytes_per_request=per_request,
            state_slots=slots,
            state_pool_gib=(slots + 1) * per_request / GIB if slots else 0.0,
            multimodal_reserve_gib=self.multimodal_reserve_gib,
            swa_tokens=swa,
            # The capped pool is not checked against the window: it holds one by design.
            swa_window=0 if fixed else self.swa_window,
            page_size=page,
        )

    def _swa_tokens(self, tokens: int, page: int) -> int:
        """The hybrid SWA pool beside `tokens` full-pool tokens (0 without one)."""
        if self.swa_ratio is None:
            return 0
        return swa_pool_tokens(tokens, self.swa_ratio, page)

    def _stages(
        self, p: Parallel, f: float, page: int, fixed: int = 0
    ) -> tuple[int | None, float, float, int, int | None, float]:
        """(KV tokens of the tightest stage, weights GiB of the fullest, the largest KV
        cell, state bytes per request, state slots) at fraction `f`, stage by stage.
        They read `f`, the attention DP and PP widths, the widths a stage's weights read
        (`stage_widths`, attention TP among them) and DCP (a GQA cell's heads), not the
        replicas or chunk size: `_at_fraction` memoises them on those (a planner's layouts
        differ mostly in replicas: 24,000 layouts on 256 GPUs, each up to 61 stages).
        `fixed`: a request-capped SWA pool's tokens (`swa_capped_tokens`), whose bytes
        each stage pays first, its full pool charging the full layers only; the last
        value is the largest SWA cell (bytes of one SWA token over a stage's layers)."""
        tokens = None
        weights = 0.0
        cell_max = swa_max = 0.0
        per_request = state_bytes_per_request(self.facts, p.attn_tp, p.pp)
        slots = None
        for s in range(p.pp):
            w = self.weights.stage(p, s).total / GIB
            if self.cpu_offload_gb > 0:  # SGLang offloads only then
                w -= self.weights.offloaded(p, s, self.cpu_offload_gb * GIB) / GIB
            cell, swa_cell = self.stage_cells(p, s, bool(fixed))
            if per_request:
                # The state pool first, from the same rest (`state.split_rest`).
                rest = (self.pre_load_gib * f - w - self.multimodal_reserve_gib) * POOL_GIB
                k, kv_bytes = split_rest(rest, per_request, self.state, p.attn_dp)
                slots = k if slots is None else min(slots, k)
                # A given `--max-mamba-cache-size` can leave the KV pool nothing.
                room = k > 0 and kv_bytes > 0
                if not cell and room:
                    # No full-attention layer on this stage: it holds no KV and bounds
                    # nothing (SGLang's `has_kv_on_another_pp_stage`).
                    weights = max(weights, w)
                    continue
                t = int(kv_bytes // cell) // page * page if room else 0
            else:
                t = pool_tokens(
                    self.pre_load_gib,
                    w,
                    f,
                    cell,
                    page_size=page,
                    reserve_gib=self.multimodal_reserve_gib,
                    fixed_bytes=fixed * swa_cell,
                )
            tokens = t if tokens is None else min(tokens, t)
            weights = max(weights, w)
            cell_max = max(cell_max, cell)
            swa_max = max(swa_max, swa_cell)
        return tokens, weights, cell_max, per_request, slots, swa_max

    def stage_cells(self, p: Parallel, stage: int, capped: bool) -> tuple[float, float]:
        """(the pool's cell, one SWA token's bytes) on `stage`: the hybrid pool's cell at
        the ratio, or with a request-capped SWA pool (`capped`) the full layers' cell and
        the sliding layers' own (`_full_cell_bytes`, `_swa_cell_bytes`)."""

        def at(ratio: float | None) -> float:
            return kv_bytes_per_token(
                self.facts,
                p,
                stage,
                self.kv_cache_dtype,
                ratio,
                dsa_raw=self.dsa_raw,
                indexer_dcp=self.indexer_dcp,
            )

        if not capped:
            return at(self.swa_ratio), 0.0
        full = at(0.0)
        return full, at(1.0) - full


def memory_of(
    report: Any,
    model: str | Path | Mapping[str, Any] | ModelFacts,
    gpu_type: str | Gpu,
    **options: Any,
) -> Memory:
    """Memory of a validated layout: `report` is `meshsat.solver.validate(config, model)`'s result
    (anything with `.resolved` and `.derived`)."""
    p = Parallel.from_resolved(report.resolved, report.derived)
    if not p.whole:
        raise ValueError(f"the layout's widths are not whole, so it has no memory to size: {p}")
    return MemoryModel(model, gpu_type, **options).of(p)
