"""Threads calling the CLI's `main` at once, each with its own streams, get what one call gets.

The oracle is a serial run of the same argument lists in this process (after one warm-up
round, since a stand-in pack is said once per process); the threads then repeat them,
shuffled, eight at a time. What is compared is everything a user sees: the exit status,
stdout and stderr (held notes, an input error's one line, a failed write's one line).
"""

from __future__ import annotations

import io
import random
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

from meshsat.solver.cli import main
from meshsat.solver.cli.output import warnings_to
from meshsat.solver.errors import MeshsatWarning

#: A flag an older release takes (0.4.6.post5): a warning note on 0.5.23, held until the
#: command's output (a flag no release takes is `fix`'s verdict instead, said once).
LAUNCH = "python -m sglang.launch_server --enable-ep-moe"
CALLS: list[tuple[str, ...]] = [
    ("validate", "--set", "tp_size=8", "--set", "dp_size=3", "--set", "enable_dp_attention=1"),
    ("validate", "--set", "tp_size=4", "--json"),
    ("validate", "--set", "tp_size=zero"),  # exit 2, one line
    ("fix", "--sglang", f"{LAUNCH} --tp 6 --ep 4", "--gpus", "8"),  # a held note, then output
    ("fix", "--sglang", f"{LAUNCH} --tp 6", "--gpus", "0"),  # its held note is dropped
    ("enumerate", "--gpus", "8", "--format", "csv"),
    ("enumerate", "--gpus", "6", "--where", "tp > 8"),  # exit 1 with a note
    ("enumerate", "--gpus", "4", "--where", "tp >"),
    ("groups", "--set", "tp_size=4", "--set", "dp_size=2"),
    ("rules", "--json"),
]


class _Full(io.StringIO):
    """A stdout on a full disk."""

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")


def _run(args: tuple[str, ...], full: bool = False) -> tuple[int, str, str]:
    out = _Full() if full else io.StringIO()
    err = io.StringIO()
    try:
        main(list(args), stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    return code, "" if full else out.getvalue(), err.getvalue()


def test_threads_running_main_match_a_serial_run() -> None:
    calls = [(args, False) for args in CALLS] + [(CALLS[1], True), (CALLS[5], True)]
    for args, full in calls:
        _run(args, full)
    streams = sys.stdin, sys.stdout, sys.stderr
    expected = {call: _run(*call) for call in calls}
    assert {expected[c][0] for c in calls} == {0, 1, 2}
    assert expected[(CALLS[1], True)][2].startswith("meshsat: error: cannot write output")
    assert "note:" in expected[(CALLS[3], False)][2] and expected[(CALLS[4], False)][0] == 2
    shuffled = calls * 3
    random.Random(3).shuffle(shuffled)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda call: (call, _run(*call)), shuffled))
    for call, got in results:
        assert got == expected[call], call
    assert (sys.stdin, sys.stdout, sys.stderr) == streams  # the routing is taken down


def test_warnings_go_to_the_context_that_raised_them() -> None:
    sinks: list[list[str]] = [[] for _ in range(8)]
    together = threading.Barrier(len(sinks))

    def warn(i: int) -> None:
        with warnings_to(sinks[i].append):
            together.wait()
            for k in range(20):
                warnings.warn(f"thread {i} warning {k}", MeshsatWarning, stacklevel=1)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        threads = [threading.Thread(target=warn, args=(i,)) for i in range(len(sinks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for i, sink in enumerate(sinks):
        assert sink == [f"thread {i} warning {k}" for k in range(20)]


def test_typer_adapter_building_is_safe_across_threads() -> None:
    """typer sets and deletes PYDANTIC_DISABLE_PLUGINS around each adapter it builds; two
    threads inside at once deleted it twice (KeyError in the run above, once in several
    `.ci/run`s). Forced overlap: 16 threads enter and leave it 30 times, pausing inside."""
    import os
    import time

    from typer import _adapters

    import meshsat.solver.cli  # noqa: F401  (installs the lock)

    errors: list[BaseException] = []
    before = os.environ.get("PYDANTIC_DISABLE_PLUGINS")

    def enter_many() -> None:
        try:
            for _ in range(30):
                with _adapters.disabled_pydantic_plugins():
                    time.sleep(0.0002)
        except BaseException as exc:  # the race surfaces as a KeyError here
            errors.append(exc)

    workers = [threading.Thread(target=enter_many) for _ in range(16)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert os.environ.get("PYDANTIC_DISABLE_PLUGINS") == before
