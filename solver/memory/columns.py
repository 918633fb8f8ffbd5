"""Enumerate's memory columns at streaming speed: (weights_gib, kv_tokens, max_requests, fits).

Why a second path: `MemoryModel.of` builds a full `Memory` per layout (tens of µs), and the
layouts of one enumeration almost never repeat their widths, so caching whole layouts does
not help. The per-rank figures factor instead: a stage's weights are
`layers·X(attn_tp) + dense_layers·Y(dense_tp) + moe_layers·Z(ep, moe_tp, shared_tp) +
embedding + LM head`, and its KV cell is `C(pp, attn_tp)` per stage shape, where X, Y, Z, C and the
default `mem_fraction_static` take few distinct values and are cached. A layout then costs a
handful of multiplications, in a function generated per pipeline depth with each distinct
stage shape unrolled, and the result is cached per key of the widths it depends on (`_KEY`):
an enumeration's layouts share keys several times over (dp_size only scales the requests),
so most rows cost one generated tuple and one dictionary lookup. The caches are
keyed by values (the generated functions, with their per-row cache, by their own source, which
inlines the row positions and shared values it reads) and kept on the `MemoryModel`, so a
second enumeration starts warm. Enumerate streams through `column_rows`, the same code as one
generator loop.
A GatedDeltaNet hybrid (Qwen3.5, Qwen3-Next) adds per stage shape its GatedDeltaNet layers'
difference from full attention (`g`, and the allocator's rounding differences `yg`, `zg`) and
splits each stage's rest with the per-request state pool before the KV cell divides it
(`state.split_rest`); its requests are also capped by the state slots.
`tests/test_memory.py` checks the columns against `MemoryModel.of`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from meshsat.solver.memory.fraction import raised_fraction
from meshsat.solver.memory.kv import swa_holds_a_request, swa_pool_tokens
from meshsat.solver.memory.layout import Parallel
from meshsat.solver.memory.pool import capped_tokens
from meshsat.solver.memory.sizing import GRAPH_FLAGS, SIZING_FIELDS, sizing_flags
from meshsat.solver.memory.state import split_rest, state_bytes_per_request
from meshsat.solver.memory.weights import rope_cache_bytes, stage_layers

if TYPE_CHECKING:
    from meshsat.solver.memory import MemoryModel

GIB = float(1 << 30)

#: The value a field the row lacks takes when the shared constants lack it too.
_DEFAULTS: dict[str, Any] = {
    "tp_size": 1,
    "pp_size": 1,
    "dp_size": 1,
    "enable_dp_attention": False,
    "ep_size": 1,
    "dcp_size": 1,
    "attn_cp_size": 1,
    "moe_dense_tp_size": None,
    "moe_a2a_backend": "none",
    "enable_dp_lm_head": False,
    "chunked_prefill_size": None,
    "ep_num_redundant_experts": 0,
    "page_size": None,
}
#: What the per-rank figures depend on, in the order of a cache key: the engine's widths
#: (the first `_ENGINE`, which fix the budget, attention, embedding and head; the all-to-all
#: backend among them, as DeepEP moves the default fraction), then the MoE's, then the
#: resolved KV page the pool is rounded to (None: the model's, `MemoryModel.page_size`).
_KEY = (
    "tp_size",
    "pp_size",
    "enable_dp_attention",
    "moe_dense_tp_size",
    "enable_dp_lm_head",
    "chunked_prefill_size",
    "attn_tp",
    "attn_dp",
    "dcp_size",
    "attn_cp_size",
    "moe_a2a_backend",
    "ep_size",
    "moe_tp",
    "ep_num_redundant_experts",
    "page_size",
)
_ENGINE = 11
#: Distinct keys held before the cache is emptied (a few million layouts share far fewer).
_CACHE_LIMIT = 1 << 20


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def column_reader(
    mm: MemoryModel,
    config_index: Mapping[str, int],
    constant: Mapping[str, Any],
    derived_index: Mapping[str, int],
    *,
    extend: bool = False,
    weights_digits: int | None = None,
    typed: Mapping[str, Any] | None = None,
    vary: Iterable[str] = (),
) -> Callable[[tuple[Any, ...]], Any]:
    """A function from an enumerated layout's row (`Layout.row`, with the three mappings of
    its `Layout.shape`) to (weights_gib, kv_tokens, max_requests, fits); with `extend`, to
    the row with those four appended. With `weights_digits`, weights_gib comes `round`ed to
    that many digits, once per key rather than per row. With `typed` (the fields the
    launch gives beside the varied ones, `vary`), each row is sized by its own sizing flags
    as `MemoryModel.of_layout` sizes it (`_sizing`); without, by the model's own."""
    read: Callable[[tuple[Any, ...]], Any] = _generated(
        mm, config_index, constant, derived_index, extend, weights_digits, typed, tuple(vary)
    )["read"]
    return read


def column_rows(
    mm: MemoryModel,
    config_index: Mapping[str, int],
    constant: Mapping[str, Any],
    derived_index: Mapping[str, int],
    *,
    weights_digits: int | None = None,
    typed: Mapping[str, Any] | None = None,
    vary: Iterable[str] = (),
) -> Callable[[Iterable[tuple[Any, ...]]], Iterator[tuple[Any, ...]]]:
    """What enumerate streams: a generator function from rows to the rows with the four
    columns appended. The same arithmetic as `column_reader(..., extend=True)`, as one loop:
    resuming a generator costs about half of `map`'s Python call per row."""
    rows: Callable[[Iterable[tuple[Any, ...]]], Iterator[tuple[Any, ...]]] = _generated(
        mm, config_index, constant, derived_index, True, weights_digits, typed, tuple(vary)
    )["rows"]
    return rows


def _sizing(
    mm: MemoryModel,
    config_index: Mapping[str, int],
    constant: Mapping[str, Any],
    typed: Mapping[str, Any] | None,
    vary: tuple[str, ...],
) -> tuple[MemoryModel, dict[str, Any] | None, tuple[str, ...]]:
    """How the rows' sizing flags (`memory.sizing_flags`) reach the figures: (the model
    for the flags every row shares, those flags, the sizing fields each row holds itself).
    Without `typed`, the model's own flags and none per row. The resolved flags the rows
    share are `constant`'s, the graph flags `typed`'s, each as `MemoryModel.of_layout`
    reads a layout's; a row holds a field that resolution sets per layout (a dependent
    column) or that is varied (a graph flag only then: its typed value is the row's)."""
    if typed is None:
        return mm, None, ()
    shared = sizing_flags(constant, typed)
    per_row = tuple(
        n for n in SIZING_FIELDS if n in config_index and (n not in GRAPH_FLAGS or n in vary)
    )
    return (mm if per_row else mm.with_flags(shared)), shared, per_row


def _generated(
    mm: MemoryModel,
    config_index: Mapping[str, int],
    constant: Mapping[str, Any],
    derived_index: Mapping[str, int],
    extend: bool,
    weights_digits: int | None,
    typed: Mapping[str, Any] | None = None,
    vary: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The namespace of the generated `read(row)` and `rows(rows)`. Rows that hold sizing
    flags of their own (`_sizing`) add them to the key, and a miss sizes the row with the
    model for its flags (`MemoryModel.with_flags`, one per distinct value)."""
    mm, shared, per_row = _sizing(mm, config_index, constant, typed, vary)

    def shared_value(name: str) -> Any:
        """The value every row has for a field the rows do not hold."""
        default = _DEFAULTS[name]
        v = constant.get(name, default)
        return v if v is not None or default is None else default

    def read_of(name: str) -> str:
        """The row read of a field, or its shared value inlined."""
        if name in derived_index:
            return f"r[{derived_index[name]}]"
        if name in config_index:
            return f"r[{config_index[name]}]"
        return repr(shared_value(name))

    # Generated once per enumeration: the row's key is a tuple of its row reads (the fields
    # the rows share are left out and filled in on a miss); a layout whose key was seen
    # costs one dictionary lookup.
    in_row = {**config_index, **derived_index}
    # A PD decode engine's request-capped SWA pool also reads the replicas
    # (`SwaRequestCap.tokens`' extra slots): only then is dp_size part of the key (with
    # sizing flags per row, any row may be one). The row's sizing flags end the key.
    decode_cap = mm.swa_cap is not None and mm.swa_cap.decode
    fields = (*_KEY, "dp_size") if decode_cap or per_row else _KEY
    short = ", ".join(read_of(n) for n in (*fields, *per_row) if n in in_row)
    full = ", ".join(read_of(n) for n in (*fields, *per_row))
    # The generated code names everything its figures depend on (the rounding too), so it
    # can key the cache of generated functions below.
    rounding = "" if weights_digits is None else f"    w = round(w, {weights_digits!r})\n"
    key = f"{short}," if short else "()"
    body = (
        "try:\n"
        f"    w, t, fits, pools, per_dp, cap = cache[{key}]\n"
        "except KeyError:\n"
        "    if len(cache) >= limit:\n"
        "        cache.clear()\n"
        f"    w, t, fits, pools, per_dp, cap = miss(({full},))\n"
        + rounding
        + f"    cache[{key}] = w, t, fits, pools, per_dp, cap\n"
        f"if per_dp:\n    pools *= {read_of('dp_size')}\n"
    )
    # Decode CP widens each pool row into dcp request tokens, not the hybrid SWA pool
    # (`kv.dcp_widening`, here as generated code).
    widen = "1" if mm.swa_ratio is not None else read_of("dcp_size")
    per_pool = f"t * {widen} // ctx"
    # A GatedDeltaNet hybrid's requests are also capped by its state slots (`cap`).
    if mm.facts.linear_layer_ids:
        per_pool = f"min({per_pool}, cap)"
    figures = f"(w, t, pools * ({per_pool}), fits)"
    source = (
        "def read(r):\n"
        + textwrap.indent(body, "    ")
        + f"    return {'r + ' if extend else ''}{figures}\n"
        + "def rows(rows):\n"
        + "    for r in rows:\n"
        + textwrap.indent(body, "        ")
        + f"        yield r + {figures}\n"
    )
    # Kept per model by the code itself, which inlines the row positions and the shared
    # values it reads: the same enumeration again (another filter, another format) reuses
    # the compiled functions and their row cache.
    generated: dict[Any, dict[str, Any]] = mm.column_cache.setdefault("generated", {})
    # Rows with flags of their own share the model's caches with other flags besides.
    label = (source, tuple(shared.items())) if per_row and shared is not None else source
    hit = generated.get(label)
    if hit is not None:
        return hit
    if per_row and shared is not None:
        miss = _per_row_miss(mm, shared, per_row, len(fields))
    else:
        miss = _miss(mm)
    cache: dict[tuple[Any, ...], tuple[float, int, bool, int, bool, int]] = {}
    namespace: dict[str, Any] = {
        "cache": cache,
        "miss": miss,
        "ctx": mm.context_length,
        "limit": _CACHE_LIMIT,
    }
    exec(compile(source, "<meshsat:memory-columns>", "exec"), namespace)
    generated[label] = namespace
    return namespace


def _per_row_miss(
    mm: MemoryModel, shared: Mapping[str, Any], per_row: tuple[str, ...], widths: int
) -> Callable[[tuple[Any, ...]], tuple[float, int, bool, int, bool, int]]:
    """A miss of a key whose last values are the row's own sizing flags (`per_row`):
    the figures of its widths (the first `widths` values) from the model for its flags."""
    models: dict[tuple[Any, ...], Callable[..., tuple[float, int, bool, int, bool, int]]] = {}

    def miss(key: tuple[Any, ...]) -> tuple[float, int, bool, int, bool, int]:
        own = key[widths:]
        of = models.get(own)
        if of is None:
            flags = {**shared, **dict(zip(per_row, own, strict=True))}
            of = models[own] = _miss(mm.with_flags(flags))
        return of(key[:widths])

    return miss


def _miss(mm: MemoryModel) -> Callable[[tuple[Any, ...]], tuple[float, int, bool, int, bool, int]]:
    """The figures of one width key (`_KEY`, dp_size after it where the model caps a PD
    decode engine's SWA pool) under `mm`'s flags, with every cache they read kept on
    `mm`: made once per model."""
    made = mm.column_cache.get("miss")
    if made is not None:
        return made  # type: ignore[no-any-return]
    if mm.cpu_offload_gb > 0:
        # The offloaded prefix depends on each stage's first layers: `MemoryModel.of` only.
        raise ValueError("the streaming columns do not size --cpu-offload-gb")
    f = mm.facts
    wm = mm.weights
    capped_swa = mm.swa_cap is not None
    page, ctx = mm.page_size, mm.context_length
    cap_tokens = mm.max_total_tokens
    pre, fixed_fraction = mm.pre_load_gib, mm.fraction
    reserve = mm.multimodal_reserve_gib
    vocab, row_bytes, tied = f.padded_vocab, wm.row, f.tie_word_embeddings
    experts = f.num_experts
    attn_a, attn_b, dense_d = wm.attn_sharded, wm.attn_whole, wm.dense
    expert_e, shared_s, router_r = wm.expert_per_rank, wm.shared, wm.router

    stage_cache: dict[int, tuple[Callable[..., tuple[float, float, int]], tuple[int, ...]]] = (
        mm.column_cache.setdefault("stages", {})
    )
    swa_ids = f.swa_layer_ids if mm.swa_ratio is not None else ()
    swa_ratio, swa_window = mm.swa_ratio or 0.0, mm.swa_window
    hybrid = bool(f.linear_layer_ids)

    def stages(pp: int) -> tuple[Callable[..., tuple[float, float, int]], tuple[int, ...]]:
        """(worst stage's weights, fewest tokens, fewest state slots) for `pp` stages,
        generated with each distinct stage shape unrolled: (layers, MoE layers, sliding
        layers, GatedDeltaNet layers and MoE ones, first, last) are constants, terms with a
        zero factor are left out (adding 0.0 changes no float); with the index of one stage
        of each shape, whose KV cell the caller passes. A hybrid's stage splits its rest
        with the state pool first (`state.split_rest`)."""
        hit = stage_cache.get(pp)
        if hit is not None:
            return hit
        kinds: dict[tuple[int, int, int, int, int, bool, bool], int] = {}
        for i, (lo, hi) in enumerate(stage_layers(f.num_layers, pp)):
            moe, lin, lin_moe = wm.counts(lo, hi)
            swa = sum(1 for j in swa_ids if lo <= j < hi)
            kinds.setdefault((hi - lo, moe, swa, lin, lin_moe, i == 0, i == pp - 1), i)
        weights, tokens, slots = [], [], []
        for k, (n, moe, _swa, lin, lin_moe, first, last) in enumerate(kinds):
            terms = [f"{n} * x"]
            terms += [f"{n - moe} * y"] if n - moe else []
            terms += [f"{moe} * z"] if moe else []
            terms += [f"{lin} * g"] if lin else []
            terms += [f"{lin - lin_moe} * yg"] if lin - lin_moe else []
            terms += [f"{lin_moe} * zg"] if lin_moe else []
            terms += ["emb"] if first else []
            terms += ["head"] if last else []
            terms += ["vis"]  # the vision tower and the load overhead are on every stage
            weights.append(f"    w{k} = " + " + ".join(terms) + "\n")
            if hybrid:
                weights.append(f"    k{k}, r{k} = split(budget - w{k}, per, flags, dp)\n")
                # A stage with no full-attention layer holds no KV and bounds nothing
                # (SGLang's `has_kv_on_another_pp_stage`).
                # A given `--max-mamba-cache-size` can leave the KV pool nothing.
                tokens.append(
                    f"((r{k} // cells[{k}] if cells[{k}] else inf) if k{k} > 0 and r{k} > 0 else 0)"
                )
                slots.append(f"k{k}")
            elif capped_swa:
                # The request-capped SWA pool's bytes first (`MemoryModel.stage_cells`).
                tokens.append(f"(budget - w{k} - fixed[{k}]) // cells[{k}]")
            else:
                tokens.append(f"(budget - w{k}) // cells[{k}]")
        ws = [f"w{k}" for k in range(len(kinds))]
        worst = ws[0] if len(ws) == 1 else f"max({', '.join(ws)})"
        fewest = tokens[0] if len(tokens) == 1 else f"min({', '.join(tokens)})"
        few_slots = (
            "0" if not slots else slots[0] if len(slots) == 1 else f"min({', '.join(slots)})"
        )
        source = (
            "def stages(x, y, z, g, yg, zg, emb, head, vis, budget, cells, per, dp, fixed):\n"
            + "".join(weights)
            + f"    return {worst}, {fewest}, {few_slots}\n"
        )
        namespace: dict[str, Any] = {
            "__builtins__": {"max": max, "min": min},
            "split": split_rest,
            "inf": float("inf"),
            "flags": mm.state,
        }
        exec(compile(source, f"<meshsat:memory-stages-{pp}>", "exec"), namespace)
        fn: Callable[..., tuple[float, float, int]] = namespace["stages"]
        stage_cache[pp] = fn, tuple(kinds.values())
        return stage_cache[pp]

    head_anyway = not tied

    def engine(ek: tuple[Any, ...]) -> tuple[Any, ...]:
        """Everything one key's engine part fixes: the stages, the attention share, the
        dense MLP share, embedding and head, the KV budget and cell."""
        tp, pp, dpa, dense, lmh, chunked, attn_tp, attn_dp, dcp, attn_cp, a2a = ek
        fr = fixed_fraction
        if fr is None:
            fk = (tp, pp, dpa, attn_dp, chunked, dcp, attn_cp, a2a)
            fr = fraction_cache.get(fk)
            if fr is None:
                fr = fraction_cache[fk] = mm.default_fraction(*fk)
        unrolled, reps = stages(pp)
        both = cell_cache.get((pp, attn_tp, dcp))
        if both is None:
            p = Parallel(pp=pp, attn_tp=attn_tp, dcp=dcp)
            pairs = [mm.stage_cells(p, s, capped_swa) for s in reps]
            both = cell_cache[(pp, attn_tp, dcp)] = (
                tuple(c for c, _ in pairs),
                tuple(w for _, w in pairs),
            )
        cells, swa_cells = both
        emb_rows = wm.embedding_rows(tp, attn_tp, dpa)
        dtp = wm.dense_width(dense, tp)
        # Attention's weights by the class's own width; the KV cells above by attention TP.
        atp = wm.attention_width(tp, attn_tp)
        head = row_bytes
        if head_anyway or pp > 1:
            head_rows = _ceil(vocab, attn_tp) if lmh else _ceil(vocab, tp)
            head += head_rows * row_bytes + wm.vocab_rounding(head_rows)
        dense_round = wm.layer_rounding(False, atp, dtp, 1, 1, 0)
        return (
            unrolled,
            attn_a / atp + attn_b + wm.mla_copies(atp),
            dense_d / dtp + dense_round,
            emb_rows * row_bytes + wm.vocab_rounding(emb_rows),
            head,
            wm.vision_attn / attn_tp + wm.vision_mlp / tp + wm.vision_whole + rope_cache_bytes(f),
            (pre * fr - reserve) * GIB,
            cells,
            dtp,
            wm.linear_delta(atp) if hybrid else 0.0,
            wm.layer_rounding(False, atp, dtp, 1, 1, 0, linear=True) - dense_round
            if hybrid
            else 0.0,
            state_bytes_per_request(f, attn_tp, pp),
            atp,
            swa_cells,
        )

    fraction_cache: dict[tuple[Any, ...], float] = mm.column_cache.setdefault("fraction", {})
    cell_cache: dict[tuple[int, int, int], tuple[tuple[float, ...], tuple[float, ...]]] = (
        mm.column_cache.setdefault("cells", {})
    )
    # Keyed by values, not row positions: shared by every reader of this model, so a second
    # enumeration (another N, another filter) starts warm.
    engine_cache: dict[tuple[Any, ...], tuple[Any, ...]] = mm.column_cache.setdefault("engine", {})
    known: dict[tuple[Any, ...], tuple[float, int, bool, int, bool, int]] = (
        mm.column_cache.setdefault("figures", {})
    )

    def miss(key: tuple[Any, ...]) -> tuple[float, int, bool, int, bool, int]:
        """The per-rank figures of one key: (weights GiB, tokens, fits, attention-DP
        pools, whether engine replicas multiply them, requests a pool's state slots hold
        (-1 without a state pool))."""
        hit = known.get(key)
        if hit is not None:
            return hit
        ek = key[:_ENGINE]
        en = engine_cache.get(ek)
        if en is None:
            en = engine_cache[ek] = engine(ek)
        unrolled, x, y, emb, head, vis, budget, cells, dtp, g, yg, per, atp, swa_cells = en
        here = wm.experts_per_rank(key[11], key[13])
        stp = wm.shared_width(key[10], ek[0], key[11], key[12])
        z = here * expert_e(key[12]) + router_r + shared_s / stp
        zg = 0.0
        if experts:
            moe_round = wm.layer_rounding(True, atp, dtp, stp, key[12], here)
            z += moe_round
            if hybrid:
                zg = wm.layer_rounding(True, atp, dtp, stp, key[12], here, linear=True) - moe_round
        dp = ek[7]
        pg = key[14] or page
        swa_fixed = 0
        if capped_swa:
            replicas = 1 if ek[2] or len(key) <= 15 else key[15]
            widths = Parallel(tp=ek[0], attn_dp=dp, dp_attention=ek[2], replicas=replicas)
            swa_fixed = mm.swa_capped_tokens(replace(widths, chunked_prefill_size=ek[5]), pg)
        fixed = tuple(swa_fixed * c for c in swa_cells)
        worst, fewest, slots = unrolled(
            x, y, z, g, yg, zg, emb, head, vis, budget, cells, per, dp, fixed
        )
        if fewest <= 0 and fixed_fraction is None and mm.raise_default_fraction:
            # As `MemoryModel._compute`: a default fraction that leaves no pool is raised.
            raised = raised_fraction(
                mm.gpu.memory_mib, pre, ctx, worst / GIB + reserve, max(cells), tp=ek[0], pp=ek[1]
            )
            if raised is not None:
                budget = (pre * raised - reserve) * GIB
                worst, fewest, slots = unrolled(
                    x, y, z, g, yg, zg, emb, head, vis, budget, cells, per, dp, fixed
                )
        tokens = int(fewest) if 0 < fewest < float("inf") else 0
        if pg > 1:
            tokens = tokens // pg * pg
        tokens = capped_tokens(tokens, cap_tokens, pg)
        if len(known) >= _CACHE_LIMIT:
            known.clear()
        # A hybrid's requests are capped by its state slots (`state.slots_per_request`).
        cap = max(slots, 0) // mm.state.slots_per_request if hybrid else -1
        # A hybrid SWA pool must hold one request's window (`Memory.swa_holds_a_request`).
        # (The request-capped SWA pool is not checked: `Memory.swa_window` 0.)
        fits = tokens > 0 and (
            bool(swa_fixed)
            or swa_holds_a_request(swa_pool_tokens(tokens, swa_ratio, pg), swa_window, pg)
        )
        hit = known[key] = (worst / GIB, tokens, fits, key[7], not key[2], cap)
        return hit

    mm.column_cache["miss"] = miss
    return miss
