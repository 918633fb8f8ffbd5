"""Many threads at once get exactly what one thread gets (issue 13: Z3 is not thread-safe).

The oracle is a sequential run of the same calls in the same process; the threads then
repeat them in a shuffled order, sixteen at a time. Before the process-wide Z3 lock
(`meshsat.solver.backends.z3lock`) this aborted the interpreter ("UNEXPECTED CODE WAS REACHED",
"context mismatch") within a few dozen calls.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from meshsat import solver

_INVALID = [
    {"tp_size": 8, "dp_size": 3, "enable_dp_attention": True, "attn_cp_size": 3},
    {"tp_size": 6, "ep_size": 4, "moe_dp_size": 4},
    {"tp_size": 4, "attn_cp_size": 8, "enable_prefill_cp": True},
]


def _validate(i: int) -> Any:
    report = solver.validate(_INVALID[i % len(_INVALID)])
    return report.to_dict(), report.conflict


def _explain_valid(i: int) -> Any:
    return solver.validate({"tp_size": 2 ** (i % 4)}, explain=True).to_dict()


def _fix(i: int) -> Any:
    # A generous timeout: the lock serialises solving, and a timed-out search could
    # legitimately return a different (non-optimal) answer than the sequential run.
    report = solver.fix(_INVALID[i % len(_INVALID)], gpus=8 * (1 + i % 2), timeout_s=120)
    return report.to_dict()


def _enumerate(i: int) -> Any:
    where = [f"tp >= {1 + i % 3}"]
    return [
        sorted(layout.values.items()) for layout in solver.enumerate(4 * (1 + i % 3), where=where)
    ]


def _count(i: int) -> Any:
    return solver.count(6 + i % 5, vary=["tp_size", "dp_size", "enable_dp_attention"])


_JOBS: list[Callable[[int], Any]] = [_validate, _explain_valid, _fix, _enumerate, _count]


def test_sixteen_threads_match_a_sequential_run() -> None:
    calls = [(job, i) for i in range(8) for job in _JOBS]
    expected = {(job.__name__, i): job(i) for job, i in calls}
    shuffled = calls * 2
    random.Random(13).shuffle(shuffled)
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(
            pool.map(lambda call: (call[0].__name__, call[1], call[0](call[1])), shuffled)
        )
    assert len(results) == len(shuffled)
    for name, i, got in results:
        assert got == expected[(name, i)], (name, i)
