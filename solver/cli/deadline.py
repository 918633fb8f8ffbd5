"""`--timeout` for commands whose work is Python loops rather than Z3 calls (enumerate).

Z3 honours a timeout itself (fix); a generated enumeration loop does not, so the
command line arms a real-time interval timer whose signal raises `TimedOut` inside
the loop, and again when the block ends if something in it swallowed the first. Signals
reach only the main thread: elsewhere (a server calling `main` from a worker) the limit is
not enforced, and the API has no timeout to begin with.
"""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from meshsat.solver.errors import MeshsatError
from meshsat.solver.lang.limits import MAX_TIMEOUT_S


class TimedOut(MeshsatError):
    """The command ran past its --timeout (exit 2, one line)."""


def checked_timeout(seconds: float | None) -> float | None:
    """`--timeout S` as every command reads it (capped at `MAX_TIMEOUT_S`), or None; one
    line for a value that is not a positive number (the web app reads it too)."""
    if seconds is None:
        return None
    if not (isinstance(seconds, int | float) and seconds > 0 and not math.isnan(seconds)):
        raise MeshsatError(f"--timeout must be a positive number of seconds, got {seconds}")
    return min(float(seconds), MAX_TIMEOUT_S)


@contextmanager
def time_limit(seconds: float | None, what: str) -> Iterator[None]:
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    limit = checked_timeout(seconds)
    assert limit is not None

    message = f"{what} did not finish within --timeout {seconds:g} s"
    fired = False

    def expire(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        fired = True
        raise TimedOut(message)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if fired:
        # The signal raised inside code that caught it (a library's `except Exception`:
        # aiconfigurator-core's own, while `plan` estimates) and the block went on: its
        # result is past the deadline, and may be a fallback the exception caused.
        raise TimedOut(message)
