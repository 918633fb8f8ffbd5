"""Enumerate's memory columns at streaming speed: (weights_gib, kv_tokens, max_requests, fits).

Why a second path: `MemoryModel.of` builds a full `Memory` per layout (tens of µs), and the
layouts of one enumeration almost never repeat their widths, so caching whole layouts does
not help. The per-rank figures factor instead: a stage's weights are
`layers·X(attn_tp) + dense_layers·Y(dense_tp) + moe_layers·Z(ep, moe_tp, dense_tp) +
embedding + LM head`, and its KV cell is `layers·C(attn_tp)`, where X, Y, Z, C and the
default `mem_fraction_static` take few distinct values and are cached. A layout then costs a
handful of multiplications per distinct stage shape. `tests/test_memory.py` checks the
columns against `MemoryModel.of`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from solver.memory.fraction import default_mem_fraction_static
from solver.memory.kv import layer_kv_bytes
from solver.memory.weights import stage_layers

if TYPE_CHECKING:
    from solver.memory import MemoryModel

GIB = float(1 << 30)
Columns = tuple[float, int, int, bool]

#: Row field -> its name in the generated reader, in the order `compute` takes them.
_FIELDS = (
    ("tp_size", 1),
    ("pp_size", 1),
    ("dp_size", 1),
    ("enable_dp_attention", False),
    ("ep_size", 1),
    ("dcp_size", 1),
    ("moe_dense_tp_size", None),
    ("enable_dp_lm_head", False),
    ("chunked_prefill_size", None),
)
_DERIVED = ("attn_tp", "attn_dp", "moe_tp")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def column_reader(
    mm: MemoryModel,
    config_index: Mapping[str, int],
    constant: Mapping[str, Any],
    derived_index: Mapping[str, int],
) -> Callable[[tuple[Any, ...]], Columns]:
    """A function from an enumerated layout's row (`Layout.row`, with the three mappings of
    its `Layout.shape`) to (weights_gib, kv_tokens, max_requests, fits)."""
    parts = []
    for name, default in _FIELDS:
        if name in config_index:
            parts.append(f"r[{config_index[name]}]")
        else:
            v = constant.get(name, default)
            parts.append(repr(v if v is not None or default is None else default))
    parts += [f"r[{derived_index[n]}]" for n in _DERIVED]
    # Generated once per enumeration: a tuple of row reads and inlined constants.
    pick: Callable[[tuple[Any, ...]], tuple[Any, ...]] = eval(
        "lambda r: (" + ", ".join(parts) + ",)", {"__builtins__": {}}
    )

    f = mm.facts
    wm = mm.weights
    kv_dtype, page, ctx = mm.kv_cache_dtype, mm.page_size, mm.context_length
    pre, fixed_fraction, gpu_mib = mm.pre_load_gib, mm.fraction, mm.gpu.memory_mib
    vocab, row_bytes, tied = f.padded_vocab, wm.row, f.tie_word_embeddings
    experts = f.num_experts
    attn_a, attn_b, dense_d = wm.attn_sharded, wm.attn_whole, wm.dense
    expert_e, shared_s, router_r = wm.expert, wm.shared, wm.router

    def kinds(pp: int) -> list[tuple[int, int, int, int]]:
        out = {}
        for s, (a, b) in enumerate(stage_layers(f.num_layers, pp)):
            moe = wm._moe_prefix[b] - wm._moe_prefix[a]
            key = (b - a, moe, int(s == 0), int(s == pp - 1))
            out[key] = key
        return list(out)

    def engine_terms(key: tuple[Any, ...]) -> tuple[float, list[tuple[int, int, int, int]]]:
        tp, pp, dpa, attn_dp, chunked = key
        fr = fixed_fraction
        if fr is None:
            fr = default_mem_fraction_static(
                gpu_mib,
                tp=tp,
                pp=pp,
                dp_attention=dpa,
                dp=attn_dp,
                mla=f.is_mla,
                chunked_prefill_size=chunked,
                pack=mm.pack,
            )
        return pre * fr * GIB, kinds(pp)

    engine_cache: dict[tuple[Any, ...], tuple[float, list[tuple[int, int, int, int]]]] = {}
    attn_cache: dict[int, tuple[float, float, float]] = {}
    tp_cache: dict[int, float] = {}
    moe_cache: dict[tuple[int, int, int], float] = {}
    emb_full = vocab * row_bytes
    head_anyway = not tied

    def read(r: tuple[Any, ...]) -> Columns:
        tp, pp, dp, dpa, ep, dcp, dense, lmh, chunked, attn_tp, attn_dp, moe_tp = pick(r)
        a = attn_cache.get(attn_tp)
        if a is None:
            a = attn_cache[attn_tp] = (
                attn_a / attn_tp + attn_b,
                layer_kv_bytes(f, attn_tp, kv_dtype),
                _ceil(vocab, attn_tp) * row_bytes,
            )
        x, cell_l, head_attn = a
        vocab_tp = tp_cache.get(tp)
        if vocab_tp is None:
            vocab_tp = tp_cache[tp] = _ceil(vocab, tp) * row_bytes
        dtp = dense or tp
        zk = (ep, moe_tp, dtp)
        z = moe_cache.get(zk)
        if z is None:
            z = moe_cache[zk] = _ceil(experts, ep) * expert_e / moe_tp + router_r + shared_s / dtp
        y = dense_d / dtp
        emb = emb_full if dpa else vocab_tp
        head = row_bytes
        if head_anyway or pp > 1:
            head += head_attn if lmh else vocab_tp
        ek = (tp, pp, dpa, attn_dp, chunked)
        en = engine_cache.get(ek)
        if en is None:
            en = engine_cache[ek] = engine_terms(ek)
        budget, ks = en
        worst = 0.0
        tokens = -1
        for n, moe, first, last in ks:
            w = n * x + (n - moe) * y + moe * z + first * emb + last * head
            if w > worst:
                worst = w
            t = int((budget - w) // (n * cell_l)) if budget > w else 0
            if tokens < 0 or t < tokens:
                tokens = t
        if page > 1:
            tokens = tokens // page * page
        pools = attn_dp if dpa else attn_dp * dp
        return worst / GIB, tokens, pools * (tokens * dcp // ctx), tokens > 0

    return read
