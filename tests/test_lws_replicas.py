"""A manifest object's `spec.replicas` read back: N copies of its server, each its own job.

Oracles: the plan's own worker counts × GPUs per worker (`plan --disagg`) and its GPU count
(`plan`), which the emitted manifests must read back to through `meshsat validate`; and
for hand-built manifests the replicas and tensor-parallel widths the test chose, which
the reader never sees except as YAML.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.cli.node_launch import node_size
from meshsat.solver.cli.plan_cmd import picked_disagg
from meshsat.solver.cli.plan_disagg import DisaggRow, disagg_rows
from meshsat.solver.deployment.model import Deployment
from meshsat.solver.deployment.reader import read_deployment
from meshsat.solver.deployment.validate import judge, load_server
from meshsat.solver.inputs.k8s import lws_manifest, router_manifest
from meshsat.solver.memory.gpus import gpu
from meshsat.solver.packs.registry import get_pack
from meshsat.solver.perf.workload import cli_workload
from tests.cli_helpers import Run, run_cli

RELEASE = "0.5.23"
LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B"]


@cache
def _disagg_rows() -> tuple[DisaggRow, ...]:
    """`plan --disagg`'s top 3 for DeepSeek-V3 on 32 GB200 (the roofline estimate: the
    same rows' shape as the default engine's, in a third of the time)."""
    rows, _, _ = disagg_rows(
        "deepseek-ai/DeepSeek-V3", gpu("GB200"), 32, cli_workload(1024, 1024, None, None,
        no_sla=False), engine="roofline", gpus_per_node=None, top=3, sglang_version=RELEASE,
        progress=lambda done, total: None,
    )  # fmt: skip
    return tuple(rows)


def _validate(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> Run:
    return run_cli(capsys, "validate", "--sglang-file", str(path), "--sglang-version", RELEASE,
                   *extra)  # fmt: skip


def test_every_disagg_manifest_reads_back_with_the_plans_gpus(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each row as `plan --disagg --emit lws` writes it, on the GPU's own nodes and on
    nodes of 4 (groups of 2 pods): `validate` counts every replica group of each role."""
    rows = _disagg_rows()
    assert len(rows) == 3
    default = node_size(gpu("GB200"), 32, None)
    replicated: list[Path] = []  # manifests where a role runs more than one server
    for per_node in (default, 4):
        for pick, row in enumerate(rows, 1):
            text = picked_disagg(list(rows), pick, per_node, model=None, name="pd", image="i")
            path = tmp_path / f"pd-{per_node}-{pick}.yaml"
            path.write_text(text)
            docs = [d for d in yaml.safe_load_all(text) if d["kind"] == "LeaderWorkerSet"]
            groups = {d["metadata"]["name"]: d["spec"]["replicas"] for d in docs}
            run = _validate(capsys, path, "--json")
            assert run.code == 0, run.err
            doc = json.loads(run.out)
            planned = sum(
                getattr(row, f"{r}_workers") * getattr(row, f"{r}_gpus_per_worker")
                for r in ("prefill", "decode")
            )
            assert doc["deployment"]["gpus"] == planned, (per_node, pick)
            servers = {"prefill": groups["pd-prefill"], "decode": groups["pd-decode"]}
            assert doc["deployment"]["servers"] == {**servers, "aggregated": 0}
            # One entry per role, its replicas counted, not N identical entries.
            assert [(r["role"], r["replicas"]) for r in doc["roles"]] == list(servers.items())
            for role in doc["roles"]:
                assert role["gpus"] == role["derived"]["gpus_used"]  # one copy's
                workers = getattr(row, f"{role['role']}_workers")
                assert role["replicas"] % workers == 0  # split DP replicas multiply them
            if max(servers.values()) > 1:
                replicated.append(path)
                text = _validate(capsys, path)
                assert text.code == 0
                for role_name, n in servers.items():
                    assert (f"({role_name} ×{n}, " in text.out) == (n > 1), text.out
                head = f"deployment: {sum(servers.values())} server(s), 1 router(s), {planned} "
                assert head in text.out
    assert replicated  # the case this test is for


def test_aggregated_manifest_reads_back_with_the_plans_gpus(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`plan --emit lws`'s first row for Qwen3-30B-A3B on 16 H100 is plain DP 8 split into
    8 LWS groups of one server of 2 GPUs behind a router: `validate` reads a deployment of
    8 servers and 16 GPUs."""
    args = ["plan", "--model", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--gpus", "16"]
    plan = run_cli(capsys, *args, "--emit", "lws")
    assert plan.code == 0, plan.err
    lws = next(yaml.safe_load_all(plan.out))
    replicas = lws["spec"]["replicas"]
    assert replicas > 1  # the case this test is for
    path = tmp_path / "lws.yaml"
    path.write_text(plan.out)
    run = _validate(capsys, path, "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)["deployment"]
    assert doc["servers"]["aggregated"] == replicas and doc["gpus"] == 16
    assert doc["routers"] == 1
    text = _validate(capsys, path)
    assert f"{replicas} server(s), 1 router(s), 16 GPU(s)" in text.out


# --- hand-built manifests ----------------------------------------------------------------


def _server(kind: str, name: str, role: str, tp: int, size: int, replicas: int | None) -> str:
    """One server object of `role` on `tp` GPUs: a LeaderWorkerSet of `size` pods, or a
    Deployment/StatefulSet of one pod; `replicas` None leaves the field out."""
    words = [*LAUNCH, "--tp", str(tp), "--disaggregation-mode", role, "--host", "0.0.0.0"]
    if kind == "LeaderWorkerSet":
        doc = yaml.safe_load(lws_manifest(words, nodes=size, gpus_per_node=tp // size, name=name))
    else:
        container = {"name": "s", "image": "i", "command": words}
        template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}
        spec = {"selector": {"matchLabels": {"app": name}}, "template": template}
        doc = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    if replicas is None:
        doc["spec"].pop("replicas", None)
    else:
        doc["spec"]["replicas"] = replicas
    return yaml.safe_dump(doc, sort_keys=False)


_ROUTER = router_manifest(
    ["python", "-m", "sglang_router.launch_router", "--pd-disaggregation", "--prefill",
     "http://p:30000", "--decode", "http://d:30000"], name="r", port=30000,
)  # fmt: skip

#: A server object: kind, LWS size, TP width, replicas (None: the field left out).
_OBJECT = st.one_of(
    st.tuples(st.just("LeaderWorkerSet"), st.sampled_from([1, 2]), st.sampled_from([2, 4, 8]),
              st.none() | st.integers(1, 6)),
    st.tuples(st.sampled_from(["Deployment", "StatefulSet"]), st.just(1),
              st.sampled_from([1, 2, 4]), st.none() | st.integers(1, 6)),
)  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(
    prefill=st.lists(_OBJECT, min_size=1, max_size=2),
    decode=st.lists(_OBJECT, min_size=1, max_size=2),
)
def test_any_replicas_per_role_count_as_that_many_servers(
    prefill: list[tuple[str, int, int, int | None]],
    decode: list[tuple[str, int, int, int | None]],
) -> None:
    """Random objects per role, each with its replicas (or none: Kubernetes' 1): each
    object is one entry of its role, the role counts the sum of its objects' replicas and
    the deployment's GPUs are Σ replicas × TP, the width the test wrote."""
    docs, expected = [], {}
    for role, objects in (("prefill", prefill), ("decode", decode)):
        for i, (kind, size, tp, replicas) in enumerate(objects):
            docs.append(_server(kind, f"{role}-{i}", role, tp, size, replicas))
            expected[f"{role}-{i}"] = (role, replicas or 1, tp)
    found = read_deployment("---\n".join([*docs, _ROUTER]), load_server(None, RELEASE))
    assert isinstance(found, Deployment)
    report = judge(found, get_pack(RELEASE))
    assert [(r.role, r.replicas, r.gpus) for r in report.roles] == list(expected.values())
    for role in ("prefill", "decode"):
        assert report.servers[role] == sum(n for r, n, _ in expected.values() if r == role)
    assert report.gpus == sum(n * tp for _, n, tp in expected.values())


def test_one_server_objects_give_their_replicas(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A Deployment or StatefulSet of one server (no PD role), and an LWS of 2-pod groups:
    `validate --json` names the object, its replicas (absent: 1) and all copies' GPUs."""
    container = {"name": "s", "command": [*LAUNCH, "--tp", "2"]}
    pod = yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one"},
         "spec": {"containers": [container]}}
    )  # fmt: skip
    cases = [
        (_server("Deployment", "a", "null", 4, 1, 3), "Deployment/a", 3, 4),
        (_server("StatefulSet", "b", "null", 2, 1, None), "StatefulSet/b", 1, 2),
        (_server("LeaderWorkerSet", "c", "null", 8, 2, 5), "LeaderWorkerSet/c", 5, 8),
        (pod, "Pod/one", 1, 2),
    ]
    for text, owner, replicas, tp in cases:
        path = tmp_path / "one.yaml"
        path.write_text(text)
        run = _validate(capsys, path, "--json")
        assert run.code == 0, run.err
        doc = json.loads(run.out)
        assert doc["manifest"] == {"object": owner, "replicas": replicas, "gpus": replicas * tp}


@pytest.mark.parametrize("value", ["0", "-1", "2.5", '"3"', "true"])
def test_replicas_that_run_no_server_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str
) -> None:
    """0, a negative number or anything but a whole number: one error line naming the
    object, nothing on stdout, whichever role of a PD manifest has it, and for a single
    server (`groups` and `fix` read the manifest the same way)."""
    decode = _server("StatefulSet", "d", "decode", 4, 1, 1)
    prefill = _server("LeaderWorkerSet", "p", "prefill", 4, 1, 2)
    bad = f"replicas: {value}"
    cases = {
        "LeaderWorkerSet/p": [prefill.replace("replicas: 2", bad), decode, _ROUTER],
        "StatefulSet/d": [prefill, decode.replace("replicas: 1", bad), _ROUTER],
        "Deployment/a": [_server("Deployment", "a", "decode", 4, 1, 2).replace("replicas: 2", bad)],
    }
    commands = ("validate", "groups", "fix") if value == "0" else ("validate",)
    for where, docs in cases.items():
        path = tmp_path / "bad.yaml"
        path.write_text("---\n".join(docs))
        for command in commands:
            run = run_cli(capsys, command, "--sglang-file", str(path))
            assert run.code == 2 and run.out == "", (command, run)
            (line,) = run.err.strip().splitlines()
            assert line.startswith(f"meshsat: error: {where}: spec.replicas "), line


def test_a_router_deployments_replicas_are_not_servers(tmp_path: Path) -> None:
    """A router's object is not a server: its replicas add no server and no GPU."""
    router = _ROUTER.replace("replicas: 1", "replicas: 3")
    prefill, decode = (
        _server("LeaderWorkerSet", "p", "prefill", 4, 1, 3),
        _server("LeaderWorkerSet", "d", "decode", 4, 1, None),
    )
    found = read_deployment("---\n".join([prefill, decode, router]), load_server(None, RELEASE))
    assert isinstance(found, Deployment)
    report = judge(found, get_pack(RELEASE))
    assert report.servers == {"prefill": 3, "decode": 1, "aggregated": 0}
    assert report.gpus == 16 and report.routers == 1


def test_a_kind_list_reads_as_its_items(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`kubectl get -o yaml` wraps several objects in one `kind: List`: read as its items,
    a PD deployment (LWS groups with replicas, a router) and a single server's manifest
    give what the same objects as separate documents give, and that is what the test
    wrote (3 prefill groups and 1 decode of TP 4; a Deployment of 3 copies of TP 4)."""
    pd = [
        _server("LeaderWorkerSet", "p", "prefill", 4, 2, 3),
        _server("LeaderWorkerSet", "d", "decode", 4, 1, None),
        _ROUTER,
    ]
    single = [_server("Deployment", "a", "null", 4, 1, 3)]
    for docs, key, expected in (
        (pd, "deployment", {"prefill": 3, "decode": 1, "aggregated": 0}),
        (single, "manifest", {"object": "Deployment/a", "replicas": 3, "gpus": 12}),
    ):
        read = []
        for i, text in enumerate(
            (
                "---\n".join(docs),
                yaml.safe_dump(
                    {
                        "apiVersion": "v1",
                        "kind": "List",
                        "items": list(yaml.safe_load_all("---\n".join(docs))),
                    },
                    sort_keys=False,
                ),
            )
        ):
            path = tmp_path / f"{key}-{i}.yaml"
            path.write_text(text)
            run = _validate(capsys, path, "--json")
            assert run.code == 0, run.err
            read.append(json.loads(run.out)[key])
        assert read[0] == read[1]
        got = read[1]["servers"] if key == "deployment" else read[1]
        assert got == expected


@settings(max_examples=20, deadline=None)
@given(replicas=st.integers(1, 4), named=st.sets(st.integers(0, 5), max_size=5))
def test_a_router_names_each_group_leader_of_a_scaled_lws(replicas: int, named: set[int]) -> None:
    """A prefill LeaderWorkerSet of `replicas` groups and a router listing the leaders of
    the groups `named` (`<lws>-<g>.<lws>`, as `leader_urls` writes them; g past the
    replicas included): ROUTER-REPLICA-URLS exactly when the groups named are not the
    groups the object runs, naming the missing and the absent ones; silent when the router
    names no leader (a Service URL: what it reaches is not known)."""
    urls = [f"http://p-{g}.p:30000" for g in sorted(named)] or ["http://p:30000"]
    # One --prefill per URL: sglang_router reads `--prefill URL [PORT]`, a second URL
    # after the first being a bootstrap port it refuses.
    prefills = [w for url in urls for w in ("--prefill", url)]
    router = router_manifest(
        ["python", "-m", "sglang_router.launch_router", "--pd-disaggregation",
         *prefills, "--decode", "http://d-0.d:30000"], name="r", port=30000,
    )  # fmt: skip
    prefill = _server("LeaderWorkerSet", "p", "prefill", 4, 1, replicas)
    decode = _server("LeaderWorkerSet", "d", "decode", 4, 1, None)
    found = read_deployment("---\n".join([prefill, decode, router]), load_server(None, RELEASE))
    assert isinstance(found, Deployment)
    report = judge(found, get_pack(RELEASE))
    flagged = [f for f in report.findings if f.rule == "ROUTER-REPLICA-URLS"]
    if not named or named == set(range(replicas)):
        assert flagged == []
        return
    (finding,) = flagged
    assert finding.severity == "warning" and finding.servers == (found.servers[0].name,)
    missing = sorted(set(range(replicas)) - named)
    extra = sorted(named - set(range(replicas)))
    assert ("get no work" in finding.message) == bool(missing)
    assert ("do not exist" in finding.message) == bool(extra)
    for groups in (missing, extra):
        assert not groups or ", ".join(map(str, groups)) in finding.message


def _compose(services: dict[str, tuple[list[str], dict[str, object]]]) -> str:
    """A Docker Compose file: each service its command and the keys given (`deploy`,
    `scale`)."""
    doc = {
        "services": {n: {"image": "i", "command": w, **keys} for n, (w, keys) in services.items()}
    }
    return yaml.safe_dump(doc, sort_keys=False)


@settings(max_examples=10, deadline=None)
@given(prefill=st.integers(1, 4), decode=st.none() | st.integers(1, 4), scale=st.booleans())
def test_compose_replicas_count_as_servers(prefill: int, decode: int | None, scale: bool) -> None:
    """A compose service's `deploy.replicas` (else `scale`; absent: 1) are copies of its
    server, as an object's `spec.replicas`: the PD deployment counts each role's copies
    and Σ copies × the TP the test wrote; alone, a service is one job whose copies
    `validate --json` gives."""

    def server(role: str, tp: int, port: int) -> list[str]:
        return [*LAUNCH, "--tp", str(tp), "--disaggregation-mode", role, "--port", str(port)]

    decode_keys: dict[str, object] = {}
    if decode is not None:
        decode_keys = {"scale": decode} if scale else {"deploy": {"replicas": decode}}
    text = _compose({
        "prefill": (server("prefill", 4, 30000), {"deploy": {"replicas": prefill}}),
        "decode": (server("decode", 2, 30001), decode_keys),
        "router": (["python", "-m", "sglang_router.launch_router", "--pd-disaggregation",
                    "--prefill", "http://prefill:30000", "--decode", "http://decode:30001"], {}),
    })  # fmt: skip
    found = read_deployment(text, load_server(None, RELEASE))
    assert isinstance(found, Deployment)
    report = judge(found, get_pack(RELEASE))
    decodes = decode or 1
    assert report.servers == {"prefill": prefill, "decode": decodes, "aggregated": 0}
    assert report.gpus == prefill * 4 + decodes * 2


def test_a_compose_service_alone_gives_its_replicas(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One service read as one job: `validate --json` names the service, its copies and
    their GPUs; 0 copies exit 2 naming `deploy.replicas`."""
    path = tmp_path / "compose.yaml"
    path.write_text(_compose({"s": ([*LAUNCH, "--tp", "2"], {"deploy": {"replicas": 3}})}))
    run = _validate(capsys, path, "--json")
    assert run.code == 0, run.err
    assert json.loads(run.out)["manifest"] == {
        "object": "compose service s", "replicas": 3, "gpus": 6
    }  # fmt: skip
    path.write_text(_compose({"s": ([*LAUNCH, "--tp", "2"], {"deploy": {"replicas": 0}})}))
    run = _validate(capsys, path)
    assert run.code == 2 and run.out == ""
    assert run.err.strip() == (
        "meshsat: error: compose service s: deploy.replicas is 0: it runs no server to check "
        "(give 1 or more)"
    )
