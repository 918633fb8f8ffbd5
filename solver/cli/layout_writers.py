"""Streaming output of layout rows: table, JSON lines, CSV, one JSON array.

Enumeration can list millions of layouts, and `json.dumps` on a dict per row costs
more than generating the row. Column values come from small finite sets, so each
column keeps a cache from value to its encoded text, and a line is one `%` format
of a compiled template: a few hundred nanoseconds instead of microseconds. Output is
flushed after the first row and then at least every `FLUSH_S` seconds, so the first
lines appear at once even in a pipe.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any

from solver.backends.render import fmt_value
from solver.enumeration.space import ALIASES
from solver.lang.fields import SPECS

FLUSH_S = 0.2
BATCH = 4096
FORMATS = ("table", "jsonl", "csv", "json")

#: Short table headers: the alias of a field where one exists.
_SHORT = {
    **{field: alias for alias, field in ALIASES.items()},
    "enable_dp_attention": "dp_attn",
    "enable_prefill_cp": "prefill_cp",
}


class _Encoded(dict[Any, str]):
    """Value → text, filled on first sight of each value."""

    def __init__(self, encode: Callable[[Any], str]) -> None:
        super().__init__()
        self.encode = encode

    def __missing__(self, value: Any) -> str:
        text = self[value] = self.encode(value)
        return text


def _csv_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if any(ch in text for ch in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _formatter(template: str, picks: Sequence[int], encoders: Sequence[_Encoded]) -> Any:
    """`line(row) -> str` for this template, compiled so a row costs one `%`."""
    args = ", ".join(f"e{k}[r[{i}]]" for k, i in enumerate(picks))
    src = f"def line(r):\n    return T % ({args}{',' if len(picks) == 1 else ''})\n"
    namespace: dict[str, Any] = {"T": template, **{f"e{k}": e for k, e in enumerate(encoders)}}
    exec(compile(src, "<meshsat:row-format>", "exec"), namespace)
    return namespace["line"]


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
        self.on_flush = on_flush
        self.written = 0
        self.head = ""
        self.tail = ""
        self.separator = ""
        if fmt in ("jsonl", "json"):
            keys = [json.dumps(n) for n in names]
            body = "{" + ", ".join(f"{k}: %s" for k in keys) + "}"
            encoders = [_Encoded(json.dumps) for _ in names]
            if fmt == "jsonl":
                self.line = _formatter(body + "\n", picks, encoders)
            else:
                self.line = _formatter(body, picks, encoders)
                self.head, self.separator, self.tail = "[\n", ",\n", "\n]\n"
        elif fmt == "csv":
            self.head = ",".join(_csv_text(n) for n in names) + "\n"
            encoders = [_Encoded(_csv_text) for _ in names]
            self.line = _formatter(",".join("%s" for _ in names) + "\n", picks, encoders)
        elif fmt == "table":
            headers = [_SHORT.get(n, n) for n in names]
            sizes = [
                max(len(h), w) for h, w in zip(headers, widths or [0] * len(names), strict=True)
            ]
            cells = "  ".join(f"%{w}s" for w in sizes)
            self.head = (cells % tuple(headers)).rstrip() + "\n"
            self.head += (cells % tuple("-" * w for w in sizes)).rstrip() + "\n"
            encoders = [_Encoded(fmt_value) for _ in names]
            self.line = _formatter(cells + "\n", picks, encoders)
        else:  # pragma: no cover - the CLI restricts the choice
            raise ValueError(f"unknown format {fmt!r}")

    def write_all(self, rows: Iterable[tuple[Any, ...]]) -> int:
        stream, line, sep = self.stream, self.line, self.separator
        buf: list[str] = []
        last = time.monotonic()
        first = True
        n = 0
        for row in rows:
            if first:
                stream.write(self.head + line(row))
                stream.flush()
                first = False
                n = 1
                continue
            buf.append(sep + line(row) if sep else line(row))
            n += 1
            if len(buf) >= BATCH or (n & 255 == 0 and time.monotonic() - last > FLUSH_S):
                stream.write("".join(buf))
                stream.flush()
                buf.clear()
                last = time.monotonic()
                if self.on_flush is not None:
                    self.on_flush(n)
        if first:
            if self.fmt == "json":
                stream.write("[]\n")
            elif self.fmt in ("csv", "table"):
                stream.write(self.head)
        else:
            stream.write("".join(buf) + self.tail)
        stream.flush()
        self.written = n
        return n


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
