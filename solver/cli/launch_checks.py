"""What a launch script says beyond its layout, as report entries: nodes of one job that
disagree (errors: the job would hang or shard wrongly, though each node's SGLang starts) and
flags the chosen release's parser would refuse (`CMD-UNKNOWN-FLAG`, an error: SGLang exits
on them before it looks at the layout, so "valid" could not promise that the release starts.
A flag another recorded release takes, one of the release the command may have been written
for, is named with those releases and the `-V` that would take it). Rules that read a value
the launch leaves unknown (a shell expansion) are not decided (`undecided`)."""

from __future__ import annotations

from dataclasses import replace

from meshsat.solver.cli.layout_options import missing_flags_text
from meshsat.solver.deployment.visible import visible_violations
from meshsat.solver.inputs.layout_input import LayoutInput
from meshsat.solver.inputs.sglang_cmdline import recorded_releases
from meshsat.solver.validation.job_checks import job_violations, node_violations
from meshsat.solver.validation.report import Report, Violation
from meshsat.solver.validation.undecided import undecided


def with_launch_checks(report: Report, layout: LayoutInput, *, strict: bool) -> Report:
    report = undecided(report, layout.unknown)
    errors = job_violations(layout.job) + node_violations(report, layout.nodes)
    if layout.launch is not None:
        errors += visible_violations([layout.launch], report.resolved, report.sglang_version)
    refused, warnings = flag_findings(layout, strict=strict)
    return _with(report, errors + refused, warnings)


def with_flag_checks(report: Report, layout: LayoutInput) -> Report:
    """`report` with what `validate` says of the launch's flags: an error for each the
    chosen release's parser refuses. Why `meshsat launch` needs it: the layout check alone
    passed `--enable-dp-atention` and ran a command SGLang exits on, which `validate`
    refuses."""
    errors, warnings = flag_findings(layout, strict=False)
    return _with(report, errors, warnings)


def flag_findings(layout: LayoutInput, *, strict: bool) -> tuple[list[Violation], list[Violation]]:
    """The launch's refused flags as (errors, warnings): `unstartable`, an error with or
    without `strict` (kept for the callers: a flag only another release takes was a
    warning without it until QA found `--cuda-graph-max-bs` passed as valid on 0.5.23,
    whose parser exits on it as ambiguous); no warnings."""
    refused = unstartable(layout)
    return ([refused] if refused is not None else []), []


def _with(report: Report, errors: list[Violation], warnings: list[Violation]) -> Report:
    if not errors and not warnings:
        return report
    return replace(
        report,
        valid=report.valid and not errors,
        violations=(*report.violations, *errors),
        warnings=(*report.warnings, *warnings),
    )


def unstartable(layout: LayoutInput) -> Violation | None:
    """The launch's flags (and values) the chosen release's parser refuses, as one error
    (`CMD-UNKNOWN-FLAG`), with or without --strict: a typo such as `--moe-a2a-backend
    deepepp` starts on no SGLang, and a flag of another release (`--cuda-graph-max-bs`, an
    ambiguous prefix on 0.5.23; 0.5.19 takes it) does not start on this one. Such a flag
    is named with the releases that take it and the hint says which `-V` takes them all.
    None when there are none. `fix` and `--rewrite` edit only the layout, so they say it
    too."""
    texts = [missing_flags_text(layout, everywhere=e) for e in (True, False)]
    said = [t for t in texts if t is not None]
    if not said:
        return None
    hint = "correct or remove the flag by hand: SGLang's parser exits on it"
    if texts[0] is None:  # every refused flag is one another recorded release takes
        takers = [set(t) for t in layout.elsewhere.values()]
        common = set.intersection(*takers) if takers else set()
        newest = [r for r in recorded_releases() if r in common][-1:]
        if newest:
            hint += f", or run the release that takes it: pass -V {newest[0]}"
        else:
            hint += ", or run a release that takes it (named with each flag)"
    return Violation(
        "CMD-UNKNOWN-FLAG",
        "; ".join(said),
        (),
        "",
        hint,
        "SGLang's argument parser",
        severity="error",
    )


def launch_violations(report: Report, layout: LayoutInput) -> list[Violation]:
    """What `validate` refuses in the launch beyond a valid layout's `report` (its nodes,
    its LeaderWorkerSet, its visible devices): `groups` shows a layout's groups, and exits
    1 with these as `validate` does (the CLI and the web API alike)."""
    checked = with_launch_checks(report, layout, strict=False).violations
    return [v for v in checked if v not in report.violations]
