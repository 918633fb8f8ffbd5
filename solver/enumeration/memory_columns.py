"""Enumerate's memory columns: the weights on the fullest rank, the KV-cache tokens per rank, the
requests of a context length that fit, and whether the layout loads at all, appended to each
row, with the `--where` filters that read them.

Why a stage after the loops rather than rules inside them: the figures are floating-point
arithmetic from the model's config and the GPU (`meshsat.solver.memory`), not conditions SGLang
checks, and a listing without a GPU needs none of them; the loops and Z3 stay integer. The rows pass
through one generated loop of `meshsat.solver.memory.columns` (a cached lookup per row). A filter
that names a memory column is evaluated here, in Python; every other filter still goes into the
generated loops.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.enumeration.where import split_reading
from meshsat.solver.lang.expr import Expr, Field, Named

if TYPE_CHECKING:
    from meshsat.solver.enumeration.layouts import Enumerator, Shape
    from meshsat.solver.memory import MemoryModel

#: The columns, in the order each row gains them.
MEMORY_COLUMNS: tuple[str, ...] = ("weights_gib", "kv_tokens", "max_requests", "fits")

#: How a filter reads them: names beyond the configuration, for `where.parse`.
MEMORY_NAMES: Mapping[str, Field] = MappingProxyType(
    {
        "weights_gib": Field("weights_gib", "float"),
        "kv_tokens": Field("kv_tokens", "int"),
        "max_requests": Field("max_requests", "int"),
        "fits": Field("fits", "bool"),
    }
)


def split_filters(
    texts: Iterable[str], widths: Mapping[str, Named] | None = None
) -> tuple[tuple[str, ...], tuple[Expr, ...]]:
    """The filters the loops take (as written), and those that read a memory column
    (parsed, with the release's derived `widths`); a filter with a syntax error raises
    here with its column."""
    return split_reading(texts, MEMORY_NAMES, MEMORY_NAMES, widths)


def filter_constants(shape: Shape) -> Mapping[str, Any]:
    """What a later stage's filter reads beside the row: the model's facts (a derived width
    such as `shared_tp` depends on them) and the constant config fields."""
    return {**shape.facts, **shape.constant}


class RowEnv(Mapping[str, Any]):
    """One extended row read by name: row positions first, then the constant fields."""

    __slots__ = ("_constant", "_index", "_row")

    def __init__(
        self, row: tuple[Any, ...], index: Mapping[str, int], constant: Mapping[str, Any]
    ) -> None:
        self._row, self._index, self._constant = row, index, constant

    def __getitem__(self, key: str) -> Any:
        i = self._index.get(key)
        return self._row[i] if i is not None else self._constant[key]

    def __iter__(self) -> Iterator[str]:
        return iter({**self._constant, **self._index})

    def __len__(self) -> int:
        return len({**self._constant, **self._index})


class MemoryColumns:
    """Appends the memory columns to an enumerator's rows and keeps those the memory filters
    accept. `columns` names the extended rows' values; `weights_gib` is rounded to 0.01 GiB,
    the precision the memory model claims (public start-up logs agree within about 2 %)."""

    def __init__(self, e: Enumerator, mm: MemoryModel, filters: Sequence[Expr] = ()) -> None:
        shape = e.shape
        # The generated loop appends the four columns itself and rounds once per width key,
        # so an unfiltered stage adds no frame of its own per row. Each row is sized by its
        # own resolved flags, as validate sizes the layout (`MemoryModel.of_layout`).
        self.extend = mm.row_extender(
            shape.config_index,
            shape.constant,
            shape.derived_index,
            weights_digits=2,
            typed=e.base.model_dump(),
            vary=shape.vary,
        )
        self.columns: tuple[str, ...] = (*e.columns, *MEMORY_COLUMNS)
        self.filters = tuple(filters)
        self._index = {c: i for i, c in enumerate(self.columns)}
        self._constant = filter_constants(shape)

    def rows(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        extended = self.extend(rows)
        if not self.filters:
            return extended
        return self._kept(extended)

    def _kept(self, rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        index, constant, filters = self._index, self._constant, self.filters
        for full in rows:
            if all(evaluate(f, RowEnv(full, index, constant)) for f in filters):
                yield full
