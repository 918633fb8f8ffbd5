"""One process-wide re-entrant lock around every use of Z3.

Why: z3py keeps one global context (`z3.main_ctx()`), and Z3 contexts are not
thread-safe. Two threads building terms or solving in it at once abort the process
("UNEXPECTED CODE WAS REACHED", "context mismatch", segmentation faults). The module
caches (fix's `Problem`, the explainer, the enumerators' completion tables) hold Z3
objects of that context, so every call that touches them must be serialised.

The alternative, one `z3.Context` per thread, was rejected after measuring (see
`benchmarks/bench_threads.py`): every cache would have to be kept per thread (a fix
problem costs a cold build of hundreds of milliseconds per thread and per GPU count,
the explainer likewise), z3py's API would have to be threaded with `ctx=` through
every encoder, and the 2-core machines this runs on gain little from Z3 running in
parallel. Measured (2 cores): a cold fix problem costs 66 ms against 12 ms warm, a cold
explainer 117 ms against 6 ms warm, so per-thread caches would cost every new thread
more than it could win; 64 mixed calls take the same time from 16 locked threads as
sequentially (0.99x). The lock costs about 160 ns uncontended, and only calls that
need Z3 take it: `validate` of a valid layout, `check` and the compiled enumeration
loops never do. The lock is re-entrant so that a locked API call may call another.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

#: Held by whoever is building Z3 terms, solving, or reading Z3 models.
Z3_LOCK = threading.RLock()


def z3_locked(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` runs holding `Z3_LOCK` (for API functions and Z3-backed callables)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with Z3_LOCK:
            return fn(*args, **kwargs)

    return wrapper
