"""JOB-VISIBLE-DEVICES: a launch whose visible-devices list is shorter than the GPU ids its
ranks take (the rank past the list's end fails: invalid device ordinal).

Oracle: SGLang's own placement as recorded per release (tests/fixtures/placement, the
launch statements of each release run by fidelity/placement.py): the rule fires exactly
when a recorded local GPU id of the launch's node is past the list's end, and names those.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from meshsat.solver.cli import app
from meshsat.solver.cli.launch_checks import with_launch_checks
from meshsat.solver.inputs.layout_input import LayoutSources, load_layout
from meshsat.solver.validation.validate import validate
from tests.test_deployment import verdict
from tests.test_placement import recorded

RELEASES = ("0.4.6.post5", "0.5.23")
L = "python -m sglang.launch_server --model-path m"
RULE = "JOB-VISIBLE-DEVICES"


def launch_text(point: dict[str, Any], node: int, visible: list[int] | None) -> str:
    env = "" if visible is None else f"CUDA_VISIBLE_DEVICES={','.join(map(str, visible))} "
    nodes = (
        f" --nnodes {point['nnodes']} --node-rank {node} --dist-init-addr 10.0.0.1:5000"
        if point["nnodes"] > 1
        else ""
    )
    return (
        f"{env}{L} --tp {point['tp']} --pp {point['pp']} --dp {point['replicas']} "
        f"--base-gpu-id {point['base_gpu_id']} --gpu-id-step {point['gpu_id_step']}{nodes}"
    )


def named_ids(message: str) -> set[int]:
    """The GPU ids a JOB-VISIBLE-DEVICES message says fail (`2, 3` or `4-7` runs)."""
    match = re.search(r"the rank\(s\) on GPU ([\d, -]+) fail", message)
    assert match is not None, message
    ids: set[int] = set()
    for part in match.group(1).split(", "):
        lo, _, hi = part.partition("-")
        ids |= set(range(int(lo), int(hi or lo) + 1))
    return ids


@st.composite
def launches(draw: st.DrawFn) -> tuple[str, dict[str, Any], int, list[int] | None]:
    release = draw(st.sampled_from(RELEASES))
    points = [
        p
        for p in recorded(release)["points"]
        if not p["scale_joiner"] and p["tp"] * p["pp"] * p["replicas"] <= 16
    ]
    point = draw(st.sampled_from(points))
    node = draw(st.integers(0, point["nnodes"] - 1))
    visible = draw(st.none() | st.permutations(range(8)).map(list))
    if visible is not None:
        visible = visible[: draw(st.integers(0, 8))]
    return release, point, node, visible


@settings(max_examples=40, deadline=None)
@given(launches())
def test_the_rule_names_the_recorded_gpu_ids_past_the_list(
    drawn: tuple[str, dict[str, Any], int, list[int] | None],
) -> None:
    release, point, node, visible = drawn
    layout = load_layout(LayoutSources(sglang=launch_text(point, node, visible)), release=release)
    report = validate(layout.config, layout.model, explain=False, sglang_version=release)
    report = with_launch_checks(report, layout, strict=False)
    found = [v for v in report.violations if v.rule == RULE]
    local = {row[4] for row in point["launches"] if row[0] == node}
    beyond = set() if visible is None else {g for g in local if g >= len(visible)}
    assert [named_ids(v.message) for v in found] == ([beyond] if beyond else [])
    if beyond:
        assert not report.valid


def test_cli_refuses_a_short_list_and_reads_no_shell_expansion() -> None:
    runner = CliRunner()
    short = runner.invoke(
        app, ["validate", "--json", "--sglang", f"CUDA_VISIBLE_DEVICES=0,1 {L} --tp 4"]
    )
    assert short.exit_code == 1, short.output
    assert f'"rule": "{RULE}"' in short.stdout
    assert "CUDA_VISIBLE_DEVICES" not in short.stderr  # no longer "not checked by meshsat"
    for env in ("CUDA_VISIBLE_DEVICES=$GPUS", "CUDA_VISIBLE_DEVICES=GPU-3b5f,GPU-77aa"):
        fine = runner.invoke(app, ["validate", "--json", "--sglang", f"{env} {L} --tp 4"])
        assert fine.exit_code == 0, fine.output
    fixed = runner.invoke(app, ["fix", "--sglang", f"CUDA_VISIBLE_DEVICES=0,1 {L} --tp 4"])
    assert f"{RULE}: the node launched on line 1 sees 2 device(s)" in fixed.stderr


def test_each_server_of_a_deployment_is_checked() -> None:
    text = (
        f"CUDA_VISIBLE_DEVICES=0,1 {L} --disaggregation-mode prefill --tp 4 --port 30000 &\n"
        f"CUDA_VISIBLE_DEVICES=4,5,6,7 {L} --disaggregation-mode decode --tp 4 --port 30001 &\n"
    )
    report = verdict(text, "0.5.23")
    assert not report.valid
    by_role = {r.role: [v.rule for v in r.report.violations] for r in report.roles}
    assert by_role == {"prefill": [RULE], "decode": []}


@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from((2, 4, 8)),
    st.integers(0, 3),
    st.sampled_from((1, 2)),
    st.integers(1, 7),
)
def test_fix_fits_the_layout_to_the_listed_gpus(tp: int, base: int, step: int, k: int) -> None:
    """Without --gpus, fix fits a launch whose list is too short to the GPUs listed; its
    command passes validate (the independent check) with the list kept as typed."""
    from hypothesis import assume

    visible = ",".join(map(str, range(k)))
    placement = f" --base-gpu-id {base} --gpu-id-step {step}" if (base, step) != (0, 1) else ""
    command = f"CUDA_VISIBLE_DEVICES={visible} {L} --tp {tp}{placement}"
    assume(base + (tp - 1) * step >= k)  # the list is too short
    runner = CliRunner()
    fixed = runner.invoke(app, ["fix", "--json", "--sglang", command])
    if fixed.exit_code == 1:  # no layout fits: only when no GPU id can
        return
    assert fixed.exit_code == 0, fixed.output
    import json

    line = json.loads(fixed.stdout)["fixes"][0]["command_line"]
    assert line.startswith(f"CUDA_VISIBLE_DEVICES={visible} ")
    check = runner.invoke(app, ["validate", "--json", "--sglang", line])
    assert check.exit_code == 0, (command, line, check.output)


def test_deployment_fix_fits_each_server_to_its_list() -> None:
    from meshsat.solver.deployment.fix import fix_deployment

    text = (
        f"CUDA_VISIBLE_DEVICES=0,1 {L} --disaggregation-mode prefill --tp 4 --port 30000 &\n"
        f"CUDA_VISIBLE_DEVICES=4,5,6,7 {L} --disaggregation-mode decode --tp 4 --port 30001 &\n"
    )
    result = fix_deployment(text, sglang_version="0.5.23")
    assert result.ok and result.fixed is not None
    tps = {s.role: s.layout.config.tp_size for s in result.fixed.servers}
    assert tps == {"prefill": 2, "decode": 4}
    # The rule the fitting repaired is named, as `meshsat fix` names it for one server.
    prefill = next(s for s in result.servers if s.server.startswith("prefill"))
    assert RULE in prefill.report.best.repairs
