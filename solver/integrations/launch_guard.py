"""One judgement of an SGLang launch, shared by the SGLang plugin and `meshsat launch`.

A server that is going to be rejected should be rejected before it loads weights or takes
GPUs, with everything that is wrong at once and a command that works: SGLang stops at its
first error, and some of its checks (heads, experts) run only after the model is built. So
the launch's own words are read (the same reader as `validate --sglang`), judged on the pack
of the installed release, and for an invalid layout the nearest fix (`meshsat fix`) is
written back into the user's command (`validate --rewrite`), every other word kept.

A visible-devices list in the process's environment (`CUDA_VISIBLE_DEVICES`,
`ASCEND_RT_VISIBLE_DEVICES`) shorter than the local GPU ids its ranks take stops it too
(JOB-VISIBLE-DEVICES, as `validate` says on the same command): the rank past the list
fails in `set_device`, after the others have loaded their weights; the fix is fitted to
the list, as `meshsat fix` fits it.

Only the rules SGLang itself enforces stop a launch (errors of the pack). meshsat's advice
is not judged, nor the model's memory (that needs the GPU, which is not touched here). Flags
the release's parser would refuse are left to SGLang by the plugin, whose hook runs just
before that parser; `meshsat launch` passes `checks` (the CLI's `with_flag_checks`) and so
refuses, as `validate` does, a flag no recorded release takes (CMD-UNKNOWN-FLAG, a typo such
as `--enable-dp-atention`) before it runs anything.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from meshsat.sglang_plugin import LAUNCH_SERVER, MODE_VARIABLE, Mode
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.accelerator import (
    CUDA_VISIBLE_DEVICES_ENV,
    VISIBLE_DEVICES_ENV,
    assume_node_size,
    infer_platform,
    is_ascend_env,
)
from meshsat.solver.inputs.convert import config_from_values
from meshsat.solver.inputs.launch import LaunchCommand, Word
from meshsat.solver.inputs.layout_input import (
    LayoutInput,
    LayoutSources,
    _model_from_path,
    load_layout,
)
from meshsat.solver.inputs.sglang_cmdline import ENV_FACTS, parse_launch
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.validation.report import Report
from meshsat.solver.validation.validate import validate

#: Rules whose hint is the whole fix (a flag to correct by hand): no layout search for them.
_HAND_FIXED = frozenset({"CMD-UNKNOWN-FLAG"})

#: A further judgement of the loaded launch beyond the pack's rules (`meshsat launch`'s
#: flag checks, which live with the CLI's).
Checks = Callable[[Report, LayoutInput], Report]


@dataclass(frozen=True)
class Verdict:
    """What meshsat found in one launch command."""

    valid: bool
    #: The SGLang release whose pack judged (the installed one's, or the newest).
    version: str
    #: The launch as judged, shell-quoted.
    command: str
    report: Report
    #: The user's command with the nearest valid layout written in (None when valid, or
    #: when no fix was found).
    fixed_command: str | None
    #: One line per changed field of the fix: "tp_size: 8 -> 4".
    changes: tuple[str, ...]
    #: Milliseconds spent reading and judging (the fix, on an invalid layout, excluded).
    judge_ms: float

    def summary(self) -> str:
        """One line for a valid layout: the proof that the check ran, and what it saw."""
        d = self.report.derived
        widths = " ".join(
            f"{k}={d[k]}" for k in ("attn_tp", "attn_dp", "moe_tp", "gpus_used") if k in d
        )
        return (
            f"[meshsat] launch layout valid for SGLang {self.version} ({widths}; "
            f"checked in {self.judge_ms:.2f} ms)"
        )

    def message(self, mode: Mode) -> str:
        """Every violated rule, the fixed command, and how to launch anyway."""
        n = len(self.report.violations)
        stop = (
            "stopping the launch before any GPU or model work"
            if mode is Mode.enforce
            else "launching anyway (MESHSAT_SGLANG=warn)"
        )
        lines = [
            f"[meshsat] SGLang {self.version} rejects this layout ({n} rule(s) violated); {stop}."
        ]
        for v in self.report.violations:
            lines.append(f"  [{v.rule}] {v.message}" + (f" ({v.detail})" if v.detail else ""))
            if v.hint:
                lines.append(f"      hint: {v.hint}")
        if self.fixed_command is not None:
            lines.append("  nearest valid layout (meshsat fix): " + ", ".join(self.changes))
            lines.append("  fixed command:")
            lines.append("    " + self.fixed_command)
        elif any(v.rule not in _HAND_FIXED for v in self.report.violations):
            lines.append("  no valid layout near this one; run `meshsat fix --sglang ...` for why")
        if mode is Mode.enforce:
            lines.append(
                f"  ({MODE_VARIABLE}=warn launches anyway; {MODE_VARIABLE}=off skips the check)"
            )
        return "\n".join(lines)


def judge_words(
    words: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    sglang_version: str | Pack | None = "installed",
    with_fix: bool = True,
    checks: Checks | None = None,
) -> Verdict:
    """Judge one launch command given as words (`python -m sglang.launch_server --tp 8`,
    `sglang serve ...`, or anything `validate --sglang` reads, such as `docker run ...`).

    `environ` supplies the SGLang environment variables that change the layout (those a
    process would inherit); they are read as if they prefixed the command, which the
    reader passes on only where the server inherits them: not into `docker run`'s
    container (its own `-e NAME=value` only) nor over `ssh`. `checks` judges the loaded
    launch further (`meshsat launch`: the flags its release's parser refuses)."""
    started = time.perf_counter()
    pack = get_pack(sglang_version)
    env = _layout_env(environ)
    text = shlex.join([*(f"{k}={v}" for k, v in env), *words])
    layout = load_layout(LayoutSources(sglang=text), catalogue=_catalogue, release=pack.version)
    return _judged(layout, pack, started, shlex.join(words), with_fix, checks)


def judge_argv(
    argv: Sequence[str],
    launcher: Sequence[str] = LAUNCH_SERVER,
    *,
    environ: Mapping[str, str] | None = None,
    sglang_version: str | Pack | None = "installed",
    with_fix: bool = True,
) -> Verdict:
    """Judge SGLang's own argument list (what `prepare_server_args` receives), as launched
    by `launcher`.

    The words are already split, so no shell is parsed: the flag reader gets them as they
    are (the shell parser's tables cost about a second to build, more than a server may
    spend here)."""
    started = time.perf_counter()
    pack = get_pack(sglang_version)
    env = _layout_env(environ)
    words: list[Word] = []
    pos = len(shlex.join(launcher)) + 1
    for word in argv:
        quoted = shlex.quote(word)
        words.append(Word(word, pos, None, pos + len(quoted)))
        pos += len(quoted) + 1
    launch = LaunchCommand(1, " ".join(launcher), env, tuple(words))
    parsed = parse_launch(launch)
    spec, source = None, None
    if parsed.model_path is not None:
        spec, source, _ = _model_from_path(parsed.model_path, _catalogue)
    script = shlex.join([*launcher, *argv])
    values = dict(parsed.values)
    infer_platform(values, parsed.ascend_signs)  # as load_layout does: without --device
    assume_node_size(values)  # as load_layout does: an npu launch's node, when none is listed
    layout = LayoutInput(
        config_from_values(values), spec, model_source=source, script=script, launch=launch
    )
    return _judged(layout, pack, started, script, with_fix)


#: Each platform's visible-devices list: the node size, and JOB-VISIBLE-DEVICES.
_LISTS = frozenset((VISIBLE_DEVICES_ENV, CUDA_VISIBLE_DEVICES_ENV))


def _layout_env(environ: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    env = os.environ if environ is None else environ
    read = (var for var in env if var in ENV_FACTS or var in _LISTS or is_ascend_env(var))
    return tuple((var, env[var]) for var in read)


def _lists_devices(launch: LaunchCommand) -> bool:
    """Whether the launch's environment lists its devices: only then is the placement
    module loaded (about 20 ms of imports on a cold start)."""
    return any(var in _LISTS for var, _ in launch.env)


def _catalogue(repo_id: str) -> Mapping[str, Any]:
    from meshsat.solver.memory.models import model_config

    return model_config(repo_id)


def _judged(
    layout: LayoutInput,
    pack: Pack,
    started: float,
    command: str,
    with_fix: bool,
    checks: Checks | None = None,
) -> Verdict:
    report = validate(layout.config, layout.model, explain=False, sglang_version=pack)
    launch = layout.launch
    if launch is not None and _lists_devices(launch):  # JOB-VISIBLE-DEVICES
        from meshsat.solver.deployment.visible import visible_violations

        short = visible_violations([launch], report.resolved, pack.version)
        if short:
            report = replace(report, valid=False, violations=(*report.violations, *short))
    if checks is not None:
        report = checks(report, layout)
    judge_ms = (time.perf_counter() - started) * 1e3
    # A refused flag alone leaves the layout to fix as it is: no search, the hint says it.
    layout_wrong = any(v.rule not in _HAND_FIXED for v in report.violations)
    fixed, changes = (None, ()) if not layout_wrong or not with_fix else _fixed(layout, pack)
    return Verdict(report.valid, pack.version, command, report, fixed, changes, judge_ms)


def _fixed(layout: LayoutInput, pack: Pack) -> tuple[str | None, tuple[str, ...]]:
    """The user's command with the nearest valid layout written in, keeping the GPU count
    when any layout can (fix's first tier)."""
    from meshsat.solver.backends.render import fmt_value
    from meshsat.solver.deployment.visible import fit_to_list
    from meshsat.solver.inputs.rewrite import rewrite_script
    from meshsat.solver.repair.fix import fix

    # A visible-devices list too short for the ranks is where the operator put the server:
    # the layout is fitted to it, as `meshsat fix` does.
    launch = layout.launch
    listed = fit_to_list(layout.config, [launch], pack.version) if launch is not None else None
    config, gpus = (layout.config, None) if listed is None else listed[:2]
    try:
        report = fix(config, layout.model, gpus=gpus, sglang_version=pack, timeout_s=10.0)
    except InputError:
        return None, ()
    if not report.fixes or layout.script is None:
        return None, ()
    best = report.best
    text, _ = rewrite_script(
        layout.script, best.config, attn_dp_spelling="attn_dp_size" not in pack.absent_fields
    )
    changes = tuple(f"{c.field}: {fmt_value(c.old)} -> {fmt_value(c.new)}" for c in best.changes)
    return text.strip(), changes
