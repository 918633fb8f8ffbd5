"""The commands that take one launch script, on a PD deployment (docs/disaggregation.md).

`groups` answers per server; the oracle is `groups` run on each server's own command alone,
cut out of the script. A command that reads one server (`diff`, `groups --rank`) refuses a
deployment with one error line instead of answering for the script's first server.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import Run, run_cli

PREFILL = (
    "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
    "--disaggregation-mode prefill --tp 8 --port 30000\n"
)
DECODE = "".join(
    "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
    "--disaggregation-mode decode --tp 16 --dp 16 --enable-dp-attention --nnodes 2 "
    f"--node-rank {rank} --dist-init-addr 10.0.0.2:5000 --port 30001\n"
    for rank in (0, 1)
)
ROUTER = (
    "python -m sglang_router.launch_router --pd-disaggregation "
    "--prefill http://10.0.0.1:30000 --decode http://10.0.0.2:30001\n"
)
#: A prefill server of 8 GPUs, a 2-node decode server with DP attention, a router.
PD = PREFILL + DECODE + ROUTER
#: The same with a decode server SGLang refuses (dp 3 does not divide tp 8).
BROKEN_DECODE = (
    "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
    "--disaggregation-mode decode --tp 8 --dp 3 --enable-dp-attention --port 30001\n"
)
#: What the deployment's JSON adds to a server's own `groups` document.
HEAD = {"server", "role", "lines", "nodes", "replicas", "gpus", "valid"}


def _alone(capsys: pytest.CaptureFixture[str], command: str, *extra: str) -> Run:
    return run_cli(capsys, "groups", "--sglang", command, *extra)


def test_groups_on_a_deployment_is_each_servers_own_groups(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = tmp_path / "pd.sh"
    script.write_text(PD)
    run = run_cli(capsys, "groups", "--sglang-file", str(script), "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert doc["deployment"]["servers"] == {"prefill": 1, "decode": 1, "aggregated": 0}
    assert doc["deployment"]["routers"] == 1 and doc["deployment"]["gpus"] == 24
    roles = {r["server"]: r for r in doc["roles"]}
    assert list(roles) == ["prefill@1", "decode@2"]
    for name, command in (("prefill@1", PREFILL), ("decode@2", DECODE)):
        alone = _alone(capsys, command, "--json")
        assert alone.code == 0, alone.err
        entry = roles[name]
        assert {k: v for k, v in entry.items() if k not in HEAD} == json.loads(alone.out)
        assert entry["gpus"] == entry["world"] and entry["valid"] is True
    assert roles["decode@2"]["lines"] == [2, 3] and roles["decode@2"]["nodes"] == 2

    text = run_cli(capsys, "groups", "--sglang-file", str(script))
    assert text.code == 0
    assert "prefill@1 (prefill server, line(s) 1, 8 GPU(s))" in text.out
    assert "decode@2 (decode server, line(s) 2, 3, 16 GPU(s))" in text.out
    # Each server's grids are exactly what `groups` prints for its command alone, in order.
    prefill, decode = _alone(capsys, PREFILL).out, _alone(capsys, DECODE).out
    assert text.out.index(prefill) < text.out.index(decode)


def test_a_servers_invalid_layout_is_its_report_and_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = PREFILL + BROKEN_DECODE + ROUTER
    run = run_cli(capsys, "groups", "--sglang", script, "--json")
    assert run.code == 1
    roles = json.loads(run.out)["roles"]
    assert [r["valid"] for r in roles] == [True, False]
    alone = _alone(capsys, BROKEN_DECODE, "--json")
    assert alone.code == 1
    assert roles[1]["report"] == json.loads(alone.out)


def _refused(run: Run, where: str, command: str) -> None:
    assert run.code == 2 and run.out == ""
    assert "Traceback" not in run.err
    assert run.err.strip().splitlines() == [
        f"meshsat: error: {where} holds a PD deployment (2 servers, 1 router): {command} takes "
        "one server; check the deployment with validate or fix, or give one server's command"
    ]


def test_diff_refuses_a_deployment_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = tmp_path / "pd.sh"
    script.write_text(PD)
    _refused(
        run_cli(capsys, "diff", "0.5.19", "0.5.23", "--sglang-file", str(script)),
        str(script),
        "diff",
    )
    _refused(
        run_cli(capsys, "diff", "0.5.19", "0.5.23", "--sglang", PD), "the --sglang command", "diff"
    )
    _refused(_stdin(capsys, PD, "diff", "0.5.19", "0.5.23"), "standard input", "diff")
    # One server of the script (a prefill server alone is one job) is answered as before.
    one = _stdin(capsys, PREFILL, "diff", "0.5.19", "0.5.23", "--json")
    assert one.code == 0 and json.loads(one.out)["layout"]["valid"]["0.5.23"] is True


def _stdin(capsys: pytest.CaptureFixture[str], text: str, *args: str) -> Run:
    from meshsat.solver.cli import main

    capsys.readouterr()
    code: Any = 0
    try:
        main([*args, "--sglang", "-"], stdin=io.StringIO(text))
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return Run(int(code or 0), captured.out, captured.err)


def test_groups_rank_refuses_a_deployment(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, "groups", "--sglang", PD, "--rank", "3")
    _refused(run, "the --sglang command", "groups --rank")


#: Deployments `validate` refuses for a reason beyond any server's layout: a pair rule (the
#: decode serves another model), a machine's GPUs shared (both servers placed on GPUs 0-7),
#: and a valid one.
BEYOND_LAYOUT = {
    "pair rule": PREFILL + DECODE.replace("DeepSeek-V3", "DeepSeek-R1") + ROUTER,
    "shared GPUs": "".join(
        f"CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python -m sglang.launch_server --model-path "
        f"deepseek-ai/DeepSeek-V3 --disaggregation-mode {role} --tp 8 --port {port} &\n"
        for role, port in (("prefill", 30000), ("decode", 30001))
    ),
    "valid": PD,
}


@pytest.mark.parametrize("case", list(BEYOND_LAYOUT))
def test_groups_judges_a_deployment_as_validate_does(
    capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """`groups` showed every server's groups and exited 0 with `"valid": true` where
    `validate` refused the deployment (exit 1): its verdict, exit status and findings are
    now `validate`'s, and its table names the rules."""
    script = BEYOND_LAYOUT[case]
    grouped = run_cli(capsys, "groups", "--sglang", script, "--json")
    validated = run_cli(capsys, "validate", "--sglang", script, "--json")
    assert grouped.code == validated.code == (0 if case == "valid" else 1), grouped.err
    g, v = json.loads(grouped.out)["deployment"], json.loads(validated.out)["deployment"]
    assert g["valid"] == v["valid"] and g["findings"] == v["findings"]
    assert all("ranks" in role for role in json.loads(grouped.out)["roles"])
    table = run_cli(capsys, "groups", "--sglang", script)
    errors = [f["rule"] for f in v["findings"] if f["severity"] == "error"]
    assert table.code == grouped.code
    assert ("would not start" in table.out) == (case != "valid")
    assert all(rule in table.out for rule in errors)
