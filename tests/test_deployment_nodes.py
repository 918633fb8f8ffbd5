"""The nodes of a PD deployment's servers: which launches are one job, and what `fix` and
`--rewrite` do when the nodes of one server disagree.

Oracles: the same launches read alone as one job (the single-server reader, whose JOB-*
rules a deployment's server must report alike), and `validate` of what `--rewrite` prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meshsat.solver.deployment.fix import fix_deployment
from meshsat.solver.deployment.validate import validate_deployment
from tests.cli_helpers import run_cli

DSV3 = "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --trust-remote-code"
PREFILL = f"{DSV3} --tp 8 --disaggregation-mode prefill --host 10.0.0.1 --port 30000\n"
ROUTER = (
    "python3 -m sglang_router.launch_router --pd-disaggregation "
    "--prefill http://10.0.0.1:30000 --decode http://10.0.0.2:30000\n"
)


def _decode_node(rank: int, host: str, tp: int = 16) -> str:
    return (
        f"{DSV3} --tp {tp} --nnodes 2 --node-rank {rank} --dist-init-addr 10.0.0.2:5000 "
        f"--disaggregation-mode decode --host {host} --port 30000\n"
    )


def test_a_repeated_rank_at_one_literal_address_is_one_job() -> None:
    """Two decode launches, both `--node-rank 0` at `--dist-init-addr 10.0.0.2:5000` (a copied
    line): one rendezvous, so one server whose ranks are wrong, as the two lines alone say."""
    nodes = _decode_node(0, "10.0.0.2") + _decode_node(0, "10.0.0.3")
    alone = validate_deployment(nodes)
    assert "JOB-NODE-RANKS" in alone.broken  # the oracle: the same launches as one job
    report = validate_deployment(PREFILL + nodes + ROUTER)
    decode = [r for r in report.roles if r.role == "decode"]
    assert [r.lines for r in decode] == [(2, 3)]
    assert "JOB-NODE-RANKS" in {v.rule for v in decode[0].report.violations}
    assert not report.valid and report.gpus == 24


def test_a_templated_address_still_starts_a_server_at_a_repeated_rank() -> None:
    """`${MASTER}:5000` may be another address each time: a rank seen again is another
    server there, as before."""
    node = _decode_node(0, "$HOST").replace("10.0.0.2:5000", "${MASTER}:5000")
    report = validate_deployment(PREFILL + node + node + ROUTER)
    assert [r.lines for r in report.roles if r.role == "decode"] == [(2,), (3,)]


#: A 2-node prefill whose second node was edited to tp 8 (JOB-ONE-LAYOUT), a 2-node decode.
MISMATCH = "".join(
    f"{DSV3} --disaggregation-mode {role} --dist-init-addr {addr}:5000 --nnodes 2 "
    f"--node-rank {rank} --tp {tp} --host 0.0.0.0\n"
    for role, addr, rank, tp in (
        ("prefill", "10.0.0.1", 0, 16),
        ("prefill", "10.0.0.1", 1, 8),
        ("decode", "10.0.0.3", 0, 16),
        ("decode", "10.0.0.3", 1, 16),
    )
) + ROUTER.replace("10.0.0.2", "10.0.0.3")


def test_fix_and_rewrite_agree_on_a_node_that_disagrees(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "pd.sh"
    path.write_text(MISMATCH)
    assert "JOB-ONE-LAYOUT" in validate_deployment(MISMATCH).broken
    result = fix_deployment(MISMATCH)
    assert result.ok
    assert result.servers[0].every_node == (2,)
    assert "JOB-ONE-LAYOUT" in result.servers[0].report.best.repairs
    fixed = run_cli(capsys, "fix", "--sglang-file", str(path))
    assert fixed.code == 0, fixed.out
    assert "the node(s) on line(s) 2 take this layout (JOB-ONE-LAYOUT" in fixed.out
    rewritten = run_cli(capsys, "validate", "--sglang-file", str(path), "--rewrite")
    assert rewritten.code == 0 and "still broken" not in rewritten.err
    assert validate_deployment(rewritten.out).valid


def test_a_rewrite_left_broken_names_the_servers_own_rules(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A repeated node rank is no layout's to rewrite: the note names it (it was empty:
    only the rules between servers were listed)."""
    script = PREFILL + _decode_node(0, "10.0.0.2") + _decode_node(0, "10.0.0.3") + ROUTER
    run = run_cli(capsys, "validate", "--sglang", script, "--rewrite")
    assert "still broken after the rewrite (fix by hand): JOB-NODE-RANKS" in run.err


def test_a_node_template_pasted_twice_is_one_server_not_two(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """QA's plan2_r1b: `plan`'s node commands (one line per role, `--node-rank $NODE_RANK`:
    every node runs that line) pasted twice read as four servers of 16 GPUs (64). Oracle:
    the same script with each line once, as `plan` prints it."""
    node = (
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp-size 8 "
        "--pp-size 2 --disaggregation-mode {role} --host 0.0.0.0 --nnodes 2 "
        "--node-rank $NODE_RANK --dist-init-addr $LEADER_ADDR:20000\n"
    )
    router = (
        "python -m sglang_router.launch_router --pd-disaggregation "
        "--prefill http://prefill-1:30000 --decode http://decode-1:30000\n"
    )
    once = node.format(role="prefill") + node.format(role="decode") + router
    twice = 2 * node.format(role="prefill") + 2 * node.format(role="decode") + router
    runs = [run_cli(capsys, "validate", "--sglang", text, "--json") for text in (once, twice)]
    want, got = (json.loads(r.out)["deployment"] for r in runs)
    assert runs[1].code == runs[0].code == 0, runs[1].err
    assert (got["servers"], got["gpus"]) == (want["servers"], want["gpus"])
    assert got["gpus"] == 32
