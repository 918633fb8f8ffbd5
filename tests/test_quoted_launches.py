"""Launches inside one quoted word: `ssh node "python -m sglang.launch_server ..."` and
`bash -c '...'`, how multi-node and PD scripts are often written.

Oracle: the same script with each quoted command written out as a plain launch, which the
reader has always read: the verdict, the layout and the rewritten flags must be the same;
and what the runner means for the rest of the script (ssh runs on another machine, with
none of this shell's variables; `bash -c` runs here, with them).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.cli_helpers import Run, run_cli

MODEL = "deepseek-ai/DeepSeek-V3"


def _node(rank: int, tp: int) -> str:
    return (
        f"python3 -m sglang.launch_server --model-path {MODEL} --tp {tp} --nnodes 2 "
        f"--node-rank {rank} --dist-init-addr 10.0.0.1:5000 --trust-remote-code"
    )


def _job(tp: int, quote: str | None) -> str:
    """A two-node job, each node's launch through ssh in `quote`s (None: written out)."""
    lines = []
    for rank in range(2):
        launch = _node(rank, tp)
        lines.append(launch if quote is None else f"ssh node{rank} {quote}{launch}{quote}")
    return "#!/bin/bash\n" + " &\n".join(lines) + "\nwait\n"


def _run(capsys: pytest.CaptureFixture[str], path: Path, text: str, *args: str) -> Run:
    path.write_text(text)
    return run_cli(capsys, "validate", "--sglang-file", str(path), *args)


@pytest.mark.parametrize("quote", ['"', "'"])
def test_a_job_launched_over_ssh_reads_as_the_same_launches_written_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, quote: str
) -> None:
    """tp 12 of DeepSeek-V3 (128 heads do not split 12 ways) over two ssh nodes: the same
    verdict and layout as the plain launches; before, the script was refused (exit 2)."""
    path = tmp_path / "job.sh"
    quoted = _run(capsys, path, _job(12, quote), "--json")
    plain = _run(capsys, path, _job(12, None), "--json")
    assert quoted.code == plain.code == 1, quoted.err
    q, p = json.loads(quoted.out), json.loads(plain.out)
    assert q["resolved"] == p["resolved"] and q["resolved"]["nnodes"] == 2
    assert {v["rule"] for v in q["violations"]} == {v["rule"] for v in p["violations"]}


def test_rewrite_edits_the_flags_inside_the_quotes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The rewritten script's quoted commands are the rewritten plain launches, quotes
    kept, and it validates."""
    path = tmp_path / "job.sh"
    quoted = _run(capsys, path, _job(12, '"'), "--rewrite")
    plain = _run(capsys, path, _job(12, None), "--rewrite")
    assert quoted.code == plain.code == 0, quoted.err
    inner = [shlex.split(line)[2] for line in quoted.out.splitlines() if line.startswith("ssh")]
    outer = [line.removesuffix(" &") for line in plain.out.splitlines() if "sglang" in line]
    assert inner == outer and len(inner) == 2 and "--tp 12 " in inner[0]
    assert _run(capsys, path, quoted.out).code == 0


def test_escaped_quotes_are_read_but_not_rewritten(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = f'ssh n0 "python3 -m sglang.launch_server --model-path \\"{MODEL}\\" --tp 12"\n'
    path = tmp_path / "job.sh"
    run = _run(capsys, path, text, "--json")
    assert run.code == 1 and "MODEL-HEADS" in {v["rule"] for v in json.loads(run.out)["violations"]}
    run = _run(capsys, path, text, "--rewrite")
    assert run.code == 2 and "quoted inside another command with escapes" in run.err


def _pd(wrapped: bool) -> str:
    servers = []
    for role, port in (("prefill", 30000), ("decode", 30001)):
        launch = (
            "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python3 -m sglang.launch_server "
            f"--model-path {MODEL} --disaggregation-mode {role} --tp 8 --host 0.0.0.0 "
            f"--port {port}"
        )
        servers.append(f"ssh {role}-host '{launch}' &" if wrapped else f"{launch} &")
    router = (
        "python3 -m sglang_router.launch_router --pd-disaggregation --prefill "
        "http://prefill-host:30000 --decode http://decode-host:30001"
    )
    return "\n".join([*servers, router]) + "\n"


def test_a_pd_deployment_over_ssh_runs_its_servers_apart(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two 8-GPU servers placed on GPUs 0-7 in one script share a machine's GPUs
    (HOST-GPU-OVERLAP); started over ssh they run on machines of their own."""
    path = tmp_path / "pd.sh"
    apart = _run(capsys, path, _pd(True), "--json")
    here = _run(capsys, path, _pd(False), "--json")
    assert apart.code == 0, apart.out + apart.err
    assert json.loads(apart.out)["deployment"]["servers"] == {
        "prefill": 1, "decode": 1, "aggregated": 0,
    }  # fmt: skip
    rules = {f["rule"] for f in json.loads(here.out)["deployment"]["findings"]}
    assert here.code == 1 and "HOST-GPU-OVERLAP" in rules


@pytest.mark.parametrize(("runner", "passed"), [("bash -c", True), ("ssh n0", False)])
def test_the_runner_decides_whether_this_shells_variables_reach_the_launch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, runner: str, passed: bool
) -> None:
    """`CUDA_VISIBLE_DEVICES=0,1` before `bash -c` is the launch's (2 GPUs for tp 4:
    JOB-VISIBLE-DEVICES); before `ssh` it is the ssh client's, not the remote server's."""
    launch = "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 4"
    run = _run(capsys, tmp_path / "one.sh", f"CUDA_VISIBLE_DEVICES=0,1 {runner} '{launch}'\n")
    assert run.code == (1 if passed else 0), run.out + run.err
    assert ("JOB-VISIBLE-DEVICES" in run.out) == passed


def _swapped_router(quote: str | None, runner: str) -> str:
    """Two servers and a router that lists them under each other's role, the router
    written out (None) or quoted in `quote`s as `runner`'s one word."""
    servers = [
        "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B "
        f"--disaggregation-mode {role} --host 0.0.0.0 --port {port} --base-gpu-id {gpu}"
        for role, port, gpu in (("prefill", 30000, 0), ("decode", 30001, 1))
    ]
    router = (
        "python3 -m sglang_router.launch_router --pd-disaggregation --prefill "
        "http://10.0.0.1:30001 --decode http://10.0.0.1:30000 --port 8000"
    )
    if quote is not None:
        router = f"{runner} {quote}{router}{quote}"
    return "\n".join([*servers, router]) + "\n"


@pytest.mark.parametrize("runner", ["ssh node3", "bash -c"])
@pytest.mark.parametrize("quote", ['"', "'"])
def test_a_quoted_router_is_read_as_the_same_router_written_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, quote: str, runner: str
) -> None:
    """A router quoted as one word was not read (its servers quoted alike were): a text
    that launched only a router was no launch, and the reader of the quoted word dropped
    it, so a router sending prefill work to a decode server passed. Oracle: the same
    router written out."""
    path = tmp_path / "pd.sh"
    written = _run(capsys, path, _swapped_router(None, runner), "--json")
    quoted = _run(capsys, path, _swapped_router(quote, runner), "--json")
    assert written.code == 1, written.out + written.err
    assert quoted.code == written.code, quoted.out + quoted.err
    want, got = (json.loads(r.out)["deployment"] for r in (written, quoted))
    assert got["routers"] == want["routers"] == 1
    assert got["findings"] == want["findings"]
