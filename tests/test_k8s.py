"""Kubernetes manifests: `--emit lws` written, `validate --sglang-file` read back.

Oracles: the launch reader on the command `plan` prints (the manifest must say the same
layout, plus the node flags LWS fills in), and hand-written manifests of each kind whose
layout is known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.cli.emit_options import lws_for
from meshsat.solver.cli.plan_cmd import PlanRow, plan_layouts
from meshsat.solver.deployment.reader import read_deployment
from meshsat.solver.deployment.validate import load_server
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.container import ContainerCommand, container_command
from meshsat.solver.inputs.k8s import lws_manifest, manifest_launch
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources, load_layout
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.memory.models import model_config
from meshsat.solver.repair.fix import command_line
from meshsat.solver.tune import layout_space
from meshsat.solver.validation.validate import validate
from tests.cli_helpers import run_cli

MODEL = "deepseek-ai/DeepSeek-V3"


def _read(text: str) -> LayoutInput:
    return load_layout(LayoutSources(sglang=text), catalogue=model_config, release="0.5.23")


@cache
def _plan(gpus: int) -> tuple[PlanRow, ...]:
    return tuple(plan_layouts(MODEL, gpu("H200"), gpus, top=20))


def _leaders(name: str, groups: int) -> list[str]:
    """Each group's leader as LWS names it (pod `<lws>-<g>` under headless Service `<lws>`),
    at SGLang's default port."""
    return [f"http://{name}-{g}.{name}:30000" for g in range(groups)]


def _worker_urls(docs: list[Any]) -> list[str] | None:
    """The router's `--worker-urls` in a Deployment + Service pair, None without one."""
    if not docs:
        return None
    deployment, service = docs
    assert (deployment["kind"], service["kind"]) == ("Deployment", "Service")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    words = [str(w) for w in container["command"]]
    assert words[:3] == ["python", "-m", "sglang_router.launch_router"]
    assert "--pd-disaggregation" not in words
    return words[words.index("--worker-urls") + 1 : words.index("--host")]


def _round_trip(
    command: str, gpus: int, model: str = MODEL, per_node: int = 8, *, clean: bool = True
) -> None:
    """The manifest holds the printed layout on exactly `gpus` GPUs, as one engine over
    `size` pods or as `replicas` servers of one DP replica each; read back (the second
    path: the manifest reader, not the emitter's own view) SGLang's rules accept it when
    `clean` (what `plan` proposes), else judge it as the printed command launched so."""
    manifest = lws_for(command, gpus, per_node, model_path=model)
    doc, *router = yaml.safe_load_all(manifest)
    lws = doc["spec"]["leaderWorkerTemplate"]
    replicas, size = doc["spec"]["replicas"], lws["size"]
    assert doc["kind"] == "LeaderWorkerSet"
    # one endpoint for clients: a router in front of split replicas, none for one group
    assert _worker_urls(router) == (_leaders("sglang", replicas) if replicas > 1 else None)
    for role in ("leaderTemplate", "workerTemplate"):
        (container,) = lws[role]["spec"]["containers"]
        pod_gpus = container["resources"]["limits"]["nvidia.com/gpu"]
        assert pod_gpus <= per_node and replicas * size * pod_gpus == gpus
        assert ("$(LWS_WORKER_INDEX)" in container["command"]) == (size > 1)
        # reachable from a Service or a router: SGLang's default host is 127.0.0.1
        assert "--host 0.0.0.0" in " ".join(map(str, container["command"]))
    back = _read(manifest)
    printed = _read(
        command.replace(
            " -m sglang.launch_server", f" -m sglang.launch_server --model-path {model}"
        )
    )
    launched = {"nnodes": size} | ({"dp_size": 1} if replicas > 1 else {})
    assert back.config == printed.config.model_copy(update=launched)
    assert back.model == printed.model
    assert any("judged container 'sglang-leader'" in n for n in back.notes)
    groups = f"one of {replicas} replica groups"
    assert any(groups in n for n in back.notes) == (replicas > 1)
    same = validate(back.config, back.model, explain=False)
    assert same.valid if clean else same.valid == validate(back.config, printed.model).valid
    # What `validate` says the manifest runs in all: every replica group, each one server.
    assert back.manifest is not None and back.manifest.replicas == replicas
    assert replicas * same.derived["gpus_used"] == gpus
    if replicas > 1:  # split only where one engine over the nodes would be refused
        assert replicas == printed.config.dp_size
        whole = printed.config.model_copy(update={"nnodes": gpus // per_node})
        assert not validate(whole, printed.model, explain=False).valid


@pytest.mark.parametrize("gpus", [16, 32])
def test_every_layout_plan_proposes_round_trips(gpus: int) -> None:
    rows = _plan(gpus)
    assert len(rows) == 20
    for row in rows:
        _round_trip(row.command, gpus)


@pytest.mark.parametrize("gpus", [16, 32])
def test_every_layout_plan_ranks_by_performance_round_trips(gpus: int) -> None:
    """`plan`'s default ranking (estimated throughput): its top 20, as `plan --emit lws`
    would write them."""
    from meshsat.solver.cli.plan_perf import perf_rows
    from meshsat.solver.perf import Workload

    rows, _, _ = perf_rows(
        MODEL, gpu("H200"), gpus, Workload(1024, 1024, None, None), engine="auto",
        gpus_per_node=None, top=20,
    )  # fmt: skip
    assert len(rows) == 20
    for row in rows:
        _round_trip(row.command, gpus)


#: Models on H100 GPU counts that span nodes of 8, each ranking's top 20 as `--emit lws`
#: writes them. Qwen3-30B-A3B on 16: 7 of the KV ranking's 20 and 15 of the estimate's
#: (its first among them) are plain DP replicas, which one engine over --nnodes 2 made
#: SGLang refuse (TOPO-MULTINODE-DP) before each replica became its own server.
SPANNING = [
    ("Qwen/Qwen3-30B-A3B", 16, "kv"),
    ("Qwen/Qwen3-30B-A3B", 16, "perf"),
    ("Qwen/Qwen3-32B", 24, "kv"),
    ("deepseek-ai/DeepSeek-V3", 32, "kv"),
]


@pytest.mark.parametrize(("model", "gpus", "rank"), SPANNING)
def test_every_manifest_plan_emits_across_nodes_validates_clean(
    model: str, gpus: int, rank: str
) -> None:
    from meshsat.solver.cli.plan_perf import perf_rows
    from meshsat.solver.perf import Workload

    if rank == "kv":
        commands = [r.command for r in plan_layouts(model, gpu("H100"), gpus, top=20)]
    else:
        rows, _, _ = perf_rows(
            model, gpu("H100"), gpus, Workload(1024, 1024, None, None), engine="auto",
            gpus_per_node=None, top=20,
        )  # fmt: skip
        commands = [r.command for r in rows]
    assert len(commands) == 20
    for command in commands:
        _round_trip(command, gpus, model)


@dataclass(frozen=True)
class _Layout:
    values: dict[str, Any]
    config: dict[str, Any]
    derived: dict[str, Any]


def test_plan_drops_a_layout_whose_launch_across_nodes_is_refused() -> None:
    """DeepEP v2's direct mode is NVLink-only: fine on one node of 16, refused over two
    of 8. `launchable` keeps a layout exactly when its manifest reads back clean."""
    from meshsat.solver.cli.node_launch import launchable
    from meshsat.solver.lang.model_spec import ModelSpec

    spec = ModelSpec.from_hf_config(model_config(MODEL))
    fields = {"tp_size": 16, "ep_size": 16, "moe_a2a_backend": "deepep_v2"}
    layouts = [
        _Layout(
            {**fields, "deepep_v2_mode": mode, "chunked_prefill_size": 2048},
            {"dp_size": 1, "enable_dp_attention": False},
            {"gpus_used": 16},
        )
        for mode in ("direct", "hybrid")
    ]
    for per_node, kept in ((16, ["direct", "hybrid"]), (8, ["hybrid"])):
        got = launchable(layouts, 16, per_node, model=spec, given={}, sglang_version=None)
        assert [lay.values["deepep_v2_mode"] for lay in got] == kept
        for lay in layouts:
            words = ["python", "-m", "sglang.launch_server", *_flags(lay.values)]
            back = _read(lws_for(" ".join(words), 16, per_node, model_path=MODEL))
            clean = validate(back.config, back.model, explain=False).valid
            assert clean == (lay.values["deepep_v2_mode"] in kept)


def _flags(values: dict[str, Any]) -> list[str]:
    return [w for k, v in values.items() for w in (f"--{k.replace('_', '-')}", str(v))]


@settings(max_examples=30, deadline=None)
@given(data=st.data(), gpus=st.sampled_from([16, 32]))
def test_any_fitting_layout_round_trips(data: st.DataObject, gpus: int) -> None:
    space = _space(gpus)
    i = data.draw(st.integers(0, len(space.candidates) - 1))
    _round_trip(space.candidates[i].command, gpus, clean=False)


@cache
def _space(gpus: int):  # type: ignore[no-untyped-def]
    return layout_space(gpus, MODEL, "H200", sglang_version="0.5.23")


def test_plan_and_fix_emit_through_the_cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Split replicas come with a router that `validate` reads back clean, naming exactly
    each replica group's leader (the deployment reader, not the test's YAML reading); one
    engine over two pods comes alone and reads back as one job."""
    path = tmp_path / "lws.yaml"
    r = run_cli(capsys, "plan", "-m", MODEL, "--gpu", "H200", "--gpus", "16", "--emit", "lws",
                "--pick", "3", "--name", "ds", "--image", "img:1")  # fmt: skip
    assert r.code == 0
    docs = list(yaml.safe_load_all(r.out))
    spec = docs[0]["spec"]
    assert (spec["replicas"], spec["leaderWorkerTemplate"]["size"]) == (2, 1)
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("LeaderWorkerSet", "ds"), ("Deployment", "ds-router"), ("Service", "ds-router")
    ]  # fmt: skip
    path.write_text(r.out, encoding="utf-8")
    v = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    report = json.loads(v.out)["deployment"]
    assert v.code == 0 and report["valid"] and report["routers"] == 1
    assert report["findings"] == [] and report["servers"]["aggregated"] == spec["replicas"]
    assert report["gpus"] == 16
    found = read_deployment(r.out, load_server(None, "0.5.23"))
    assert found is not None
    (router,) = found.routers
    assert not router.pd and [t.url for t in router.workers] == _leaders("ds", 2)
    path.write_text(r.out.replace("ds-1.ds:30000", "ds-1.ds:30001"), encoding="utf-8")
    v = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    (finding,) = json.loads(v.out)["deployment"]["findings"]
    assert finding["rule"] == "ROUTER-UNKNOWN-URL" and "ds-1.ds:30001" in finding["message"]
    r = run_cli(capsys, "plan", "-m", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--gpus", "16",
                "--rank", "kv", "--emit", "lws", "--name", "q")  # fmt: skip
    (doc,) = yaml.safe_load_all(r.out)
    assert (doc["spec"]["replicas"], doc["spec"]["leaderWorkerTemplate"]["size"]) == (1, 2)
    path.write_text(r.out, encoding="utf-8")
    v = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    assert "judged container 'sglang-leader' of LeaderWorkerSet/q (leader)" in v.err
    assert v.code == 0 and json.loads(v.out)["valid"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(lws_manifest(["python", "-m", "sglang.launch_server", "--tp", "16",
                                 "--attn-cp-size", "3"], nodes=2, gpus_per_node=8))  # fmt: skip
    f = run_cli(capsys, "fix", "--sglang-file", str(bad), "--gpus", "16", "--emit", "lws")
    assert f.code == 0
    fixed = _read(f.out)
    (leader,) = yaml.safe_load(f.out)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"][
        "containers"
    ]
    assert leader["command"].count("--nnodes") == 1  # the LWS's, not the fixed command's too
    assert fixed.config.nnodes == 2 and validate(fixed.config).valid
    assert fixed.config.tp_size * fixed.config.pp_size == 16


POD = """\
apiVersion: v1
kind: Pod
metadata: {name: one}
spec:
  containers:
  - name: proxy
    image: envoy
    command: ["envoy", "-c", "/etc/envoy.yaml"]
  - name: server
    image: lmsysorg/sglang
    env:
    - {name: SGLANG_ENABLE_CP_V2, value: "1"}
    - {name: TP, value: "8"}
    - name: FROM_SECRET
      valueFrom: {secretKeyRef: {name: s, key: k}}
    command: ["python3", "-m", "sglang.launch_server"]
    args: ["--tp", "$(TP)", "--attn-cp-size", "2", "--enable-prefill-cp", "--cp-strategy",
           "zigzag", "--dp", "$(FROM_SECRET)"]
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: dep}
spec:
  template:
    spec:
      containers:
      - name: sglang
        image: lmsysorg/sglang
        command: ["/bin/bash", "-c"]
        args:
        - |
          echo starting
          python3 -m sglang.launch_server \\
            --model-path Qwen/Qwen3-30B-A3B \\
            --tp 4 --ep-size 4 \\
            --port 30000
"""

STATEFULSET = """\
apiVersion: v1
kind: Service
metadata: {name: svc}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sts}
spec:
  template:
    spec:
      containers:
      - name: sglang
        env: [{name: NODES, value: "2"}]
        command: ["sh", "-c", "sglang serve --tp 16 --nnodes $NODES --node-rank ${POD_INDEX}"]
"""


def test_a_pod_judges_the_sglang_container_with_its_env() -> None:
    layout = _read(POD)
    assert layout.config.tp_size == 8 and layout.config.attn_cp_size == 2
    assert layout.config.env_enable_cp_v2 is True
    assert layout.config.dp_size == 1  # $(FROM_SECRET) cannot be known: left unset
    assert any("judged container 'server' of Pod/one" in n for n in layout.notes)
    assert any("dp_size" in n for n in layout.notes)


def test_a_deployment_with_a_shell_block() -> None:
    layout = _read(DEPLOYMENT)
    assert (layout.config.tp_size, layout.config.ep_size) == (4, 4)
    assert layout.model_source is not None
    assert any("Deployment/dep" in n for n in layout.notes)


def test_a_statefulset_among_other_documents() -> None:
    layout = _read(STATEFULSET)
    assert layout.config.tp_size == 16 and layout.config.nnodes == 2
    assert any("StatefulSet/sts" in n for n in layout.notes)


def test_a_manifest_without_sglang_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(InputError, match="no container of the manifest launches SGLang"):
        manifest_launch(POD.replace("sglang.launch_server", "http.server"))
    path = tmp_path / "m.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nspec: [unclosed\n", encoding="utf-8")
    r = run_cli(capsys, "validate", "--sglang-file", str(path))
    assert r.code == 2 and r.err.startswith("meshsat: error:") and r.err.count("\n") == 1


def test_single_node_manifest_has_no_node_flags() -> None:
    text = lws_manifest(command_line_words(), nodes=1, gpus_per_node=8)
    (container,) = yaml.safe_load(text)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"][
        "containers"
    ]
    assert "--nnodes" not in container["command"]
    assert _read(text).config.tp_size == 8


def command_line_words() -> list[str]:
    from meshsat.solver.lang.config import Config

    return command_line(Config(tp_size=8)).split()


#: Containers as a manifest holds them, and what the kubelet runs (written from how `sh -c`
#: takes its script and `$0`, `$1`, ... and how Kubernetes and compose list env).
SHELL_SCRIPT = "python3 -m sglang.launch_server --tp 4"
CONTAINERS: list[tuple[dict[str, Any], ContainerCommand]] = [
    (
        {"command": ["python3", "-m", "x"], "args": ["--tp", 8]},
        ContainerCommand(("python3", "-m", "x", "--tp", "8"), (), None),
    ),
    (
        {"command": "python3 -m x --tp '8'  # compose string"},
        ContainerCommand(("python3", "-m", "x", "--tp", "8"), (), None),
    ),
    (
        {"command": ["/bin/bash", "-c"], "args": [SHELL_SCRIPT, "arg0", "--tp", "2"]},
        ContainerCommand(("/bin/bash", "-c", SHELL_SCRIPT, "arg0", "--tp", "2"), (), SHELL_SCRIPT),
    ),
    (
        {"command": ["/usr/bin/env", "bash", "-e", "-x", "-c", SHELL_SCRIPT]},
        ContainerCommand(
            ("/usr/bin/env", "bash", "-e", "-x", "-c", SHELL_SCRIPT), (), SHELL_SCRIPT
        ),
    ),
    (
        {"command": ["sh", "run.sh", "-c", "x"]},  # -c is the script's argument, not sh's
        ContainerCommand(("sh", "run.sh", "-c", "x"), (), None),
    ),
    (
        {"command": ["envoy", "-c", "/etc/envoy.yaml"]},
        ContainerCommand(("envoy", "-c", "/etc/envoy.yaml"), (), None),
    ),
    (
        {
            "args": ["--tp", "$(TP)"],
            "env": [
                {"name": "TP", "value": "8"},
                {"name": "N", "value": 2},
                {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                {"name": "NULL", "value": None},
            ],
        },
        ContainerCommand(("--tp", "$(TP)"), (("TP", "8"), ("N", "2")), None),
    ),
    (
        {"command": ["sglang", "serve"], "environment": {"A": "1", "B": None, "C": 0}},
        ContainerCommand(("sglang", "serve"), (("A", "1"), ("C", "0")), None),
    ),
]


@pytest.mark.parametrize(("container", "runs"), CONTAINERS)
def test_what_a_container_runs(container: dict[str, Any], runs: ContainerCommand) -> None:
    assert container_command(container) == runs


def test_both_manifest_readers_read_a_pod_alike() -> None:
    """A whole manifest goes through `k8s.py` for `--sglang` and through `manifest.py` for
    `meshsat launch`: both read the same launch out of each container shape."""
    shapes = [
        'command: ["python3", "-m", "sglang.launch_server"]\n    args: ["--tp", "4", "--dp", "2"]',
        'command: ["/bin/sh", "-c"]\n    args: ["python3 -m sglang.launch_server --tp 4 --dp 2"]',
        'command: ["bash", "-e", "-c", "sglang serve --tp 4 --dp 2", "--pp", "2"]',
    ]
    for shape in shapes:
        text = f"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: s\n    {shape}\n"
        by_pod = parse_sglang_command(manifest_launch(text).text).values
        by_list = parse_sglang_command(text).values
        assert by_pod == by_list and (by_pod["tp_size"], by_pod["dp_size"]) == (4, 2), shape
        assert "pp_size" not in by_pod


def test_keep_ranks_as_the_kept_layouts_alone() -> None:
    """`keep` asks one member a shape where it can; the ranking is the one of the kept
    layouts alone (the reference: filter first, then rank)."""
    from meshsat import solver
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.perf import PerfModel, Workload
    from meshsat.solver.perf.disagg import role_layouts
    from meshsat.solver.perf.ranking import rank_layouts

    model = "Qwen/Qwen3-30B-A3B"
    spec = ModelSpec.from_hf_config(model_config(model))
    layouts = list(solver.enumerate(16, model=spec))
    pm = PerfModel(model, gpu("H100"), Workload(1024, 1024, None, None), engine="roofline")

    def keep(values: Any, config: Any, derived: Any) -> bool:
        # Within a shape (prefill CP is not estimated) and whole shapes (tp 2).
        return bool(values["enable_prefill_cp"] and config["tp_size"] != 2)

    kept = [lay for lay in layouts if keep(lay.values, lay.config, lay.derived)]
    got = rank_layouts(layouts, pm, keep=keep)
    want = rank_layouts(kept, pm)
    assert [(r.values, r.estimate) for r in got] == [(r.values, r.estimate) for r in want]
    assert len(want) < len(rank_layouts(layouts, pm))
    # `plan --disagg`'s roles: the same contract (`role_layouts`).
    roles = role_layouts(layouts, pm, "prefill", keep)
    assert [(r.values, r.parallel) for r in roles] == [
        (r.values, r.parallel) for r in role_layouts(kept, pm, "prefill")
    ]


@pytest.mark.parametrize("name", ["Bad_Name!", "", "UPPER_case", "-lead", "a" * 41])
def test_a_name_kubernetes_refuses_is_bad_input(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """`--name` becomes `metadata.name` and the pods' and services' names: the API server
    refuses anything but an RFC 1123 label (`kubectl apply` failed after meshsat wrote the
    manifest with exit 0)."""
    for command in (
        ["plan", "-m", "Qwen/Qwen3-0.6B", "--gpu", "H100", "--gpus", "1"],
        ["fix", "--set", "tp_size=3", "--gpus", "2"],
    ):
        run = run_cli(capsys, *command, "--emit", "lws", "--name", name)
        assert run.code == 2 and run.out == "" and run.err.count("\n") == 1, run.err
        assert "is not a Kubernetes name" in run.err
    good = run_cli(capsys, "plan", "-m", "Qwen/Qwen3-0.6B", "--gpu", "H100", "--gpus", "1",
                   "--emit", "lws", "--name", "qwen-0-6b")  # fmt: skip
    assert good.code == 0 and "name: qwen-0-6b" in good.out
