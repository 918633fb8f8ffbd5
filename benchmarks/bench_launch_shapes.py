"""Pasted launch commands by shape: is each read, as the layout meant, and how fast?

    PYTHONPATH=. .venv/bin/python benchmarks/bench_launch_shapes.py

The corpus is tests/launch_corpus.py (CORPUS: the shapes read before issue 23; SHAPES: a
terminal prompt, `export VAR=1 python3 -m ...`, a bare `${ARGS}`, `<PLACEHOLDER>` values, a
stray `-`, Kubernetes and compose command lists, the bench_* launchers, `--config FILE`, a
shell variable as a choice value). "read" is no error; "layout" is the expected layout; the
time is the median of 5 warm reads, against `shlex.split` of the same text in the same run.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable

from timing import median_seconds

from meshsat.solver.errors import InputError
from meshsat.solver.inputs import parse_sglang_command
from tests.launch_corpus import CORPUS, SHAPES


def _median_us(fn: Callable[[str], object], text: str) -> float:
    def read() -> None:
        with contextlib.suppress(InputError, ValueError):
            fn(text)

    return 1e6 * median_seconds(read, 5)


def main() -> None:
    rows = [("(before) " + str(i), t, lay, None) for i, (t, lay) in enumerate(CORPUS)]
    rows += [(name, t, lay, note) for name, t, lay, note in SHAPES]
    read = layout = 0
    print(f"{'shape':<34}{'read':>6}{'layout':>8}{'µs':>9}{'shlex µs':>10}  note")
    for name, text, want, note in rows:
        try:
            parsed = parse_sglang_command(text)
            ok, same = True, parsed.values == want
            said = next((n for n in parsed.notes if note and note in n), "")
        except InputError as exc:
            ok, same, said = False, False, str(exc)
        read += ok
        layout += same
        if name.startswith("(before)"):
            continue
        print(
            f"{name:<34}{'yes' if ok else 'NO':>6}{'yes' if same else 'NO':>8}"
            f"{_median_us(parse_sglang_command, text):>9.0f}{_median_us(shlex.split, text):>10.0f}"
            f"  {said[:70]}"
        )
    print(
        f"read {read}/{len(rows)}, layout as meant {layout}/{len(rows)} "
        f"({len(CORPUS)} earlier shapes, {len(SHAPES)} of issue 23)"
    )


if __name__ == "__main__":
    main()
