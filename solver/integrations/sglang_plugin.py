"""meshsat as an SGLang plugin: the launch layout is judged before SGLang reads its arguments.

SGLang (0.5.23 on) loads every entry point of the group `sglang.srt.plugins` in
`load_plugins()`, which `python -m sglang.launch_server` and `sglang serve` call just before
`prepare_server_args(argv)`; a plugin registers hooks through
`sglang.srt.plugins.hook_registry.HookRegistry`, applied when every plugin has run. meshsat's
entry point (`meshsat = "meshsat.solver.integrations.sglang_plugin:register"`, in
pyproject.toml) registers one BEFORE hook on `prepare_server_args`: it receives the very
argument list SGLang is about to parse, judges it (`launch_guard`), and for an invalid layout
prints every violation and the fixed command and exits 2. `SystemExit` is used on purpose:
SGLang logs and swallows an `Exception` from a plugin's registration, but a hook's exception
ends the launch, and `SystemExit` ends it without a traceback.

Why a line on stderr for a valid layout too: SGLang only logs a plugin that failed to load or
a hook that failed to apply (and its logging is not configured yet at that point), so the
line is the proof that the check ran. `MESHSAT_SGLANG=off` registers nothing and says so.

The hook never stops a launch for a reason of meshsat's own: input it cannot read (SGLang's
parser will say what is wrong) or an internal error is one line, and SGLang goes on.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from meshsat.solver.integrations.launch_guard import (
    LAUNCH_SERVER,
    SERVE,
    Mode,
    mode_from_env,
)

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
    if problem is not None:
        _say(f"[meshsat] {problem}")
    if mode is Mode.off:
        _say("[meshsat] MESHSAT_SGLANG=off: the launch layout is not checked")
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register(TARGET, before_prepare_server_args, HookType.BEFORE)


def before_prepare_server_args(*args: Any, **kwargs: Any) -> None:
    """The BEFORE hook: judge the arguments `prepare_server_args` was given, stop the
    launch (exit 2) on an invalid layout in `enforce` mode, return None (arguments
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
    stop with (2), or 0 to go on."""
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
