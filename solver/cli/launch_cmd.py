"""`meshsat launch -- <launch command>`: the SGLang plugin's check for any release.

Releases before SGLang's plugin framework (and launchers it does not hook, such as a
`docker run` line) get the same judgement from outside: the command is judged exactly as
the plugin judges SGLang's arguments (`launch_guard`), then replaced by the command itself
(`os.execvp`: same process id, signals, environment and exit status as running it bare).

Unlike the plugin (whose hook runs just before SGLang's parser, which then says it), the
wrapper also judges the flags as `validate` does (`with_flag_checks`): a flag no recorded
release's parser takes is CMD-UNKNOWN-FLAG, an error that stops the launch in `enforce`
mode; one only another release takes is a warning line. Either way the verdict is the one
`validate` gives the same command.

"Running it bare" includes the signals: Python starts with SIGPIPE and SIGXFSZ ignored, and
`exec` keeps an ignored disposition, so they are set back to the default first (as
`subprocess` does with `restore_signals`); a `yes | head -1` in the command then ends as it
does from a shell, not with "Broken pipe" and exit 1.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Annotated, Any

import typer

from meshsat.sglang_plugin import MODE_VARIABLE, Mode, mode_from_env
from meshsat.solver.cli.formats import FormatOpt, OutputFormat, chosen, emit
from meshsat.solver.cli.launch_checks import with_flag_checks
from meshsat.solver.cli.layout_options import JsonOpt
from meshsat.solver.errors import InputError
from meshsat.solver.integrations.launch_guard import judge_words
from meshsat.solver.packs import known_versions

CommandArg = Annotated[
    list[str],
    typer.Argument(
        metavar="COMMAND",
        help="The launch command, after `--`, exactly as it would be run.",
        show_default=False,
    ),
]
ModeOpt = Annotated[
    Mode | None,
    typer.Option(
        "--mode",
        help=f"enforce: an invalid layout is not launched (exit 1); warn: say so and launch; "
        f"off: launch without a check. Default: ${MODE_VARIABLE}, else enforce.",
        show_default=False,
    ),
]
VersionOpt = Annotated[
    str,
    typer.Option(
        "--sglang-version",
        "-V",
        metavar="VERSION",
        help=f"SGLang release whose rules apply: {', '.join(known_versions())}, or 'installed' "
        "(the SGLang in this environment, else the newest pack).",
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Judge and print, but do not run the command."),
]


def launch_cmd(
    command: CommandArg,
    mode: ModeOpt = None,
    sglang_version: VersionOpt = "installed",
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """Check an SGLang launch command's layout, then run it unchanged.

    For SGLang releases without the plugin framework (0.5.23 and later load meshsat's plugin
    by themselves once meshsat is installed). The command is judged on the rules of the
    installed SGLang (--sglang-version to choose): a valid layout prints one line on stderr
    and the command replaces meshsat (same process, environment and exit status); an invalid
    one prints every violated rule and the fixed command, and is not launched. A flag no
    SGLang release takes is refused as `validate` refuses it (CMD-UNKNOWN-FLAG).

    --json (or --format) prints the verdict on stdout instead and runs nothing.

    Exit status: the command's own once it runs; 1 invalid layout (enforce); 2 bad input;
    127 the program cannot be run.

    Examples:

    \b
      meshsat launch -- python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 8
      MESHSAT_SGLANG=warn meshsat launch -- sglang serve --tp 16 --attn-cp-size 2
      meshsat launch --dry-run -- docker run --gpus all lmsysorg/sglang \\
          python3 -m sglang.launch_server --tp 8 --attn-dp-size 2
    """
    if not command:
        raise InputError("give the launch command after --, e.g. meshsat launch -- sglang serve")
    if mode is None:
        mode, problem = mode_from_env()
        if problem is not None:
            raise InputError(problem.replace("; using enforce", ""))
    report_format = chosen(fmt, as_json)
    # --json asks for the verdict and runs nothing, whatever the mode (MESHSAT_SGLANG=off
    # in the environment must not turn a report into a launch).
    if mode is not Mode.off or report_format is not OutputFormat.table:
        verdict = judge_words(command, sglang_version=sglang_version, checks=with_flag_checks)
        if report_format is not OutputFormat.table:
            data = {
                **verdict.report.to_dict(),
                "command": verdict.command,
                "fixed_command": verdict.fixed_command,
                "changes": list(verdict.changes),
            }
            rows = [{"rule": v.rule} for v in verdict.report.violations]
            emit(report_format, data, rows, columns=("rule",))
            raise typer.Exit(0 if verdict.valid or mode is not Mode.enforce else 1)
        for w in verdict.report.warnings:
            sys.stderr.write(f"[meshsat] warning [{w.rule}] {w.message}\n")
        if verdict.valid:
            sys.stderr.write(verdict.summary() + "\n")
        else:
            sys.stderr.write(verdict.message(mode) + "\n")
            if mode is Mode.enforce:
                raise typer.Exit(1)
    if dry_run:
        raise typer.Exit(0)
    sys.stderr.flush()
    sys.stdout.flush()
    restored = _default_signals()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        for sig, before in restored:  # meshsat goes on: Python's own dispositions again
            signal.signal(sig, before)
        sys.stderr.write(f"meshsat: error: cannot run {command[0]}: {exc.strerror}\n")
        raise typer.Exit(127) from None


#: The signals the interpreter ignores at start-up (CPython's `signal_install_handlers`;
#: SIGXFZ exists on some Unixes only): the ones `subprocess` restores for its children.
_PYTHON_IGNORES = ("SIGPIPE", "SIGXFZ", "SIGXFSZ")


def _default_signals() -> list[tuple[signal.Signals, Any]]:
    """Set the signals Python ignored at start back to SIG_DFL, for the command `exec`
    is about to run (an ignored disposition survives `exec`; a handler does not). The
    ones changed, with what they were, so that a failed `exec` can put them back. Others
    ignored by whoever started meshsat (`nohup`'s SIGHUP, a background job's SIGINT) stay
    ignored, as they would for the command run bare."""
    changed: list[tuple[signal.Signals, Any]] = []
    for name in _PYTHON_IGNORES:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            before = signal.signal(sig, signal.SIG_DFL)
        except ValueError:  # not the main thread: signal dispositions cannot be set here
            continue
        changed.append((sig, before))
    return changed
