"""Enumerate's streamed memory columns beside the full memory model, row by row: the
columns (`MemoryModel.row_reader`) are a compiled shortcut of `MemoryModel.of`, and the
memory tests check the one against the other."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from meshsat import solver
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import Memory, MemoryModel, Parallel


def column_rows(
    mm: MemoryModel, gpus: int, spec: ModelSpec, base: Mapping[str, Any] | None = None
) -> Iterator[tuple[tuple[Any, ...], Parallel, Memory]]:
    """Each legal layout on `gpus`: its columns (weights GiB, KV tokens, requests, fits),
    its widths and the memory model's verdict for them."""
    read = None
    for lay in solver.enumerate(gpus, base=base, model=spec):
        if read is None:
            sh = lay.shape
            read = mm.row_reader(sh.config_index, sh.constant, sh.derived_index)
        p = Parallel.from_resolved(lay.config, lay.derived)
        yield tuple(read(lay.row)), p, mm.of(p)
