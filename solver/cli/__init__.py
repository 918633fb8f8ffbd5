"""The `meshsat` command line: one typer app, each command in its own module.

Exit codes: 0 success (valid), 1 the answer is negative (invalid layout, no fix),
2 bad input, 130 interrupted. Errors are one line on stderr, never a traceback; option
errors the CLI framework finds are the same one line (no usage box). Output into a
closed pipe (`meshsat rules | head -1`) ends quietly with 0: the reader had enough.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

import typer

from meshsat.solver.cli.diff_cmd import diff_cmd
from meshsat.solver.cli.enumerate_cmd import enumerate_cmd
from meshsat.solver.cli.fix_cmd import fix_cmd
from meshsat.solver.cli.groups_cmd import groups_cmd
from meshsat.solver.cli.launch_cmd import launch_cmd
from meshsat.solver.cli.plan_cmd import plan_cmd
from meshsat.solver.cli.rules_cmd import fields_cmd, rules_cmd
from meshsat.solver.cli.serve_cmd import serve_cmd
from meshsat.solver.cli.typer_threads import install as _install_thread_safe_adapters
from meshsat.solver.cli.validate_cmd import validate_cmd
from meshsat.solver.errors import MeshsatError

_install_thread_safe_adapters()
app = typer.Typer(
    name="meshsat",
    help="Which SGLang parallel layouts are legal, why yours is rejected, and the nearest "
    "one that works.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: paragraphs of the docstrings are re-flowed to the terminal width
    # (rich mode keeps their hard line breaks, so they wrapped twice).
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)
app.command("validate")(validate_cmd)
app.command("fix")(fix_cmd)
app.command("enumerate")(enumerate_cmd)
app.command("groups")(groups_cmd)
app.command("plan")(plan_cmd)
app.command("rules")(rules_cmd)
app.command("fields")(fields_cmd)
app.command("diff")(diff_cmd)
app.command("serve")(serve_cmd)
# The launch command's own words follow the first positional word untouched.
app.command(
    "launch", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)(launch_cmd)


def _degrade_streams() -> None:
    """On a terminal or pipe that is not UTF-8 (`PYTHONIOENCODING=ascii`, `LC_ALL=C`),
    characters it cannot show are escaped instead of raising UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        reconfigure = getattr(stream, "reconfigure", None)
        if encoding != "utf8" and reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _fail(message: str) -> None:
    from meshsat.solver.cli.output import err

    line = " ".join(message.split())  # one line, whatever the message holds
    err.print(f"meshsat: error: {line}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(2)


def _pipe_closed() -> None:
    """A write that bypassed the guarded streams (the framework's own help) met a closed
    pipe: the reader had enough of a listing; exit 0."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(0)


def main(
    argv: list[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> None:
    """Console entry point: run the app, turning every input error into one line, exit 2
    (`SystemExit` carries the exit status, as for the console script).

    Notes are held until the command ends and dropped on an exit 2, so that an input
    error is exactly one line on stderr. The streams (the standard ones unless given) are
    guarded for the run (`output.guarded_streams`): a reader that leaves does not change
    the exit status, a failed write is one line and exit 2; the last flush happens here,
    before the notes. Threads may call `main` at once, each with its own streams: the
    streams, the held notes and where warnings go are the calling context's own.
    """
    from meshsat.entry import reopen_closed_streams
    from meshsat.solver.cli.output import (
        OutputError,
        finish_output,
        guarded_streams,
        hold_notes,
        release_notes,
        warnings_as_notes,
    )

    reopen_closed_streams()
    with guarded_streams(stdin, stdout, stderr), warnings_as_notes():
        hold_notes()
        code: Any = 2
        failure: str | None = None
        try:
            try:
                _run(argv)
            except SystemExit as exc:
                code = exc.code
            try:
                finish_output()
            except OutputError as exc:
                failure = str(exc)
        finally:
            release_notes(show=failure is None and code != 2)
        if failure is not None:
            _fail(failure)
        sys.exit(code)


def _run(argv: list[str] | None) -> None:
    from typer import exceptions as typer_errors
    from typer._click import exceptions as click_errors
    from typer._click.utils import PacifyFlushWrapper

    _degrade_streams()
    try:
        code: Any = app(args=argv, prog_name="meshsat", standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:
        sys.stdout.write(exc.format_message() + "\n")
        sys.exit(0)
    except click_errors.ClickException as exc:
        _fail(exc.format_message())
    except typer_errors.Abort:
        sys.exit(130)
    except MeshsatError as exc:
        _fail(str(exc))
    except RecursionError:
        _fail("the input is nested too deeply")
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        _pipe_closed()
    except SystemExit as exc:
        # The framework turns a broken pipe into exit 1 after wrapping the streams.
        if isinstance(sys.stdout, PacifyFlushWrapper) and exc.code == 1:
            _pipe_closed()
        raise
    sys.exit(code if isinstance(code, int) else 0)
