"""`meshsat enumerate`: formats, filters, inputs, exit codes and the CLI surface."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from meshsat import solver
from meshsat.solver.cli.layout_writers import Writer
from meshsat.solver.enumeration.layouts import EnumerationQuery
from meshsat.solver.enumeration.space import DEFAULT_VARY
from meshsat.solver.lang.model_spec import ModelSpec
from tests.cli_helpers import run_cli

COLUMNS = [
    "tp_size",
    "pp_size",
    "dp_size",
    "attn_cp_size",
    "moe_dp_size",
    "ep_size",
    "dcp_size",
    "enable_dp_attention",
    "enable_prefill_cp",
    "cp_strategy",
    # 0.5.23 resolves an unset decode-CP backend by dcp_size (a2a with decode CP on CUDA).
    "dcp_comm_backend",
    # Every release turns the overlap scheduler off under pipeline parallelism (R-PP-OVERLAP).
    "disable_overlap_schedule",
    "attn_dp",
    "attn_tp",
    "moe_tp",
    "gpus_used",
]
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "num_hidden_layers": 61,
}


def _api(n: int, **kw: Any) -> list[dict[str, Any]]:
    e = EnumerationQuery.of(model=kw.pop("model", None), **kw).enumerator()
    cols = e.output_columns
    return [
        {c: lay.config[c] if c in lay.config else lay.derived[c] for c in cols}
        for lay in solver.enumerate(n, **({"model": e.model} if e.model else {}), **kw)
    ]


def test_jsonl_lists_every_layout(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "--gpus", "24", "--format", "jsonl")
    assert r.code == 0 and r.err == ""
    rows = [json.loads(line) for line in r.out.splitlines()]
    assert list(rows[0]) == COLUMNS
    assert rows == _api(24)
    assert len(rows) == solver.count(24)


def test_csv_and_json_match_jsonl(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("enumerate", "--gpus", "12", "--where", "attn_tp <= 2")
    jsonl = [json.loads(x) for x in run_cli(capsys, *args, "-f", "jsonl").out.splitlines()]
    array = json.loads(run_cli(capsys, *args, "-f", "json").out)
    assert array == jsonl and jsonl
    reader = csv.DictReader(io.StringIO(run_cli(capsys, *args, "-f", "csv").out))
    assert reader.fieldnames == COLUMNS
    as_text = [
        {
            k: "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in row.items()
        }
        for row in jsonl
    ]
    assert list(reader) == as_text


def test_table_is_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "--gpus", "8", "--limit", "4")
    lines = r.out.splitlines()
    assert r.code == 0 and len(lines) == 2 + 4
    assert lines[0].split() == [
        "tp",
        "pp",
        "dp",
        "attn_cp",
        "moe_dp",
        "ep",
        "dcp",
        "enable_dp_attention",
        "enable_prefill_cp",
        "cp_strategy",
        "dcp_comm_backend",
        "disable_overlap_schedule",
        "attn_dp",
        "attn_tp",
        "moe_tp",
        "gpus_used",
    ]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert len({len(line.rstrip()) for line in lines[2:]}) == 1
    assert lines[2].split()[-1] == "8"


def test_count_prints_only_the_number(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "--gpus", "64", "--count")
    assert (r.code, r.out, r.err) == (0, f"{solver.count(64)}\n", "")
    listed = run_cli(capsys, "enumerate", "--gpus", "64", "-f", "jsonl").out.splitlines()
    assert len(listed) == solver.count(64)
    r = run_cli(capsys, "enumerate", "--gpus", "6", "--up-to", "--count")
    assert int(r.out) == sum(solver.count(n) for n in range(1, 7))
    r = run_cli(capsys, "enumerate", "--gpus", "64", "--count", "--limit", "10")
    assert r.out == "10\n"


def test_limit_and_sort(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "-n", "16", "--up-to", "--sort", "gpus_used", "-f", "jsonl")
    gpus = [json.loads(x)["gpus_used"] for x in r.out.splitlines()]
    assert gpus == sorted(gpus) and gpus[0] == 1 and gpus[-1] == 16
    r = run_cli(capsys, "enumerate", "-n", "16", "--sort=-tp", "--limit", "3", "-f", "jsonl")
    top = [json.loads(x) for x in r.out.splitlines()]
    assert len(top) == 3 and all(row["tp_size"] == 16 for row in top)
    everything = [
        json.loads(x)
        for x in run_cli(
            capsys, "enumerate", "-n", "16", "--sort=-tp", "-f", "jsonl"
        ).out.splitlines()
    ]
    assert top == everything[:3]
    r = run_cli(capsys, "enumerate", "-n", "16", "--sort", "tpp")
    assert r.code == 2 and "cannot sort by 'tpp'; did you mean tp?" in r.err


def test_bad_where_is_exit_2_with_column(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "--gpus", "8", "--where", "attn_tp <= ")
    assert r.code == 2 and r.out == ""
    assert r.err.startswith("meshsat: error: bad --where expression at column 10: ")
    assert len(r.err.strip().splitlines()) == 1


def test_bad_vary_names_the_accepted_fields(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "--gpus", "8", "--vary", "chunked_prefill_size")
    assert r.code == 2
    assert "cannot vary 'chunked_prefill_size'" in r.err
    assert "meshsat fields" in r.err and r.err.count("\n") == 1


def test_bad_intra_node_and_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "--gpus", "8", "--intra-node", "rack")
    assert r.code == 2 and "unknown group kind 'rack'" in r.err
    assert run_cli(capsys, "enumerate", "--gpus", "0").code == 2
    assert run_cli(capsys, "enumerate").code == 2


def test_vary_adds_a_column(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "-n", "8", "--vary", "moe_a2a_backend", "-f", "jsonl")
    rows = [json.loads(x) for x in r.out.splitlines()]
    assert "moe_a2a_backend" in rows[0]
    assert {row["moe_a2a_backend"] for row in rows} >= {"none", "deepep", "mooncake"}
    assert all(row["ep_size"] == row["tp_size"] for row in rows if row["moe_a2a_backend"] != "none")
    assert len(rows) == solver.count(8, vary=(*DEFAULT_VARY, "moe_a2a_backend"))


def test_model_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DEEPSEEK_V3))
    r = run_cli(capsys, "enumerate", "-n", "16", "--model", str(path), "-f", "jsonl")
    rows = [json.loads(x) for x in r.out.splitlines()]
    assert rows == _api(16, model=ModelSpec.from_file(path))
    # Resolved, non-varied fields that depend on the layout are shown.
    assert {row["moe_a2a_backend"] for row in rows} == {"none", "deepep"}
    assert len(rows) < solver.count(16)


def test_base_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base.yaml"
    base.write_text("moe_a2a_backend: deepep\ntp_size: 4\n")
    r = run_cli(capsys, "enumerate", "-n", "16", "--config", str(base), "-f", "jsonl")
    rows = [json.loads(x) for x in r.out.splitlines()]
    assert rows and all(row["ep_size"] == row["tp_size"] for row in rows)
    assert len(rows) == solver.count(16, base={"moe_a2a_backend": "deepep"})
    assert "tp_size = 4 in the base is varied" in r.err


def test_intra_node_options(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("enumerate", "-n", "32", "--intra-node", "attn_tp", "--intra-node", "ep", "--count")
    small = int(run_cli(capsys, *args, "--gpus-per-node", "4").out)
    assert small == solver.count(32, intra_node=("attn_tp", "ep"), gpus_per_node=4)
    assert small < int(run_cli(capsys, *args).out) < solver.count(32)


def test_nothing_listed_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "-n", "8", "--where", "tp > 8", "-f", "jsonl")
    assert (r.code, r.out) == (1, "")
    assert "no layout" in r.err
    r = run_cli(capsys, "enumerate", "-n", "8", "--where", "tp > 8", "--count")
    assert (r.code, r.out) == (1, "0\n")
    assert run_cli(capsys, "enumerate", "-n", "8", "--where", "tp > 8", "-f", "json").out == "[]\n"


def test_first_rows_are_flushed_before_the_rest_is_generated() -> None:
    class Stream(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.flushed: list[str] = []

        def flush(self) -> None:
            self.flushed.append(self.getvalue())

    stream = Stream()

    def rows() -> Any:
        yield (1, 2)
        assert stream.flushed and stream.flushed[-1].endswith('{"a": 1, "b": 2}\n')
        yield (3, 4)

    Writer("jsonl", ["a", "b"], [0, 1], stream).write_all(rows())
    assert stream.getvalue() == '{"a": 1, "b": 2}\n{"a": 3, "b": 4}\n'


def test_cli_surface(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "enumerate", "--help")
    assert r.code == 0
    for option in [
        "--gpus",
        "--model",
        "--config",
        "--set",
        "--vary",
        "--where",
        "--gpus-per-node",
        "--intra-node",
        "--up-to",
        "--count",
        "--sort",
        "--limit",
        "--format",
    ]:
        assert option in r.out, option
    for text in ["no duplicates", "resolution", "memory"]:
        assert text in " ".join(r.out.split()), text


PERF_LISTING = ("enumerate", "--gpus", "1", "--model", "Qwen/Qwen3-0.6B", "--gpu", "H100",
                "--perf", "--engine", "roofline")  # fmt: skip


def test_every_table_header_is_a_name_where_takes(capsys: pytest.CaptureFixture[str]) -> None:
    """The table headed DP attention `dp_attn` and prefill CP `prefill_cp`, names --where
    refused ("unknown name 'dp_attn'"): each column is headed by a name the filters take,
    memory and estimate columns included."""
    from meshsat.solver.cli.enumerate_perf import split_perf_filters

    r = run_cli(capsys, *PERF_LISTING, "--limit", "1")
    assert r.code == 0, r.err
    headers = r.out.splitlines()[0].split()
    assert "tp" in headers and "perf_source" in headers
    for name in headers:
        split_perf_filters([f"{name} == {name}"])  # raises on a name it does not know
        assert run_cli(capsys, *PERF_LISTING, "--sort", name, "--count").code == 0, name


def test_perf_source_is_a_text_column_of_where(capsys: pytest.CaptureFixture[str]) -> None:
    """enumerate's help lists perf_source among the columns that "work in --where and
    --sort too", and `--where "perf_source != ''"` was exit 2 ("unknown name")."""
    every = int(run_cli(capsys, *PERF_LISTING, "--count").out)
    rows = list(csv.DictReader(io.StringIO(run_cli(capsys, *PERF_LISTING, "-f", "csv").out)))
    assert every == len(rows) > 0 and {r["perf_source"] for r in rows} == {"roofline"}
    kept = run_cli(capsys, *PERF_LISTING, "--where", "perf_source == 'roofline'", "--count")
    assert (kept.code, kept.out) == (0, f"{every}\n"), kept.err
    none = run_cli(capsys, *PERF_LISTING, "--where", "perf_source in ('does not fit', '')",
                   "--count")  # fmt: skip
    assert (none.code, none.out) == (1, "0\n")
    ordered = run_cli(capsys, *PERF_LISTING, "--where", "perf_source > 'a'")
    assert ordered.code == 2 and "needs numbers" in ordered.err
