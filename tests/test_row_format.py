"""The generated row formatters against the reference encoders they replace.

`meshsat enumerate` formats rows with generated code and per-column text caches
(`meshsat.solver.cli.row_format`); these tests hold every format to what the plain encoders
write (`json.dumps` of the row's dict, the CSV cell rule, `%<width>s` table cells), on
generated rows and across chunk and batch boundaries, so the fast path cannot drift.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from meshsat.solver.backends.render import fmt_value
from meshsat.solver.cli.layout_writers import BATCH, CHUNK, Writer
from meshsat.solver.cli.printable import printable
from meshsat.solver.cli.row_format import compile_lines, csv_text, json_text

#: One type per column, as enumerated rows have (a column may also hold None): values of
#: one column must not be equal yet written differently (True == 1 == 1.0, -0.0 == 0.0),
#: see `meshsat.solver.cli.row_format`. `+ 0.0` turns -0.0 into 0.0.
_SCALARS = (
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda x: x + 0.0),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["none", "zigzag", "in-seq-split", "deepep"]),
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[int], list[tuple[Any, ...]]]:
    """(names, picks, rows): rows of a fixed width, some columns picked (in any order)."""
    width = draw(st.integers(min_value=1, max_value=8))
    kinds = [draw(st.sampled_from(_SCALARS)) for _ in range(width)]
    optional = [draw(st.booleans()) for _ in range(width)]
    columns = [st.none() | k if o else k for k, o in zip(kinds, optional, strict=True)]
    rows = draw(st.lists(st.tuples(*columns), max_size=40))
    picks = draw(st.lists(st.integers(min_value=0, max_value=width - 1), min_size=1, max_size=8))
    names = draw(
        st.lists(st.text(min_size=1, max_size=10), min_size=len(picks), max_size=len(picks))
    )
    return names, picks, rows


def _written(fmt: str, names: list[str], picks: list[int], rows: list[tuple[Any, ...]]) -> str:
    stream = io.StringIO()
    widths = [len(fmt_value(v)) for v in rows[0]] if rows else None
    Writer(fmt, names, picks, stream, widths=widths and [widths[i] for i in picks]).write_all(rows)
    return stream.getvalue()


@given(st.one_of(*_SCALARS, st.floats(), st.none()))
def test_json_text_is_json_dumps(value: Any) -> None:
    assert json_text(value) == json.dumps(value)


def test_json_text_edge_values() -> None:
    for value in (0, -0.0, 1e300, 1e-300, math.inf, -math.inf, 'é\x00"\\/\u2028', 10**40):
        assert json_text(value) == json.dumps(value)
    assert json_text(math.nan) == "NaN"


@given(tables())
def test_jsonl_is_json_dumps_of_each_rows_dict(
    table: tuple[list[str], list[int], list[tuple[Any, ...]]],
) -> None:
    names, picks, rows = table
    expected = "".join(
        json.dumps(dict(zip(names, (r[i] for i in picks), strict=True))) + "\n" for r in rows
    )
    # json.dumps of a dict keeps the last of repeated keys; the writer writes each pick.
    if len(set(names)) == len(names):
        assert _written("jsonl", names, picks, rows) == expected
    lines = _written("jsonl", names, picks, rows).splitlines()
    assert len(lines) == len(rows)


@given(tables())
def test_json_is_one_array_of_the_same_objects(
    table: tuple[list[str], list[int], list[tuple[Any, ...]]],
) -> None:
    names, picks, rows = table
    objects = [json.dumps(dict(zip(names, (r[i] for i in picks), strict=True))) for r in rows]
    expected = "[\n" + ",\n".join(objects) + "\n]\n" if rows else "[]\n"
    if len(set(names)) == len(names):
        assert _written("json", names, picks, rows) == expected


@given(tables())
def test_csv_and_table_cells(table: tuple[list[str], list[int], list[tuple[Any, ...]]]) -> None:
    names, picks, rows = table
    head = ",".join(csv_text(n) for n in names) + "\n"
    body = "".join(",".join(csv_text(r[i]) for i in picks) + "\n" for r in rows)
    assert _written("csv", names, picks, rows) == head + body
    out = _written("table", names, picks, rows)
    if rows:
        widths = [len(fmt_value(v)) for v in rows[0]]
        sizes = [max(len(n), widths[i]) for n, i in zip(names, picks, strict=True)]
        cells = "  ".join(f"%{w}s" for w in sizes) + "\n"
        # Table cells are text output: control characters in them are shown as escapes.
        body = "".join(cells % tuple(printable(fmt_value(r[i])) for i in picks) for r in rows)
        assert out.endswith(body)


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "table"])
def test_many_rows_across_chunks_and_batches(fmt: str) -> None:
    """More rows than a batch, with values first seen late (as a long listing has)."""
    n = 2 * BATCH + CHUNK + 3
    rows = [(i % 7, i // 1000, i % 3 == 0, None if i % 5 else "x,y", i / 8) for i in range(n)]
    names, picks = ["a", "b", "c", "d", "e"], [0, 1, 2, 3, 4]
    out = _written(fmt, names, picks, rows)
    if fmt == "jsonl":
        assert out == "".join(json.dumps(dict(zip(names, r, strict=True))) + "\n" for r in rows)
    elif fmt == "json":
        assert json.loads(out) == [dict(zip(names, r, strict=True)) for r in rows]
    elif fmt == "csv":
        assert out.count("\n") == n + 1
    else:
        assert out.count("\n") == n + 2


def test_flushes_as_batches_fill() -> None:
    class Stream(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.flushed: list[int] = []

        def flush(self) -> None:
            self.flushed.append(self.getvalue().count("\n"))

    stream = Stream()
    seen: list[int] = []
    n = 3 * BATCH
    Writer("jsonl", ["a"], [0], stream, on_flush=seen.append).write_all((i,) for i in range(n))
    assert stream.flushed[0] == 1 and stream.flushed[-1] == n
    # At least one flush per batch (more if the clock says so), each after whole chunks.
    assert len(seen) >= n // BATCH - 1 and seen == sorted(seen)
    assert all((k - 1) % CHUNK == 0 for k in seen)


def test_rows_of_another_width_fail_loudly() -> None:
    lines = compile_lines(3, [0, 2], [str, str])
    assert lines([(1, 2, 3)]) == "13"
    with pytest.raises(ValueError):
        lines([(1, 2)])
    with pytest.raises(ValueError):
        compile_lines(2, [0, 2], [str, str])


def test_no_columns() -> None:
    assert _written("jsonl", [], [], [(1,), (2,)]) == "{}\n{}\n"
    assert _written("json", [], [], [(1,), (2,)]) == "[\n{},\n{}\n]\n"


@pytest.mark.parametrize("cut", [1, 5, BATCH + 7, 3 * BATCH + 1])
def test_a_json_array_cut_short_still_parses(cut: int) -> None:
    """`enumerate --timeout` (or Ctrl-C) stops the rows mid-stream: the error still
    propagates, and what was written is a closed array of the rows written whole, in
    order (rows still held in memory are dropped, never half-written)."""

    class Deadline(Exception):
        pass

    def rows() -> Any:
        for i in range(cut):
            yield (i, f"r{i}")
        raise Deadline

    stream = io.StringIO()
    with pytest.raises(Deadline):
        Writer("json", ["n", "s"], [0, 1], stream).write_all(rows())
    got = json.loads(stream.getvalue())
    assert [r["n"] for r in got] == list(range(len(got)))
    assert 1 <= len(got) <= cut and all(r["s"] == f"r{r['n']}" for r in got)
