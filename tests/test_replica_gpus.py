"""0.4.6.post5's DP replicas with pipeline stages share GPUs (TOPO-DP-REPLICA-GPUS).

Its data-parallel controller starts replica d at `base_gpu_id + d·tp_size·gpu_id_step`
(data_parallel_controller.py:133) and puts stage p's TP rank t at `p·tp_size + t·gpu_id_step`
past that (:218-222), so with pp > 1 replica 1 can land on replica 0's GPUs; 0.5.18 on offset
a replica by tp·pp·step. `tests/fixtures/placement/` holds what each release's own launch code
computes (`fidelity/placement.py`); the rule must hold exactly where it puts no two replicas
on one GPU.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from meshsat.solver import InvalidLayoutError, validate
from meshsat.solver.groups import groups
from meshsat.solver.packs import get_pack
from meshsat.solver.placement import Job, LaunchFacts, PlacementError, launches, seats
from tests.cli_helpers import run_cli
from tests.test_placement import RELEASES, recorded

RULE = "TOPO-DP-REPLICA-GPUS"


def _replicas_share(launched: list[list[int]] | list[Any]) -> bool:
    owner: dict[tuple[int, int], int] = {}
    for node, replica, _pp, _tp, gpu in launched:
        if owner.setdefault((node, gpu), replica) != replica:
            return True
    return False


def _config(tp: int, pp: int, dp: int, base: int, step: int) -> dict[str, Any]:
    return {
        "tp_size": tp,
        "pp_size": pp,
        "dp_size": dp,
        "base_gpu_id": base,
        "gpu_id_step": step,
        "gpus_per_node": 4096,  # TOPO-GPU-ID-RANGE apart
    }


def _fires(config: dict[str, Any], version: str) -> bool:
    report = validate(config, sglang_version=version, explain=False)
    return RULE in {v.rule for v in report.violations}


@pytest.mark.parametrize("release", RELEASES)
def test_rule_fires_exactly_where_the_recorded_launch_shares_a_gpu(release: str) -> None:
    shared = 0
    for p in recorded(release)["points"]:
        if p["nnodes"] != 1 or p["scale_joiner"]:
            continue
        config = _config(p["tp"], p["pp"], p["replicas"], p["base_gpu_id"], p["gpu_id_step"])
        share = _replicas_share(p["launches"])
        shared += share
        assert _fires(config, release) == share, (release, p)
    # Only 0.4.6.post5's offset ignores pp.
    assert (shared > 0) == (release == "0.4.6.post5")
    assert (RULE in get_pack(release).by_id) == (release == "0.4.6.post5")


def test_rule_is_the_launch_arithmetic_on_a_wider_grid() -> None:
    grid = itertools.product((1, 2, 3, 4, 6, 8), (1, 2, 3, 4, 5, 6), (2, 3), (1, 2, 3, 4, 6, 8))
    for tp, pp, dp, step in grid:
        job = Job(tp, pp, dp, LaunchFacts(1, 0, step, "0.4.6.post5"))
        launched = [[x.node, x.replica, x.pp_rank, x.tp_rank, x.gpu] for x in launches(job)]
        config = _config(tp, pp, dp, 0, step)
        assert _fires(config, "0.4.6.post5") == _replicas_share(launched), (tp, pp, dp, step)


def test_dp_attention_and_one_stage_are_not_replicas_sharing_gpus() -> None:
    for config in (
        {"tp_size": 2, "pp_size": 1, "dp_size": 4},
        {"tp_size": 4, "pp_size": 2, "dp_size": 2, "enable_dp_attention": True},
        {"tp_size": 2, "pp_size": 2, "dp_size": 1},
    ):
        assert validate(config, sglang_version="0.4.6.post5").valid, config


def test_the_reported_layout_is_refused_at_launch() -> None:
    config = {"tp_size": 2, "pp_size": 2, "dp_size": 2}
    report = validate(config, sglang_version="0.4.6.post5")
    assert [v.rule for v in report.violations] == [RULE]
    assert get_pack("0.4.6.post5").stage(RULE) == "launch"
    assert validate(config, sglang_version="0.5.23").valid  # replicas tp·pp apart there
    with pytest.raises(InvalidLayoutError, match=re.escape(f"[{RULE}]")):
        groups({**config, "base_gpu_id": 1, "gpus_per_node": 16}, sglang_version="0.4.6.post5")


def test_groups_cli_refuses_it_as_an_invalid_layout(capsys: pytest.CaptureFixture[str]) -> None:
    # Was exit 2, "ranks 2 and 4 both on GPU 3 ... (gpu_id_step 1 with several pipeline
    # stages per node)": the replicas' offset, not gpu_id_step, puts them there.
    args = "groups -V 0.4.6.post5 --set tp_size=2 --set pp_size=2 --set dp_size=2"
    run = run_cli(capsys, *args.split(), "--set", "base_gpu_id=1", "--set", "gpus_per_node=16")
    assert run.code == 1 and RULE in run.out + run.err
    assert "gpu_id_step 1 with several" not in run.out + run.err


def test_placement_error_blames_the_replica_offset() -> None:
    job = Job(2, 2, 2, LaunchFacts(1, 1, 1, "0.4.6.post5"))
    with pytest.raises(PlacementError) as err:
        seats(job, 16)
    message = str(err.value)
    assert "DP replica 0" in message and "DP replica 1" in message
    assert "does not count the pipeline stages" in message
    assert "gpu_id_step 1 with several pipeline stages" not in message
    # One engine whose stages and TP ranks interleave still blames gpu_id_step.
    with pytest.raises(PlacementError, match="gpu_id_step 2 with several pipeline stages"):
        seats(Job(2, 2, 1, LaunchFacts(1, 0, 2, "0.5.23")), 16)
