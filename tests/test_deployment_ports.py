"""Ports of a PD deployment: PD-BOOTSTRAP-PORT repaired by `fix` and `--rewrite`; two
servers of one machine that bind one port (HOST-PORT-CLASH); a router URL under both roles.

Oracle: the rule itself on the rewritten script, read back as text (`validate` of what
`--rewrite` prints), and the edit in the place the rule says the port is read (the port
after the router's URL, else the decode's own `--disaggregation-bootstrap-port`: SGLang's
scheduler fills it into a request that has none); for which listening addresses share a
port, the machine itself (two sockets bound as uvicorn and aiohttp bind them).
"""

from __future__ import annotations

import argparse
import errno
import socket
from pathlib import Path

import pytest

from meshsat.solver.deployment import hosts
from meshsat.solver.deployment.fix import fix_deployment
from meshsat.solver.deployment.validate import validate_deployment
from tests.cli_helpers import run_cli

LLAMA = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct"
PREFILL_9000 = (
    f"{LLAMA} --disaggregation-mode prefill --port 30000 --disaggregation-bootstrap-port 9000\n"
)
DECODE = f"{LLAMA} --disaggregation-mode decode --port 30001 --base-gpu-id 1\n"
#: On the servers' machine (loopback URLs): its own --port, not its default 30000, which
#: the prefill's --port takes.
ROUTER = (
    "python -m sglang_router.launch_router --port 8000 --pd-disaggregation --prefill "
    "http://127.0.0.1:30000"
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


# --- ports two servers of one machine both bind ----------------------------------------


def _bind_fails(first: str, second: str) -> bool:
    """Whether a listener on `second` fails to bind the port one on `first` holds, as
    uvicorn and aiohttp bind (SO_REUSEADDR, then listen): the machine's own answer."""
    with socket.socket() as a, socket.socket() as b:
        for s in (a, b):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        a.bind((first, 0))
        a.listen()
        try:
            b.bind((second, a.getsockname()[1]))
            b.listen()
        except OSError as error:
            assert error.errno == errno.EADDRINUSE
            return True
        return False


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.1", "0.0.0.0"),
        ("0.0.0.0", "127.0.0.1"),
        ("localhost", "127.0.0.1"),
        ("127.0.0.1", "127.0.0.2"),
    ],
)
def test_two_listening_addresses_share_a_port_as_the_machine_says(first: str, second: str) -> None:
    assert hosts.same_address(first, second) is _bind_fails(first, second)


#: SGLang's one-machine PD demo with a second prefill server, both on the default
#: bootstrap port 8998 (QA's b03).
TWO_PREFILLS = (
    f"{LLAMA} --disaggregation-mode prefill --port 30000 --base-gpu-id 0 &\n"
    f"{LLAMA} --disaggregation-mode prefill --port 30001 --base-gpu-id 1 &\n"
    f"{LLAMA} --disaggregation-mode decode --port 30002 --base-gpu-id 2 &\n"
    "python -m sglang_router.launch_router --port 8000 --pd-disaggregation --prefill "
    "http://127.0.0.1:30000 8998 --prefill http://127.0.0.1:30001 8998 "
    "--decode http://127.0.0.1:30002\n"
)


def _found(text: str, rule: str) -> list[tuple[str, ...]]:
    return [f.servers for f in validate_deployment(text).errors if f.rule == rule]


def test_two_prefills_of_one_machine_on_one_bootstrap_port_clash() -> None:
    assert _found(TWO_PREFILLS, "HOST-PORT-CLASH") == [("prefill@1", "prefill@2")]
    apart = TWO_PREFILLS.replace(
        "--port 30001 ", "--port 30001 --disaggregation-bootstrap-port 8999 "
    )
    assert validate_deployment(apart.replace("30001 8998", "30001 8999")).valid


def test_a_prefill_and_a_decode_on_one_http_port_clash() -> None:
    """QA's b14: the decode copied the prefill's `--port`; the router reaches both at one
    loopback URL (so they are on its machine) and lists it under both roles."""
    text = (
        f"{LLAMA} --disaggregation-mode prefill --port 30000\n"
        f"{LLAMA} --disaggregation-mode decode --port 30000\n"
        "python -m sglang_router.launch_router --pd-disaggregation "
        "--prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30000\n"
    )
    report = validate_deployment(text)
    assert {f.rule for f in report.errors} == {"HOST-PORT-CLASH", "ROUTER-TWO-ROLES"}
    two = next(f for f in report.errors if f.rule == "ROUTER-TWO-ROLES")
    assert two.servers == ("prefill@1", "decode@2")  # the servers its URL reaches
    clash = next(f for f in report.errors if f.rule == "HOST-PORT-CLASH")
    assert "(--port 30000)" in clash.message and "Address already in use" in clash.message


@pytest.mark.parametrize(
    "text",
    [
        # Each on its own --host: two machines.
        f"{LLAMA} --disaggregation-mode prefill --host 10.0.0.1 --port 30000\n"
        f"{LLAMA} --disaggregation-mode prefill --host 10.0.0.2 --port 30000\n"
        f"{LLAMA} --disaggregation-mode decode --host 10.0.0.3 --port 30000\n",
        # Neither placed by hand, no router: nothing says one machine (HOST-GPU-UNPLACED's
        # warning says so for the GPUs).
        f"{LLAMA} --disaggregation-mode prefill --port 30000\n"
        f"{LLAMA} --disaggregation-mode prefill --port 30001\n"
        f"{LLAMA} --disaggregation-mode decode --port 30002\n",
        # Through ssh: other machines.
        f"ssh p0 {LLAMA} --disaggregation-mode prefill --port 30000 --base-gpu-id 0\n"
        f"ssh p1 {LLAMA} --disaggregation-mode prefill --port 30001 --base-gpu-id 0\n"
        f"ssh d0 {LLAMA} --disaggregation-mode decode --port 30002\n",
    ],
)
def test_servers_not_known_to_share_a_machine_do_not_clash(text: str) -> None:
    assert _found(text, "HOST-PORT-CLASH") == []


@pytest.mark.parametrize("router_ports", [True, False])
def test_a_bootstrap_clash_moves_the_later_prefill_and_its_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, router_ports: bool
) -> None:
    """The one-edit repair of HOST-PORT-CLASH: the later prefill takes the next port no
    server binds, and the router's URL for it says so (written after it, or added where the
    router gave none, since the decode's one default port cannot serve both)."""
    text = TWO_PREFILLS if router_ports else TWO_PREFILLS.replace(" 8998", "")
    out = _rewritten(capsys, tmp_path, text)
    lines = out.splitlines()
    assert lines[0] == text.splitlines()[0]  # the first prefill keeps its port
    assert "--base-gpu-id 1 --disaggregation-bootstrap-port 8999 &" in lines[1]
    assert "--prefill http://127.0.0.1:30001 8999 --decode" in lines[3]
    result = fix_deployment(text)
    assert result.ok
    fixed = {f.server: f.flags for f in result.servers}
    assert fixed["prefill@2"] == (("--disaggregation-bootstrap-port", "8999"),)
    assert fixed["prefill@1"] == ()


def _router_listens(args: str) -> tuple[str, int]:
    """Where sglang_router listens given `args`: its declaration's `--host`/`--port` and
    their defaults (`RouterArgs.host = "127.0.0.1"`, `port = 30000`), parsed by argparse."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", type=str, default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    namespace, _ = parser.parse_known_args(args.split())
    return namespace.host, namespace.port


@pytest.mark.parametrize(
    ("runner", "args"),
    [
        ("", ""),  # QA's r5: both on their defaults
        ("", "--host 0.0.0.0 --port 30000"),  # QA's bp4
        ("", "--port 8998"),  # the prefill's bootstrap server
        ("", "--port 8000"),
        ("", "--host 127.0.0.2 --port 30000"),
        ("ssh node3 ", ""),  # another machine
    ],
)
def test_a_router_on_a_servers_machine_and_port_clashes(runner: str, args: str) -> None:
    """A router's own port was never compared with the servers': with no --port it listens
    on 30000, the prefill's default `--port` too. On the prefill's machine (it reaches the
    prefill at a loopback URL) and an address the machine refuses to bind twice
    (`_bind_fails`), one of the two fails to start. Started over ssh, it is elsewhere."""
    text = (
        f"{LLAMA} --disaggregation-mode prefill\n"
        f"{LLAMA} --disaggregation-mode decode --port 30001 --base-gpu-id 1\n"
        f"{runner}python -m sglang_router.launch_router --pd-disaggregation "
        f"--prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30001 {args}\n"
    )
    host, port = _router_listens(args)
    bound = {30000: "--port", 8998: "--disaggregation-bootstrap-port"}
    clash = not runner and port in bound and _bind_fails("127.0.0.1", host)
    found = [f for f in validate_deployment(text).errors if f.rule == "HOST-PORT-CLASH"]
    assert [f.servers for f in found] == ([("prefill@1",)] if clash else [])
    if clash:
        assert f"({bound[port]} {port})" in found[0].message
        assert "router on line 3" in found[0].message
