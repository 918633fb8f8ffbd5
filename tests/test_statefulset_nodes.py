"""A StatefulSet whose pods are one server's nodes (SGLang's
docker/k8s-sglang-distributed-sts.yaml: `replicas: N`, `--nnodes N --node-rank $POD_INDEX`)
inside a PD deployment, and `fix` fitting a layout to the pods a manifest object starts.

Oracles: the same deployment written as a shell script, one launch per node with its
`--node-rank` (which the reader has always grouped into one server per job), and
`validate` on the command `fix` prints, put back into the manifest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import Run, run_cli

MODEL = "deepseek-ai/DeepSeek-V3"


def _launch(role: str, nnodes: int, rank: str) -> list[str]:
    return [
        "python3", "-m", "sglang.launch_server", "--model-path", MODEL,
        "--disaggregation-mode", role, "--tp", "16", "--nnodes", str(nnodes),
        "--node-rank", rank, "--dist-init-addr", f"{role}-0.{role}:5000",
        "--host", "0.0.0.0",
    ]  # fmt: skip


def _statefulset(role: str, replicas: int, nnodes: int = 2) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": role},
        "spec": {
            "replicas": replicas,
            "serviceName": role,
            "template": {"spec": {"containers": [
                {"name": "sglang", "command": _launch(role, nnodes, "$(POD_INDEX)")}
            ]}},
        },
    }  # fmt: skip


ROUTER = [
    "python3", "-m", "sglang_router.launch_router", "--pd-disaggregation",
    "--prefill", "http://prefill-0.prefill:30000", "--decode", "http://decode-0.decode:30000",
]  # fmt: skip


def _router(command: list[str]) -> dict[str, object]:
    """A Deployment of one router running `command`."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "router"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "router", "command": command}
        ]}}},
    }  # fmt: skip


def _pd_manifest(prefill_pods: int, decode_pods: int) -> str:
    docs = (
        _statefulset("prefill", prefill_pods),
        _statefulset("decode", decode_pods),
        _router(ROUTER),
    )
    return yaml.safe_dump_all(docs, sort_keys=False)


def _pd_script() -> str:
    """The deployment of `_pd_manifest(2, 2)` as a script: each pod a launch of its own."""
    lines = [
        " ".join(_launch(role, 2, str(rank))) + " &"
        for role in ("prefill", "decode")
        for rank in range(2)
    ]
    return "\n".join([*lines, " ".join(ROUTER)]) + "\n"


def _validate(capsys: pytest.CaptureFixture[str], path: Path, text: str) -> Run:
    path.write_text(text)
    return run_cli(capsys, "validate", "--sglang-file", str(path), "--json")


def _shape(doc: dict[str, object]) -> tuple[object, ...]:
    deployment = doc["deployment"]
    assert isinstance(deployment, dict)
    roles = doc["roles"]
    assert isinstance(roles, list)
    per_role = sorted((r["role"], r["gpus"], r["replicas"]) for r in roles)
    return deployment["servers"], deployment["gpus"], tuple(per_role)


def test_statefulsets_of_a_pd_deployment_are_one_server_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two pods of `--nnodes 2` are one 16-GPU server, as the same job written as two
    launches is; before, each StatefulSet read as 2 servers (64 GPUs in all)."""
    manifest = _validate(capsys, tmp_path / "pd.yaml", _pd_manifest(2, 2))
    script = _validate(capsys, tmp_path / "pd.sh", _pd_script())
    assert manifest.code == script.code == 0, manifest.out + script.out
    shape = _shape(json.loads(manifest.out))
    assert shape == _shape(json.loads(script.out))
    assert shape[1] == 32


def test_a_statefulset_scaled_past_its_nnodes_is_refused_in_the_deployment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = _validate(capsys, tmp_path / "pd.yaml", _pd_manifest(2, 3))
    assert run.code == 1, run.out + run.err
    roles = {r["role"]: r for r in json.loads(run.out)["roles"]}
    assert [v["rule"] for v in roles["decode"]["violations"]] == ["JOB-GROUP-SIZE"]
    assert roles["prefill"]["valid"] and roles["decode"]["replicas"] == 1
    (found,) = roles["decode"]["violations"]
    assert "StatefulSet/decode starts 3 pod(s), the nodes of one job" in found["message"]
    assert "pod ordinal 2 launch" in found["message"]


def test_fix_moves_a_statefulset_server_onto_its_pods(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """3 pods of a 16-GPU, `--nnodes 2` launch: 16 GPUs do not split over 3 nodes, so the
    fix takes the 8 GPUs a node gives now on each of the 3 pods, with --nnodes 3; the
    printed command, put back into the StatefulSet, validates."""
    path = tmp_path / "sts.yaml"
    path.write_text(yaml.safe_dump(_statefulset("decode", 3), sort_keys=False))
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--json")
    assert run.code == 0, run.out + run.err
    doc = json.loads(run.out)
    best = doc["fixes"][0]
    assert best["config"]["nnodes"] == 3 and best["gpus_used"] == 24
    assert "JOB-GROUP-SIZE" in best["repairs"]  # what validate named, not only TOPO-NNODES
    assert "set its spec.replicas to 2" in run.err
    table = run_cli(capsys, "fix", "--sglang-file", str(path))
    assert "GPU count 16 → 24 for the 3 pods StatefulSet/decode starts" in table.out
    # `validate --rewrite` fits the launch as `fix` does (it said "already valid").
    rewrite = run_cli(capsys, "validate", "--sglang-file", str(path), "--rewrite")
    assert rewrite.code == 0 and rewrite.out.strip() == best["command_line"]
    command = best["command_line"].split()
    command[command.index("--node-rank") + 1] = "$(POD_INDEX)"
    fixed = _statefulset("decode", 3)
    fixed["spec"]["template"]["spec"]["containers"][0]["command"] = command  # type: ignore[index]
    again = _validate(capsys, path, yaml.safe_dump(fixed, sort_keys=False))
    assert again.code == 0, again.out + again.err


def test_the_deployment_fix_fits_an_aggregated_statefulset_to_its_pods(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The deployment's fix does for each server what `fix` does for one: the server of 3
    pods is moved onto them (--nnodes 3) and the fixed deployment is valid."""
    server = _statefulset("agg", 3)
    command = server["spec"]["template"]["spec"]["containers"][0]["command"]  # type: ignore[index]
    i = command.index("--disaggregation-mode")
    del command[i : i + 2]
    router = ["python3", "-m", "sglang_router.launch_router"]
    lb = _router([*router, "--worker-urls", "http://agg-0.agg:30000"])
    path = tmp_path / "agg.yaml"
    path.write_text(yaml.safe_dump_all((server, lb), sort_keys=False))
    assert _validate(capsys, path, path.read_text()).code == 1
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--json")
    assert run.code == 0, run.out + run.err
    doc = json.loads(run.out)
    assert doc["deployment"]["fixed"]
    (role,) = doc["roles"]
    assert role["fixes"][0]["config"]["nnodes"] == 3
    assert {"field": "nnodes", "old": 2, "new": 3} in role["fixes"][0]["changes"]
    assert "JOB-GROUP-SIZE" in role["fixes"][0]["repairs"]


def test_a_decode_that_must_follow_its_prefill_off_its_pods_keeps_its_nodes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The decode's 3 pods hold no layout that pairs with a 16-GPU prefill (the pair rules
    hold its widths to the prefill's), so no count of nodes fixes the launch: its own 2
    are kept (not a 4 that matches neither the launch nor the pods), and JOB-GROUP-SIZE
    stays, its hint naming the StatefulSet's replicas."""
    path = tmp_path / "pd.yaml"
    path.write_text(_pd_manifest(2, 3))
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--json")
    assert run.code == 1, run.out + run.err
    doc = json.loads(run.out)
    decode = next(r for r in doc["roles"] if r["server"].startswith("decode"))
    assert decode["fixes"][0]["config"]["nnodes"] == 2
    assert not doc["deployment"]["fixed"] and not doc["deployment"]["after"]["valid"]
    table = run_cli(capsys, "fix", "--sglang-file", str(path))
    assert "JOB-GROUP-SIZE" in table.out and "spec.replicas" in table.out
