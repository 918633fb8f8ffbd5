"""What the oracle-answer tests assert of a report: SGLang's verdict, and where it refuses,
its first error's words and the step that raised it (the tables each test file holds were
recorded from the real release)."""

from __future__ import annotations

from typing import Any

from fidelity.compare import model
from meshsat.solver import validate
from meshsat.solver.lang.config import Config
from meshsat.solver.validation.report import Report


def assert_sglang_answer(report: Report, error: str | None, step: str | None) -> None:
    """`report` says what SGLang said: valid where it accepted, else its first violation
    starts with SGLang's message and names the step that raised it."""
    assert report.valid == (error is None), report.violations
    if error is not None:
        first = report.violations[0]
        assert first.message.startswith(error), first.message
        assert first.source == step


def rule_ids(config: dict[str, Any], name: str, version: str) -> list[str]:
    """The violated rules of `config` on the fidelity model `name` in `version`, in order."""
    report = validate(Config(**config), model(name), explain=False, sglang_version=version)
    return [v.rule for v in report.violations]
