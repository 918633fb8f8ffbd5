"""A launch value unknown here (`--tp $TP`) leaves the rules that read it undecided: they
are warnings that say so, not violations (solver/validation/undecided.py). The oracle is
`validate` itself with the unknown field set to each value it could take."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver import validate
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.validation.undecided import undecided
from tests.cli_helpers import run_cli

PACK = "0.5.23"
L = "python -m sglang.launch_server --model-path x"


def _validate(capsys: pytest.CaptureFixture[str], tmp_path: Path, script: str, *extra: str) -> Any:
    path = tmp_path / "launch.sh"
    path.write_text(script)
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json", *extra)
    return run.code, json.loads(run.out)


def test_unknown_tp_leaves_the_node_split_undecided(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """tp from the caller's environment on two nodes: judged at tp 1 it broke
    TOPO-NNODES, and the launch was called invalid."""
    code, report = _validate(capsys, tmp_path, f"{L} --tp $TP --nnodes 2\n")
    assert code == 0 and report["valid"] and not report["violations"]
    (warning,) = [w for w in report["warnings"] if w["rule"] == "TOPO-NNODES"]
    assert warning["message"].startswith("not checked: it reads tp_size = $TP")


def test_known_values_still_decide(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An unknown node rank does not open TOPO-NNODES (it reads tp, pp and the nodes)."""
    code, report = _validate(capsys, tmp_path, f"{L} --tp 3 --nnodes 2 --node-rank $RANK\n")
    assert code == 1 and [v["rule"] for v in report["violations"]] == ["TOPO-NNODES"]


def test_set_makes_a_value_known(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, report = _validate(capsys, tmp_path, f"{L} --tp $TP --nnodes 2\n", "--set", "tp_size=3")
    assert code == 1 and "TOPO-NNODES" in [v["rule"] for v in report["violations"]]


SIZES = ("tp_size", "pp_size", "dp_size", "ep_size", "attn_cp_size", "nnodes", "moe_dp_size")
VALUES = (1, 2, 3, 4, 8, 16)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.sampled_from(SIZES), st.sampled_from(VALUES), min_size=2),
    st.booleans(),
    st.sampled_from(SIZES),
    st.sampled_from(["none", "deepep"]),
    st.sampled_from([None, "deepseek-ai/DeepSeek-V3"]),
)
def test_a_kept_violation_fails_whatever_the_unknown_value(
    values: dict[str, int], dp_attention: bool, unknown: str, a2a: str, model: str | None
) -> None:
    """Every violation left standing fails for every value the unknown field could take;
    the ones turned into warnings are those whose rule reads it, through what resolution
    derives from it where its conditions let it (an all-to-all backend makes ep follow
    tp; without one it does not)."""
    known: dict[str, Any] = {k: v for k, v in values.items() if k != unknown}
    known["enable_dp_attention"] = dp_attention
    known["moe_a2a_backend"] = a2a
    spec = catalogue_config(model) if model is not None else None
    report = undecided(validate(known, spec, sglang_version=PACK), {unknown: "$X"})
    assert report.valid == (not report.violations)
    for value in VALUES:
        again = validate({**known, unknown: value}, spec, sglang_version=PACK)
        rules = {v.rule for v in again.violations}
        for v in report.violations:
            assert v.rule in rules, (known, unknown, value)
    for w in report.warnings:
        if w.message.startswith("not checked"):
            assert f"{unknown} = $X" in w.message


def test_a_node_whose_value_is_unknown_does_not_disagree(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The second node's tp is expanded by the remote shell (single quotes): it used to
    "disagree with the first node on tp_size" (JOB-ONE-LAYOUT); it is now not compared,
    and said so. A node whose known value differs still disagrees."""
    head = f'ssh a "{L} --tp 8 --nnodes 2 --node-rank 0"\n'
    code, report = _validate(
        capsys, tmp_path, head + f"ssh b '{L} --tp $TP --nnodes 2 --node-rank 1'\n"
    )
    assert code == 0 and report["valid"], report
    code, report = _validate(
        capsys, tmp_path, head + f"ssh b '{L} --tp 4 --nnodes 2 --node-rank 1'\n"
    )
    assert code == 1 and [v["rule"] for v in report["violations"]] == ["JOB-ONE-LAYOUT"]


def test_fix_says_it_starts_from_the_default(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A rule broken by known values (DPATTN-TP-DIV: tp 3, attention DP 2) is fixed; a fix
    needs a layout, takes SGLang's default for the unknown pp, and says so (with how to give
    it); --rewrite the same, naming each change once (a change of the node count was listed
    twice) and keeping the variable."""
    path = tmp_path / "launch.sh"
    path.write_text(f"{L} --pp-size $PP --tp 3 --dp 2 --enable-dp-attention --nnodes 4\n")
    run = run_cli(capsys, "fix", "--sglang-file", str(path))
    assert run.code == 0 and "fixed from SGLang's default: pp_size = $PP" in run.err
    assert "--set pp_size=N" in run.err and "dp_size" in run.out
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--rewrite")
    assert "fixed from SGLang's default: pp_size = $PP" in run.err
    assert run.err.count("nnodes: 4 -> ") == 1, run.err
    assert "--pp-size $PP" in run.out


UNDECIDED_ONLY = f"{L} --tp $TP --dp 3 --enable-dp-attention\n"


def test_what_is_not_known_to_fail_is_not_fixed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--tp $TP --dp 3 --enable-dp-attention` breaks nothing known (tp 3, 6, ... run), yet
    `fix` used to answer dp 3 -> 1 from tp's default and `validate --rewrite`, after
    calling the launch valid, rewrote it without DP attention. Both now leave it as it is
    and name the rules not checked."""
    code, report = _validate(capsys, tmp_path, UNDECIDED_ONLY)
    assert code == 0 and report["unknown"] == {"tp_size": "$TP"}
    assert report["undecided"] == ["DPATTN-TP-DIV", "TOPO-ATTN-TP"]
    path = tmp_path / "launch.sh"
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--json")
    document = json.loads(run.out)
    assert run.code == 0 and document["valid_input"], document
    assert document["undecided"] == ["DPATTN-TP-DIV", "TOPO-ATTN-TP"]
    assert [f["changes"] for f in document["fixes"]] == [[]]
    assert "not checked, and not fixed: DPATTN-TP-DIV, TOPO-ATTN-TP read tp_size = $TP" in run.err
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--rewrite")
    assert run.code == 0 and run.out == UNDECIDED_ONLY, run.out
    assert "nothing to fix on the values known here" in run.err


def test_the_report_does_not_show_a_default_as_the_launch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The headline said "valid layout on 1 GPU(s)" and the widths "attn_tp 0": tp's
    default, not the launch's. Widths that read the unknown value show '?'."""
    path = tmp_path / "launch.sh"
    path.write_text(UNDECIDED_ONLY)
    run = run_cli(capsys, "validate", "--sglang-file", str(path))
    text = " ".join(run.out.split())
    assert run.code == 0 and "2 rules not checked" in text, text
    assert "GPU count not known here (it reads tp_size = $TP)" in text
    assert "attn_dp 3 · attn_tp ? · moe_tp ? · engine world ? · CP strategy active: false" in text
    assert "1 GPU(s)" not in text


def test_a_pd_server_with_an_unknown_width_is_not_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each server of a PD script was judged at tp's default: `--tp $TP --dp 2
    --enable-dp-attention` on both servers made the deployment invalid."""
    model = "--model-path deepseek-ai/DeepSeek-V3"
    servers = "".join(
        f"python -m sglang.launch_server {model} --disaggregation-mode {role} --tp $TP "
        f"--dp 2 --enable-dp-attention --port {port} &\n"
        for role, port in (("prefill", 30000), ("decode", 30001))
    )
    router = (
        "python -m sglang_router.launch_router --port 8000 --pd-disaggregation --prefill "
        "http://127.0.0.1:30000 --decode http://127.0.0.1:30001\n"
    )
    code, report = _validate(capsys, tmp_path, servers + router)
    assert code == 0, report
    for role in report["roles"]:
        assert role["valid"] and role["undecided"] == ["DPATTN-TP-DIV", "TOPO-ATTN-TP"], role
    run = run_cli(capsys, "validate", "--sglang-file", str(tmp_path / "launch.sh"))
    assert "prefill, line(s) 1, ? GPU(s)" in run.out and "router(s), ? GPU(s)" in run.out
    run = run_cli(capsys, "fix", "--sglang-file", str(tmp_path / "launch.sh"), "--json")
    assert run.code == 0, run.out
    assert all(not role["fixes"][0]["changes"] for role in json.loads(run.out)["roles"]), run.out


def test_groups_ask_for_an_unknown_width(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`groups` drew the groups of tp's default (or called the launch invalid at it): a
    width unknown here is asked for instead, in one line, exit 2; given, it is used; an
    unknown node rank is no width."""
    path = tmp_path / "launch.sh"
    path.write_text(UNDECIDED_ONLY)
    run = run_cli(capsys, "groups", "--sglang-file", str(path))
    assert run.code == 2 and "tp_size = $TP is unknown here" in run.err, run.err
    assert "--set tp_size=N" in run.err and not run.out
    run = run_cli(capsys, "groups", "--sglang-file", str(path), "--set", "tp_size=12", "--json")
    assert run.code == 0 and json.loads(run.out)["world"] == 12, run.out
    path.write_text(f"{L} --tp 8 --nnodes 2 --node-rank $R\n")
    assert run_cli(capsys, "groups", "--sglang-file", str(path)).code == 0


def test_a_rule_the_unknown_value_cannot_reach_is_decided(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """256 experts over `--ep 5`: no tp helps, since without an all-to-all backend ep does
    not follow tp, yet MODEL-EXPERTS was "not checked" at `--tp $TP` (resolution's reach
    ignored the step's condition). With a backend, ep follows tp: open, and the silent
    change is said as following tp, not as tp's default."""
    model = "--model-path deepseek-ai/DeepSeek-V3"
    code, report = _validate(
        capsys, tmp_path, f"python -m sglang.launch_server {model} --tp $TP --ep 5\n"
    )
    assert code == 1 and [v["rule"] for v in report["violations"]] == ["MODEL-EXPERTS"], report
    code, report = _validate(
        capsys, tmp_path,
        f"python -m sglang.launch_server {model} --tp $TP --ep 5 --moe-a2a-backend deepep\n",
    )  # fmt: skip
    assert code == 0 and not report["violations"], report
    (note,) = [n for n in report["notes"] if n["field"] == "ep_size"]
    assert note["follows"] == "tp_size = $TP" and note["new"] is None
    assert note["text"].startswith("SGLang will set ep_size from tp_size = $TP (given 5)")


def test_a_change_the_unknown_value_decides_is_said_as_a_may(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--dp-size $((N*8)) --enable-dp-attention` (sglang issue 6017's decode script): the
    note said "SGLang will set enable_dp_attention ... because dp_size is 1", the default
    standing in for the unknown value; whether SGLang turns DP attention off reads it, so
    the note says that it may, and on what. A change whose trigger is known keeps "will".
    (0.5.19's `_data_parallelism_defaults`; 0.5.23 reads the deprecated spelling as
    `--attn-dp-size N` and resolves enable_dp_attention to false whatever N is, so no note
    there speaks of it.)"""
    path = tmp_path / "launch.sh"
    path.write_text(
        "python -m sglang.launch_server --model-path m --tp 16 --dp-size $((N*8)) "
        "--enable-dp-attention\n"
    )
    args = ("validate", "--sglang-file", str(path), "--format", "json")
    newest = json.loads(run_cli(capsys, *args).out)
    assert [n for n in newest["notes"] if n["field"] == "enable_dp_attention"] == []
    run = run_cli(capsys, *args, "--sglang-version", "0.5.19")
    notes = {n["field"]: n for n in json.loads(run.out)["notes"]}
    dpa = notes["enable_dp_attention"]
    assert dpa["conditional"] and dpa["follows"] == "dp_size = $((N*8))"
    assert dpa["text"].startswith(
        "SGLang may set enable_dp_attention (given true), depending on dp_size = $((N*8)): "
        "it does when dp_size is 1"
    )
    _code, known = _validate(
        capsys,
        tmp_path,
        "python -m sglang.launch_server --tp 8 --dp-size 1 --enable-dp-attention\n",
        "--sglang-version",
        "0.5.19",
    )
    text = {n["field"]: n["text"] for n in known["notes"]}
    assert text["enable_dp_attention"].startswith("SGLang will set enable_dp_attention = false")
