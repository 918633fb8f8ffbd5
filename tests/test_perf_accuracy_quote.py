"""What `plan` quotes of its accuracy is what the measured-run comparison last wrote
(benchmarks/RESULTS-perf.md): a re-run that moves a figure fails here until the quote
moves with it, and `plan` says it in text, CSV notes and JSON."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from meshsat.solver.perf.accuracy import AGGREGATED, DISAGG, SOURCE
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = re.escape("meshsat default (AIC steps, + EP all-to-all with EP), leave-one-model-out")


def _figures(pattern: str, text: str) -> tuple[float, ...]:
    """The numbers `pattern`'s groups capture in the first line it matches."""
    m = re.search(pattern, text, re.M)
    assert m is not None, pattern
    return tuple(float(g) for g in m.groups())


def test_the_quotes_are_the_comparisons_last_figures() -> None:
    text = (ROOT / SOURCE).read_text()
    top1 = r"^\| same-GPU-count top-1 >= 70 % \({}\) \| (\d+) % \w+ \((\d+)\)"
    # the first table scores every estimable row (a later one each measurement once)
    a = AGGREGATED
    assert (a.runs, a.ttft_median_pct, a.tpot_median_pct) == _figures(
        rf"^\| {DEFAULT} \| (\d+) \| ([\d.]+) \| [\d.]+ \| ([\d.]+) \|", text
    )
    assert (a.same_build_top1_pct, a.same_build_groups) == _figures(
        top1.format("within one build"), text
    )
    assert (a.across_builds_top1_pct, a.across_builds_groups) == _figures(
        top1.format("across builds"), text
    )
    d = DISAGG
    assert (d.runs, d.ttft_median_pct, d.tpot_median_pct) == _figures(
        r"^\| meshsat, leave-one-model-out, complete rows "
        r"\| (\d+) \| ([\d.]+) \| [\d.]+ \| ([\d.]+) \|",
        text,
    )
    assert (d.groups, d.groups_within_10pct) == _figures(
        r"^\| meshsat, leave-one-model-out, all groups \| (\d+) \| \d+ \| (\d+) \(", text
    )


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_plan_says_how_far_its_estimates_were_from_measured_runs(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["plan", "--model", "Qwen/Qwen3-32B", "--gpu", "H100", "--gpus", "2", "--top", "1"]
    run = run_cli(capsys, *args, *(["--format", "json"] if fmt == "json" else []))
    assert run.code == 0, run.err
    if fmt == "json":
        assert json.loads(run.out)["accuracy"] == asdict(AGGREGATED)
    else:
        assert f"note: {AGGREGATED.text()}" in run.err.replace("\n", " ")
