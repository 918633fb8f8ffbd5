"""--base-gpu-id and --gpu-id-step: read as config fields, placed by `groups`, and checked by
TOPO-GPU-ID-RANGE (a node's last GPU id must exist) and SGLang's own asserts.

Oracles: the launches of the real releases recorded in `tests/fixtures/placement/` (the GPU
id every scheduler gets, `fidelity/placement.py`), and brute force over
`meshsat.solver.placement.launches` (which `tests/test_placement.py` replays against those
records) for the space between the recorded points.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver import fix, validate
from meshsat.solver.enumeration.layouts import enumerate_layouts
from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.lang.config import Config
from meshsat.solver.packs import get_pack
from meshsat.solver.placement import Job, LaunchFacts, launches
from meshsat.solver.validation.validate import environment
from tests.cli_helpers import run_cli
from tests.test_placement import RELEASES, _well_formed, job_of, recorded, rows

RANGE = "TOPO-GPU-ID-RANGE"
NODE_SIZES = (2, 4, 6, 8, 12, 16)


def _config(job: Job, gpus_per_node: int) -> Config:
    f = job.facts
    return Config.model_validate(
        {
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
        if point["scale_joiner"] or not _well_formed(job, point["launches"]):
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
    facts = LaunchFacts(
        nnodes=draw(st.sampled_from((1, 1, 2, 4))),
        base_gpu_id=draw(st.integers(0, 9)),
        gpu_id_step=draw(st.integers(1, 3)),
        release=draw(st.sampled_from(RELEASES)),
    )
    replicas = draw(st.integers(1, 3)) if facts.nnodes == 1 else 1
    return Job(draw(st.sampled_from((1, 2, 3, 4, 8))), draw(st.integers(1, 4)), replicas, facts)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(single_jobs(), st.sampled_from(NODE_SIZES))
def test_range_rule_equals_brute_force(job: Job, gpus_per_node: int) -> None:
    """Between the recorded points: the rule against the largest GPU id of every launch
    SGLang's placement makes, for each release's replica stride."""
    launched = rows(job)
    if not _well_formed(job, launched):
        return
    placed = (job.facts.base_gpu_id, job.facts.gpu_id_step) != (0, 1)
    expected = placed and _past_the_node(launched, gpus_per_node)
    assert _range_fails(job, gpus_per_node, job.facts.release or RELEASES[-1]) == expected


def test_sglang_asserts_in_every_release() -> None:
    """check_server_args' two asserts (every release: `base_gpu_id >= 0`, `gpu_id_step >= 1`)
    with SGLang's words; the input is read, not refused, as SGLang's parser reads it."""
    for release in RELEASES:
        report = validate(
            {"base_gpu_id": -1, "gpu_id_step": 0}, explain=False, sglang_version=release
        )
        said = {v.rule: v.message for v in report.violations}
        assert said == {
            "TOPO-BASE-GPU-ID": "base_gpu_id must be non-negative",
            "TOPO-GPU-ID-STEP": "gpu_id_step must be positive",
        }, release
        assert validate({"base_gpu_id": 0, "gpu_id_step": 1}, sglang_version=release).valid


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
    command = (
        "python -m sglang.launch_server --model-path m --tp 2 --base-gpu-id 3 --gpu-id-step 2"
    )
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


def test_validate_refuses_ids_past_the_node(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(
        capsys,
        "validate",
        "--sglang",
        "python -m sglang.launch_server --model-path m --tp 8 --base-gpu-id 4",
        "--json",
    )
    assert run.code == 1
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
