"""One output path: data on stdout (text or JSON), diagnostics on stderr."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

# Rich assumes 80 columns when stdout is not a terminal, which truncates the 8-GPU group grid
# and wraps violation tables in logs; 120 fits both. COLUMNS still wins when set.
_PIPE_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120


class _Console(Console):
    """A rich console whose closed pipe means "the reader had enough": exit 0.

    Rich's own handler exits 1, which for meshsat means "invalid layout".
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        raise SystemExit(0)


out = _Console(highlight=False, soft_wrap=False, width=_PIPE_WIDTH)
err = _Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, allow_nan=False, default=str) + "\n")


#: Notes held back while `meshsat` runs a command: an exit 2 must be exactly one
#: `meshsat: error:` line on stderr, so notes are printed only once the command did not
#: fail on its input (`meshsat.solver.cli.main` flushes or drops them). None: print at once.
_held: list[str] | None = None


def hold_notes() -> None:
    global _held
    _held = []


def release_notes(show: bool) -> None:
    """Print (or, after an input error, drop) the held notes and stop holding."""
    global _held
    held, _held = _held or [], None
    if show:
        for text in held:
            note(text)


def quant_note(not_checked: str | None) -> None:
    """Say that a checkpoint's quantized weight shapes go unchecked (QUANT-NOT-CHECKED):
    `enumerate` and `plan` list layouts without it, so the gap must not be silent."""
    if not_checked is not None:
        note(f"weight shapes not checked: {not_checked}")


def note(text: str) -> None:
    """One diagnostic line; `text` may quote user input, so it is never read as markup."""
    if _held is not None:
        _held.append(text)
        return
    err.print(f"[dim]note:[/dim] {escape(text)}", markup=True)
