"""benchmarks/timing.py, the timers and table layout every bench script shares.

Timers are checked against a fake clock that ticks once per read, so what is timed (and
what is not: the warm-up) is counted exactly, with no wall-clock assertion. The table
layout is checked against the two layouts the bench scripts printed before they shared it
(bench_validate's left-justified rows, bench_enumerate's right-justified table under a rule
of dashes), kept here as the reference.
"""

from __future__ import annotations

import statistics

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.timing import aligned, interleaved_medians, median_seconds, percentile, timed


class _Clock:
    """A fake clock: time moves only when a timed function spends it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> float:
        self.now += seconds
        return seconds


def test_warm_up_calls_are_made_but_not_timed() -> None:
    clock = _Clock()
    costs = iter([100.0, 200.0, 3.0, 1.0, 2.0])  # two warm-up calls, then three timed
    runs = timed(lambda: clock.spend(next(costs)), 3, warmup=2, clock=clock)
    assert runs.seconds == [3.0, 1.0, 2.0] and runs.median == 2.0
    assert runs.result == 2.0  # what the last call returned
    costs = iter([7.0, 5.0, 9.0])
    assert median_seconds(lambda: clock.spend(next(costs)), 3, clock=clock) == 7.0


def test_interleaved_medians_time_each_in_turn() -> None:
    clock = _Clock()
    order: list[str] = []
    cost = {"a": [50.0, 1.0, 2.0, 3.0], "b": [50.0, 10.0, 30.0, 20.0]}

    def run(name: str) -> None:
        order.append(name)
        clock.spend(cost[name].pop(0))

    fns = {name: (lambda name=name: run(name)) for name in cost}
    medians = interleaved_medians(fns, 3, warmup=1, clock=clock)
    assert order == ["a", "b", "a", "b", "a", "b", "a", "b"]
    assert medians == {"a": 2.0, "b": 20.0}


def _print_rows(rows: list[list[str]]) -> str:
    """bench_validate's layout, as it was."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _ruled(header: list[str], rows: list[list[str]]) -> str:
    """bench_enumerate's layout, as it was."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, ["-" * w for w in widths], *rows]
    )


cells = st.text(alphabet="ab µ×.-", max_size=6)


@given(
    st.integers(1, 4).flatmap(
        lambda k: st.lists(st.lists(cells, min_size=k, max_size=k), min_size=1, max_size=5)
    )
)
def test_aligned_is_both_layouts_the_benches_printed(rows: list[list[str]]) -> None:
    assert aligned(rows) == _print_rows(rows)
    assert aligned(rows, right=True, rule=True) == _ruled(rows[0], rows[1:])


@given(st.lists(st.floats(0, 1e3), min_size=1, max_size=30), st.sampled_from([0.5, 0.95, 0.99]))
def test_percentile_is_a_value_at_its_rank(values: list[float], q: float) -> None:
    p = percentile(values, q)
    below = sum(v <= p for v in values)
    assert p in values and below >= q * (len(values) - 1)
    if q == 0.5 and len(values) % 2:
        assert p == statistics.median(values)
