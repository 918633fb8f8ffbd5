"""A PD script's arguments that the programs' own parsers refuse: the error names the
flag and the line, in argparse's words.

Oracle: argparse itself, given the declarations of the programs (sglang_router's
`launch_router`: `--prefill` nargs="+" and `--decode` nargs=1, both `action="append"`;
0.4.6.post5's `mini_lb`: both nargs="+"; SGLang's `--disaggregation-bootstrap-port`:
`type=int`), parsing the same words.
"""

from __future__ import annotations

import argparse

import pytest

from tests.cli_helpers import run_cli

LLAMA = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct"
SERVERS = (
    f"{LLAMA} --disaggregation-mode prefill --port 30000\n"
    f"{LLAMA} --disaggregation-mode decode --port 30001 --base-gpu-id 1\n"
)


def _argparse_says(declared: dict[str, dict[str, object]], words: list[str]) -> str:
    parser = argparse.ArgumentParser(exit_on_error=False)
    for flag, kwargs in declared.items():
        parser.add_argument(flag, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(argparse.ArgumentError) as refused:
        parser.parse_known_args(words)
    return str(refused.value)


ROUTER = {
    "--prefill": {"nargs": "+", "action": "append"},
    "--decode": {"nargs": 1, "action": "append", "metavar": ("URL",)},
}
MINI_LB = {"--prefill": {"nargs": "+"}, "--decode": {"nargs": "+"}}


@pytest.mark.parametrize(
    ("program", "declared", "args"),
    [
        ("sglang_router.launch_router --pd-disaggregation", ROUTER,
         "--prefill --decode http://127.0.0.1:30001"),
        ("sglang_router.launch_router --pd-disaggregation", ROUTER,
         "--prefill http://127.0.0.1:30000 --decode"),
        ("sglang.srt.disaggregation.mini_lb", MINI_LB,
         "--prefill --decode http://127.0.0.1:30001"),
    ],
)  # fmt: skip
def test_a_router_flag_without_its_value_is_the_routers_parse_error(
    capsys: pytest.CaptureFixture[str], program: str, declared: dict[str, dict[str, object]],
    args: str,
) -> None:  # fmt: skip
    said = _argparse_says(declared, args.split())
    run = run_cli(capsys, "validate", "--sglang", SERVERS + f"python -m {program} {args}\n")
    assert run.code == 2, run.out
    assert run.err.startswith("meshsat: error: line 3: ")
    assert said in run.err, (said, run.err)


def test_a_bootstrap_port_that_is_no_integer_names_its_flag_and_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flag = "--disaggregation-bootstrap-port"
    said = _argparse_says({flag: {"type": int}}, [flag, "abc"])
    script = SERVERS.replace("--port 30001", f"--port 30001 {flag} abc")
    run = run_cli(capsys, "validate", "--sglang", script)
    assert run.code == 2, run.out
    assert run.err.strip() == f"meshsat: error: line 2: {said}"


@pytest.mark.parametrize(
    ("prefill", "refused"),
    [
        ("http://127.0.0.1:30000 abc", "Invalid bootstrap port: abc."),
        ("http://127.0.0.1:30000 http://127.0.0.1:30001", "Invalid bootstrap port: http://"),
        ("http://127.0.0.1:30000 8998", None),
        ("http://127.0.0.1:30000 none", None),
        ("http://127.0.0.1:30000 $BOOTSTRAP", None),
    ],
)
def test_what_follows_a_router_prefill_url_is_its_bootstrap_port(
    capsys: pytest.CaptureFixture[str], prefill: str, refused: str | None
) -> None:
    """sglang_router reads `--prefill URL [PORT]` and refuses a PORT that is neither a
    number nor `none` ("Invalid bootstrap port: abc. Must be a number or 'none'",
    `_parse_prefill_urls`); it was read as a second URL (ROUTER-UNKNOWN-URL, exit 0)."""
    text = (
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
        "--disaggregation-mode prefill --port 30000\n"
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
        "--disaggregation-mode decode --port 30002 --base-gpu-id 1\n"
        f"python -m sglang_router.launch_router --pd-disaggregation --prefill {prefill} "
        "--decode http://127.0.0.1:30002\n"
    )
    run = run_cli(capsys, "validate", "--sglang", text)
    if refused is None:
        assert run.code != 2, run.err
    else:
        assert run.code == 2 and refused in run.err and "line 3" in run.err
        assert "Traceback" not in run.err and len(run.err.strip().splitlines()) == 1
