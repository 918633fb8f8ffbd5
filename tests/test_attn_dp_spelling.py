"""What `validate` shows of SGLang 0.5.23's resolution is in 0.5.23's own fields.

meshsat reads DP attention as `enable_dp_attention` with `dp_size` its width (one field per
concept inside); 0.5.23 resolves it to `attn_dp_size` = the width and `dp_size` = replicas
(`handle_deprecated_dp_attention`, DWDP's `attn_dp_size = dwdp, dp_size = 1`). The notes and
JSON's `resolved` said the internal view ("SGLang will set dp_size = 8"), which 0.5.23 never
does, and that `resolved` read back as `--config` broke DP-REPLICAS-ATTN-DP.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fidelity.compare import iter_records, model, release_config
from meshsat.solver import validate
from meshsat.solver.inputs.spelling import DP_GROUP
from meshsat.solver.lang.config import Config
from tests.cli_helpers import run_cli

LAUNCH = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3"


def test_resolved_and_notes_match_what_0_5_23_resolved() -> None:
    """Every recorded 0.5.23 config both accept: `resolved` has SGLang's attn_dp_size and
    dp_size, and every note on them says the value SGLang resolved (DWDP's, and DeepSeek's
    prefill-CP override folding replicas into attention DP)."""
    seen = {"R-DWDP": 0, "R-CP-MODEL-DPATTN": 0}
    for rec in iter_records("0.5.23"):
        if not rec["accepted"] or not rec.get("resolved"):
            continue
        cfg = release_config(rec)
        cfg["platform"] = rec.get("platform", "cpu")
        if cfg["platform"] == "cuda":
            cfg["gpu_sm"] = 90
        report = validate(
            Config(**cfg), model(rec["model"]), explain=False, sglang_version="0.5.23"
        )
        if not report.valid:  # meshsat's own disagreements are fidelity/disagreements/
            continue
        ours, theirs = report.to_dict()["resolved"], rec["resolved"]
        assert (ours["attn_dp_size"], ours["dp_size"]) == (
            theirs["attn_dp_size"],
            theirs["dp_size"],
        ), cfg
        for note in report.notes:
            if note.field in DP_GROUP:
                assert note.new == theirs[note.field], (cfg, note.text)
                seen[note.resolution] = seen.get(note.resolution, 0) + 1
    assert seen["R-DWDP"] and seen["R-CP-MODEL-DPATTN"], seen


def test_dwdp_note_names_attn_dp_size(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, "validate", "--sglang", f"{LAUNCH} --tp 8 --dwdp-size 8")
    assert run.code == 0
    assert "SGLang will set attn_dp_size = 8 (given 1)" in run.out
    assert "set dp_size" not in run.out and "enable_dp_attention" not in run.out
    # The seed's release resolves DWDP to its own spelling, dp_size with DP attention on.
    seed = run_cli(capsys, "validate", "-V", "0.5.19", "--sglang", f"{LAUNCH} --tp 8 --dwdp-size 8")
    assert "SGLang will set dp_size = 8 (given 1)" in seed.out
    assert "SGLang will set enable_dp_attention = true (given false)" in seed.out


@pytest.mark.parametrize(
    "flags",
    [
        "--tp 16 --attn-dp-size 16 --nnodes 2",
        # The deprecated spelling: 0.5.23 rewrites it to attn_dp_size 16, dp_size 1 (measured
        # with its own resolution: handle_deprecated_dp_attention).
        "--tp 16 --dp 16 --enable-dp-attention --nnodes 2",
        "--tp 8 --dwdp-size 8",
    ],
)
def test_resolved_json_reads_back_as_the_same_layout(
    flags: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first = run_cli(capsys, "validate", "--sglang", f"{LAUNCH} {flags}", "--json")
    data = json.loads(first.out)
    assert first.code == 0 and data["valid"]
    width = data["derived"]["attn_dp"]
    resolved = data["resolved"]
    assert (resolved["attn_dp_size"], resolved["dp_size"]) == (width, 1)
    assert resolved["enable_dp_attention"] is False
    path = tmp_path / "resolved.json"
    path.write_text(json.dumps(resolved))
    again = run_cli(capsys, "validate", "--config", str(path), "--json")
    back = json.loads(again.out)
    assert again.code == 0 and back["valid"], back["violations"]
    assert back["derived"] == data["derived"]
    assert (back["resolved"]["attn_dp_size"], back["resolved"]["dp_size"]) == (width, 1)


@pytest.mark.parametrize(
    ("flags", "names"),
    [
        ("--tp 8 --attn-dp-size 3", ["attn_dp_size"]),
        ("--tp 8 --enable-dp-attention --dp 3", ["enable_dp_attention", "dp_size"]),
    ],
)
def test_violation_fields_name_the_dp_group_as_typed(
    capsys: pytest.CaptureFixture[str], flags: str, names: list[str]
) -> None:
    """On 0.5.23 a rule on the DP-attention width names the group as the user typed it
    (`--attn-dp-size`, or the deprecated pair), never the internal pair they did not type;
    0.5.19, which has no `--attn-dp-size`, keeps `enable_dp_attention, dp_size`."""
    for version, expected in (("0.5.23", names), ("0.5.19", ["enable_dp_attention", "dp_size"])):
        if version == "0.5.19" and "attn-dp-size" in flags:
            continue
        r = run_cli(capsys, "validate", "-V", version, "--sglang", f"{LAUNCH} {flags}", "--json")
        assert r.code == 1, r.err
        (div,) = [v for v in json.loads(r.out)["violations"] if v["rule"] == "DPATTN-TP-DIV"]
        assert [f for f in div["fields"] if f in DP_GROUP] == expected
        assert "tp_size" in div["fields"]


def test_recorded_rejections_name_only_fields_the_release_has() -> None:
    """Every 0.5.23 rejection recorded from the real SGLang with DP attention on: no
    violation names an internal DP field the user did not type."""
    checked = 0
    for rec in iter_records("0.5.23"):
        if rec["accepted"]:
            continue
        cfg = release_config(rec)
        report = validate(
            Config(**cfg), model(rec["model"]), explain=False, sglang_version="0.5.23"
        )
        if not report.resolved_env["enable_dp_attention"]:
            continue
        typed = report.config.user_set()
        for v in report.to_dict()["violations"]:
            stray = {"enable_dp_attention", "dp_size", "attn_dp_size"} & set(v["fields"]) - typed
            assert stray <= {"attn_dp_size"} and not (stray and typed & set(DP_GROUP)), (
                rec,
                v,
            )
            checked += 1
    assert checked > 0
