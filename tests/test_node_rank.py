"""TOPO-NODE-RANK: a --node-rank at or past --nnodes starts ranks the engine does not have.

Oracles: SGLang's launcher arithmetic (`meshsat.solver.placement.node_share`, which
tests/test_placement.py replays against every release's recorded launches) over every even
split, and SGLang 0.5.23 itself (shared oracle, `--launch`, 2026-12-07): its resolution and
check_server_args() accept `--tp 4 --nnodes 2 --node-rank 2` (and 5), so the refusal is the
process group's, at start-up.
"""

from __future__ import annotations

import pytest

from meshsat.solver import validate
from meshsat.solver.placement import node_share
from tests.rule_cases import EEP_JOINER

RELEASES = ("0.4.6.post5", "0.5.18", "0.5.19", "0.5.23")
RULE = "TOPO-NODE-RANK"


def _fires(config: dict[str, int], release: str) -> bool:
    report = validate(config, explain=False, sglang_version=release)
    return RULE in {v.rule for v in report.violations}


def _even_splits() -> list[tuple[int, int, int]]:
    """(tp, pp, nnodes) whose split starts every rank once (placement.EVEN_SPLIT)."""
    out = []
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4):
            for n in (1, 2, 4, 8):
                if pp % n == 0 or (n % pp == 0 and tp % (n // pp) == 0):
                    out.append((tp, pp, n))
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_rule_equals_the_launcher(release: str) -> None:
    """The rule fires exactly when the node's share of stages lies past pp_size."""
    checked = fired = 0
    for tp, pp, nnodes in _even_splits():
        for node_rank in range(nnodes + 3):
            share = node_share(nnodes, pp, tp, node_rank)
            outside = share.pp_ranks.start >= pp
            config = {"tp_size": tp, "pp_size": pp, "nnodes": nnodes, "node_rank": node_rank}
            assert _fires(config, release) == outside, config
            checked += 1
            fired += outside
    assert checked > 100 and 0 < fired < checked


@pytest.mark.parametrize("release", RELEASES)
def test_the_measured_command(release: str) -> None:
    report = validate(
        {"tp_size": 4, "nnodes": 2, "node_rank": 2}, explain=False, sglang_version=release
    )
    assert [v.rule for v in report.violations] == [RULE]
    assert report.violations[0].message.startswith("--node-rank 2 is not below --nnodes 2")
    assert validate({"tp_size": 4, "nnodes": 2, "node_rank": 1}, sglang_version=release).valid


def test_a_scale_joiner_runs_alone_at_node_rank_1() -> None:
    """EEP-SCALE-NODE asks a scale joiner for --node-rank 1 on its one node."""
    assert EEP_JOINER["node_rank"] == 1 and "nnodes" not in EEP_JOINER
    assert not _fires(EEP_JOINER, "0.5.23")
