"""--base-gpu-id and --gpu-id-step: read as config fields, placed by `groups`, and checked by
TOPO-GPU-ID-RANGE (a node's last GPU id must exist) and SGLang's own asserts.

Oracles: what the real releases say at launch (`tests/fixtures/gpu_ids/`, by
`fidelity/gpu_ids.py`), the launches they make, recorded in `tests/fixtures/placement/` (the GPU
id every scheduler gets, `fidelity/placement.py`), and brute force over
`meshsat.solver.placement.launches` (which `tests/test_placement.py` replays against those
records) for the space between the recorded points.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver import fix, validate
from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.enumeration.layouts import enumerate_layouts
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command
from meshsat.solver.lang.config import Config
from meshsat.solver.packs import get_pack
from meshsat.solver.placement import Job, LaunchFacts, global_rank
from meshsat.solver.validation.validate import environment
from tests.cli_helpers import run_cli
from tests.test_placement import RELEASES, _well_formed, job_of, recorded, rows

RANGE = "TOPO-GPU-ID-RANGE"
ASSERTS = frozenset({"TOPO-BASE-GPU-ID", "TOPO-GPU-ID-STEP"})
GPU_IDS = Path(__file__).parent / "fixtures" / "gpu_ids"
NODE_SIZES = (2, 4, 6, 8, 12, 16)


def _config(job: Job, gpus_per_node: int) -> Config:
    f = job.facts
    joiner = {"ep_join_mode": "scale"} if f.scale_joiner else {}
    return Config.model_validate(
        {
            **joiner,
            "tp_size": job.tp,
            "pp_size": job.pp,
            "dp_size": job.replicas,
            "nnodes": f.nnodes,
            "base_gpu_id": f.base_gpu_id,
            "gpu_id_step": f.gpu_id_step,
            "gpus_per_node": gpus_per_node,
        }
    )


def _range_fails(job: Job, gpus_per_node: int, release: str) -> bool:
    """TOPO-GPU-ID-RANGE's verdict from the release's compiled checker."""
    pack = get_pack(release)
    checker = compiled(pack)
    env = environment(_config(job, gpus_per_node), None)
    resolved, _ = checker.resolve(env)
    return any(pack.rules[i].id == RANGE for i in checker.violations(resolved, env))


def _starts_cleanly(job: Job, launched: list[list[int]]) -> bool:
    """SGLang starts each rank once on a GPU of its own; for a scale joiner (whose nodes
    each start every TP rank of their stages), the same split without the joiner does,
    and no node gives one GPU twice."""
    if not job.facts.scale_joiner:
        return _well_formed(job, launched)
    plain = replace(job, facts=replace(job.facts, scale_joiner=False))
    gpus = [(x[0], x[4]) for x in launched]
    return _well_formed(plain, rows(plain)) and len(set(gpus)) == len(gpus)


def _past_the_node(launched: list[list[int]], gpus_per_node: int) -> bool:
    return max(x[4] for x in launched) >= gpus_per_node


@pytest.mark.parametrize("release", RELEASES)
def test_range_rule_equals_the_recorded_sglang_gpu_ids(release: str) -> None:
    """On every recorded point where SGLang starts each rank once on a GPU of its own, the
    rule fails exactly when some scheduler's recorded GPU id is past the node (for each
    node size), whenever the launch gives a base or a step."""
    checked = fired = 0
    for point in recorded(release)["points"]:
        job = job_of(point, release)
        if not _starts_cleanly(job, point["launches"]):
            continue
        placed = (job.facts.base_gpu_id, job.facts.gpu_id_step) != (0, 1)
        for g in NODE_SIZES:
            expected = placed and _past_the_node(point["launches"], g)
            assert _range_fails(job, g, release) == expected, (point, g)
            checked += 1
            fired += expected
    assert checked > 1000 and 100 < fired < checked, (checked, fired)


@st.composite
def single_jobs(draw: st.DrawFn) -> Job:
    release = draw(st.sampled_from(RELEASES))
    facts = LaunchFacts(
        nnodes=draw(st.sampled_from((1, 1, 2, 4))),
        base_gpu_id=draw(st.integers(0, 9)),
        gpu_id_step=draw(st.integers(1, 3)),
        release=release,
        # Elastic EP's scale joiner exists from 0.5 on.
        scale_joiner=release != "0.4.6.post5" and draw(st.booleans()),
    )
    replicas = draw(st.integers(1, 3)) if facts.nnodes == 1 else 1
    return Job(draw(st.sampled_from((1, 2, 3, 4, 8))), draw(st.integers(1, 4)), replicas, facts)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(single_jobs(), st.sampled_from(NODE_SIZES))
def test_range_rule_equals_brute_force(job: Job, gpus_per_node: int) -> None:
    """Between the recorded points: the rule against the largest GPU id of every launch
    SGLang's placement makes, for each release's replica stride."""
    launched = rows(job)
    if not _starts_cleanly(job, launched):
        return
    placed = (job.facts.base_gpu_id, job.facts.gpu_id_step) != (0, 1)
    expected = placed and _past_the_node(launched, gpus_per_node)
    assert _range_fails(job, gpus_per_node, job.facts.release or RELEASES[-1]) == expected


def _asserts(release: str) -> list[dict[str, Any]]:
    path = GPU_IDS / f"{release}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    assert data["sglang"] == release
    return list(data["records"])


@pytest.mark.parametrize("release", RELEASES)
def test_sglang_asserts_equal_the_recorded_release(release: str) -> None:
    """Each recorded command (`fidelity/gpu_ids.py`: the release's parser, resolution and
    check_server_args): where SGLang raises, meshsat's first violation is that assert,
    in SGLang's words; where SGLang lets the command through, no assert of meshsat fires
    either (ids past the node are TOPO-GPU-ID-RANGE's, a CUDA start-up failure that a
    CPU run never reaches)."""
    records = _asserts(release)
    assert {r["id"] for r in records if r["launch_error"]} >= {"negative-base", "zero-step"}
    for r in records:
        assert r["accepted"] and not r["harness_error"], r
        text = "python -m sglang.launch_server --model-path m " + " ".join(r["argv"])
        values = parse_sglang_command(text).values
        report = validate(values, explain=False, sglang_version=release)
        said = [(v.rule, v.message) for v in report.violations]
        if r["launch_error"] is not None:
            assert said[0][1] == r["launch_error"], (r, said)
            assert said[0][0] in ASSERTS and report.violations[0].source == "check_server_args"
        else:
            assert not {rule for rule, _ in said} & ASSERTS, (r, said)
            past = r["id"].startswith("past-the-node")
            assert [rule for rule, _ in said] == ([RANGE] if past else []), (r, said)


def test_defaults_keep_the_planning_view_and_node_rule() -> None:
    """Without either flag one node is the planning view (tp 16 is valid there, as before)
    and several nodes are TOPO-NODE-GPUS's, not this rule's."""
    assert validate({"tp_size": 16}).valid
    report = validate({"tp_size": 32, "nnodes": 2}, explain=False)
    assert [v.rule for v in report.violations] == ["TOPO-NODE-GPUS"]


def test_launch_command_is_read_and_groups_show_sglang_gpu_ids(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`groups` of one pasted command: the ranks sit on the GPU ids real SGLang 0.5.23 gave
    the same launch (recorded point tp 2, base 3, step 2)."""
    point = next(
        p
        for p in recorded("0.5.23")["points"]
        if (p["tp"], p["pp"], p["nnodes"], p["replicas"], p["base_gpu_id"], p["gpu_id_step"])
        == (2, 1, 1, 1, 3, 2)
        and not p["scale_joiner"]
    )
    command = "python -m sglang.launch_server --model-path m --tp 2 --base-gpu-id 3 --gpu-id-step 2"
    run = run_cli(capsys, "groups", "--sglang", command, "--sglang-version", "0.5.23", "--json")
    assert run.code == 0, run.err
    doc: dict[str, Any] = json.loads(run.out)
    assert doc["placement"] == "sglang"
    assert "--base-gpu-id 3 --gpu-id-step 2" in doc["summary"]
    assert [(r["node"], r["local_gpu"]) for r in doc["ranks"]] == [
        (x[0], x[4]) for x in point["launches"]
    ]
    assert [r["local_gpu"] for r in doc["ranks"]] == [3, 5]
    text = run_cli(capsys, "groups", "--sglang", command, "--sglang-version", "0.5.23")
    assert "gpu 3" in text.out and "gpu 5" in text.out


@pytest.mark.parametrize("source", ["command", "config", "set"])
def test_validate_refuses_ids_past_the_node(
    source: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The fields arrive from a pasted command, a layout file and --set alike."""
    layout = tmp_path / "layout.yaml"
    layout.write_text("tp_size: 8\nbase_gpu_id: 4\n")
    given = {
        "command": [
            "--sglang",
            "python -m sglang.launch_server --model-path m --tp 8 --base-gpu-id 4",
        ],
        "config": ["-c", str(layout)],
        "set": ["--set", "tp_size=8", "--set", "base_gpu_id=4"],
    }[source]
    run = run_cli(capsys, "validate", *given, "--json")
    assert run.code == 1, run.err
    doc = json.loads(run.out)
    assert [v["rule"] for v in doc["violations"]] == [RANGE]
    assert "GPU 11" in doc["violations"][0]["message"]


@pytest.mark.parametrize(
    ("given", "changed"),
    [
        ({"tp_size": 8, "base_gpu_id": 4}, {"base_gpu_id": 0}),
        ({"tp_size": 4, "base_gpu_id": 6}, {"base_gpu_id": 4}),
        ({"tp_size": 4, "base_gpu_id": 2, "gpu_id_step": 2}, {"base_gpu_id": 1}),
        ({"tp_size": 8, "gpu_id_step": 2}, {"gpu_id_step": 1}),
    ],
)
def test_fix_lowers_the_base_then_the_step(given: dict[str, Any], changed: dict[str, Any]) -> None:
    """The nearest valid launch keeps the GPU count: the base goes down as little as it must,
    and the step goes to 1 only where no base fits."""
    result = fix(given, sglang_version="0.5.23", top=1)
    best = result.fixes[0]
    moved = {name: getattr(best.config, name) for name in given if name != "tp_size"}
    assert {k: v for k, v in moved.items() if given[k] != v} == changed
    assert best.config.tp_size == given["tp_size"]
    assert validate(best.config, sglang_version="0.5.23").valid


def test_fix_and_enumerate_never_invent_gpu_ids() -> None:
    """A layout that gives neither flag keeps both at their defaults in every fix, and
    enumeration does not vary them: a base set in the base config only filters."""
    result = fix({"tp_size": 8, "attn_cp_size": 3}, sglang_version="0.5.23", top=3)
    assert result.fixes
    for f in result.fixes:
        assert (f.config.base_gpu_id, f.config.gpu_id_step) == (0, 1)
        assert not {"base_gpu_id", "gpu_id_step"} & f.config.user_set()
    plain = list(enumerate_layouts(8, sglang_version="0.5.23"))
    offset = list(
        enumerate_layouts(4, base={"base_gpu_id": 4}, up_to=True, sglang_version="0.5.23")
    )
    assert {(r.config["base_gpu_id"], r.config["gpu_id_step"]) for r in plain} == {(0, 1)}
    assert offset and all(r.config["base_gpu_id"] == 4 for r in offset)
    assert not list(enumerate_layouts(8, base={"base_gpu_id": 4}, sglang_version="0.5.23"))


def test_groups_shows_two_stages_on_one_gpu_with_the_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With a step above 1 and several stages on the one node, SGLang's own arithmetic gives
    two schedulers one GPU (stage offsets are tp apart, not tp·step) and starts both there:
    the layout validates with TOPO-STAGE-GPUS's warning, so `groups` shows the ranks on the
    GPUs SGLang's launcher gives them (brute force: `rows`), the warning on stderr (was:
    exit 2, "both on GPU 2 of node 0")."""
    job = Job(2, 2, 1, LaunchFacts(gpu_id_step=2))
    gpus = [x[4] for x in rows(job)]
    assert len(set(gpus)) < len(gpus)  # SGLang's placement, brute force: GPU 2 twice
    report = validate({"tp_size": 2, "pp_size": 2, "gpu_id_step": 2}, explain=False)
    assert report.valid and [w.rule for w in report.warnings] == ["TOPO-STAGE-GPUS"]
    args = ("groups", "--set", "tp_size=2", "--set", "pp_size=2", "--set", "gpu_id_step=2")
    run = run_cli(capsys, *args, "--json")
    assert run.code == 0, run.err
    placed = {r["rank"]: r["local_gpu"] for r in json.loads(run.out)["ranks"]}
    launched = {global_rank(job, x[1], x[2], x[3]): x[4] for x in rows(job)}
    assert placed == launched == {0: 0, 1: 2, 2: 2, 3: 4}
    assert "warning [TOPO-STAGE-GPUS] " + report.warnings[0].message in " ".join(run.err.split())
    table = run_cli(capsys, *args)
    assert table.code == 0 and "TOPO-STAGE-GPUS" in table.err and "pipeline stage 1" in table.out
    # Replicas on one GPU are an error (0.4.6.post5, TOPO-DP-REPLICA-GPUS): still refused.
    old = ("groups", "-V", "0.4.6.post5", "--set", "tp_size=2", "--set", "pp_size=2")
    refused = run_cli(capsys, *old, "--set", "dp_size=2", "--set", "base_gpu_id=1")
    assert refused.code == 1 and "TOPO-DP-REPLICA-GPUS" in refused.out + refused.err


@pytest.mark.parametrize(
    ("tp", "bases", "steps", "gpus_per_node"),
    [
        (8, (0, 4), (1, 1), 8),  # two jobs' halves side by side on 8-GPU nodes: starts
        (8, (4, 6), (1, 1), 8),  # the second node runs ranks on GPUs 6..9
        (16, (0, 2), (1, 1), 8),
        (8, (0, 0, 4, 6), (1, 2, 1, 2), 8),  # the last node: GPUs 6 and 8
        (8, (6, 0), (1, 1), 8),  # only the first node is past its GPUs
    ],
)
def test_nodes_of_one_job_may_differ_in_gpu_ids(
    tp: int,
    bases: tuple[int, ...],
    steps: tuple[int, ...],
    gpus_per_node: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each node's SGLang reads its own --base-gpu-id and --gpu-id-step (the scheduler's
    `gpu_id` in `launch_tensor_parallel_group`), so nodes that differ in them are one job
    (no JOB-ONE-LAYOUT) and each node's own ids are checked: TOPO-GPU-ID-RANGE names the
    nodes whose brute-force GPU ids (SGLang's placement with that node's values) pass the
    node's GPUs, by their line."""
    nnodes = len(bases)
    script = "".join(
        f"python -m sglang.launch_server --model-path m --tp {tp} --nnodes {nnodes} "
        f"--node-rank {i} --dist-init-addr 10.0.0.1:5000 --base-gpu-id {b} "
        f"--gpu-id-step {s} &\n"
        for i, (b, s) in enumerate(zip(bases, steps, strict=True))
    )
    past = []
    for i, (b, s) in enumerate(zip(bases, steps, strict=True)):
        job = Job(tp, 1, 1, LaunchFacts(nnodes, b, s, RELEASES[-1]))
        if max(x[4] for x in rows(job) if x[0] == i) >= gpus_per_node:
            past.append(i)
    run = run_cli(
        capsys, "validate", "--sglang", script, "--set", f"gpus_per_node={gpus_per_node}", "--json"
    )
    doc = json.loads(run.out)
    assert run.code == (1 if past else 0), run.err
    assert {v["rule"] for v in doc["violations"]} <= {RANGE}
    # The first node's is the layout's own violation; every other node's names its line.
    named = sorted(
        int(v["detail"].removeprefix("line ")) - 1
        for v in doc["violations"]
        if v["detail"].startswith("line ")
    )
    first = any(not v["detail"].startswith("line ") for v in doc["violations"])
    assert (([0] if first else []) + named) == past


def test_a_deployment_server_checks_each_nodes_gpu_ids_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A prefill server of two nodes (bases 0 and 6, TP 8: 4 ranks a node) in a PD script:
    one TOPO-GPU-ID-RANGE, for its second node (brute force: its GPUs reach 9 on a node of
    8), under the prefill server, and no JOB-ONE-LAYOUT."""
    job = Job(8, 1, 1, LaunchFacts(2, 6, 1, RELEASES[-1]))
    assert max(x[4] for x in rows(job) if x[0] == 1) == 9
    launch = "python -m sglang.launch_server --model-path m --tp 8"
    node = "--nnodes 2 --dist-init-addr 10.0.0.1:5000 --disaggregation-mode prefill --port 30000"
    script = (
        f"{launch} {node} --node-rank 0 &\n"
        f"{launch} {node} --node-rank 1 --base-gpu-id 6 &\n"
        f"{launch} --disaggregation-mode decode --port 30001 &\n"
        "python -m sglang_router.launch_router --pd-disaggregation --prefill "
        "http://127.0.0.1:30000 --decode http://127.0.0.1:30001\n"
    )
    run = run_cli(capsys, "validate", "--sglang", script, "--set", "gpus_per_node=8", "--json")
    roles = {r["server"]: r["violations"] for r in json.loads(run.out)["roles"]}
    assert [(v["rule"], v["detail"]) for v in roles["prefill@1"]] == [(RANGE, "line 2")]
    assert roles["decode@3"] == []
