"""What `plan` tells an operator to run on each node (`emit_options.NodeCommand`).

Oracle: meshsat's own reader of launch text and its rules, as `meshsat validate
--sglang-file` judges a pasted job: every node's command (NODE_RANK and LEADER_ADDR set as
the operator sets them) read back as one job must raise no job issue and validate on the
row's node size, and the servers, nodes and GPUs must add up to the GPUs planned. The
one-engine command `plan` printed before for 16+ GPUs put every rank on one host, and
plain DP across nodes is refused by SGLang's check_server_args (TOPO-MULTINODE-DP).
"""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver.cli.emit_options import node_command
from meshsat.solver.cli.plan_cmd import plan_layouts
from meshsat.solver.cli.plan_disagg import disagg_rows
from meshsat.solver.cli.plan_perf import perf_rows
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command
from meshsat.solver.lang.config import Config
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.perf import Workload
from meshsat.solver.validation.validate import validate
from tests.cli_helpers import run_cli

LEADER = "10.0.0.1"


def node_lines(command: str, nodes: int) -> str:
    """The text of one server's nodes, as the operator fills the variables in."""
    lines = [
        command.replace("$NODE_RANK", str(rank)).replace("$LEADER_ADDR", LEADER)
        for rank in range(nodes)
    ]
    return "\n".join(lines)


def assert_runs(node_cmd: str, nodes: int, gpus_per_node: int) -> dict[str, Any]:
    """`node_cmd` on `nodes` nodes is one job SGLang's rules accept; its resolved layout."""
    parsed = parse_sglang_command(node_lines(node_cmd, nodes))
    assert parsed.job == [], parsed.job
    assert parsed.unknown_flags == []
    values = {**parsed.values, "gpus_per_node": gpus_per_node}
    if nodes > 1:
        assert values["nnodes"] == nodes
    report = validate(Config.model_validate(values), explain=False)
    assert report.valid, [v.rule_id for v in report.violations]
    return dict(report.resolved)


@pytest.mark.parametrize(
    ("model", "gpu_name", "gpus"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "H100", 64),
        ("deepseek-ai/DeepSeek-V3", "H200", 16),
        ("deepseek-ai/DeepSeek-V3", "GB200", 16),
        ("Qwen/Qwen3-32B", "L40S", 8),
        ("Qwen/Qwen3-8B", "H100", 12),
    ],
)
def test_every_node_command_is_a_job_that_adds_up(model: str, gpu_name: str, gpus: int) -> None:
    g = gpu(gpu_name)
    rows, _, _ = perf_rows(
        model, g, gpus, Workload(1024, 1024), engine="roofline", gpus_per_node=None, top=8
    )
    kv = plan_layouts(model, g, gpus, top=8)
    assert rows and kv
    for r in [*rows, *kv]:
        assert r.servers * r.nodes_per_server * r.gpus_per_node == gpus
        assert r.gpus_per_node <= g.host_gpus
        resolved = assert_runs(r.node_command, r.nodes_per_server, r.gpus_per_node)
        world = resolved["tp_size"] * resolved["pp_size"]
        replicas = 1 if resolved["enable_dp_attention"] else resolved["dp_size"]
        assert world * replicas == r.nodes_per_server * r.gpus_per_node
        if r.servers * r.nodes_per_server == 1:
            assert r.node_command == r.command
        else:  # one host could not hold it: the command as typed names no node
            assert "--nnodes" not in r.command


def test_a_gb200_tray_is_the_node() -> None:
    """A GB200 NVL72 rack is 18 hosts of 4 GPUs in one NVLink domain: 16 GPUs are four
    nodes to SGLang, though one fabric."""
    rows = plan_layouts("deepseek-ai/DeepSeek-V3", gpu("GB200"), 16, top=4)
    assert rows
    for r in rows:
        assert r.gpus_per_node == 4
        assert r.servers * r.nodes_per_server == 4
        assert r.node_crossing_gpus == 0  # traffic stays in the NVLink domain


@pytest.mark.parametrize(
    ("command", "gpus", "per_node", "expected"),
    [
        # plain DP replicas smaller than a node share it: one server per node
        ("python -m sglang.launch_server --model-path m --tp-size 2 --dp-size 32", 64, 8,
         (8, 1, 8, "--tp-size 2 --dp-size 4 --host 0.0.0.0")),
        # 12 GPUs of 1-GPU replicas: two hosts of six, not twelve one-GPU servers
        ("python -m sglang.launch_server --model-path m --dp-size 12", 12, 8,
         (2, 1, 6, "--model-path m --dp-size 6 --host 0.0.0.0")),
        # three 4-GPU replicas on 12 GPUs: no even split of two hosts, so one per host
        ("python -m sglang.launch_server --model-path m --tp-size 4 --dp-size 3", 12, 8,
         (3, 1, 4, "--tp-size 4 --host 0.0.0.0")),
        # replicas of a node each: the DP flag goes
        ("python -m sglang.launch_server --model-path m --tp-size 8 --dp-size 2", 16, 8,
         (2, 1, 8, "--tp-size 8 --host 0.0.0.0")),
        # one engine over nodes
        ("python -m sglang.launch_server --model-path m --tp-size 16", 16, 8,
         (1, 2, 8, "--tp-size 16 --host 0.0.0.0 --nnodes 2 --node-rank $NODE_RANK "
          "--dist-init-addr $LEADER_ADDR:20000")),
        # replicas that each span nodes; the environment stays in front
        ("A=1 python -m sglang.launch_server --model-path m --tp-size 16 --dp-size 2", 32, 8,
         (2, 2, 8, "--tp-size 16 --host 0.0.0.0 --nnodes 2")),
        # one node: as printed
        ("python -m sglang.launch_server --model-path m --tp-size 8", 8, 8,
         (1, 1, 8, "--tp-size 8")),
    ],
)  # fmt: skip
def test_node_command_forms(
    command: str, gpus: int, per_node: int, expected: tuple[int, int, int, str]
) -> None:
    servers, nodes, gpus_per_node, tail = expected
    launch = node_command(command, gpus, per_node, model_path=None)
    assert (launch.servers, launch.nodes, launch.gpus_per_node) == (servers, nodes, gpus_per_node)
    assert tail in launch.command
    assert launch.command.startswith("A=1 ") == command.startswith("A=1 ")
    assert bool(launch.how()) == (servers * nodes > 1)
    assert_runs(launch.command, nodes, gpus_per_node)


def test_disagg_roles_are_whole_servers_whose_nodes_run() -> None:
    """`plan --disagg` counts servers as workers: a role of plain DP replicas over several
    hosts would be its own `x replicas` row again, launched as neither its command nor its
    router says; roles over several hosts name their nodes."""
    g = gpu("GB200")
    rows, _, _ = disagg_rows(
        "deepseek-ai/DeepSeek-V3", g, 32, Workload(8192, 1024), engine="roofline",
        gpus_per_node=None, top=10,
    )  # fmt: skip
    assert rows
    spanning = 0
    for r in rows:
        for role in ("prefill", "decode"):
            gpus = getattr(r, f"{role}_gpus_per_worker")
            nodes = getattr(r, f"{role}_nodes_per_worker")
            plain_dp = getattr(r, f"{role}_dp") > 1 and not getattr(r, f"{role}_dp_attention")
            assert not (plain_dp and gpus > g.host_gpus)
            assert nodes == -(-gpus // g.host_gpus)
            spanning += nodes > 1
            assert_runs(getattr(r, f"{role}_node_command"), nodes, gpus // nodes)
    assert spanning  # the check above saw a role over several trays


@pytest.mark.parametrize(
    ("model", "gpu_name", "gpus", "where"),
    [
        ("deepseek-ai/DeepSeek-V3", "GB200", 12, ()),
        ("meta-llama/Llama-3.1-70B-Instruct", "H100", 24, ("tp == 4 and pp == 3",)),
        ("Qwen/Qwen3-32B", "H100", 24, ("tp == 2 and pp == 3",)),
    ],
)
def test_every_listed_launch_fits_the_hosts_of_its_gpus(
    model: str, gpu_name: str, gpus: int, where: tuple[str, ...]
) -> None:
    """Servers of pods that do not pack whole onto the hosts `--gpus` are (two servers of
    two 3-GPU pods on 12 GB200, three trays) are not listed: one pod would stay Pending."""
    g = gpu(gpu_name)
    hosts = -(-gpus // g.host_gpus)
    rows = plan_layouts(model, g, gpus, top=50, where=where)
    assert rows or where  # filtered to the unpackable widths, nothing may be left
    for r in rows:
        pods_per_host = g.host_gpus // r.gpus_per_node
        assert r.servers * r.nodes_per_server <= hosts * pods_per_host, r.node_command


def test_disagg_roles_listen_where_the_router_reaches_them() -> None:
    rows, _, _ = disagg_rows(
        "deepseek-ai/DeepSeek-V3", gpu("H200"), 16, Workload(1024, 1024), engine="roofline",
        gpus_per_node=None, top=3,
    )  # fmt: skip
    assert rows
    for r in rows:
        for role in ("prefill", "decode"):
            assert "--host 0.0.0.0" in getattr(r, f"{role}_node_command")


def test_a_fix_onto_more_gpus_than_a_node_says_what_each_node_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """DeepSeek-V3 does not fit 8 H100, and `fix` goes to `--tp 16`: typed on one host that
    command starts 16 ranks on 8 GPUs. The fix prints each node's command, which read back as
    a two-node job validates; `--gpu`'s class is no flag of either line."""
    run = run_cli(
        capsys, "fix", "--gpu", "H100", "--sglang",
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --port 30000",
    )  # fmt: skip
    assert run.code == 0, run.err
    lines = dict(
        line.split(": ", 1)
        for line in run.out.splitlines()
        if line.startswith(("command", "on each"))
    )
    assert "--tp 16" in lines["command"] and "gpu_sm" not in lines["command"]
    node = lines["on each node"]
    assert "--nnodes 2 --node-rank $NODE_RANK" in node and "gpu_sm" not in node
    assert_runs(node, 2, 8)
