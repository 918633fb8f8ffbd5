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


def _first(pattern: str, text: str) -> re.Match[str]:
    m = re.search(pattern, text, re.M)
    assert m is not None, pattern
    return m


def test_the_quotes_are_the_comparisons_last_figures() -> None:
    text = (ROOT / SOURCE).read_text()
    # the first table scores every estimable row (a later one each measurement once)
    row = _first(rf"^\| {DEFAULT} \| (\d+) \| ([\d.]+) \| [\d.]+ \| ([\d.]+) \|", text)
    one = _first(
        r"^\| same-GPU-count top-1 >= 70 % \(within one build\) \| (\d+) % \w+ \((\d+)\)", text
    )
    mix = _first(
        r"^\| same-GPU-count top-1 >= 70 % \(across builds\) \| (\d+) % \w+ \((\d+)\)", text
    )
    assert (AGGREGATED.runs, AGGREGATED.ttft_median_pct, AGGREGATED.tpot_median_pct) == (
        int(row[1]),
        float(row[2]),
        float(row[3]),
    )
    assert (AGGREGATED.same_build_top1_pct, AGGREGATED.same_build_groups) == (
        int(one[1]),
        int(one[2]),
    )
    assert (AGGREGATED.across_builds_top1_pct, AGGREGATED.across_builds_groups) == (
        int(mix[1]),
        int(mix[2]),
    )
    dis = _first(
        r"^\| meshsat, leave-one-model-out, complete rows "
        r"\| (\d+) \| ([\d.]+) \| [\d.]+ \| ([\d.]+) \|",
        text,
    )
    groups = _first(
        r"^\| meshsat, leave-one-model-out, all groups \| (\d+) \| \d+ \| (\d+) \(", text
    )
    assert (DISAGG.runs, DISAGG.ttft_median_pct, DISAGG.tpot_median_pct) == (
        int(dis[1]),
        float(dis[2]),
        float(dis[3]),
    )
    assert (DISAGG.groups, DISAGG.groups_within_10pct) == (int(groups[1]), int(groups[2]))


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
