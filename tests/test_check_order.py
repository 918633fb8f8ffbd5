"""check_server_args()'s order: its pipeline-parallel checks come before the multi-node DP,
GPU id and dense-TP asserts, so a layout that breaks both kinds meets the PP one first.

The oracle is SGLang 0.5.23's own resolution and launch checks on CPU (the shared oracle,
`oracle.py --launch`, platform cuda, 2026-12-07): its `launch_error` for each layout below.
The other releases' order is read from their source: 0.4.6.post5's `check_server_args`
(server_args.py: nnodes, then `if pp_size > 1`, then multi-node DP), 0.5.18's (the same
method, with the micro-batch, padding and min-free-slots asserts) and 0.5.19's
(arg_groups/validation_hook.py), whose PP block also precedes the multi-node DP assert.
"""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver.validation.validate import validate

_MIN_FREE = (
    "--min-free-slots-delay is not supported with pipeline parallelism: allocatable slots "
    "per microbatch are bounded by pp-max-micro-batch-size, so the threshold may never be "
    "reached"
)
#: (layout, 0.5.23's launch error, the rule meshsat names first). The EAGLE rows' error is
#: the prefill-only branch of check_pipeline_parallel_compat, which meshsat's TOPO-PP-SPEC
#: words together with the algorithm branch (its message starts with SGLang's).
MEASURED_0_5_23: tuple[tuple[dict[str, Any], str, str], ...] = (
    ({"tp_size": 4, "pp_size": 2, "moe_dense_tp_size": 2, "min_free_slots_delay": 1},
     _MIN_FREE, "PP-MIN-FREE-SLOTS"),
    ({"tp_size": 2, "pp_size": 2, "dp_size": 2, "nnodes": 2, "min_free_slots_delay": 1},
     _MIN_FREE, "PP-MIN-FREE-SLOTS"),
    ({"tp_size": 4, "pp_size": 2, "moe_dense_tp_size": 2, "speculative_algorithm": "EAGLE"},
     "PP + speculative decoding (MTP) is only supported on prefill nodes "
     "(disaggregation-mode=prefill)", "TOPO-PP-SPEC"),
    ({"tp_size": 2, "pp_size": 2, "dp_size": 2, "nnodes": 2, "speculative_algorithm": "EAGLE"},
     "PP + speculative decoding (MTP) is only supported on prefill nodes "
     "(disaggregation-mode=prefill)", "TOPO-PP-SPEC"),
)  # fmt: skip
#: What each alone is refused with in 0.5.23 (measured): the PP check hides a real error.
ALONE_0_5_23 = (
    ({"tp_size": 4, "pp_size": 2, "moe_dense_tp_size": 2}, "TOPO-MOE-DENSE-TP"),
    ({"tp_size": 2, "pp_size": 2, "dp_size": 2, "nnodes": 2}, "TOPO-MULTINODE-DP"),
)


@pytest.mark.parametrize(("config", "error", "rule"), MEASURED_0_5_23)
def test_first_violation_is_the_error_0_5_23_raises(
    config: dict[str, Any], error: str, rule: str
) -> None:
    report = validate(config, explain=False, sglang_version="0.5.23")
    first = report.violations[0]
    assert first.rule == rule, [v.rule for v in report.violations]
    assert first.message.startswith(error)
    # The later assert is still listed: validate says everything that is wrong.
    assert len(report.violations) == 2


@pytest.mark.parametrize(("config", "rule"), ALONE_0_5_23)
def test_each_later_assert_alone(config: dict[str, Any], rule: str) -> None:
    report = validate(config, explain=False, sglang_version="0.5.23")
    assert [v.rule for v in report.violations] == [rule]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19"])
@pytest.mark.parametrize(("config", "error", "rule"), MEASURED_0_5_23)
def test_0_5_18_and_0_5_19_check_pp_first_too(
    version: str, config: dict[str, Any], error: str, rule: str
) -> None:
    """Their PP block is one assert (overlap schedule and speculative decoding) followed
    by the min-free-slots one, both before the multi-node DP assert."""
    report = validate(config, explain=False, sglang_version=version)
    assert report.violations[0].rule == rule


def test_0_4_6_post5_checks_pp_before_multi_node_dp() -> None:
    config = {"tp_size": 2, "pp_size": 2, "dp_size": 2, "nnodes": 2}
    report = validate(
        {**config, "speculative_algorithm": "EAGLE"}, explain=False, sglang_version="0.4.6.post5"
    )
    assert [v.rule for v in report.violations] == ["TOPO-PP-SPEC", "TOPO-MULTINODE-DP"]
