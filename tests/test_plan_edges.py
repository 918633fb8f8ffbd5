"""`meshsat plan` / `enumerate --perf` at the edges a new user reaches first: limits nobody
writes on purpose, names mistyped, commands pasted back. Each test failed before its fix."""

from __future__ import annotations

import csv
import http.client
import io
import json
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.cli import plan_perf
from meshsat.solver.errors import InputError
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.perf import Workload
from meshsat.solver.web import make_server
from tests.cli_helpers import run_cli

SMALL = ("plan", "--model", "Qwen/Qwen3-0.6B", "--gpu", "H100", "--gpus", "1", "--top", "1")


@pytest.mark.parametrize("flag", ["--ttft", "--tpot"])
def test_an_infinite_latency_limit_is_no_limit_in_standard_json(
    capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """`--ttft inf` passed the parser's `min=0` and crashed the JSON writer with a traceback
    (JSON has no infinity): it is no limit, as 0 is, and the document says null."""
    inf = run_cli(capsys, *SMALL, flag, "inf", "--format", "json")
    zero = run_cli(capsys, *SMALL, flag, "0", "--format", "json")
    assert inf.code == 0, inf.err
    assert json.loads(inf.out) == json.loads(zero.out)
    assert json.loads(inf.out)["workload"][flag[2:] + "_ms"] is None


def test_the_api_refuses_a_non_finite_limit() -> None:
    """`Workload`'s no limit is None; infinity there would reach the JSON writer too."""
    for bad in (math.inf, math.nan, 0.0, -1.0):
        with pytest.raises(InputError, match="finite number of milliseconds"):
            Workload(ttft_ms=bad)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("Qwen3-32B", "Qwen/Qwen3-32B"),  # the organisation left out
        ("gpt-oss-120b", "openai/gpt-oss-120b"),
        ("Kimi-K2", "moonshotai/Kimi-K2-Instruct"),  # a name cut short
        ("deepseek-ai/DeepSeek-V4", "deepseek-ai/DeepSeek-V3"),
    ],
)
def test_a_mistyped_model_is_one_line_naming_the_close_ids(
    capsys: pytest.CaptureFixture[str], typed: str, meant: str
) -> None:
    """The error named the same three DeepSeek ids whatever was typed."""
    res = run_cli(capsys, "plan", "--model", typed, "--gpu", "H200", "--gpus", "8")
    assert res.code == 2 and res.out == ""
    line = res.err.strip()
    assert line.startswith(f"meshsat: error: unknown model {typed!r}") and "\n" not in line
    assert f"did you mean {meant}" in line


def test_a_mistyped_gpu_names_the_close_one(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H2000", "--gpus", "8")
    assert res.code == 2 and "did you mean H200" in res.err
    assert len(res.err.strip().splitlines()) == 1


def _fraction_of(command: str) -> str | None:
    words = command.split()
    return (
        words[words.index("--mem-fraction-static") + 1]
        if "--mem-fraction-static" in words
        else None
    )


def test_a_row_on_a_raised_fraction_prints_the_fraction_its_command_needs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The estimate raises a default fraction that leaves no KV pool (as measured runs
    launched with an explicit one); the printed command left the flag out, so the command
    plan recommended was one SGLang refuses to start and `validate --gpu` reported MEM-FIT.
    `validate` is the oracle: without the fraction the command does not fit, with it, it
    does."""
    res = run_cli(capsys, "plan", "--model", "stepfun-ai/Step-3.5-Flash", "--gpu", "H200",
                  "--gpus", "3", "--format", "json")  # fmt: skip
    assert res.code == 0, res.err
    (row,) = json.loads(res.out)["layouts"]
    fraction = _fraction_of(row["command"])
    assert fraction is not None, row["command"]
    bare = row["command"].replace(f" --mem-fraction-static {fraction}", "")
    check = ("validate", "--sglang", bare, "--gpu", "H200", "--json")
    assert run_cli(capsys, *check).code == 1
    as_planned = run_cli(capsys, *check, "--mem-fraction-static", fraction)
    assert as_planned.code == 0, as_planned.out
    memory = json.loads(as_planned.out)["memory"]
    assert memory["weights_gib"] == pytest.approx(row["weights_gib"], abs=0.01)
    assert memory["max_total_num_tokens"] * memory["pools"] == row["total_kv_tokens"]


@pytest.mark.parametrize("extra", [("--rank", "kv"), ("--disagg",)])
def test_a_given_fraction_is_in_every_printed_command(
    capsys: pytest.CaptureFixture[str], extra: tuple[str, ...]
) -> None:
    """`--mem-fraction-static 0.7` sized every row, but the commands ran SGLang's default."""
    res = run_cli(capsys, *SMALL[:-2], "--gpus", "2", "--mem-fraction-static", "0.7",
                  "--format", "json", *extra)  # fmt: skip
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    commands = [r["command"] for r in doc.get("layouts", [])] + [
        d[k] for d in doc.get("deployments", []) for k in ("prefill_command", "decode_command")
    ]
    assert commands and all(_fraction_of(c) == "0.7" for c in commands), commands


@pytest.mark.parametrize(
    "where",
    ["moe_dense_tp_size + 1 > 0", "moe_dense_tp_size + 1 == 2", "moe_dense_tp_size * 2 in (2, 4)"],
)
def test_arithmetic_on_an_unset_optional_field_filters_instead_of_crashing(where: str) -> None:
    """Arithmetic on an optional field was left unguarded (only a bare field in an ordering
    was), so the generated loops raised `TypeError: NoneType + int` out of `enumerate`.
    Unset, the filter is false; set, it reads the value: the same layouts as the plain
    equality, which the loops already answered."""
    from meshsat import solver

    unset = list(solver.enumerate(4, where=[where]))
    assert unset == []
    base = {"moe_dense_tp_size": 1}
    with_value = [lay.values for lay in solver.enumerate(4, base=base, where=[where])]
    plain = [lay.values for lay in solver.enumerate(4, base=base, where=["moe_dense_tp_size == 1"])]
    assert with_value == plain and plain


def _strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_enumerate_perf_sizes_the_estimate_as_its_memory_columns_and_plan_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`enumerate --perf --mem-fraction-static 0.3` sized kv_tokens at 0.3 but estimated at
    the release's default: concurrency 177 against room for 29 where `plan` (the oracle:
    the same question) said 29."""
    ask = ("--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "1", "--no-sla",
           "--mem-fraction-static", "0.3", "--format", "json")  # fmt: skip
    (planned,) = json.loads(run_cli(capsys, "plan", *ask).out)["layouts"]
    listed = json.loads(run_cli(capsys, "enumerate", *ask, "--perf", "--command").out)
    same = [r for r in listed if r["command"] == planned["command"]]
    assert len(same) == 1, [r["command"] for r in listed]
    for key in ("concurrency", "ttft_ms", "tpot_ms", "tokens_per_s_gpu", "tokens_per_s_user"):
        assert same[0][key] == planned[key], key
    assert same[0]["concurrency"] <= planned["kv_concurrency"]


def test_enumerate_perf_writes_no_estimate_as_null_sorted_last(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A layout that does not fit has no latency: it was written `NaN` (not JSON) and
    sorted first by `--sort ttft_ms`. Its command, where the estimate raised the fraction,
    now carries it, as plan's does (the oracle: plan's row for the same layout)."""
    ask = ("--model", "stepfun-ai/Step-3.5-Flash", "--gpu", "H200", "--gpus", "3")
    rows = _strict_json(run_cli(capsys, "enumerate", *ask, "--perf", "--command",
                                "--format", "json").out)  # fmt: skip
    assert isinstance(rows, list)
    missing = [r for r in rows if r["perf_source"] == "does not fit"]
    assert missing and all(r["ttft_ms"] is None and r["tpot_ms"] is None for r in missing)
    for order in ("ttft_ms", "-ttft_ms"):
        res = run_cli(capsys, "enumerate", *ask, "--perf", "--sort", order, "--limit", "1",
                      "--format", "json")  # fmt: skip
        (first,) = _strict_json(res.out)  # type: ignore[misc]
        assert first["ttft_ms"] is not None, order
    (planned,) = json.loads(run_cli(capsys, "plan", *ask, "--format", "json").out)["layouts"]
    assert planned["command"] in {r["command"] for r in rows}


@pytest.fixture(scope="module")
def web() -> Iterator[Callable[[dict[str, Any]], tuple[int, Any, str | None]]]:
    """POST /api/plan on a server of this process (127.0.0.1, a free port)."""
    srv = make_server("127.0.0.1", 0, workers=2)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    def post(body: dict[str, Any]) -> tuple[int, Any, str | None]:
        conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=60)
        conn.request("POST", "/api/plan", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        status, exit_status, payload = r.status, r.getheader("X-Meshsat-Exit"), json.loads(r.read())
        conn.close()
        return status, payload, exit_status

    yield post
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("timeout", [-1, "nan"])
def test_web_plan_refuses_the_timeout_the_cli_refuses(
    capsys: pytest.CaptureFixture[str],
    web: Callable[[dict[str, Any]], tuple[int, Any, str | None]],
    timeout: object,
) -> None:
    """/api/plan lists `timeout` among its fields but ignored it: a bad one was answered
    200 where the CLI (the oracle) exits 2 with one line."""
    cli = run_cli(capsys, *SMALL, "--timeout", str(timeout))
    status, doc, _ = web({"model": "Qwen/Qwen3-0.6B", "gpu": "H100", "gpus": 1, "timeout": timeout})
    assert cli.code == 2 and status == 400
    assert doc == {"error": cli.err.strip(), "field": "timeout", "exit": 2}


def test_web_plan_stops_at_the_timeout_asked(
    web: Callable[[dict[str, Any]], tuple[int, Any, str | None]],
) -> None:
    status, doc, _ = web({"model": "Qwen/Qwen3-0.6B", "gpu": "H100", "gpus": 1, "timeout": 1e-9})
    assert (
        status == 400
        and doc["error"] == "meshsat: error: plan did not finish within --timeout 1e-09 s"
    )
    assert doc["field"] == "timeout"  # the CLI's line, naming the option


def test_a_plot_the_directory_refuses_is_exit_2_with_nothing_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the directory's existence was checked first, so a directory that refuses the
    file (read-only, /proc; root passes the permission bits) printed the whole table or
    JSON document and then exited 2: a half answer behind an error status."""

    def refused(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(plan_perf.tempfile, "mkstemp", refused)
    target = tmp_path / "pareto.png"
    res = run_cli(capsys, *SMALL, "--plot", str(target), "--format", "json")
    assert res.code == 2 and res.out == ""
    assert res.err == f"meshsat: error: cannot write {target}: Permission denied\n"
    assert list(tmp_path.iterdir()) == []


def test_plan_csv_writes_booleans_as_enumerate_csv_does(capsys: pytest.CaptureFixture[str]) -> None:
    """One CSV dialect for every command (formats.py): `plan --format csv` wrote Python's
    `True`/`False` where `enumerate --format csv` (row_format.csv_text, the oracle) writes
    `true`/`false`, so one reader could not parse both."""
    ask = ("--model", "Qwen/Qwen3-0.6B", "--gpu", "H100", "--gpus", "2", "--format", "csv")
    planned = list(csv.DictReader(io.StringIO(run_cli(capsys, "plan", *ask).out)))
    listed = list(csv.DictReader(io.StringIO(
        run_cli(capsys, "enumerate", *ask, "--perf").out)))  # fmt: skip
    assert {r["meets_sla"] for r in listed} <= {"true", "false"}
    assert {r["dp_attention"] for r in planned} | {r["meets_sla"] for r in planned} <= {
        "true", "false"}  # fmt: skip
    disagg = list(csv.DictReader(io.StringIO(run_cli(capsys, "plan", *ask, "--disagg").out)))
    assert {r["meets_sla"] for r in disagg} <= {"true", "false"}


@pytest.mark.parametrize("rank", ["perf", "kv"])
def test_plan_on_an_older_release_prints_commands_that_release_accepts(
    capsys: pytest.CaptureFixture[str], rank: str
) -> None:
    """`plan --sglang-version 0.5.19` spelled DP attention as 0.5.23's `--attn-dp-size`,
    which 0.5.19 has no flag for: `validate` on the same release (the oracle) refused
    every such command (FLAG-ABSENT-ATTN-DP-SIZE)."""
    res = run_cli(capsys, *SMALL[:-2], "--gpus", "2", "--top", "50", "--rank", rank,
                  "--sglang-version", "0.5.19", "--format", "json")  # fmt: skip
    rows = json.loads(res.out)["layouts"]
    assert any(r["dp_attention"] for r in rows)
    for r in rows:
        check = run_cli(capsys, "validate", "--sglang", r["command"], "--sglang-version", "0.5.19")
        assert check.code == 0, (r["command"], check.out)


@pytest.mark.parametrize("version", ["0.4.6.post5", "0.5.19"])
@pytest.mark.parametrize("rank", ["perf", "kv"])
def test_plan_sizes_memory_as_validate_does_on_the_chosen_release(
    capsys: pytest.CaptureFixture[str], version: str, rank: str
) -> None:
    """plan sized every pool with 0.5.23's defaults whatever --sglang-version said (the
    perf ranking mapped the 0.5 line to 0.5.23, the KV ranking ignored it), so on a
    20-35 GiB GPU (0.5.19's own band) or on 0.4.6.post5's table its KV tokens were not
    those `validate --gpu` (the oracle) reports for the command it printed."""
    ask = ("--model", "Qwen/Qwen3-0.6B", "--gpu", "L4", "--sglang-version", version)
    res = run_cli(capsys, "plan", *ask, "--gpus", "1", "--rank", rank, "--format", "json")
    row = json.loads(res.out)["layouts"][0]
    check = run_cli(capsys, "validate", "--sglang", row["command"], *ask, "--json")
    memory = json.loads(check.out)["memory"]
    assert memory["max_total_num_tokens"] * memory["pools"] == row["total_kv_tokens"]


def test_plan_disagg_json_carries_every_width_of_each_role_as_plan_rows_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """plan's rows carry attn_tp, moe_tp, attn_cp and dcp; plan --disagg's role columns
    stopped at ep, so a decode server of `tp2 dcp2` read as `tp2` to a tool (only the label
    text said otherwise). Each role's columns must be its command's widths, as validate
    (the oracle) resolves the command."""
    from meshsat import solver
    from meshsat.solver.inputs import parse_sglang_command

    res = run_cli(capsys, *SMALL[:-2], "--gpus", "4", "--disagg", "--top", "40",
                  "--format", "json")  # fmt: skip
    rows = json.loads(res.out)["deployments"]
    assert any(r["prefill_dcp"] > 1 or r["decode_dcp"] > 1 for r in rows)
    for r in rows:
        for role in ("prefill", "decode"):
            report = solver.validate(parse_sglang_command(r[f"{role}_command"]).values)
            c, d = report.resolved, report.derived
            got = {k: r[f"{role}_{k}"] for k in ("tp", "attn_tp", "moe_tp", "attn_cp", "dcp")}
            assert got == {"tp": c["tp_size"], "attn_tp": d["attn_tp"], "moe_tp": d["moe_tp"],
                           "attn_cp": c["attn_cp_size"], "dcp": c["dcp_size"]}  # fmt: skip


@pytest.mark.parametrize("concurrency", [0, -5, 2.5])
def test_the_estimate_refuses_a_concurrency_no_client_can_send(concurrency: object) -> None:
    """`PerfModel.estimate(p, concurrency=0)` answered for one request in flight."""
    from meshsat.solver.memory import Parallel
    from meshsat.solver.perf import PerfModel

    pm = PerfModel("Qwen/Qwen3-0.6B", "H100", Workload(), engine="roofline")
    assert pm.estimate(Parallel(), concurrency=3).concurrency == 3
    with pytest.raises(InputError, match="concurrency must be a whole number >= 1"):
        pm.estimate(Parallel(), concurrency=concurrency)  # type: ignore[arg-type]


def test_plan_exits_1_when_no_layout_holds_one_request_as_plan_disagg_does(
    capsys: pytest.CaptureFixture[str],
    web: Callable[[dict[str, Any]], tuple[int, Any, str | None]],
    tmp_path: Path,
) -> None:
    """At ISL 100,000,000 every layout's row was `does not fit` with zeros, and plan exited
    0 (and /api/plan said exit 0) where plan --disagg (the oracle: the same question)
    exits 1. The model's own context (40,960 positions) refuses such requests first, for
    all three alike (exit 2, one line); a copy of its config with room for them holds none
    in its KV cache."""
    ask = (*SMALL[:-2], "--gpus", "2", "--isl", "100000000")
    long_ones = [run_cli(capsys, *ask, "--disagg"), run_cli(capsys, *ask, "--format", "json")]
    status, doc, _ = web({"model": "Qwen/Qwen3-0.6B", "gpu": "H100", "gpus": 2, "isl": 100000000})
    assert {(r.code, r.err) for r in long_ones} == {(2, long_ones[0].err)}
    assert "is more than the context length of Qwen/Qwen3-0.6B, 40,960" in long_ones[0].err
    assert status == 400 and doc["error"] == long_ones[0].err.strip()
    roomy = tmp_path / "config.json"
    roomy.write_text(json.dumps({**catalogue_config("Qwen/Qwen3-0.6B"), "seq_length": 2**28}))
    ask = ("plan", "--model", str(roomy), "--gpu", "H100", "--gpus", "2", "--isl", "100000000")
    disagg = run_cli(capsys, *ask, "--disagg")
    res = run_cli(capsys, *ask, "--format", "json")
    assert disagg.code == 1 and res.code == 1
    assert {r["source"] for r in json.loads(res.out)["layouts"]} == {"does not fit"}
    assert "holds one request of ISL + OSL = 100,001,024 tokens" in res.err


def test_disagg_on_one_gpu_says_it_needs_two(
    capsys: pytest.CaptureFixture[str], web: Callable[[dict[str, Any]], tuple[int, Any, str | None]]
) -> None:
    """One GPU holds no prefill and decode pair; plan --disagg blamed memory or speeds
    ("none fits, or the GPU has no speeds to estimate with") and exited 1."""
    res = run_cli(capsys, *SMALL, "--disagg")
    assert res.code == 2 and res.out == ""
    assert res.err == "meshsat: error: --disagg needs at least 2 GPUs (a prefill and a decode " \
        "server), got --gpus 1\n"  # fmt: skip
    status, doc, _ = web({"model": "Qwen/Qwen3-0.6B", "gpu": "H100", "gpus": 1, "disagg": True})
    assert status == 400 and doc["error"] == res.err.strip()


@pytest.mark.parametrize(
    "ask",
    [("--where", "ttft_ms < 100"), ("--sort", "ttft_ms"), ("--where", "meets_sla")],
)
def test_a_perf_column_without_perf_names_the_missing_option(
    capsys: pytest.CaptureFixture[str], ask: tuple[str, str]
) -> None:
    """With --model and --gpu but no --perf, `--sort ttft_ms` and `--where "ttft_ms < 100"`
    said "unknown name 'ttft_ms'; did you mean fits?": the column exists, the option that
    adds it was missing."""
    res = run_cli(capsys, "enumerate", "--gpus", "2", "--model", "Qwen/Qwen3-0.6B", "--gpu",
                  "H100", *ask)  # fmt: skip
    assert res.code == 2 and res.out == "" and len(res.err.splitlines()) == 1
    assert "needs --perf" in res.err or "needs the estimate: give --perf" in res.err, res.err


def test_a_gpu_without_speeds_says_why_nothing_is_estimated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`plan --gpu-memory 80GiB` ranks by estimate by default, and every row read
    `source: unavailable` with zeros and nothing to say what to change."""
    res = run_cli(capsys, "plan", "--model", "Qwen/Qwen3-0.6B", "--gpu-memory", "80GiB",
                  "--gpus", "1", "--format", "json")  # fmt: skip
    (row,) = json.loads(res.out)["layouts"]
    assert row["source"] == "unavailable (custom-80GiB has no speeds: name its type, --gpu)"


@pytest.mark.parametrize("extra", [("--format", "json"), ("--plot", "pareto.png")])
def test_emit_refuses_the_report_options_it_would_drop(
    capsys: pytest.CaptureFixture[str], extra: tuple[str, str], tmp_path: Path
) -> None:
    """`--emit lws --format json` printed YAML with exit 0, and `--emit lws --plot F` wrote
    no plot: options asked for and dropped without a word."""
    flag, value = extra
    value = str(tmp_path / value) if flag == "--plot" else value
    res = run_cli(capsys, *SMALL, "--emit", "lws", flag, value)
    assert res.code == 2 and res.out == "" and list(tmp_path.iterdir()) == []
    assert res.err.startswith(f"meshsat: error: drop {extra[0]}") and res.err.count("\n") == 1


def test_a_row_without_estimate_says_so_alike_in_every_format(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A GPU with no speeds (`--gpu-memory`) leaves TTFT and TPOT unestimated: JSON said
    null, while the table and CSV printed `nan` (a number to a CSV reader)."""
    ask = ("plan", "-m", "Qwen/Qwen3-32B", "--gpu-memory", "96GiB", "--gpus", "2", "--top", "1")
    doc = json.loads(run_cli(capsys, *ask, "--format", "json").out)
    row = doc["layouts"][0]
    assert row["ttft_ms"] is None and row["tpot_ms"] is None
    cells = next(csv.DictReader(io.StringIO(run_cli(capsys, *ask, "--format", "csv").out)))
    assert cells["ttft_ms"] == "" and cells["tpot_ms"] == ""
    table = run_cli(capsys, *ask).out
    assert "nan" not in table and table.splitlines()[1].split()[10:12] == ["-", "-"]


def test_a_gpu_without_speeds_says_so_and_points_to_the_kv_ranking(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--gpu-memory` gives memory, not speeds: no row has an estimate, and "the rows are the
    fastest that miss the SLA" would send the user after limits that were never the cause."""
    res = run_cli(capsys, "plan", "-m", "Qwen/Qwen3-32B", "--gpu-memory", "141GiB", "--gpus", "2")
    assert res.code == 1
    assert "could be estimated (custom-141GiB has no speeds" in res.err
    assert "--rank kv" in res.err and "meets the SLA" not in res.err
    assert run_cli(capsys, "plan", "-m", "Qwen/Qwen3-32B", "--gpu-memory", "141GiB", "--gpus",
                   "2", "--rank", "kv").code == 0  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    value=st.floats(min_value=0.001, max_value=1e5, allow_nan=False),
    limit=st.floats(min_value=0.001, max_value=1e5, allow_nan=False) | st.none(),
    near=st.integers(min_value=-60, max_value=60),
)
def test_a_published_latency_is_on_its_limits_side(
    value: float, limit: float | None, near: int
) -> None:
    """`meets_sla` was judged on the estimate while TTFT was printed to 0.1 ms: 500.004 ms
    against `--ttft 500` printed 500.0 beside meets_sla false, and a tool re-checking the
    SLA from the CSV disagreed. Each printed figure is within one last digit of the estimate
    and on the same side of its limit (`near` puts the figure within 0.06 ms of it)."""
    if limit is not None and near:
        value = max(limit + near / 1000, 0.001)
    w = Workload(ttft_ms=limit, tpot_ms=limit)
    ttft, tpot = w.published(value, value)
    for shown, step in ((ttft, 0.1), (tpot, 0.01)):
        assert abs(shown - value) <= step + 1e-9
        assert limit is None or (shown <= limit) == (value <= limit)
    assert Workload(ttft_ms=500).published(500.004, 20.0) == (500.1, 20.0)
    assert math.isnan(w.published(math.nan, math.nan)[0])


def test_meets_sla_agrees_with_the_printed_latencies(capsys: pytest.CaptureFixture[str]) -> None:
    """QA's case: DeepSeek-V3 on 16 H200 at ISL 4096, `--ttft 500`, printed a row of
    ttft_ms 500.0 with meets_sla false (the estimate: 500.004 ms). Every row of
    `enumerate --perf` (CSV) and `plan` (JSON), re-checked against the limits from its
    printed figures, gives its own meets_sla."""
    pytest.importorskip("aiconfigurator_core")
    ask = ("--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "16", "--isl",
           "4096", "--osl", "1024", "--ttft", "500", "--tpot", "30")  # fmt: skip
    listed = run_cli(capsys, "enumerate", *ask, "--where", "fits", "--perf", "-f", "csv")
    rows = list(csv.DictReader(io.StringIO(listed.out)))
    doc = json.loads(run_cli(capsys, "plan", *ask, "--top", "1000", "-f", "json").out)
    checked = [(float(r["ttft_ms"]), float(r["tpot_ms"]), r["meets_sla"] == "true")
               for r in rows if r["ttft_ms"]]  # fmt: skip
    checked += [(r["ttft_ms"], r["tpot_ms"], r["meets_sla"]) for r in doc["layouts"]
                if r["ttft_ms"] is not None]  # fmt: skip
    assert len(checked) > 100
    for ttft, tpot, met in checked:
        assert (ttft <= 500 and tpot <= 30) == met, (ttft, tpot, met)
    assert any(ttft == 500.1 and not met for ttft, _tpot, met in checked)  # the QA's row


@pytest.mark.parametrize(
    "args",
    [
        ("plan", "--rank", "kv", "--gpus", "8"),
        ("plan", "--gpus", "1"),  # the perf ranking does not read it: bad input all the same
        ("enumerate", "--gpus", "1", "--count"),
        ("validate", "--set", "tp_size=1"),
    ],
)
def test_a_context_length_beyond_the_models_is_refused(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    """`plan --rank kv --context-length 200000` on Llama-3.1-8B (131,072 positions) planned
    with exit 0, and 10,000,000 counted 0 requests that fit, while `--isl 200000` was
    refused: SGLang refuses such requests, and refuses to start with that --context-length
    unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set (ModelConfig)."""
    ask = ("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100")
    for length in ("131073", "10000000"):
        res = run_cli(capsys, *args, *ask, "--context-length", length)
        assert res.code == 2 and res.out == "" and res.err.count("\n") == 1, res.err
        assert f"--context-length {int(length):,} is more than the context length" in res.err
        assert "131,072 (max_position_embeddings): SGLang refuses such requests" in res.err
    assert run_cli(capsys, *args, *ask, "--context-length", "131072").code == 0


def test_the_default_context_length_is_cut_to_the_models(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A request is at most the model's context length: TinyLlama's 2,048 tokens, not the
    4,096 default, and its document says which length `max_requests` counts."""
    ask = ("plan", "--model", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--gpu", "H100",
           "--gpus", "1", "--rank", "kv", "-f", "json")  # fmt: skip
    doc = json.loads(run_cli(capsys, *ask).out)
    assert doc["context_length"] == 2048
    (row,) = doc["layouts"]
    assert row["max_requests"] == row["pools"] * (row["kv_tokens_per_pool"] // 2048)
    assert run_cli(capsys, *ask, "--context-length", "4096").code == 2


SAID_NOTES = [
    ({}, ["TTFT <= 2000 ms, TPOT <= 30 ms", "both limits are AIConfigurator's defaults",
          "--no-sla lifts them"], []),
    ({"ttft_ms": 500, "tpot_ms": 20}, ["TTFT <= 500 ms, TPOT <= 20 ms", "--no-sla lifts them"],
     ["2000", "30 ms", "default"]),
    ({"ttft_ms": None}, ["TPOT <= 30 ms", "the TPOT limit is AIConfigurator's default",
                         "--no-sla lifts it"], ["TTFT", "them"]),
    ({"ttft_ms": None, "tpot_ms": None}, ["no latency limit"],
     ["TTFT", "TPOT", "default", "--no-sla"]),
]  # fmt: skip


@pytest.mark.parametrize(("limits", "said", "unsaid"), SAID_NOTES)
def test_the_ranking_note_says_only_the_limits_that_apply(
    limits: dict[str, float | None], said: list[str], unsaid: list[str]
) -> None:
    """The note said "limits not given are TTFT <= 2000 ms and TPOT <= 30 ms" after
    `--ttft 500 --tpot 20`, and after `--ttft inf` (no TTFT limit at all)."""
    from meshsat.solver.cli import plan_disagg

    w = Workload(1024, 1024, **{"ttft_ms": 2000.0, "tpot_ms": 30.0, **limits})
    terms = plan_perf.sla_terms(w)
    assert all(s in terms for s in said) and not any(s in terms for s in unsaid), terms
    for note in (plan_perf.ranking_note(w), plan_disagg.ranking_note(w)):
        assert f"({terms})" in note
        assert ("meeting the SLA" in note) == (w.ttft_ms is not None or w.tpot_ms is not None)


@pytest.mark.parametrize("rank", ["perf", "kv"])
def test_a_where_that_leaves_no_layout_says_so(
    capsys: pytest.CaptureFixture[str], rank: str
) -> None:
    """`plan --where "tp == 3"` on one GPU said "no legal layout ... fits 1 x H100": memory
    refused nothing, the filter had left no layout to fit."""
    res = run_cli(capsys, *SMALL, "--rank", rank, "--where", "tp == 3")
    assert res.code == 1
    assert "the --where filters leave no layout of Qwen/Qwen3-0.6B on 1 GPU (of" in res.err
    assert "fits" not in res.err
    big = ("plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H100", "--gpus", "8",
           "--rank", rank, "--where", "tp == 8")  # fmt: skip
    res = run_cli(capsys, *big)
    assert res.code == 1
    assert "no legal layout of deepseek-ai/DeepSeek-V3 that the --where filters keep fits" in (
        res.err
    )


@pytest.mark.parametrize("name", ["x.txt", "x.jpeg", "x"])
def test_a_plot_suffix_that_names_no_format_it_writes_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    """`--plot x.txt` wrote a PNG under a .txt name, silently."""
    res = run_cli(capsys, *SMALL, "--plot", str(tmp_path / name))
    assert res.code == 2 and res.out == "" and res.err.count("\n") == 1
    assert "--plot writes the format the file's suffix names, one of .png, .svg, .pdf" in res.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("name", "magic"), [("x.svg", b"<?xml"), ("x.PDF", b"%PDF")])
def test_a_plot_is_written_in_the_format_its_suffix_names(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, magic: bytes
) -> None:
    pytest.importorskip("matplotlib")
    res = run_cli(capsys, *SMALL, "--plot", str(tmp_path / name))
    assert res.code == 0, res.err
    assert (tmp_path / name).read_bytes().startswith(magic)
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_the_docs_python_api_example_gives_the_clis_numbers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/perf.md's example built `Workload(isl=1024, osl=1024, tpot_ms=50)`, which has no
    TTFT limit, and ranked 469.0 tokens/s per GPU first where `plan --tpot 50` (TTFT <= 2000
    ms by default) says 318.6: the example, run as written, gives the command's first row."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "perf.md").read_text("utf-8")
    example = text.split("## Python API", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict[str, Any] = {}
    exec(compile(example, "docs/perf.md", "exec"), scope)
    top = scope["best"][0]
    res = run_cli(capsys, "plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200",
                  "--gpus", "16", "--tpot", "50", "--top", "1", "-f", "json")  # fmt: skip
    doc = json.loads(res.out)
    assert doc["workload"] == asdict(scope["pm"].workload)
    (row,) = doc["layouts"]
    assert (row["concurrency"], row["tokens_per_s_gpu"]) == (
        top.estimate.concurrency, round(top.estimate.tokens_per_s_gpu, 1))  # fmt: skip


@pytest.mark.parametrize("rank", ["perf", "kv"])
def test_the_json_document_says_what_was_planned(
    capsys: pytest.CaptureFixture[str], rank: str
) -> None:
    """The document named the GPU type and nothing else of the question (no model, GPU
    count or release), and its rows' fields were documented nowhere: README's plan table
    names every field of either ranking's rows."""
    res = run_cli(capsys, *SMALL, "--rank", rank, "--sglang-version", "0.5.19", "-f", "json")
    doc = json.loads(res.out)
    facts = {"model": "Qwen/Qwen3-0.6B", "gpu": "H100", "gpus": 1, "sglang_version": "0.5.19"}
    assert {k: doc[k] for k in facts} == facts
    assert (doc["context_length"] == 4096) if rank == "kv" else ("workload" in doc)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
    plan_section = readme.split("\n## plan\n", 1)[1].split("\n## ", 1)[0]
    table = {
        name.strip("` ")
        for line in plan_section.splitlines()
        if line.startswith("| `")
        for name in line.split("|")[1].split(",")
    }
    assert set(doc["layouts"][0]) <= table, set(doc["layouts"][0]) - table


def test_web_plan_refuses_the_context_length_the_cli_refuses(
    web: Callable[[dict[str, Any]], tuple[int, Any, str | None]],
) -> None:
    """/api/plan (the page's form sent 4096 whatever the model) takes the CLI's check and
    answers with its document's facts of what was planned."""
    ask = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "gpus": 1, "top": 1,
           "rank": "kv"}  # fmt: skip
    status, doc, _ = web({**ask, "context_length": 200000})
    assert status == 400 and doc["field"] == "context_length"
    assert "is more than the context length" in doc["error"]
    status, doc, _ = web(ask)
    assert status == 200 and doc["context_length"] == 4096
    assert (doc["model"], doc["gpus"], doc["sglang_version"]) == (ask["model"], 1, "0.5.23")
