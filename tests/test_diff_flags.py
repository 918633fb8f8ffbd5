"""`meshsat diff A B` lists the flag spellings of a field that came or went between the two
releases' parsers (`fidelity/flags/<version>.json`, each release's own argparse table)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from meshsat.solver.lang.fields import SPECS
from meshsat.solver.packs import get_pack
from meshsat.solver.packs.compare import compare
from tests.cli_helpers import run_cli

FLAGS = Path(__file__).parent.parent / "fidelity" / "flags"
RELEASES = ("0.4.6.post5", "0.5.18", "0.5.19", "0.5.23")


def _options_by_field(version: str) -> dict[str, set[str]]:
    """Each field's options in the release's parser, by argparse dest."""
    out: dict[str, set[str]] = {}
    for entry in json.loads((FLAGS / f"{version}.json").read_text())["flags"]:
        out.setdefault(entry["dest"], set()).update(f for f in entry["flags"] if f[:2] == "--")
    return out


@pytest.mark.parametrize("old,new", list(itertools.combinations(RELEASES, 2)))
def test_every_spelling_that_came_or_went_is_listed(old: str, new: str) -> None:
    a, b = get_pack(old), get_pack(new)
    changes = compare(a, b)
    added = {f for _, f in changes.flags_added}
    removed = {f for _, f in changes.flags_removed}
    was, now = _options_by_field(old), _options_by_field(new)
    for name in set(was) & set(now) & set(SPECS):  # a field both parsers store into
        if name in a.absent_fields or name in b.absent_fields:
            continue
        assert now[name] - was[name] <= added, (name, now[name] - was[name])
        assert was[name] - now[name] <= removed, (name, was[name] - now[name])
    old_table = {f for fs in was.values() for f in fs}
    new_table = {f for fs in now.values() for f in fs}
    assert added <= new_table - old_table and removed <= old_table - new_table


def test_the_reported_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, "diff", "0.5.19", "0.5.23")
    for flag in (
        "--disable-piecewise-cuda-graph",
        "--enforce-piecewise-cuda-graph",
        "--enable-breakable-cuda-graph",
    ):
        assert f"flag removed: {flag}" in run.out
    assert "flag added: --no-mm-enable-dp-encoder (mm_enable_dp_encoder)" in run.out
    doc = json.loads(run_cli(capsys, "diff", "0.5.19", "0.5.23", "--json").out)
    assert {"field": "cuda_graph_backend_prefill", "flag": "--enforce-piecewise-cuda-graph"} in doc[
        "flags"
    ]["removed"]
