"""`--format json|jsonl|csv|table` for every command, with `--json` kept as its alias.

One meaning everywhere: `table` is the human view (the default); `json` one indented
document; `jsonl` one compact JSON value per line (the rows of a listing, or the whole
answer on one line for validate/fix/groups); `csv` the rows of the answer with a header.
JSON is always standard JSON (`allow_nan=False`): inputs reject non-finite numbers, so
a NaN reaching output is a bug that must fail loudly rather than print `NaN`.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Annotated, Any

import typer

from meshsat.solver.cli.printable import printable
from meshsat.solver.errors import InputError


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    jsonl = "jsonl"
    csv = "csv"


FormatOpt = Annotated[
    OutputFormat | None,
    typer.Option(
        "--format",
        "-f",
        help="Output: table (default), json, jsonl (one value per line) or csv.",
        show_default=False,
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Show every note about SGLang's silent changes, also those that change "
        "nothing you can see.",
    ),
]


def chosen(fmt: OutputFormat | None, as_json: bool) -> OutputFormat:
    """The format asked for; `--json` is `--format json`."""
    if as_json and fmt not in (None, OutputFormat.json):
        raise InputError(
            f"--json means --format json; it cannot be combined with --format {fmt.value}"
        )
    if fmt is not None:
        return fmt
    return OutputFormat.json if as_json else OutputFormat.table


def _text(value: Any) -> Any:
    """One CSV cell; text is `printable` (a CSV is read in terminals too); booleans as the
    listings write them (`row_format.csv_text`: `true`/`false`, not Python's `True`); a
    number with no value (an estimate the engine could not make) empty."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return printable(" ".join(str(v) for v in value))
    if isinstance(value, Mapping):
        return json.dumps(value, allow_nan=False, default=str)
    if isinstance(value, float) and not math.isfinite(value):
        return ""  # no value, as JSON's null says it (`nan` read back is a number)
    return printable(value) if isinstance(value, str) else value


def write_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> None:
    """Rows as CSV on stdout, one dialect for every command (`\\n` line ends, cells as
    `_text` makes them); the columns are `columns`, else every key in order of appearance."""
    if columns is None:
        seen: dict[str, None] = {}
        for row in rows:
            seen.update(dict.fromkeys(row))
        columns = list(seen)
    writer = csv.DictWriter(sys.stdout, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _text(v) for k, v in row.items()})


def emit(
    fmt: OutputFormat,
    document: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    *,
    listing: bool = False,
    columns: Sequence[str] | None = None,
) -> None:
    """Write `document` (json), `rows` (csv; jsonl for a listing) or the document on one
    line (jsonl for a single answer). `table` is each command's own view. `columns`: the
    CSV header, written when there is no row too (a reader of a valid layout's CSV gets
    the header, not an empty file it cannot parse)."""
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(document, indent=2, allow_nan=False, default=str) + "\n")
    elif fmt is OutputFormat.jsonl:
        values: Sequence[Any] = rows if listing else [document]
        for value in values:
            sys.stdout.write(json.dumps(value, allow_nan=False, default=str) + "\n")
    elif fmt is OutputFormat.csv:
        write_csv(rows, columns)
    else:  # pragma: no cover - callers print their own table
        raise ValueError("the table format is each command's own view")
