"""What a launch script says beyond its layout, as report entries: nodes of one job that
disagree (errors: the job would hang or shard wrongly, though each node's SGLang starts) and
flags the chosen release's parser would refuse (`CMD-UNKNOWN-FLAG`, since SGLang exits on
them before it looks at the layout: an error when no recorded release takes them, as a typo;
else, a flag of another release the command may have been written for, a warning, an error
with `--strict`). Rules that read a value the launch leaves unknown (a shell expansion) are
not decided (`undecided`)."""

from __future__ import annotations

from dataclasses import replace

from meshsat.solver.cli.layout_options import missing_flags_text
from meshsat.solver.deployment.visible import visible_violations
from meshsat.solver.inputs.layout_input import LayoutInput
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
    """`report` with what `validate` (without --strict) says of the launch's flags: an
    error for one no recorded release's parser takes, a warning for one only another
    release takes. Why `meshsat launch` needs it: the layout check alone passed
    `--enable-dp-atention` and ran a command SGLang exits on, which `validate` refuses."""
    errors, warnings = flag_findings(layout, strict=False)
    return _with(report, errors, warnings)


def flag_findings(layout: LayoutInput, *, strict: bool) -> tuple[list[Violation], list[Violation]]:
    """The launch's refused flags as (errors, warnings): `unstartable` always an error; a
    flag another recorded release takes a warning, an error with `strict`."""
    errors: list[Violation] = []
    warnings: list[Violation] = []
    refused = unstartable(layout)
    if refused is not None:
        errors.append(refused)
    elsewhere = missing_flags_text(layout, everywhere=False)
    if elsewhere is not None:
        flag = Violation(
            "CMD-UNKNOWN-FLAG",
            elsewhere,
            (),
            "",
            "remove or correct the flag (SGLang's parser exits on it), or run the release "
            "that takes it",
            "SGLang's argument parser",
            severity="error" if strict else "warning",
        )
        (errors if strict else warnings).append(flag)
    return errors, warnings


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
    """The launch's flags (and values) that no recorded release's parser takes, as an
    error (`CMD-UNKNOWN-FLAG`), with or without --strict: a typo such as
    `--moe-a2a-backend deepepp` starts on no SGLang, whichever release runs it. None when
    there are none. `fix` and `--rewrite` edit only the layout, so they say it too."""
    text = missing_flags_text(layout, everywhere=True)
    if text is None:
        return None
    return Violation(
        "CMD-UNKNOWN-FLAG",
        text,
        (),
        "",
        "correct or remove the flag by hand: SGLang's parser exits on it",
        "SGLang's argument parser",
        severity="error",
    )


def launch_violations(report: Report, layout: LayoutInput) -> list[Violation]:
    """What `validate` refuses in the launch beyond a valid layout's `report` (its nodes,
    its LeaderWorkerSet, its visible devices): `groups` shows a layout's groups, and exits
    1 with these as `validate` does (the CLI and the web API alike)."""
    checked = with_launch_checks(report, layout, strict=False).violations
    return [v for v in checked if v not in report.violations]
