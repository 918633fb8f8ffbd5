"""One output path: data on stdout (text or JSON), diagnostics on stderr.

Also what the output does when it cannot be written, in one place for every command:

- a reader that leaves (`meshsat validate ... | head -1`) must not change the answer: the
  rest of the output goes to /dev/null and the command ends as it would have, so its exit
  status is still the verdict (0 valid, 1 invalid); listings stop early (`output_dropped`);
- any other write error (`> /dev/full`, an I/O error) is one `meshsat: error: cannot write
  output: ...` line and exit 2 (`OutputError`), never a traceback or "invalid" (the
  command runs to its end with its output dropped; listings stop early);
- text output echoes user input (a pasted command's flags, values from files), so every
  string the consoles print goes through `printable` (as do table and CSV cells): control
  characters are shown as escapes rather than sent to the user's terminal (JSON escapes
  them itself).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from meshsat.solver.cli.printable import printable
from meshsat.solver.errors import MeshsatError, MeshsatWarning


class OutputError(MeshsatError):
    """Standard output could not be written (disk full, I/O error): exit 2, one line."""


class _Guarded:
    """A standard stream whose write errors are settled here rather than in every command.

    After the first failure the stream's descriptor is pointed at /dev/null (so that what
    is still buffered, and the interpreter's last flush, cannot fail again) and later
    writes are dropped. Nothing is raised through the writer (rich, csv): the command runs
    to its end, a listing stops at its next flush (`output_dropped`), and `finish_output`
    turns a failure other than a closed pipe into `OutputError`. On stderr nothing is left
    to report on, so its failures are only dropped.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.dropped = False
        #: The first failure other than a closed pipe, as the operating system words it.
        self.error: str | None = None

    def write(self, text: str) -> int:
        if not self.dropped:
            try:
                return self.stream.write(text)
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.dropped:
            try:
                self.stream.flush()
            except OSError as exc:
                self._failed(exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def _failed(self, exc: OSError) -> None:
        self.dropped = True
        if not isinstance(exc, BrokenPipeError):
            self.error = exc.strerror or str(exc)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
            self.stream.flush()  # what was buffered goes to /dev/null now
        except (OSError, ValueError):
            pass


@contextmanager
def guarded_streams() -> Iterator[None]:
    """Run a command with both standard streams guarded (see `_Guarded`); restored after."""
    saved = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, _Guarded(saved[0]))
    sys.stderr = cast(TextIO, _Guarded(saved[1]))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def output_dropped() -> bool:
    """Whether stdout reaches nobody any more (its reader left, or writes fail): a listing
    stops here; its exit status is decided by what it already wrote."""
    return isinstance(sys.stdout, _Guarded) and sys.stdout.dropped


def finish_output() -> None:
    """Flush stdout; a failed write (now or earlier) is an `OutputError`."""
    sys.stdout.flush()
    if isinstance(sys.stdout, _Guarded) and sys.stdout.error is not None:
        raise OutputError(f"cannot write output: {sys.stdout.error}")


def _pipe_width() -> int | None:
    """Rich assumes 80 columns when stdout is not a terminal, which truncates the 8-GPU
    group grid and wraps violation tables in logs; 120 fits both. COLUMNS still wins when
    set. A closed stdout (None) is not a terminal."""
    try:
        tty = sys.stdout is not None and sys.stdout.isatty()
    except (OSError, ValueError):
        tty = False
    return None if tty or "COLUMNS" in os.environ else 120


class _Console(Console):
    """A rich console for meshsat: every string it renders is `printable`, and a closed
    pipe does not end the command (rich's own handler exits 1, "invalid layout")."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text), **kwargs)

    def on_broken_pipe(self) -> None:
        """Only reached for a stream that is not guarded: drop the rest of the output."""
        self.quiet = True


out = _Console(highlight=False, soft_wrap=False, width=_pipe_width())
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


@contextmanager
def warnings_as_notes() -> Iterator[None]:
    """Warnings are notes on the command line, not `file:line: Warning:` lines with source:
    meshsat's own (`MeshsatWarning`: which pack stands in for the installed SGLang) as they
    are, a library's (matplotlib drawing `--plot`) named by its category. Like every note
    they are one line, and dropped when the command fails on its input (exit 2 is one
    line)."""
    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        note(warning_note(message, category))

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


def warning_note(message: Warning | str, category: type[Warning]) -> str:
    """A warning as one note line: meshsat's own as it is, a library's named by category
    (also how `meshsat serve` words the warnings of a request)."""
    text = " ".join(str(message).split())
    return text if issubclass(category, MeshsatWarning) else f"{category.__name__}: {text}"


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


def rewritten_out(text: str | None, notes: list[str]) -> int:
    """`--rewrite`'s answer: the notes on stderr, the script on stdout (ending in a
    newline); the exit status, 1 when there is no script (no fix exists)."""
    for line in notes:
        note(line)
    if text is None:
        return 1
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    return 0
