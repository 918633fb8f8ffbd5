"""Ports of a PD deployment: PD-BOOTSTRAP-PORT repaired by `fix` and `--rewrite`.

Oracle: the rule itself on the rewritten script, read back as text (`validate` of what
`--rewrite` prints), and the edit in the place the rule says the port is read (the port
after the router's URL, else the decode's own `--disaggregation-bootstrap-port`: SGLang's
scheduler fills it into a request that has none).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from meshsat.solver.deployment.fix import fix_deployment
from meshsat.solver.deployment.validate import validate_deployment
from tests.cli_helpers import run_cli

LLAMA = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct"
PREFILL_9000 = (
    f"{LLAMA} --disaggregation-mode prefill --port 30000 --disaggregation-bootstrap-port 9000\n"
)
DECODE = f"{LLAMA} --disaggregation-mode decode --port 30001 --base-gpu-id 1\n"
ROUTER = (
    "python -m sglang_router.launch_router --pd-disaggregation --prefill http://127.0.0.1:30000"
)


def _rewritten(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> str:
    path = tmp_path / "pd.sh"
    path.write_text(text)
    assert run_cli(capsys, "validate", "--sglang-file", str(path)).code == 1
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--rewrite")
    assert run.code == 0, run.err
    assert "still broken" not in run.err
    assert validate_deployment(run.out).valid, run.out
    return run.out


def test_a_wrong_port_after_the_router_url_is_rewritten(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = PREFILL_9000 + DECODE + ROUTER + " 8998 --decode http://127.0.0.1:30001\n"
    out = _rewritten(capsys, tmp_path, text)
    assert out.splitlines()[:2] == text.splitlines()[:2]  # the servers are left as they are
    assert "--prefill http://127.0.0.1:30000 9000 --decode" in out
    result = fix_deployment(text)
    assert result.ok
    assert [(p.url, p.old, p.new) for r in result.routers for p in r.ports] == [
        ("http://127.0.0.1:30000", 8998, 9000)
    ]


def test_without_a_router_port_the_decode_takes_the_prefills(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = PREFILL_9000 + DECODE + ROUTER + " --decode http://127.0.0.1:30001\n"
    out = _rewritten(capsys, tmp_path, text)
    decode = out.splitlines()[1]
    assert decode.endswith("--disaggregation-bootstrap-port 9000")
    assert out.splitlines()[2] == text.splitlines()[2]  # the router is left as it is
    fixed = run_cli(capsys, "fix", "--sglang", text)
    assert fixed.code == 0, fixed.err
    assert "decode@2: no layout change; --disaggregation-bootstrap-port 9000" in fixed.out


def test_prefills_on_different_ports_get_theirs_after_their_urls(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No one decode port serves two prefill servers that listen on 9000 and 9001: the
    router says each one's port after its URL."""
    text = (
        f"{LLAMA} --disaggregation-mode prefill --host 10.0.0.1 --port 30000 "
        "--disaggregation-bootstrap-port 9000\n"
        f"{LLAMA} --disaggregation-mode prefill --host 10.0.0.2 --port 30000 "
        "--disaggregation-bootstrap-port 9001\n"
        f"{LLAMA} --disaggregation-mode decode --host 10.0.0.3 --port 30000\n"
        "python -m sglang_router.launch_router --pd-disaggregation --prefill "
        "http://10.0.0.1:30000 --prefill http://10.0.0.2:30000 --decode http://10.0.0.3:30000\n"
    )
    out = _rewritten(capsys, tmp_path, text)
    assert "--prefill http://10.0.0.1:30000 9000 --prefill http://10.0.0.2:30000 9001 " in out
    assert out.splitlines()[2] == text.splitlines()[2]  # the decode is left as it is
