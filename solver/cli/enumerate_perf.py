"""`meshsat enumerate --perf`: the estimate's columns appended to each listed layout, with the
`--where` filters and `--sort` keys that read them.

Why a stage after the memory columns: the estimate needs the KV-cache size (the SLA search's
limit) and is the costly step, so it runs only on the rows the loops and the other filters
kept, once per layout shape (`PerfModel` caches by widths).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.enumeration.layouts import Layout
from meshsat.solver.enumeration.memory_columns import MEMORY_NAMES, RowEnv, filter_constants
from meshsat.solver.enumeration.where import split_reading
from meshsat.solver.lang.expr import Expr, Field, Named
from meshsat.solver.memory import Parallel

if TYPE_CHECKING:
    from meshsat.solver.enumeration.layouts import Enumerator
    from meshsat.solver.perf import PerfModel

#: The columns, in the order each row gains them (after the memory columns).
PERF_COLUMNS: tuple[str, ...] = (
    "concurrency", "ttft_ms", "tpot_ms", "tokens_per_s_gpu", "tokens_per_s_user", "meets_sla",
    "perf_source",
)  # fmt: skip

#: How a filter reads them: every column, `perf_source` as text (`==`, `!=`, `in (...)`:
#: `perf_source != 'does not fit'`), since enumerate's help offers each in --where.
PERF_NAMES: Mapping[str, Field] = MappingProxyType(
    {
        "concurrency": Field("concurrency", "int"),
        "ttft_ms": Field("ttft_ms", "float", optional=True),
        "tpot_ms": Field("tpot_ms", "float", optional=True),
        "tokens_per_s_gpu": Field("tokens_per_s_gpu", "float"),
        "tokens_per_s_user": Field("tokens_per_s_user", "float"),
        "meets_sla": Field("meets_sla", "bool"),
        "perf_source": Field("perf_source", "enum"),
    }
)


def split_perf_filters(
    texts: Iterable[str], widths: Mapping[str, Named] | None = None
) -> tuple[tuple[str, ...], tuple[Expr, ...]]:
    """The filters for the earlier stages (as written), and those that read a perf column
    (parsed with the release's derived `widths`)."""
    return split_reading(texts, {**MEMORY_NAMES, **PERF_NAMES}, PERF_NAMES, widths)


class PerfColumns:
    """Appends the estimate's columns to (memory-extended) rows, keeping those the perf
    filters accept."""

    def __init__(
        self, e: Enumerator, columns: Sequence[str], pm: PerfModel, filters: Sequence[Expr] = ()
    ) -> None:
        self.shape = e.shape
        self.pm = pm
        self.columns: tuple[str, ...] = (*columns, *PERF_COLUMNS)
        self.filters = tuple(filters)
        self._width = len(e.columns)
        self._index = {c: i for i, c in enumerate(self.columns)}
        self._constant = filter_constants(e.shape)

    def rows(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        shape, pm, width = self.shape, self.pm, self._width
        w = pm.workload
        for full in rows:
            lay = Layout(full[:width], shape)
            cfg = lay.config
            e = pm.estimate(
                Parallel.from_resolved(cfg, lay.derived),
                dwdp=int(cfg.get("dwdp_size") or 1) > 1,
            )
            ttft, tpot = w.published(e.ttft_ms, e.tpot_ms)
            ext = (
                *full,
                e.concurrency,
                _finite(ttft),
                _finite(tpot),
                round(e.tokens_per_s_gpu, 1),
                round(e.tokens_per_s_user, 1),
                e.meets_sla,
                e.source,
            )
            if self.filters and not all(
                evaluate(f, RowEnv(ext, self._index, self._constant)) for f in self.filters
            ):
                continue
            yield ext


def _finite(x: float) -> float | None:
    """A latency as published (`Workload.published`), or None where there is none (a
    layout that does not fit): the JSON writer printed its NaN as `NaN`, which is not JSON,
    and `--sort` ordered it anywhere. None is `null` in JSON, empty in CSV, sorts last and
    fails every ordering in --where (`ttft_ms` is optional to the filters, as `plan
    --format json` writes null)."""
    return x if math.isfinite(x) else None
