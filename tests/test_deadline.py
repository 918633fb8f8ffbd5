"""`--timeout` (solver/cli/deadline.py): the signal's exception may land inside code that
catches every exception (aiconfigurator-core's, while `plan` estimates); the limit holds
anyway, and the engine never remembers the interruption as its own failure."""

from __future__ import annotations

import time

import pytest

from meshsat.solver.cli.deadline import TimedOut, time_limit
from meshsat.solver.perf import aic
from meshsat.solver.perf.engine_args import EngineArgs


def _swallowing_loop(seconds: float) -> int:
    """Work that catches everything, as a library's retry or fallback loop does."""
    caught = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            sum(range(10_000))
        except Exception:
            caught += 1
    return caught


def test_a_swallowed_deadline_still_ends_the_block() -> None:
    with (
        pytest.raises(TimedOut, match=r"did not finish within --timeout 0\.05 s"),
        time_limit(0.05, "plan"),
    ):
        assert _swallowing_loop(0.3) >= 1  # the first TimedOut was caught in the loop


def test_a_block_that_ends_in_time_is_left_alone() -> None:
    with time_limit(5, "plan"):
        assert _swallowing_loop(0.01) == 0


def test_the_engine_does_not_remember_an_interruption(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("aiconfigurator_core")
    from aiconfigurator_core.sdk import engine

    def interrupted(*a: object, **k: object) -> None:
        raise TimedOut("plan did not finish within --timeout 1 s")

    monkeypatch.setattr(engine.EngineHandle, "compile", staticmethod(interrupted))
    args = EngineArgs(
        "deepseek-ai/DeepSeek-V3", "h200_sxm", "0.5.14", 8, 1, 1, 1, 8,
        "fp8_block", "fp8_block", "float16", "float16",
    )  # fmt: skip
    with pytest.raises(TimedOut):
        aic._handle(args)
    assert args not in aic._FAILED
