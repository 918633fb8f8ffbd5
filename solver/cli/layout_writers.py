"""Streaming output of layout rows: table, JSON lines, CSV, one JSON array.

Enumeration can list millions of layouts, and `json.dumps` on a dict per row costs
more than generating the row. Rows are taken `CHUNK` at a time and formatted by one
generated loop (`row_format.compile_lines`): a row costs one cache lookup per column and
one f-string, and the stream gets one `writelines` per `BATCH` rows. Output is
flushed after the first row and then at least every `FLUSH_S` seconds (checked once
per chunk), so the first lines appear at once even in a pipe. A JSON array cut short
(`--timeout`, Ctrl-C) is closed after its last whole row before the error propagates, so
what was written still parses, as JSON lines and CSV do line by line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import IO, Any

from meshsat.solver.backends.render import fmt_value
from meshsat.solver.cli.output import output_dropped
from meshsat.solver.cli.printable import printable
from meshsat.solver.cli.row_format import compile_lines, csv_text, framed, json_text
from meshsat.solver.enumeration.space import ALIASES
from meshsat.solver.lang.fields import SPECS

FLUSH_S = 0.2
#: Rows formatted per generated call (and between two looks at the clock).
CHUNK = 256
#: Rows held before one write to the stream.
BATCH = 4096
FORMATS = ("table", "jsonl", "csv", "json")

#: Short table headers: the alias of a field where one exists, the one other name --where,
#: --sort and --vary take; any other column is headed by its own name (`dp_attn` and
#: `prefill_cp` headed columns no option took).
_SHORT = {field: alias for alias, field in ALIASES.items()}


class Writer:
    """Writes rows (tuples) as one format, streaming, and counts what it wrote."""

    def __init__(
        self,
        fmt: str,
        names: Sequence[str],
        picks: Sequence[int],
        stream: IO[str],
        on_flush: Callable[[int], None] | None = None,
        widths: Sequence[int] | None = None,
    ) -> None:
        self.fmt, self.names, self.stream = fmt, tuple(names), stream
        self.picks = tuple(picks)
        self.on_flush = on_flush
        self.written = 0
        self.head = ""
        self.tail = ""
        #: What comes before every line but the first (the JSON array's comma).
        self.separator = ""
        last = len(names) - 1
        if fmt in ("jsonl", "json"):
            if fmt == "json":
                self.head, self.separator, self.tail = "[\n", ",\n", "\n]\n"
            end = "}\n" if fmt == "jsonl" else "}"
            keys = [json.dumps(n) + ": " for n in names]
            self.pieces = [
                framed(
                    json_text,
                    (self.separator + "{" if k == 0 else ", ") + key,
                    end if k == last else "",
                )
                for k, key in enumerate(keys)
            ]
            self.blank = self.separator + "{" + end
        elif fmt == "csv":
            self.head = ",".join(csv_text(n) for n in names) + "\n"
            self.pieces = [
                framed(csv_text, "", "\n" if k == last else ",") for k in range(len(names))
            ]
            self.blank = "\n"
        elif fmt == "table":
            headers = [_SHORT.get(n, n) for n in names]
            sizes = [
                max(len(h), w) for h, w in zip(headers, widths or [0] * len(names), strict=True)
            ]
            cells = "  ".join(f"%{w}s" for w in sizes)
            self.head = (cells % tuple(headers)).rstrip() + "\n"
            self.head += (cells % tuple("-" * w for w in sizes)).rstrip() + "\n"
            self.pieces = [_cell(size, "\n" if k == last else "  ") for k, size in enumerate(sizes)]
            self.blank = "\n"
        else:  # pragma: no cover - the CLI restricts the choice
            raise ValueError(f"unknown format {fmt!r}")

    def write_all(self, rows: Iterable[tuple[Any, ...]]) -> int:
        stream = self.stream
        it = iter(rows)
        first = list(islice(it, 1))
        if not first:
            if self.fmt == "json":
                stream.write("[]\n")
            elif self.fmt in ("csv", "table"):
                stream.write(self.head)
            stream.flush()
            self.written = 0
            return 0
        # Compiled for the rows' width, which the first row tells (all rows share it).
        lines = compile_lines(len(first[0]), self.picks, self.pieces, self.blank)
        stream.write(self.head + lines(first)[len(self.separator) :])
        stream.flush()
        n = 1
        buf: list[str] = []
        held = 0
        last = time.monotonic()
        try:
            while chunk := list(islice(it, CHUNK)):
                buf.append(lines(chunk))
                n += len(chunk)
                held += len(chunk)
                if held >= BATCH or time.monotonic() - last > FLUSH_S:
                    # Chunk by chunk: joining them first would copy every byte once more.
                    pending, buf = buf, []
                    stream.writelines(pending)
                    stream.flush()
                    held = 0
                    last = time.monotonic()
                    if self.on_flush is not None:
                        self.on_flush(n)
                    if output_dropped():  # nobody reads on; some layout exists: answered
                        self.written = n
                        return n
        except BaseException:
            if self.fmt == "json" and not output_dropped():
                stream.write(self.tail)
                stream.flush()
            raise
        stream.writelines(buf)
        stream.write(self.tail)
        stream.flush()
        self.written = n
        return n


def _cell(size: int, after: str) -> Callable[[Any], str]:
    """A table cell: the value's text right-aligned to `size` (as `%<size>s` pads it)."""
    return lambda value: printable(fmt_value(value)).rjust(size) + after


def column_width(name: str, gpus: int) -> int:
    """How wide a table column must be for any value it can hold."""
    spec = SPECS.get(name)
    if spec is not None and spec.choices:
        return max(len(fmt_value(c)) for c in spec.choices)
    if spec is not None and spec.kind == "bool":
        return 5
    if spec is not None and spec.kind == "enum":
        return 12
    return len(str(gpus))
