"""`meshsat plan`: legal, fitting layouts, ranked as its output says."""

from __future__ import annotations

import json

import pytest

from meshsat import solver
from meshsat.solver.cli.plan_cmd import plan_layouts
from meshsat.solver.inputs import parse_sglang_command
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.models import catalogue_config
from tests.cli_helpers import run_cli


def test_plan_rows_are_legal_fit_and_are_ranked() -> None:
    spec = ModelSpec.from_hf_config(catalogue_config("deepseek-ai/DeepSeek-V3"))
    rows = plan_layouts("deepseek-ai/DeepSeek-V3", gpu("H200"), 16, context_length=8192, top=8)
    assert rows
    keys = [(-r.total_kv_tokens, r.node_crossing_gpus) for r in rows]
    assert keys == sorted(keys)
    for r in rows:
        assert r.weights_gib < gpu("H200").memory_gib and r.total_kv_tokens > 0
        cmd = r.command.split("  #")[0]
        report = solver.validate(parse_sglang_command(cmd).values, spec)
        assert report.valid, cmd
        assert r.max_requests == r.pools * (r.kv_tokens_per_pool // 8192)


def test_plan_cli_json_states_the_ranking_and_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    res = run_cli(
        capsys,
        "plan",
        "-m",
        "Qwen/Qwen3-8B",
        "--gpu",
        "H100",
        "-n",
        "2",
        "-f",
        "json",
        "--rank",
        "kv",
    )
    assert res.code == 0
    data = json.loads(res.out)
    assert "not modelled" in data["ranking"] and data["layouts"]
    none = run_cli(capsys, "plan", "-m", "deepseek-ai/DeepSeek-V3", "--gpu", "A100-40", "-n", "8")
    assert none.code == 1 and "fits" in none.err
    bad = run_cli(capsys, "plan", "-m", "Qwen/Qwen3-8B", "--gpu", "V100", "-n", "2")
    assert bad.code == 2 and "known: H100" in bad.err and "Traceback" not in bad.err


def _reference_plan(model: str, gpus: int, per_node: int, top: int) -> list[tuple[int, int, str]]:
    """The ranking as first written: a whole `Memory` per layout and the crossing counted on
    the full rank map (`groups.plan`), slow but direct: (total KV tokens, crossing, values),
    the first layout of each memory shape only (`memory_shape`: flags the ranking does not
    read list one layout)."""
    from meshsat.solver.groups import Widths
    from meshsat.solver.groups import plan as rank_plan
    from meshsat.solver.memory import MemoryModel, Parallel
    from meshsat.solver.perf.ranking import memory_shape

    spec = ModelSpec.from_hf_config(catalogue_config(model))
    mm = MemoryModel(catalogue_config(model), gpu("H200"))
    scored = []
    shapes = set()
    for lay in solver.enumerate(gpus, model=spec):
        m = mm.of(Parallel.from_resolved(lay.config, lay.derived))
        shape = memory_shape(mm, lay.config, lay.derived)
        if not m.fits or shape in shapes:
            continue
        shapes.add(shape)
        rm = rank_plan(Widths.of({**lay.config, "gpus_per_node": per_node}))
        node = {r.rank: r.node for r in rm.ranks}
        cross = sum(
            len(g)
            for kind in ("attn_tp", "ep")
            for g in rm.groups[kind]
            if len({node[x] for x in g}) > 1
        )
        scored.append((m.max_total_num_tokens * m.pools, cross, repr(lay.values)))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return scored[:top]


@pytest.mark.parametrize(
    ("model", "gpus", "per_node"),
    [
        ("deepseek-ai/DeepSeek-V3", 16, 8),
        ("deepseek-ai/DeepSeek-V3", 16, 4),
        ("Qwen/Qwen3-30B-A3B", 8, 2),
    ],
)
def test_plan_ranks_as_the_direct_reference(model: str, gpus: int, per_node: int) -> None:
    """Streaming memory columns and the closed-form crossing change nothing: the same rows
    in the same order (ties kept in enumeration order) as the direct computation."""
    top = 40
    rows = plan_layouts(model, gpu("H200"), gpus, gpus_per_node=per_node, top=top)
    expected = _reference_plan(model, gpus, per_node, top)
    got = [(r.total_kv_tokens, r.node_crossing_gpus, r.tp, r.pp, r.dp, r.ep) for r in rows]
    assert [g[:2] for g in got] == [e[:2] for e in expected]
    assert any(c for _cap, c, _v in expected), "some layout must cross a node to mean something"
    for r, (_cap, _cross, values) in zip(rows, expected, strict=True):
        assert f"'tp_size': {r.tp}," in values and f"'ep_size': {r.ep}," in values


def test_plan_at_a_million_gpus_builds_no_rank_map(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28's repro (2^20 H200s) ran past 120 s building a million-rank map per
    candidate; no rank map is built now. DeepSeek-V3's FP8 blocks refuse TP 64 at load
    (QUANT-BLOCK-DENSE-MLP: 18432 / 64 = 288), so the most KV is TP 2 · PP 32 · DP 16384;
    on one-GPU nodes every group crosses a node, which the count must see."""
    import meshsat.solver.groups as groups

    def refuse(*_args: object) -> None:
        raise AssertionError("plan built a rank map")

    monkeypatch.setattr(groups, "plan", refuse)
    rows = plan_layouts("deepseek-ai/DeepSeek-V3", gpu("H200"), 1 << 20, top=2, gpus_per_node=1)
    assert [(r.tp, r.pp, r.dp, r.ep) for r in rows] == [(2, 32, 16384, 1), (2, 32, 16384, 2)]
    # Every attention-TP group of 2 spans 2 one-GPU nodes; with EP 2 the EP groups too.
    assert [r.node_crossing_gpus for r in rows] == [1 << 20, 2 << 20]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("-n", str((1 << 20) + 1)), "above the limit of 1048576 GPUs"),
        (("-n", "8", "--top", "1001"), "--top 1001 is above the limit of 1000"),
        (("-n", "8", "--gpus-per-node", str(1 << 40)), "--gpus-per-node"),
        (("-n", "8", "--timeout", "-1"), "--timeout must be a positive number"),
        (("-n", "4096", "--timeout", "0.000001"), "did not finish within --timeout"),
    ],
)
def test_plan_bounds_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], says: str
) -> None:
    res = run_cli(capsys, "plan", "-m", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", *args)
    assert res.code == 2 and says in res.err, res.err
    assert "Traceback" not in res.err and len(res.err.strip().splitlines()) == 1
    assert res.out == ""


def test_plan_lists_each_memory_shape_once() -> None:
    """Llama-3.1-70B on 8 H100 listed `--pp-size 8` three times (plain, and with
    `--enable-prefill-cp` zigzag or interleave at CP width 1) and each dense layout once per
    EP width: rows the table could not tell apart. Each shape once now (here the plain
    command stands for it), and rows that differ show it in a column (cp, dcp)."""
    rows = plan_layouts("meta-llama/Llama-3.1-70B-Instruct", gpu("H100"), 8, top=200)
    shown = [
        (r.tp, r.pp, r.dp, r.dp_attention, r.attn_tp, r.attn_cp, r.dcp, r.total_kv_tokens)
        for r in rows
    ]
    assert len(shown) == len(set(shown)) > 20
    assert all(r.ep == 1 for r in rows), "a dense model's EP width is not a layout of its own"
    pp8 = [r.command for r in rows if r.pp == 8 and r.tp == 1]
    assert pp8 == [
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --pp-size 8"
    ]
