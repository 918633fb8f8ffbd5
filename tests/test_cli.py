"""The `meshsat` command line: exit codes, JSON shape, bad input, pinned surface."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from tests.cli_helpers import run_cli

DP_CP = (
    "--set",
    "tp_size=8",
    "--set",
    "dp_size=3",
    "--set",
    "attn_cp_size=2",
    "--set",
    "enable_dp_attention=true",
)


def test_valid_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, "validate", "--set", "tp_size=8", "--set", "attn_cp_size=2")
    assert run.code == 0
    assert "valid" in run.out and "8 GPU(s)" in run.out


def test_invalid_exits_one_and_explains(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, "validate", *DP_CP)
    assert run.code == 1
    for text in (
        "invalid",
        "CP-DPCP-DIV",
        "DPATTN-TP-DIV",
        "TOPO-ATTN-TP",
        "conflict:",
        "tp_size=8, dp_size=3, enable_dp_attention=true",
    ):
        assert text in run.out


def test_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, "validate", *DP_CP, "--json")
    assert run.code == 1
    data = json.loads(run.out)
    assert set(data) == {
        "valid",
        "sglang_version",
        "first",
        "violations",
        "conflict",
        "warnings",
        "notes",
        "derived",
        "resolved",
        "unknown",
        "undecided",
        "derived_unknown",
    }
    assert data["valid"] is False
    assert data["conflict"] == ["tp_size", "dp_size", "enable_dp_attention"]
    assert data["first"] == data["violations"][0]["rule"] == "DPATTN-TP-DIV"
    rule = data["violations"][1]
    assert {"rule", "message", "fields", "stage"} <= set(rule)
    assert rule["rule"] == "CP-DPCP-DIV" and rule["fields"] == [
        "attn_cp_size",
        "enable_dp_attention",
        "dp_size",
        "tp_size",
    ]
    assert data["derived"]["gpus_used"] == 8
    assert data["derived"]["gpus_without_dp_attention"] == 24
    assert data["resolved"]["schedule_conservativeness"] == pytest.approx(0.3)
    assert data["notes"][0]["field"] == "schedule_conservativeness"


def test_sglang_input_and_ignored_note(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(
        capsys,
        "validate",
        "--json",
        "--sglang",
        "python -m sglang.launch_server --model-path m --tp 8 --ep 8 "
        "--moe-a2a-backend deepep --port 30000",
    )
    assert run.code == 0
    assert json.loads(run.out)["resolved"]["ep_size"] == 8
    assert (
        "1 flag(s) not checked by meshsat (not layout flags; SGLang still reads them): --port"
        in run.err
    )
    assert "--model-path m: no config.json there; model facts unknown" in run.err


def test_precedence_file_then_sglang_then_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "layout.yaml"
    path.write_text("tp_size: 2\ndp_size: 2\n")
    run = run_cli(
        capsys,
        "validate",
        "--json",
        "--config",
        str(path),
        "--sglang",
        "sglang serve --tp 4",
        "--set",
        "dp_size=4",
    )
    resolved = json.loads(run.out)["resolved"]
    assert (resolved["tp_size"], resolved["dp_size"]) == (4, 4)


def test_model_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "config.json"
    model.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_attention_heads": 6}))
    run = run_cli(capsys, "validate", "--set", "tp_size=4", "--model", str(model), "--json")
    assert run.code == 1
    # No num_key_value_heads key: KV heads default to the attention heads, so both fail.
    assert [v["rule"] for v in json.loads(run.out)["violations"]] == [
        "MODEL-HEADS",
        "MODEL-KV-HEADS",
    ]


@pytest.mark.parametrize(
    "args,message",
    [
        (("--set", "tp=8"), "unknown field 'tp'; did you mean tp_size?"),
        (("--set", "tp_size=0"), "tp_size must be a positive integer, got 0"),
        (("--set", "tp_size=-4"), "tp_size must be a positive integer, got -4"),
        (("--set", "tp_size=2.5"), "tp_size must be a positive integer, got '2.5'"),
        (("--set", "cp_strategy=ring"), "cp_strategy must be one of none, zigzag, interleave"),
        (("--set", "moe_a2a_backend=nccl"), "moe_a2a_backend must be one of"),
        (("--set", "tp_size"), "--set expects FIELD=VALUE"),
        (("--config", "/nonexistent.yaml"), "config file not found"),
        (("--model", "/nonexistent/config.json"), "model config not found"),
        (("--sglang", "python -m sglang.launch_server --tp"), "--tp expects a value"),
        (("--example", "nope"), "unknown example 'nope'"),
    ],
)
def test_bad_input_exits_two_with_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    run = run_cli(capsys, "validate", *args)
    assert run.code == 2
    assert run.out == ""
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("meshsat: error: ")
    assert message in lines[0]
    assert "Traceback" not in run.err


def test_malformed_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("tp_size: [8\n")
    run = run_cli(capsys, "validate", "--config", str(path))
    assert run.code == 2 and "invalid YAML" in run.err and len(run.err.splitlines()) == 1


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "validate", "--tp", "8").code == 2


def test_rules_lists_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    from meshsat.solver.packs import SEED

    run = run_cli(capsys, "rules", "--json", "--sglang-version", SEED.version)
    data = json.loads(run.out)
    assert [r["id"] for r in data["rules"]] == [r.id for r in SEED.rules]
    assert [r["id"] for r in data["resolutions"]] == [r.id for r in SEED.resolutions]
    dpcp = next(r for r in data["rules"] if r["id"] == "CP-DPCP-DIV")
    assert dpcp["condition"] == "if attn_cp_size > 1: (dp_size·attn_cp_size) divides tp_size"
    assert dpcp["source"] == "handle_context_parallelism"
    text = run_cli(capsys, "rules")
    assert text.code == 0 and "EEP-A2A-NIXL" in text.out and "R-DWDP" in text.out


def test_fields_lists_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    from meshsat.solver.lang.fields import SPECS

    data = json.loads(run_cli(capsys, "fields", "--json").out)
    assert [f["field"] for f in data["fields"]] == list(SPECS)
    tp = data["fields"][0]
    assert tp["flags"] == ["--tp-size", "--tensor-parallel-size", "--tp"]
    assert tp["accepts"] == "a positive integer"


def _surface(group: typer.core.TyperGroup) -> dict[str, list[str]]:
    return {
        name: sorted(opt for p in cmd.params for opt in p.opts)
        for name, cmd in sorted(group.commands.items())
    } | {"": sorted(group.commands)}


def test_cli_surface_is_pinned() -> None:
    """Changing a command or option name is a breaking change: update this on purpose."""
    from meshsat.solver.cli import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    surface = _surface(group)
    version = ["--sglang-version", "-V"]
    layout = ["--config", "--example", "--json", "--model", "--set", "--sglang", "-c", "-m", "-s"]
    layout += ["--sglang-file"]
    memory = ["--context-length", "--gpu", "--gpu-memory"]
    memory += ["--free-memory", "--mem-fraction-static"]  # issue 24
    output = ["--format", "--json", "-f"]  # every command: --format, --json its alias
    verbose = ["--verbose", "-v"]
    launch = ["--rewrite", "--strict"]
    assert surface["validate"] == sorted({*layout, *output, *verbose, *version, *memory, *launch})
    sizing = ["--gpu", "--gpu-memory", "--free-memory", "--mem-fraction-static"]
    assert set(output + verbose + version + sizing) <= set(surface["fix"])
    assert set(output + version + memory + ["--command"]) <= set(surface["enumerate"])
    assert surface["groups"] == sorted({*layout, *output, *version, "--rank", "-r"})
    assert surface["rules"] == sorted({*output, *version})
    assert surface["fields"] == sorted({*output, *version})
    assert surface["diff"] == sorted({*layout, *output, "new", "old"})
    assert surface["serve"] == ["--host", "--port"]
    assert surface["launch"] == sorted({*output, *version, "--mode", "--dry-run", "command"})
    assert surface[""] == [
        "diff", "enumerate", "fields", "fix", "groups", "launch", "plan", "rules", "serve",
        "validate",
    ]  # fmt: skip


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, "validate", "--help")
    assert run.code == 0
    for text in (
        "Exit status: 0 valid, 1 invalid, 2 bad input",
        "meshsat validate --sglang",
        "FIELD=VALUE",
    ):
        assert text in run.out


def _python(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_validation_imports_neither_torch_nor_z3() -> None:
    out = _python(
        "import sys, solver\n"
        "r = solver.validate({'tp_size': 8, 'attn_cp_size': 2, 'enable_prefill_cp': True,"
        " 'cp_strategy': 'zigzag'})\n"
        "try:\n    solver.check({'tp_size': 8, 'attn_cp_size': 3})\n"
        "except solver.InvalidLayoutError:\n    pass\n"
        "print(r.valid, 'z3' in sys.modules, 'torch' in sys.modules)"
    )
    assert out == "True False False"


def test_explanation_imports_z3_only_when_invalid() -> None:
    out = _python(
        "import sys, solver\nr = solver.validate({'tp_size': 8, 'attn_cp_size': 3})\n"
        "print(r.conflict, 'z3' in sys.modules, 'torch' in sys.modules)"
    )
    assert out == "('tp_size', 'attn_cp_size') True False"


def test_console_script_end_to_end() -> None:
    exe = Path(sys.executable).with_name("meshsat")
    ok = subprocess.run(
        [str(exe), "validate", "--example", "deepseek-v3-prefill-cp"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert "attn_cp_size = 8" in ok.stdout
    bad = subprocess.run(
        [str(exe), "validate", "--set", "tp_size=x"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip() == "meshsat: error: tp_size must be a positive integer, got 'x'"


def test_an_inexact_width_is_shown_as_its_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    """tp 16 over attention DP 3 printed `attn_tp 5`, and tp 4 over EP 4 x MoE DP 2
    `moe_tp 0`: rounded-down quotients of an invalid layout, read as widths."""
    for sets, shown in (
        (["tp_size=16", "dp_size=3", "enable_dp_attention=true"], "attn_tp 16/3 (not whole)"),
        (["tp_size=4", "ep_size=4", "moe_dp_size=2"], "moe_tp 4/8 (not whole)"),
        (["tp_size=8", "ep_size=8"], "attn_tp 8 · moe_tp 1 ·"),
    ):
        run = run_cli(capsys, "validate", *(a for s in sets for a in ("--set", s)))
        assert shown in " ".join(run.out.split()), run.out


def test_plan_json_is_format_json(capsys: pytest.CaptureFixture[str]) -> None:
    """`plan --json` is `plan --format json`, the alias validate, fix, rules and enumerate
    take (before, typer refused it: "No such option: --json"); with another format it is
    refused as those commands refuse it."""
    base = ("plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "1", "--top", "2")
    alias = run_cli(capsys, *base, "--json")
    long = run_cli(capsys, *base, "--format", "json")
    assert alias.code == long.code == 0, alias.err
    assert json.loads(alias.out) == json.loads(long.out)
    clash = run_cli(capsys, *base, "--json", "--format", "csv")
    assert clash.code == 2
    assert "--json means --format json" in clash.err
