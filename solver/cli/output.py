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

Several threads may run `meshsat.solver.cli.main` at once, each with its own streams: a
run's streams and held notes live in a context variable (`_run`), and while any run is
under way `sys.stdout`/`sys.stderr`/`sys.stdin` are `_Routed` proxies that send each call to
the streams of the run in the caller's context (a thread outside every run gets the
streams the proxies replaced). So the commands, click and rich keep writing to `sys.stdout`
and need no stream passed through them.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
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


@dataclass
class _Run:
    """One `main` call's streams (stdout and stderr guarded) and the notes it holds back
    (None: a note is printed at once)."""

    stdin: TextIO
    stdout: _Guarded
    stderr: _Guarded
    held: list[str] | None = None


_run: ContextVar[_Run | None] = ContextVar("meshsat_cli_run", default=None)

_STREAMS = ("stdin", "stdout", "stderr")


class _Routed:
    """`sys.stdin`/`sys.stdout`/`sys.stderr` while any run is under way: every call goes to
    the stream of the run in the caller's context, else to the stream this one replaced."""

    def __init__(self, name: str, replaced: TextIO) -> None:
        self.name = name
        self.replaced = replaced

    def target(self) -> TextIO:
        run = _run.get()
        return self.replaced if run is None else cast(TextIO, getattr(run, self.name))

    def write(self, text: str) -> int:
        return self.target().write(text)

    def flush(self) -> None:
        self.target().flush()

    def __iter__(self) -> Iterator[str]:
        return iter(self.target())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target(), name)


_routing_lock = threading.Lock()
_runs_under_way = 0


def _current(name: str) -> TextIO:
    """The stream a new run defaults to: the caller's own (not a proxy)."""
    stream = getattr(sys, name)
    return stream.target() if isinstance(stream, _Routed) else cast(TextIO, stream)


@contextmanager
def guarded_streams(
    stdin: TextIO | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> Iterator[None]:
    """Run a command on these streams (the caller's standard streams by default), stdout
    and stderr guarded (see `_Guarded`), in the caller's context only."""
    global _runs_under_way
    run = _Run(
        stdin or _current("stdin"),
        _Guarded(stdout or _current("stdout")),
        _Guarded(stderr or _current("stderr")),
    )
    with _routing_lock:
        if _runs_under_way == 0:
            for name in _STREAMS:
                stream = getattr(sys, name)
                if not isinstance(stream, _Routed):
                    setattr(sys, name, _Routed(name, stream))
        _runs_under_way += 1
    token = _run.set(run)
    try:
        yield
    finally:
        _run.reset(token)
        with _routing_lock:
            _runs_under_way -= 1
            if _runs_under_way == 0:
                for name in _STREAMS:
                    stream = getattr(sys, name)
                    if isinstance(stream, _Routed):  # else someone replaced it meanwhile
                        setattr(sys, name, stream.replaced)


def output_dropped() -> bool:
    """Whether stdout reaches nobody any more (its reader left, or writes fail): a listing
    stops here; its exit status is decided by what it already wrote."""
    run = _run.get()
    return run is not None and run.stdout.dropped


def finish_output() -> None:
    """Flush stdout; a failed write (now or earlier) is an `OutputError`."""
    sys.stdout.flush()
    run = _run.get()
    if run is not None and run.stdout.error is not None:
        raise OutputError(f"cannot write output: {run.stdout.error}")


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


#: Notes are held back while `meshsat` runs a command: an exit 2 must be exactly one
#: `meshsat: error:` line on stderr, so notes are printed only once the command did not
#: fail on its input (`meshsat.solver.cli.main` flushes or drops them).


def hold_notes() -> None:
    """Hold the notes of the run in this context (see `guarded_streams`)."""
    run = _run.get()
    if run is not None:
        run.held = []


def release_notes(show: bool) -> None:
    """Print (or, after an input error, drop) the held notes and stop holding."""
    run = _run.get()
    if run is None:
        return
    held, run.held = run.held or [], None
    if show:
        for text in held:
            note(text)


#: Where a warning raised in this context goes, as a note line (None: where it went before).
_warning_sink: ContextVar[Callable[[str], None] | None] = ContextVar(
    "meshsat_warning_sink", default=None
)
_hook_lock = threading.Lock()
_shown_before: Any = None


def _show(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """`warnings.showwarning` once a context asked for its warnings as notes."""
    sink = _warning_sink.get()
    if sink is None:
        _shown_before(message, category, filename, lineno, file, line)
    else:
        sink(warning_note(message, category))


@contextmanager
def warnings_to(sink: Callable[[str], None]) -> Iterator[None]:
    """Warnings raised in this context go to `sink` as one note line each (`warning_note`),
    elsewhere where they went before.

    Why a process-wide hook that reads a context variable rather than
    `warnings.catch_warnings`: that swaps process-wide state, which concurrent runs (CLI
    threads, server requests) would undo for one another. The hook is put back if
    something else (a test harness) replaced it meanwhile."""
    global _shown_before
    with _hook_lock:
        if warnings.showwarning is not _show:
            _shown_before = warnings.showwarning
            warnings.showwarning = _show
    token = _warning_sink.set(sink)
    try:
        yield
    finally:
        _warning_sink.reset(token)


def warnings_as_notes() -> AbstractContextManager[None]:
    """Warnings are notes on the command line, not `file:line: Warning:` lines with source:
    meshsat's own (`MeshsatWarning`: which pack stands in for the installed SGLang) as they
    are, a library's (matplotlib drawing `--plot`) named by its category. Like every note
    they are one line, and dropped when the command fails on its input (exit 2 is one
    line)."""
    return warnings_to(note)


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
    run = _run.get()
    if run is not None and run.held is not None:
        run.held.append(text)
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
