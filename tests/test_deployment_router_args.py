"""A PD script's arguments that the programs' own parsers refuse: the error names the
flag and the line, in argparse's words.

Oracle: argparse itself, given the declarations of the programs (sglang_router's
`launch_router`: `--prefill` nargs="+" and `--decode` nargs=1, both `action="append"`;
0.4.6.post5's `mini_lb`: both nargs="+"; SGLang's `--disaggregation-bootstrap-port`:
`type=int`), parsing the same words.
"""

from __future__ import annotations

import argparse
import http.client
import json
from urllib.parse import urlsplit

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


def _router_reads(args: str) -> tuple[list[tuple[str, int | None]], list[str]]:
    """What sglang_router makes of `args`: `parse_args` with its declaration (extras are
    its "unrecognized arguments" error, raised as `ArgumentError`'s text), then
    `RouterArgs._parse_prefill_urls`/`_parse_decode_urls` as the source writes them
    (`prefill_args[0]`, `prefill_args[1]` if present; `url[0]` of each nargs=1 list)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    for flag, kwargs in ROUTER.items():
        parser.add_argument(flag, **kwargs)  # type: ignore[arg-type]
    parser.add_argument("--pd-disaggregation", action="store_true")
    parser.add_argument("--host", type=str, default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    namespace, extras = parser.parse_known_args(args.split())
    if extras:  # parse_args: `error(_('unrecognized arguments: %s') % ' '.join(argv))`
        raise ValueError("unrecognized arguments: " + " ".join(extras))
    prefill = [
        (p[0], None if len(p) < 2 or p[1].lower() == "none" else int(p[1]))
        for p in namespace.prefill or []
    ]
    return prefill, [d[0] for d in namespace.decode or []]


def _meshsat_reads(args: str) -> tuple[list[tuple[str, int | None]], list[str]]:
    from meshsat.solver.deployment.reader import router_of
    from meshsat.solver.errors import InputError
    from meshsat.solver.inputs.launch import read_launch_commands

    text = SERVERS + f"python -m sglang_router.launch_router {args}\n"
    router = next(c for c in read_launch_commands(text, routers=True) if c.router)
    try:
        read = router_of(router)
    except InputError as refused:
        raise ValueError(str(refused).split(": ", 2)[-1].split(" (")[0]) from None
    return [(t.url, t.bootstrap_port) for t in read.prefill], [t.url for t in read.decode]


P, D, E = "http://127.0.0.1:30000", "http://127.0.0.1:30001", "http://127.0.0.1:30002"


@pytest.mark.parametrize(
    "args",
    [
        f"--pd-disaggregation --prefill={P} --decode={D}",
        f"--pd-disaggregation --prefill={P} --prefill {E} 9000 --decode={D} --decode {E}",
        f"--pd-disaggregation --prefill={P} 8998 --decode {D}",  # `=` takes one word
        f"--pd-disaggregation --prefill {P} --decode {D} {E}",  # --decode: nargs=1
        f"--pd-disaggregation --prefill {P} --decode={D} {E}",
        f"--pd-disaggregation --prefill {P} 8998 9000 --decode {D}",  # the first port
        f"--pd-disaggregation --prefill {P} none 9000 --decode {D}",
        f"--pd-disaggregation --prefill {P} 8998 --prefill {E} --decode {D} --port 8000",
    ],
)
def test_the_router_flags_are_read_as_sglang_router_parses_them(args: str) -> None:
    """Each spelling argparse accepts (`--flag value`, `--flag=value`) and each flag's
    nargs, against sglang_router's own declaration and `_parse_prefill_urls`: the `=` form
    was ignored (a router with swapped roles passed), `--decode URL1 URL2` counted two
    decodes where the router refuses the second word, and `--prefill URL 8998 9000` read
    the last port where the router reads the first."""
    try:
        expected: object = _router_reads(args)
    except ValueError as refused:
        expected = str(refused)
    try:
        got: object = _meshsat_reads(args)
    except ValueError as refused:
        got = str(refused)
    assert got == expected


def test_swapped_roles_written_with_equals_are_router_role_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    router = (
        f"python -m sglang_router.launch_router --pd-disaggregation --prefill={D} "
        f"--decode={P} --host 0.0.0.0 --port 8000\n"
    )
    run = run_cli(capsys, "validate", "--sglang", SERVERS + router, "--json")
    assert run.code == 1, run.err
    found = json.loads(run.out)["deployment"]["findings"]
    assert sorted((f["rule"], f["servers"][0]) for f in found) == [
        ("ROUTER-ROLE", "decode@2"),
        ("ROUTER-ROLE", "prefill@1"),
    ]


def test_words_a_router_flag_does_not_take_are_its_parse_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = f"--pd-disaggregation --prefill {P} --decode {D} {E}"
    with pytest.raises(ValueError, match="unrecognized") as said:
        _router_reads(args)
    text = SERVERS + f"python -m sglang_router.launch_router {args}\n"
    run = run_cli(capsys, "validate", "--sglang", text)
    assert run.code == 2, run.out
    assert run.err.startswith("meshsat: error: line 3: sglang_router.launch_router: ")
    assert str(said.value) in run.err and len(run.err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("http://127.0.0.1", http.client.HTTPConnection("127.0.0.1").port),
        ("https://127.0.0.1", http.client.HTTPSConnection("127.0.0.1").port),
        ("HTTPS://127.0.0.1/", http.client.HTTPSConnection("127.0.0.1").port),
        ("127.0.0.1:30001", 30001),
    ],
)
def test_a_router_url_without_a_port_is_reached_at_its_schemes_port(url: str, port: int) -> None:
    """An HTTP client reaches a URL without a port at its scheme's default (the oracle:
    `http.client`'s connections; the router's client follows the same URL standard). Such
    a URL matched every server before, whatever port it listens on."""
    from meshsat.solver.deployment.reader import router_of
    from meshsat.solver.inputs.launch import read_launch_commands

    text = (
        SERVERS
        + "python -m sglang_router.launch_router --pd-disaggregation "
        + f"--prefill {P} --decode {url}\n"
    )
    router = router_of(next(c for c in read_launch_commands(text, routers=True) if c.router))
    assert router.decode[0].endpoint.port == port


def test_a_router_url_without_a_port_is_not_any_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    router = (
        "python -m sglang_router.launch_router --pd-disaggregation --prefill http://127.0.0.1 "
        f"--decode {D}\n"
    )
    run = run_cli(capsys, "validate", "--sglang", SERVERS + router, "--json")
    found = json.loads(run.out)["deployment"]["findings"]
    assert [(f["rule"], f["severity"]) for f in found] == [("ROUTER-UNKNOWN-URL", "warning")]


@pytest.mark.parametrize("port", ["notaport", "99999", "30000x"])
def test_a_router_url_whose_port_is_no_port_is_refused(
    capsys: pytest.CaptureFixture[str], port: str
) -> None:
    """A port no HTTP client can connect to (the oracle: `urllib.parse` refuses it too);
    it matched every server before and the deployment passed."""
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(ValueError):
        urlsplit(url).port  # noqa: B018
    router = (
        f"python -m sglang_router.launch_router --pd-disaggregation --prefill {url} --decode {D}\n"
    )
    run = run_cli(capsys, "validate", "--sglang", SERVERS + router)
    assert run.code == 2, run.out
    assert run.err.startswith("meshsat: error: line 3: sglang_router.launch_router: ")
    assert url in run.err and len(run.err.strip().splitlines()) == 1


def test_a_router_url_through_a_variable_still_matches_what_it_may_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    router = (
        "python -m sglang_router.launch_router --pd-disaggregation --prefill "
        f"http://127.0.0.1:$PREFILL_PORT --decode {D}\n"
    )
    run = run_cli(capsys, "validate", "--sglang", SERVERS + router)
    assert run.code == 0, run.out + run.err
