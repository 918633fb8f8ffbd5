"""HOST-GPU-OVERLAP and HOST-GPU-COUNT: servers of one script on one machine.

Oracles: SGLang's own placement as recorded per release (tests/fixtures/placement, the
launch statements of each release run by fidelity/placement.py), read here as rows and
intersected directly; the public single-machine PD recipes of tests/fixtures/pd, which
must stay accepted, and one of them seeded broken.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.deployment.fix import DeploymentFix, fix_deployment
from meshsat.solver.deployment.validate import DeploymentReport, judge, load_server, read
from meshsat.solver.inputs.layout_input import LayoutSources
from meshsat.solver.packs import get_pack
from tests.test_deployment import recipe, verdict
from tests.test_placement import recorded

RELEASES = ("0.4.6.post5", "0.5.23")
#: The single-machine recipes: a prefill and a decode server (and a router) on one host.
ONE_MACHINE = (
    ("sglang-docs-llama-mooncake.sh", "0.5.23"),
    ("sglang-docs-llama-nixl.sh", "0.5.23"),
    ("sglang-docs-0.4.6-mini-lb.sh", "0.4.6.post5"),
)
L = "python -m sglang.launch_server --model-path m"


def single_node_points(release: str) -> list[dict[str, object]]:
    return [
        p
        for p in recorded(release)["points"]
        if p["nnodes"] == 1 and not p["scale_joiner"] and p["tp"] * p["pp"] * p["replicas"] <= 8
    ]


def shared(report: DeploymentReport) -> list[set[int]]:
    """The GPU ids each HOST-GPU-OVERLAP finding names (`0-3, 6` read back as runs)."""
    out = []
    for f in report.findings:
        if f.rule not in ("HOST-GPU-OVERLAP", "HOST-GPU-UNPLACED"):
            continue
        match = re.search(r"take its GPU\(s\) ([\d, -]+):", f.message)
        assert match is not None, f.message
        ids: set[int] = set()
        for part in match.group(1).split(", "):
            lo, _, hi = part.partition("-")
            ids |= set(range(int(lo), int(hi or lo) + 1))
        out.append(ids)
    return out


@st.composite
def servers(draw: st.DrawFn) -> tuple[str, list[tuple[dict[str, object], list[int] | None]]]:
    release = draw(st.sampled_from(RELEASES))
    points = single_node_points(release)
    two = []
    for _ in range(2):
        point = draw(st.sampled_from(points))
        visible = draw(st.none() | st.permutations(range(8)).map(list))
        if visible is not None:
            visible = visible[: draw(st.integers(0, 8))]
        two.append((point, visible))
    return release, two


@settings(max_examples=40, deadline=None)
@given(servers())
def test_overlap_is_the_intersection_of_sglangs_recorded_placements(
    drawn: tuple[str, list[tuple[dict[str, object], list[int] | None]]],
) -> None:
    release, two = drawn
    lines, physical = [], []
    for (point, visible), role, port in zip(
        two, ("prefill", "decode"), (30000, 30001), strict=True
    ):
        env = "" if visible is None else f"CUDA_VISIBLE_DEVICES={','.join(map(str, visible))} "
        lines.append(
            f"{env}{L} --disaggregation-mode {role} --port {port} --tp {point['tp']} "
            f"--pp {point['pp']} --dp {point['replicas']} --base-gpu-id {point['base_gpu_id']} "
            f"--gpu-id-step {point['gpu_id_step']}"
        )
        local = {row[4] for row in point["launches"]}
        physical.append(
            local if visible is None else {visible[g] for g in local if g < len(visible)}
        )
    expected = physical[0] & physical[1]
    report = verdict("\n".join(lines) + "\n", release)
    assert shared(report) == ([expected] if expected else [])
    assert all(f.severity == "error" for f in report.findings if f.rule == "HOST-GPU-OVERLAP")


@pytest.mark.parametrize(("name", "release"), ONE_MACHINE)
def test_single_machine_recipes_are_accepted_and_seeded_overlap_is_refused(
    name: str, release: str
) -> None:
    text = recipe(name)
    assert not [f for f in verdict(text, release).findings if f.rule.startswith("HOST-")]
    # both servers on GPUs 0-3: the decode's --base-gpu-id 1 dropped, TP 4 each
    broken = text.replace(" --base-gpu-id 1", "").replace(
        "python -m sglang.launch_server",
        "CUDA_VISIBLE_DEVICES=0,1,2,3 python -m sglang.launch_server",
    )
    broken = re.sub(r"--disaggregation-mode (prefill|decode)", r"\g<0> --tp 4", broken)
    report = verdict(broken, release)
    assert not report.valid
    (finding,) = [f for f in report.errors if f.rule == "HOST-GPU-OVERLAP"]
    assert "GPU(s) 0-3" in finding.message and "CUDA_VISIBLE_DEVICES=0,1,2,3" in finding.message
    assert [s.split("@")[0] for s in finding.servers] == ["prefill", "decode"]


def seeded(prefill: str = "", decode: str = "", prefix: str = "", port: int = 30001) -> str:
    """Both servers on GPUs 0-3 of one machine, each with `prefill`/`decode` flags added,
    the decode started through `prefix`."""
    return (
        f"{L} --disaggregation-mode prefill --port 30000 --tp 4 {prefill}\n"
        f"{prefix}{L} --disaggregation-mode decode --port {port} --tp 4 {decode}\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        seeded(prefix="ssh node1 "),
        seeded(prefix="srun -w n1 "),
        seeded("--host 10.0.0.1", "--host 10.0.0.2"),
        seeded("--dist-init-addr $P:5000", "--dist-init-addr $Q:5000"),
        seeded(port=30000),  # one machine cannot listen on one port twice
    ],
)
def test_servers_on_separate_machines_are_not_compared(text: str) -> None:
    assert "HOST-GPU-OVERLAP" in {
        f.rule for f in verdict(seeded("--base-gpu-id 0"), "0.5.23").errors
    }
    assert not {f.rule for f in verdict(text, "0.5.23").findings} & {
        "HOST-GPU-OVERLAP",
        "HOST-GPU-UNPLACED",
    }


def test_servers_that_choose_no_gpus_overlap_as_a_warning() -> None:
    """Neither server sets CUDA_VISIBLE_DEVICES, --base-gpu-id or --gpu-id-step: on one
    machine both take GPUs 0-3, but two machines the script does not tell apart look the
    same, so the finding warns; once either server chooses its GPUs it is an error."""
    plain = verdict(seeded(), "0.5.23")
    (finding,) = [f for f in plain.findings if f.rule.startswith("HOST-GPU")]
    assert (finding.rule, finding.severity) == ("HOST-GPU-UNPLACED", "warning")
    assert plain.valid and "GPU(s) 0-3" in finding.message
    chosen = verdict(seeded(decode="--gpu-id-step 1"), "0.5.23")
    assert not chosen.valid and [f.rule for f in chosen.errors] == ["HOST-GPU-OVERLAP"]


def pod(role: str, port: int) -> str:
    return (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {role}}}\nspec:\n"
        "  template:\n    spec:\n      containers:\n      - name: sglang\n"
        '        command: ["python", "-m", "sglang.launch_server", "--model-path", "m", '
        f'"--disaggregation-mode", "{role}", "--port", "{port}", "--tp", "4"]\n'
    )


def test_manifest_pods_are_never_compared() -> None:
    """Each pod has its own GPUs: two servers on GPUs 0-3 in one manifest are fine, the
    same two in a script are not."""
    manifest = pod("prefill", 30000) + "---\n" + pod("decode", 30001)
    report = verdict(manifest, "0.5.23")
    assert report.servers["prefill"] == report.servers["decode"] == 1
    assert not [f for f in report.findings if f.rule.startswith("HOST-")]


def test_servers_needing_more_gpus_than_the_machine_warn() -> None:
    text = (
        f"{L} --disaggregation-mode prefill --port 30000 --tp 4\n"
        f"{L} --disaggregation-mode decode --port 30001 --tp 4 --base-gpu-id 4\n"
    )
    release = "0.5.23"

    def judged(sets: tuple[str, ...]) -> DeploymentReport:
        deployment = read(text, load_server(None, release), LayoutSources(sets=sets))
        return judge(deployment, get_pack(release))

    assert judged(()).findings == ()  # the default node size of 8 is no machine's size
    assert judged(("gpus_per_node=8",)).findings == ()
    (finding,) = judged(("gpus_per_node=6",)).findings
    assert (finding.rule, finding.severity) == ("HOST-GPU-COUNT", "warning")
    assert "need 8 GPUs together, but the machine has 6" in finding.message


def test_one_node_launches_are_servers_of_their_own() -> None:
    """Replicas started by hand on one machine (no router, no PD role): each launch of one
    node is a server SGLang starts by itself, so the script is a deployment whose GPUs are
    compared. It used to be read as one job of the first launch: valid, whatever GPUs the
    others took."""
    replicas = "".join(
        f"CUDA_VISIBLE_DEVICES={gpus} {L} --tp 2 --port {port} &\n"
        for gpus, port in (("0,1", 30000), ("2,3", 30001), ("2,3", 30002))
    )
    report = verdict(replicas, "0.5.23")
    assert report.servers["aggregated"] == 3
    assert not report.valid and [f.rule for f in report.errors] == ["HOST-GPU-OVERLAP"]
    assert "GPU(s) 2, 3" in report.errors[0].message
    apart = verdict(replicas.replace("2,3 ", "4,5 ", 1), "0.5.23")
    assert apart.valid and apart.findings == ()


def test_launches_of_several_nodes_stay_one_job() -> None:
    """Two `--node-rank 0` of a two-node job are a numbering mistake, not two servers."""
    node = f"{L} --tp 16 --nnodes 2 --dist-init-addr 10.0.0.1:5000 --node-rank 0\n"
    from meshsat.solver.deployment.reader import read_deployment

    assert read_deployment(node + node, load_server(None, "0.5.23"), LayoutSources()) is None


def _fixed(text: str) -> tuple[DeploymentFix, dict[str, int]]:
    result = fix_deployment(text, sglang_version="0.5.23")
    assert result.fixed is not None
    return result, {s.name: s.layout.config.base_gpu_id for s in result.fixed.servers}


def test_fix_moves_an_overlapping_server_to_free_gpus() -> None:
    """The second server chose its GPUs (--gpu-id-step 1) and overlaps the first on GPUs
    0-3: fix moves it to --base-gpu-id 4, and the fixed deployment is valid."""
    text = f"{L} --tp 4 --port 30000 &\n{L} --tp 4 --port 30001 --gpu-id-step 1 &\n"
    result, bases = _fixed(text)
    assert bases == {"aggregated@1": 0, "aggregated@2": 4}
    assert result.ok
    (moved,) = [s for s in result.servers if s.server == "aggregated@2"]
    assert moved.report.best.changes[-1] == ("base_gpu_id", 0, 4)
    assert "HOST-GPU-OVERLAP" in moved.report.best.repairs


def test_fix_moves_within_a_visible_list_else_moves_the_list() -> None:
    wide = "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"
    result, bases = _fixed(f"{wide} {L} --tp 4 --port 30000 &\n{wide} {L} --tp 4 --port 30001 &\n")
    assert bases == {"aggregated@1": 0, "aggregated@2": 4} and result.ok
    copied = "".join(
        f"CUDA_VISIBLE_DEVICES={gpus} {L} --tp 2 --port {port} &\n"
        for gpus, port in (("0,1", 30000), ("2,3", 30001), ("2,3", 30002))
    )
    # No base id frees a list of two taken GPUs: its list moves instead (test_relist.py).
    result, bases = _fixed(copied)
    assert set(bases.values()) == {0} and result.ok
    (moved,) = [s for s in result.servers if s.relisted is not None]
    assert (moved.server, moved.relisted.new) == ("aggregated@3", (4, 5))


def test_fix_leaves_servers_that_choose_no_gpus() -> None:
    """HOST-GPU-UNPLACED only warns (two machines look the same): nothing moves."""
    _, bases = _fixed(f"{L} --tp 4 --port 30000 &\n{L} --tp 4 --port 30001 &\n")
    assert set(bases.values()) == {0}
