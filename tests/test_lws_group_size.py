"""JOB-GROUP-SIZE: a LeaderWorkerSet starts `size` pods per group, so its launch's literal
`--nnodes` must be that size (a shell expansion such as `$(LWS_GROUP_SIZE)` follows it).

Oracle: the group size and `--nnodes` each test writes into the YAML, which the reader
sees only as YAML; manifests are the ones `plan --emit lws` writes (the shape of the public
LWS recipes: leader and worker templates running one command), with `--nnodes` edited the
way a hand-written manifest drifts from its `size`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from meshsat.solver.inputs.k8s import lws_manifest
from tests.cli_helpers import Run, run_cli

LAUNCH = ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B", "--tp", "16"]


def _manifest(size: int, nnodes: str, *, role: str | None = None, name: str = "sglang") -> str:
    """The LWS `plan --emit lws` writes for `size` pods of 16 // size GPUs, with the
    command's `--nnodes` replaced by `nnodes` in both templates."""
    words = LAUNCH + ([] if role is None else ["--disaggregation-mode", role])
    doc = yaml.safe_load(lws_manifest(words, nodes=size, gpus_per_node=16 // size, name=name))
    template = doc["spec"]["leaderWorkerTemplate"]
    for part in ("leaderTemplate", "workerTemplate"):
        command = template[part]["spec"]["containers"][0]["command"]
        command[command.index("--nnodes") + 1] = nnodes
    return yaml.safe_dump(doc, sort_keys=False)


def _validate(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> Run:
    path = tmp_path / "lws.yaml"
    path.write_text(text)
    return run_cli(capsys, "validate", "--sglang-file", str(path), "--gpu", "H100", "--json")


@pytest.mark.parametrize(("size", "nnodes"), [(2, 4), (4, 2)])
def test_a_group_size_other_than_nnodes_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, size: int, nnodes: int
) -> None:
    run = _validate(capsys, tmp_path, _manifest(size, str(nnodes)))
    assert run.code == 1, run.err
    (found,) = [v for v in json.loads(run.out)["violations"] if v["rule"] == "JOB-GROUP-SIZE"]
    assert f"starts {size} pod(s) per group" in found["message"]
    assert f"--nnodes {nnodes}:" in found["message"]
    assert ("hangs at start-up" in found["message"]) == (nnodes > size)
    assert "$(LWS_GROUP_SIZE)" in found["hint"]


@pytest.mark.parametrize("nnodes", ["$(LWS_GROUP_SIZE)", "2"])
def test_nnodes_that_follows_the_group_size_is_accepted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, nnodes: str
) -> None:
    run = _validate(capsys, tmp_path, _manifest(2, nnodes))
    assert run.code == 0, run.out + run.err
    assert "JOB-GROUP-SIZE" not in run.out + run.err


def test_each_lws_of_a_pd_deployment_is_held_to_its_own_size(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The deployment reader's path (manifest.py): the prefill LWS of 2 pods says
    --nnodes 4, the decode's follows its size; only the prefill is refused."""
    text = "---\n".join(
        (
            _manifest(2, "4", role="prefill", name="pd-prefill"),
            _manifest(2, "$(LWS_GROUP_SIZE)", role="decode", name="pd-decode"),
        )
    )
    run = _validate(capsys, tmp_path, text)
    assert run.code == 1, run.err
    doc = json.loads(run.out)
    rules = {r["role"]: {v["rule"] for v in r["violations"]} for r in doc["roles"]}
    assert "JOB-GROUP-SIZE" in rules["prefill"] and "JOB-GROUP-SIZE" not in rules["decode"]


def test_fix_emit_lws_writes_a_consistent_group(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(_manifest(2, "4"))
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--gpu", "H100", "--emit", "lws")
    assert run.code == 0, run.err
    doc = yaml.safe_load(run.out)
    command = doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0][
        "command"
    ]
    assert command[command.index("--nnodes") + 1] == "$(LWS_GROUP_SIZE)"
    assert _validate(capsys, tmp_path, run.out).code == 0


@pytest.mark.parametrize(("size", "nnodes"), [(2, 4), (4, 2)])
def test_fix_sets_nnodes_to_the_group_size(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, size: int, nnodes: int
) -> None:
    """`fix` on the manifest prints the leader's command with --nnodes the group's size
    (exit 0); before, the layout read valid and the script's hang went unsaid."""
    path = tmp_path / "bad.yaml"
    path.write_text(_manifest(size, str(nnodes)))
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--gpu", "H100")
    assert run.code == 0, run.out + run.err
    assert f"--nnodes {nnodes} → {size} (JOB-GROUP-SIZE)" in run.out
    (command,) = [line for line in run.out.splitlines() if line.startswith("command:")]
    assert f"--nnodes {size} " in command and f"--nnodes {nnodes} " not in command


#: Two nodes of one job that both say --node-rank 0 (JOB-NODE-RANKS): its layout is valid,
#: the job is not.
SAME_RANK = 2 * (
    "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 4 --nnodes 2 "
    "--node-rank 0 --dist-init-addr 10.0.0.1:5000 &\n"
)


@pytest.mark.parametrize("script", ["same-rank", "lws"])
def test_groups_exits_as_validate_on_a_launch_that_would_not_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, script: str
) -> None:
    """`groups` shows the first node's groups and exits 1 where `validate` does, the
    reasons under "violations" (JSON); a consistent group exits 0 with none."""
    path = tmp_path / "job.txt"
    path.write_text(SAME_RANK if script == "same-rank" else _manifest(2, "4"))
    validated = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    grouped = run_cli(capsys, "groups", "--sglang-file", str(path), "--json")
    assert validated.code == grouped.code == 1, grouped.err
    wrong = {v["rule"] for v in json.loads(grouped.out)["violations"]}
    assert wrong == {v["rule"] for v in json.loads(validated.out)["violations"]}
    assert json.loads(grouped.out)["ranks"]  # the groups are still shown
    path.write_text(_manifest(2, "$(LWS_GROUP_SIZE)"))
    fine = run_cli(capsys, "groups", "--sglang-file", str(path), "--json")
    assert fine.code == 0 and "violations" not in json.loads(fine.out)


def _statefulset(replicas: int, nnodes: int) -> str:
    """The shape of SGLang's docker/k8s-sglang-distributed-sts.yaml: one StatefulSet whose
    pods rank themselves by their ordinal (`--node-rank $POD_INDEX`)."""
    launch = (
        "python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 16 "
        f"--dist-init-addr sglang-master-pod:5000 --nnodes {nnodes} --node-rank $POD_INDEX"
    )
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "distributed-sglang"},
            "spec": {
                "replicas": replicas,
                "template": {"spec": {"containers": [
                    {"name": "sglang", "command": ["/bin/bash", "-c"], "args": [launch]}
                ]}},
            },
        },
        sort_keys=False,
    )  # fmt: skip


def test_a_statefulset_of_multi_node_pods_is_one_server(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """SGLang's StatefulSet recipe: 2 pods, `--nnodes 2`, one server of 16 GPUs. It was read
    as 2 servers of 16 GPUs (32 in all)."""
    run = _validate(capsys, tmp_path, _statefulset(2, 2))
    doc = json.loads(run.out)
    assert run.code == 0 and doc["manifest"]["replicas"] == 1 and doc["manifest"]["gpus"] == 16
    wrong = _validate(capsys, tmp_path, _statefulset(3, 2))
    rules = [v["rule"] for v in json.loads(wrong.out)["violations"]]
    assert wrong.code == 1 and rules == ["JOB-GROUP-SIZE"]
    assert "starts 3 pod(s), the nodes of one job (spec.replicas)" in wrong.out


def test_a_statefulset_of_one_node_pods_runs_a_server_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = _statefulset(3, 1).replace(" --nnodes 1 --node-rank $POD_INDEX", "")
    run = _validate(capsys, tmp_path, text)
    doc = json.loads(run.out)
    assert run.code == 0 and doc["manifest"]["replicas"] == 3


def test_fix_emit_lws_keeps_a_valid_groups_pods(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A valid `--tp 16` group of 4 pods of 4 GPUs (`--nnodes $(LWS_GROUP_SIZE)`) was
    re-emitted as 2 pods of 8, the node size: the pods are what the user runs, so the
    manifest written back has the input's size and GPUs per pod (the oracle: the input)."""
    path = tmp_path / "good.yaml"
    path.write_text(_manifest(4, "$(LWS_GROUP_SIZE)"))
    given = yaml.safe_load(path.read_text())["spec"]["leaderWorkerTemplate"]
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--emit", "lws")
    assert run.code == 0, run.err
    template = yaml.safe_load(run.out)["spec"]["leaderWorkerTemplate"]
    assert template["size"] == given["size"] == 4

    def gpus(t: dict[str, object]) -> object:
        return t["leaderTemplate"]["spec"]["containers"][0]["resources"]["limits"]  # type: ignore[index]

    assert gpus(template) == gpus(given)
