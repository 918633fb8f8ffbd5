"""Enumerate's memory columns against the full memory model, and their filters and sorting
against the unfiltered listing."""

from __future__ import annotations

import json
import math

import pytest

from meshsat import solver
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import MemoryModel, Parallel
from meshsat.solver.memory.models import catalogue_config
from tests.cli_helpers import run_cli

MODEL, GPU = "meta-llama/Llama-3.1-70B-Instruct", "A100-40"


def listing(capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, object]]:
    run = run_cli(
        capsys, "enumerate", "--gpus", "8", "--model", MODEL, "--gpu", GPU, "-f", "jsonl", *extra
    )
    assert run.code in (0, 1), run.err
    return [json.loads(line) for line in run.out.splitlines()]


def test_every_row_carries_the_full_models_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI's streamed columns, row by row, against `MemoryModel.of` on the same layouts
    from the API; some layouts fit and some do not, so both branches are exercised."""
    rows = listing(capsys, "--context-length", "8192")
    mm = MemoryModel(MODEL, GPU, context_length=8192)
    spec = ModelSpec.from_hf_config(catalogue_config(MODEL))
    layouts = list(solver.enumerate(8, model=spec))
    assert len(rows) == len(layouts) > 20
    for row, lay in zip(rows, layouts, strict=True):
        assert {k: row[k] for k in lay.values} == lay.values
        m = mm.of(Parallel.from_resolved(lay.config, lay.derived))
        assert math.isclose(float(row["weights_gib"]), m.weights_gib, abs_tol=0.005)
        assert abs(int(row["kv_tokens"]) - m.kv_tokens) <= 1  # float summation order only
        assert row["fits"] == m.fits
        assert abs(int(row["max_requests"]) - m.max_requests) <= m.pools
    assert {r["fits"] for r in rows} == {True, False}


def test_memory_filters_keep_exactly_the_matching_rows(capsys: pytest.CaptureFixture[str]) -> None:
    everything = listing(capsys)
    fitting = listing(capsys, "--where", "fits")
    assert fitting == [r for r in everything if r["fits"]]
    big = listing(capsys, "--where", "kv_tokens >= 1.5e5 and tp <= 4")
    assert big == [r for r in everything if int(r["kv_tokens"]) >= 150_000 and r["tp_size"] <= 4]
    assert big and len(big) < len(everything)
    counted = run_cli(
        capsys, "enumerate", "--gpus", "8", "--model", MODEL, "--gpu", GPU, "--where", "fits",
        "--count",
    )  # fmt: skip
    assert counted.out.strip() == str(len(fitting))


def test_sorting_by_a_memory_column(capsys: pytest.CaptureFixture[str]) -> None:
    everything = listing(capsys)
    top = listing(capsys, "--sort=-kv_tokens", "--limit", "5")
    want = sorted(int(r["kv_tokens"]) for r in everything)[::-1][:5]
    assert [int(r["kv_tokens"]) for r in top] == want


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--where", "fits"), "needs --gpu (or --gpu-memory) and --model"),
        (("--sort=-kv_tokens",), "needs the memory columns"),
        (("--gpu", "H100"), "--gpu needs --model"),
        (("--gpu", "H100", "--gpu-memory", "80GiB", "--model", MODEL), "not both"),
        (("--where", "tp >= 1.5"), "literal 1.5 is not allowed"),
        (("--gpu", "H100", "--model", MODEL, "--where", "kv_tokenz > 1"), "did you mean kv_tokens"),
    ],
)
def test_memory_options_misused_are_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], says: str
) -> None:
    run = run_cli(capsys, "enumerate", "--gpus", "8", *args)
    assert run.code == 2
    assert says in run.err and len(run.err.strip().splitlines()) == 1


@pytest.mark.parametrize("release", ["0.5.19", "0.5.23"])
def test_each_command_launches_its_layout(capsys: pytest.CaptureFixture[str], release: str) -> None:
    """The command column, read back by the launch reader and validated on the same release,
    is the listed layout: valid, and SGLang resolves the varied fields to the row's values
    (0.5.23 spells DP attention `--attn-dp-size`, 0.5.19 `--enable-dp-attention --dp-size`)."""
    from meshsat.solver.inputs import config_from_values, parse_sglang_command

    run = run_cli(capsys, "enumerate", "--gpus", "8", "--command", "-f", "jsonl", "-V", release)
    rows = [json.loads(line) for line in run.out.splitlines()]
    assert len(rows) > 100
    spelled = "--attn-dp-size" if release == "0.5.23" else "--enable-dp-attention"
    assert any(spelled in str(r["command"]) for r in rows)
    for row in rows:
        values = parse_sglang_command(str(row["command"])).values
        report = solver.validate(config_from_values(values), sglang_version=release)
        assert report.valid, row["command"]
        for field in ("tp_size", "pp_size", "dp_size", "ep_size", "attn_cp_size", "dcp_size"):
            assert report.resolved[field] == row[field], (row["command"], field)
        assert report.resolved["enable_dp_attention"] == row["enable_dp_attention"]
