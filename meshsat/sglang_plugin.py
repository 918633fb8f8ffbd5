"""meshsat as an SGLang plugin: the launch layout is judged before SGLang reads its arguments.

This module is the entry point SGLang imports in every process that calls `load_plugins()`
(the server, its schedulers, its detokenizer), so it imports only the standard library:
registering costs nothing, and `meshsat.solver` (the rules) is imported only when the hook
runs, in the one process that parses the launch arguments. It lives outside `meshsat.solver`
because importing anything under that package loads the whole rule model first.

SGLang (0.5.23 on) loads every entry point of the group `sglang.srt.plugins` in
`load_plugins()`, which `python -m sglang.launch_server` and `sglang serve` call just before
`prepare_server_args(argv)`; a plugin registers hooks through
`sglang.srt.plugins.hook_registry.HookRegistry`, applied when every plugin has run. meshsat's
entry point (`meshsat = "meshsat.sglang_plugin:register"`, in
pyproject.toml) registers one BEFORE hook on `prepare_server_args`: it receives the very
argument list SGLang is about to parse, judges it (`meshsat.solver.integrations.launch_guard`),
and for an invalid layout prints every violation and the fixed command and exits 1.
`SystemExit` is used on purpose: SGLang logs and swallows an `Exception` from a plugin's
registration, but a hook's exception ends the launch, and `SystemExit` ends it without a
traceback.

Why a line on stderr for a valid layout too: SGLang only logs a plugin that failed to load or
a hook that failed to apply (and its logging is not configured yet at that point), so the
line is the proof that the check ran. `MESHSAT_SGLANG=off` registers nothing and says so.

The hook never stops a launch for a reason of meshsat's own: input it cannot read (SGLang's
parser will say what is wrong) or an internal error is one line, and SGLang goes on.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

#: The environment variable that chooses what an invalid launch does.
MODE_VARIABLE = "MESHSAT_SGLANG"
#: The launchers, as the fixed command spells them.
LAUNCH_SERVER = ("python", "-m", "sglang.launch_server")
SERVE = ("sglang", "serve")


class Mode(str, Enum):
    """What an invalid launch does: `enforce` stops it (the default: installing meshsat is
    asking for the check), `warn` prints the same message and launches, `off` checks
    nothing."""

    enforce = "enforce"
    warn = "warn"
    off = "off"


DEFAULT_MODE = Mode.enforce


def mode_from_env(environ: Mapping[str, str] | None = None) -> tuple[Mode, str | None]:
    """The chosen mode and, for a value that is not a mode, a line saying the default is
    used instead (a typo must not switch the check off, nor crash the server)."""
    raw = (os.environ if environ is None else environ).get(MODE_VARIABLE, "").strip().lower()
    if not raw:
        return DEFAULT_MODE, None
    try:
        return Mode(raw), None
    except ValueError:
        choices = "|".join(m.value for m in Mode)
        return DEFAULT_MODE, f"{MODE_VARIABLE}={raw!r} is not {choices}; using {DEFAULT_MODE.value}"


#: The function SGLang parses its arguments with; the hook runs before it.
TARGET = "sglang.srt.server_args.prepare_server_args"
#: Arguments that print help and exit: nothing to judge.
_HELP = frozenset({"-h", "--help"})


def _say(line: str) -> None:
    """One line on stderr, flushed: SGLang's logging is not set up when plugins load."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def register() -> None:
    """The entry point SGLang calls from `load_plugins()`: register the hook (or, with
    `MESHSAT_SGLANG=off`, say that nothing is checked)."""
    mode, problem = mode_from_env()
    # SGLang's schedulers and detokenizer load plugins too (multiprocessing children): only
    # the launching process speaks, once.
    main = multiprocessing.parent_process() is None
    if problem is not None and main:
        _say(f"[meshsat] {problem}")
    if mode is Mode.off:
        if main:
            _say("[meshsat] MESHSAT_SGLANG=off: the launch layout is not checked")
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, before_prepare_server_args, HookType.BEFORE)


def before_prepare_server_args(*args: Any, **kwargs: Any) -> None:
    """The BEFORE hook: judge the arguments `prepare_server_args` was given, stop the
    launch (exit 1) on an invalid layout in `enforce` mode, return None (arguments
    unchanged) otherwise."""
    argv = args[0] if args else kwargs.get("argv")
    if not isinstance(argv, Sequence) or isinstance(argv, str):
        return
    mode, _ = mode_from_env()
    if mode is Mode.off or _HELP & set(argv):
        return
    code = check_arguments(list(argv), mode)
    if code:
        raise SystemExit(code)


def check_arguments(argv: list[str], mode: Mode) -> int:
    """Judge one argument list; print the proof line or the message. The exit status to
    stop with (1), or 0 to go on."""
    from meshsat.solver.errors import InputError
    from meshsat.solver.integrations.launch_guard import judge_argv

    try:
        verdict = judge_argv(_expanded(argv), _launcher())
    except InputError as exc:
        _say(f"[meshsat] the launch arguments were not checked: {exc}")
        return 0
    except Exception as exc:  # meshsat's own failure must never stop a server
        _say(f"[meshsat] internal error, the launch layout was not checked: {exc!r}")
        return 0
    if verdict.valid:
        _say(verdict.summary())
        return 0
    _say(verdict.message(mode))
    return 1 if mode is Mode.enforce else 0


def _launcher() -> tuple[str, ...]:
    """How the server was started, for the fixed command: `sglang serve` or
    `python -m sglang.launch_server`."""
    program = sys.argv[0] if sys.argv else ""
    return SERVE if program.endswith("sglang") else LAUNCH_SERVER


def _expanded(argv: list[str]) -> list[str]:
    """`--config FILE` merged in as SGLang itself merges it (its own merger), so that the
    layout set in the file is judged too."""
    if "--config" not in argv:
        return argv
    import argparse

    from sglang.srt.server_args import ServerArgs
    from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    merged: list[str] = ConfigArgumentMerger(parser).merge_config_with_args(argv)
    return merged
