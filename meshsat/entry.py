"""The command line's first code: it must run before rich, typer and pydantic load.

A Ctrl-C while those imports run (a few hundred milliseconds) would otherwise print a
KeyboardInterrupt traceback; a closed standard stream would crash the modules that read it at
import time. Both are settled here, with nothing imported but the standard library, and then
the CLI is loaded (`meshsat.solver.cli`).

Three ways in share this: the `meshsat` console script and `python -m meshsat` call `main`;
`python -m meshsat.solver.cli` imports `meshsat.solver` (pydantic) before its `__main__`
runs, so `meshsat/__init__.py` calls `settle` itself when, and only when, the interpreter
was started as `python -m meshsat...` (a library import never touches the signal handler).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

#: The SIGINT handler `settle` replaced (None: not replaced), given back once the CLI loaded.
_replaced: list[Any] = []


def reopen_closed_streams() -> None:
    """`meshsat ... >&-` leaves sys.stdout None: point it at /dev/null so that the answer is
    still the exit status (output nobody can read is dropped, as a closed pipe's is)."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115


def _interrupted(signum: int, frame: object) -> None:
    os._exit(130)


def settle() -> None:
    """Exit 130, silently, on Ctrl-C until the CLI is loaded; reopen closed streams."""
    if not _replaced:
        _replaced.append(signal.signal(signal.SIGINT, _interrupted))
    reopen_closed_streams()


#: The modules `python -m` runs as the command line (`meshsat.cp.demo` and other tools that
#: are no CLI keep Python's Ctrl-C: they clean up their own processes).
_CLI_MODULES = frozenset(
    ("meshsat", "meshsat.__main__", "meshsat.solver.cli", "meshsat.solver.cli.__main__")
)


def run_as_module() -> bool:
    """Whether this interpreter was started as `python -m meshsat` (or the CLI's own module):
    Python sets argv[0] to "-m" while it imports the module's parent packages."""
    if sys.argv[:1] != ["-m"]:
        return False
    args = iter(getattr(sys, "orig_argv", ())[1:])
    for arg in args:
        if arg == "-m":
            module = next(args, "")
        elif arg.startswith("-m"):
            module = arg[2:]
        else:
            continue
        return module in _CLI_MODULES
    return False


def main() -> None:
    """Settle start-up, load the CLI, give Ctrl-C back to Python (the CLI turns it into exit
    130 for the rest of the run) and run it."""
    settle()
    from meshsat.solver.cli import main as cli_main

    before = _replaced.pop()
    signal.signal(signal.SIGINT, signal.default_int_handler if before is None else before)
    try:
        cli_main()
    except KeyboardInterrupt:  # between the CLI's own handlers (its set-up, its last flush)
        sys.exit(130)
