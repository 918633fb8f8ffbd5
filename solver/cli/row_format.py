"""Row tuples to text, a batch at a time: the inner loop of every streamed listing.

Why generated code: a listing can hold millions of rows, and the per-row cost of the
obvious `json.dumps(dict(zip(names, row)))` (several µs) is more than generating the row.
Column values come from small finite sets, so each column keeps a plain dict from value to
the whole piece of line it stands for (key, value text, separator), and one generated loop
turns a batch of rows into text: each row is unpacked into locals and becomes one f-string
of one dict lookup per column, with no Python call, `%` template parse or dict building
per row. A value not seen before raises KeyError out of the loop; the handler fills in the
failing row's new values, writes that row and resumes the same iterator at the next one,
so no row is formatted twice and the common path reads exact dicts, whose lookups CPython
specialises. On enumerate's 20-column rows (DeepSeek-V3 with the memory columns) that is
about 0.75-0.95 µs a row, against 1.6-2 µs for one call per row of a `%` template over the
same cached texts. A dict subclass with `__missing__` instead of the KeyError costs about
10 ns more per column and row, more than the misses do even for the memory columns'
hundreds of values (22 ms against 18.5 ms for the 19,570 rows of 4096 GPUs).

A value's text is what the format's reference encoder writes (`json_text` is exactly
`json.dumps(value)`; `tests/test_row_format.py` holds the lines to `json.dumps` of each
row's dict on generated rows), so the fast path cannot drift from them unnoticed. Values
are cached by equality, so a column must not hold values that are equal yet written
differently (`True` and `1`, `1` and `1.0`, `-0.0` and `0.0`): enumerated columns have
one type each (plus None) and no negative zero.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring_ascii
from types import CodeType
from typing import Any

from meshsat.solver.cli.printable import printable

#: A compiled batch formatter: the rows' lines, concatenated.
Lines = Callable[[Sequence[tuple[Any, ...]]], str]


def json_text(value: Any) -> str:
    """`json.dumps(value)` (default settings), without the encoder set-up per call for the
    scalar types rows hold; anything else goes to `json.dumps` itself."""
    kind = type(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return json.dumps(value)


def csv_text(value: Any) -> str:
    """One CSV cell: empty for None, lower-case booleans, quoted when it must be, control
    characters as escapes (`printable`: a CSV is read in terminals too)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = printable(str(value))
    if any(ch in text for ch in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


@functools.lru_cache(maxsize=64)
def _code(source: str) -> CodeType:
    """Compiled once per shape of row and choice of columns: compiling costs about a
    millisecond, as much as formatting a thousand rows."""
    return compile(source, "<meshsat:row-format>", "exec")


def framed(encode: Callable[[Any], str], before: str, after: str) -> Callable[[Any], str]:
    """`encode` with fixed text on either side: one column's piece of a line."""
    return lambda value: before + encode(value) + after


def compile_lines(
    width: int, picks: Sequence[int], pieces: Sequence[Callable[[Any], str]], blank: str = ""
) -> Lines:
    """`lines(rows) -> str`: for each row (a tuple of `width` values), the concatenation of
    `pieces[k](row[picks[k]])` over k, each piece cached per value; rows joined. Without
    columns each row is `blank`. `rows` is a list or tuple: a KeyError out of iterating it
    would be taken for a value not seen yet."""
    if len(picks) != len(pieces):
        raise ValueError("one piece per picked column")
    if not picks:
        return lambda rows: blank * len(rows)
    if width < 1 or not all(0 <= i < width for i in picks):
        raise ValueError(f"picks {list(picks)} outside rows of {width} values")
    # Unpacking into locals beats indexing the tuple per column; a row of another width
    # fails loudly (ValueError) rather than printing the wrong values.
    target = ", ".join(f"c{i}" for i in range(width)) + ","
    line = "".join(f"{{e{k}[c{i}]}}" for k, i in enumerate(picks))
    learn = "".join(
        f"        if c{i} not in e{k}:\n            e{k}[c{i}] = p{k}(c{i})\n"
        for k, i in enumerate(picks)
    )
    source = (
        "def lines(rows):\n"
        "    out = []\n"
        "    append = out.append\n"
        "    it = iter(rows)\n"
        "    while True:\n"
        "        try:\n"
        f"            for ({target}) in it:\n"
        f"                append(f'{line}')\n"
        "            return ''.join(out)\n"
        "        except KeyError:\n"
        "            pass\n"
        # The row that missed is still in the locals: learn its new values, write it, and
        # go on with the rows after it.
        f"{learn}"
        f"        append(f'{line}')\n"
    )
    namespace: dict[str, Any] = {f"e{k}": {} for k in range(len(picks))}
    namespace.update({f"p{k}": piece for k, piece in enumerate(pieces)})
    exec(_code(source), namespace)
    lines: Lines = namespace["lines"]
    return lines
