"""`plan --disagg --emit lws`: the picked deployment as a LeaderWorkerSet per role and the
router's Deployment + Service, read back by meshsat's own deployment reader.

Oracles: the plan row (role widths and worker counts, from the enumerated layouts, not from
the manifest), the deployment reader on the YAML (the manifest path of
`meshsat.solver.deployment.reader`, a second reading of what the emitter wrote), and the
pair and router rules of the same pack (`validate_deployment`).
"""

from __future__ import annotations

import json
import shlex
from functools import cache

import pytest
import yaml

from meshsat.solver.catalogue.pd_pairs import DEPLOYMENT_RULES
from meshsat.solver.cli.plan_cmd import picked_disagg
from meshsat.solver.cli.plan_disagg import DisaggRow, disagg_rows, layout_columns
from meshsat.solver.deployment.model import Deployment
from meshsat.solver.deployment.reader import read_deployment
from meshsat.solver.deployment.validate import judge, load_server, server_report
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.packs.registry import get_pack
from meshsat.solver.perf.workload import cli_workload
from tests.cli_helpers import run_cli

RELEASE = "0.5.23"
#: (model, GPUs of H100 in nodes of 8): roles within one node with several prefill
#: workers, and roles that span two nodes.
CASES = [("Qwen/Qwen3-32B", 16), ("deepseek-ai/DeepSeek-V3", 32)]

#: `plan`'s own default workload and SLA (the rows `--emit` picks from).
WORKLOAD = cli_workload(1024, 1024, None, None, no_sla=False)
ROUTING = frozenset(r.id for r in DEPLOYMENT_RULES)


@cache
def _rows(model: str, gpus: int) -> tuple[DisaggRow, ...]:
    rows, _search, _agg = disagg_rows(
        model, gpu("H100"), gpus, WORKLOAD, engine="roofline", gpus_per_node=None, top=3,
        sglang_version=RELEASE, progress=lambda done, total: None,
    )  # fmt: skip
    return tuple(rows)


def _docs(text: str) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


@pytest.mark.parametrize(("model", "gpus"), CASES)
def test_every_ranked_deployment_reads_back_clean_with_the_rows_widths(
    model: str, gpus: int
) -> None:
    rows = _rows(model, gpus)
    assert rows
    pack = get_pack(RELEASE)
    for pick, row in enumerate(rows, 1):
        text = picked_disagg(list(rows), pick, 8, model=model, name="pd", image="img")
        docs = _docs(text)
        kinds = [(d["kind"], d["metadata"]["name"]) for d in docs]  # type: ignore[index]
        assert kinds == [
            ("LeaderWorkerSet", "pd-prefill"),
            ("LeaderWorkerSet", "pd-decode"),
            ("Deployment", "pd-router"),
            ("Service", "pd-router"),
        ]
        found = read_deployment(text, load_server(None, RELEASE))
        assert isinstance(found, Deployment)
        report = judge(found, pack)
        assert report.valid and not report.undecided, report.to_dict()
        # Pair warnings (performance notes plan accepts) may stay; nothing wrong as an
        # error, and nothing at all from the router and bootstrap rules.
        wrong = [f for f in report.findings if f.severity == "error" or f.rule in ROUTING]
        assert not wrong, wrong
        assert len(found.routers) == 1
        router = found.routers[0]
        # Every replica group is a server of its role: the plan's own GPU count.
        planned = {r: getattr(row, f"{r}_workers") * getattr(row, f"{r}_gpus_per_worker")
                   for r in ("prefill", "decode")}  # fmt: skip
        assert report.gpus == sum(planned.values()), (pick, report.to_dict()["deployment"])
        for role, lws in (("prefill", docs[0]), ("decode", docs[1])):
            (server,) = found.of_role(role)  # type: ignore[arg-type]
            spec = lws["spec"]  # type: ignore[index]
            groups, size = spec["replicas"], spec["leaderWorkerTemplate"]["size"]
            assert server.replicas == groups == report.servers[role]  # type: ignore[index]
            pod_gpus = spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0][
                "resources"
            ]["limits"]["nvidia.com/gpu"]
            workers = getattr(row, f"{role}_workers")
            per_worker = getattr(row, f"{role}_gpus_per_worker")
            assert groups * size * pod_gpus == workers * per_worker
            assert len(server.commands) == min(size, 2)  # the leader, and the worker template
            split = groups // workers  # plain DP replicas across nodes: one server each
            judged = server_report(server, pack)  # SGLang's resolution of what was read
            back = layout_columns(judged.resolved, judged.derived)
            for width in ("tp", "pp", "ep", "dp_attention"):
                assert back[width] == getattr(row, f"{role}_{width}"), (pick, role, width)
            assert back["dp"] * split == getattr(row, f"{role}_dp")
            assert server.layout.config.nnodes == size
            targets = router.prefill if role == "prefill" else router.decode
            name = f"pd-{role}"
            assert [t.url for t in targets] == [
                f"http://{name}-{g}.{name}:30000" for g in range(groups)
            ]


def test_cli_emits_the_picked_deployment_and_refuses_a_pick_beyond_the_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["plan", "--model", "Qwen/Qwen3-32B", "--gpu", "H100", "--gpus", "16", "--disagg",
            "--engine", "roofline", "--top", "2", "--emit", "lws"]  # fmt: skip
    run = run_cli(capsys, *args, "--pick", "2")
    assert run.code == 0, run.err
    table = run_cli(capsys, *args[:-2], "--format", "json")
    row = json.loads(table.out)["deployments"][1]
    docs = _docs(run.out)
    for role, lws in (("prefill", docs[0]), ("decode", docs[1])):
        spec = lws["spec"]  # type: ignore[index]
        assert spec["replicas"] == row[f"{role}_workers"]  # within one node: no split
        command = spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
        assert command["command"] == [*shlex.split(row[f"{role}_command"]), "--host", "0.0.0.0"]
    run = run_cli(capsys, *args, "--pick", "3")
    assert run.code == 2 and run.out == ""
    assert run.err.strip().splitlines() == [
        "meshsat: error: --pick 3: only 2 deployment(s) ranked (raise --top)"
    ]
