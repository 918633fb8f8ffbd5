"""The console script's first code: it must run before rich, typer and pydantic load.

A Ctrl-C while those imports run (a few hundred milliseconds) would otherwise print a
KeyboardInterrupt traceback; a closed standard stream would crash the modules that read it at
import time. Both are settled here, with nothing imported but the standard library, and then
the CLI is loaded (`meshsat.solver.cli`).
"""

from __future__ import annotations

import os
import signal
import sys


def _reopen_closed_streams() -> None:
    """`meshsat ... >&-` leaves sys.stdout None: point it at /dev/null so that the answer is
    still the exit status (output nobody can read is dropped, as a closed pipe's is)."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115


def _interrupted(signum: int, frame: object) -> None:
    os._exit(130)


def main() -> None:
    """Exit 130, silently, on Ctrl-C during start-up; then hand over to the CLI, which
    installs its own handling for the rest of the run."""
    previous = signal.signal(signal.SIGINT, _interrupted)
    _reopen_closed_streams()
    from meshsat.solver.cli import main as cli_main

    signal.signal(signal.SIGINT, previous)
    cli_main()
