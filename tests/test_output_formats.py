"""`--format` on every command, `--json` its alias, and quiet-by-default notes (issue 13)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli

COMMANDS = (
    ("validate", "--example", "dp-cp-conflict"),
    ("fix", "--example", "dp-cp-conflict", "--gpus", "8"),
    ("groups", "--set", "tp_size=4", "--set", "attn_cp_size=2"),
    ("enumerate", "--gpus", "8"),
    ("rules",),
    ("fields",),
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_format_parses_and_json_is_its_alias(
    command: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    as_json = run_cli(capsys, *command, "--json")
    fmt_json = run_cli(capsys, *command, "--format", "json")
    assert as_json.code in (0, 1) and as_json.out == fmt_json.out
    assert json.loads(as_json.out)
    lines = run_cli(capsys, *command, "--format", "jsonl").out.splitlines()
    assert lines and all(json.loads(line) is not None for line in lines)
    rows = list(csv.reader(io.StringIO(run_cli(capsys, *command, "--format", "csv").out)))
    assert rows and all(len(r) == len(rows[0]) for r in rows)
    assert run_cli(capsys, *command, "--format", "table").code == as_json.code
    clash = run_cli(capsys, *command, "--json", "--format", "csv")
    assert clash.code == 2 and clash.err.count("\n") == 1


def test_notes_only_for_visible_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3 turns CP-v2 on by default (up to 0.5.19; 0.5.23 has no such switch);
    without CP nothing the user sees changes."""
    model = tmp_path / "config.json"
    model.write_text(
        json.dumps(
            {
                "architectures": ["DeepseekV3ForCausalLM"],
                "num_attention_heads": 128,
                "num_key_value_heads": 128,
                "n_routed_experts": 256,
                "num_hidden_layers": 61,
            }
        )
    )
    args = ("validate", "--set", "tp_size=8", "--model", str(model), "--sglang-version", "0.5.19")
    quiet, verbose = run_cli(capsys, *args), run_cli(capsys, *args, "-v")
    assert quiet.code == verbose.code == 0
    assert "env_enable_cp_v2" not in quiet.out and "env_enable_cp_v2" in verbose.out
    data = json.loads(run_cli(capsys, *args, "--json").out)
    assert [n["visible"] for n in data["notes"] if n["field"] == "env_enable_cp_v2"] == [False]


def test_single_field_conflict_wording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """128 heads cannot be split over tp 24: one field, so no "cannot all hold"."""
    model = tmp_path / "config.json"
    model.write_text(json.dumps({"architectures": ["X"], "num_attention_heads": 128}))
    run = run_cli(capsys, "validate", "--set", "tp_size=24", "--model", str(model))
    assert run.code == 1
    conflict = [line for line in run.out.splitlines() if line.startswith("conflict:")]
    assert conflict == [
        "conflict: tp_size=24 cannot hold with the other fields as they are; change it"
    ]
