"""The KV page size a pool is rounded to: the page the server runs, as R-PAGE-SIZE resolves it.

Why not the typed `--page-size`: SGLang rewrites it for attention back-ends and models that
run only their own page (flashmla 64, trtllm_mla 32/64, cutlass_mla 128, trtllm_mha,
fa4 on SM100, intel_xpu, a DeepSeek DSA model's 64: solver/catalogue/page_size.py), and
every rounding of the pool (`DefaultPoolConfigurator.calculate_pool_sizes`:
`max_total_num_tokens // page_size * page_size`, again after `--max-total-tokens`; the
hybrid SWA pool's `align_page_size`; 0.5.23's `pool_configurator.py`) reads that
resolved `get_schedule().page_size`. A layout that was validated or enumerated carries
its resolved page (`layout.Parallel.page_size`, from the report's `.resolved`); this
module answers for one that does not (the API's `MemoryModel(...).of(Parallel(...))`),
by running the same resolution on what the memory model knows: the model's
architecture, the GPU's class and the typed page. Nothing here re-states the rule.
"""

from __future__ import annotations

from functools import lru_cache

from meshsat.solver.memory.facts import ModelFacts
from meshsat.solver.memory.gpus import Gpu
from meshsat.solver.packs.registry import get_pack
from meshsat.solver.validation.validate import validate

#: Packs with no release resolution of their own (the memory model's `legacy` table).
_UNRESOLVED = frozenset({"legacy"})


def resolved_page_size(f: ModelFacts, gpu: Gpu, pack: str, typed: int | None = None) -> int:
    """The page `pack` runs this model with on `gpu` when `--page-size` is `typed` (None:
    not given) and no attention back-end is named: R-PAGE-SIZE's answer (1 where it
    leaves the page free)."""
    if pack in _UNRESOLVED:
        return typed or 1
    mla_q = f.qk_nope_head_dim + f.qk_rope_head_dim if f.is_mla else None
    return _resolved(
        f.architecture, bool(f.index_head_dim), mla_q, tuple(gpu.layout_fields.items()), pack, typed
    )


@lru_cache(maxsize=256)
def _resolved(
    architecture: str,
    dsa: bool,
    mla_q_head_dim: int | None,
    gpu_fields: tuple[tuple[str, object], ...],
    pack: str,
    typed: int | None,
) -> int:
    model = {"architecture": architecture, "is_deepseek_dsa": dsa, "mla_q_head_dim": mla_q_head_dim}
    config = {**dict(gpu_fields), "page_size": typed}
    report = validate(config, model, explain=False, sglang_version=get_pack(pack))
    page = report.resolved.get("page_size")
    return int(page) if page else 1
