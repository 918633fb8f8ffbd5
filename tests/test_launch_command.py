"""The commands meshsat prints (`plan`, `fix`, `enumerate --command`) can be pasted.

Oracles, none of them the renderer itself:
- the real SGLang 0.5.23: `python -m fidelity.paste` handed the command of every legal layout
  of three recorded models, as typed words, to that release's own parser and resolution
  (tests/fixtures/pasted/0.5.23.jsonl.gz): every one must launch, as the layout
  meshsat enumerated;
- the releases' recorded flag tables (fidelity/flags/<version>.json): no printed flag may sit
  at the release's default, and rendering what the fidelity recorder passed to a release
  must give that release's parser the same namespace (so the release resolves the printed
  command as it resolved the record);
- meshsat's own launch reader (`validate --sglang`), on the CLI's printed lines.
"""

from __future__ import annotations

import gzip
import json
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from fidelity.compare import (
    BUFFER,
    COMPARED_FIELDS,
    ENV_FIELDS,
    OLD_SPELLINGS,
    load,
    model,
    release_config,
    sglang_resolved,
)
from fidelity.paste import SPACES, commands, fixture_path, split_command
from meshsat import solver
from meshsat.solver.inputs import parse_sglang_command
from meshsat.solver.inputs.command import launch_command
from meshsat.solver.inputs.spelling import DP_GROUP
from meshsat.solver.lang.config import Config
from meshsat.solver.packs import known_versions
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parent.parent
PASTED = "0.5.23"


@cache
def _pasted() -> list[dict[str, Any]]:
    with gzip.open(fixture_path(PASTED), "rt") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    assert rows[0] == {"sglang": PASTED, "n": len(rows) - 1}
    return rows[1:]


#: 0.4's parser stores the widths under long names that `ServerArgs.from_cli_args` copies
#: to the fields (`args.tp_size = args.tensor_parallel_size`, ...).
_OLD_DESTS = {
    "tensor_parallel_size": "tp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
    "pipeline_parallel_size": "pp_size",
}


@cache
def _argparse_defaults(version: str) -> dict[str, Any]:
    """ServerArgs field -> its option's default, from the release's recorded parser (not
    meshsat's tables; a deprecated alias's "==SUPPRESS==" is no default)."""
    table = json.loads((ROOT / "fidelity" / "flags" / f"{version}.json").read_text("utf-8"))
    return {
        _OLD_DESTS.get(f["dest"], f["dest"]): f["default"]
        for f in table["flags"]
        if f["default"] != "==SUPPRESS=="
    }


@cache
def _option_dests(version: str) -> dict[str, tuple[str, Any]]:
    """option string -> (ServerArgs field, const for a flag without a value)."""
    table = json.loads((ROOT / "fidelity" / "flags" / f"{version}.json").read_text("utf-8"))
    out: dict[str, tuple[str, Any]] = {}
    for f in table["flags"]:
        for option in f["flags"]:
            negated = option.startswith("--no-") and f["action"] == "BooleanOptionalAction"
            out[option] = (_OLD_DESTS.get(f["dest"], f["dest"]), not negated)
    return out


def _typed(command: str, version: str) -> dict[str, Any]:
    """dest -> value of every flag typed in `command`, read with the release's option table
    (a flag without a value stores its constant)."""
    _env, words = split_command(command)
    options = _option_dests(version)
    typed: dict[str, Any] = {}
    i = 0
    while i < len(words):
        dest, const = options[words[i]]
        takes_value = i + 1 < len(words) and not words[i + 1].startswith("--")
        typed[dest] = words[i + 1] if takes_value else const
        i += 2 if takes_value else 1
    return typed


def test_the_fixture_holds_the_commands_meshsat_prints_today() -> None:
    """Else the recording is stale: re-run `python -m fidelity.paste 0.5.23`."""
    recorded = [(r["model"], r["values"], r["command"]) for r in _pasted()]
    assert [(i["model"], i["values"], i["command"]) for i in commands(PASTED)] == recorded
    assert {r["model"] for r in _pasted()} == {name for name, _repo, _n in SPACES}


def test_the_release_launches_every_printed_command_as_the_layout_meant() -> None:
    """The real 0.5.23 accepts each command as typed (its parser, its resolution and its
    launch check) and resolves it to the layout meshsat enumerated, field for field."""
    meant: dict[tuple[str, str], dict[str, Any]] = {}
    for name, _repo, gpus in SPACES:
        for lay in solver.enumerate(gpus, model=model(name), sglang_version=PASTED):
            meant[(name, json.dumps(lay.values, sort_keys=True))] = dict(lay.config)
    compared = 0
    for row in _pasted():
        assert row["accepted"] and row["launch_error"] is None, (row["command"], row["error"])
        ours = meant[(row["model"], json.dumps(row["values"], sort_keys=True))]
        ours = {**ours, "attn_dp_size": ours["dp_size"] if ours["enable_dp_attention"] else 1}
        theirs = sglang_resolved(row["resolved"])
        # chunked_prefill_size: meshsat leaves SGLang's device-dependent default unset.
        fields = [f for f in COMPARED_FIELDS if f in theirs and f != "chunked_prefill_size"]
        diff = {f: (ours[f], theirs[f]) for f in fields if ours[f] != theirs[f]}
        assert not diff, (row["command"], diff)
        compared += len(fields)
        # The value the old command typed: the release sets it by itself.
        assert "--expert-distribution-recorder-buffer-size" not in row["command"]
        assert theirs[BUFFER] == 1000
    assert compared > 20 * len(_pasted())


def test_meshsats_reader_reads_each_printed_command_as_the_layout() -> None:
    """`validate --sglang` on a printed command (model facts from its own --model-path, the
    embedded catalogue) resolves to the enumerated layout: every derived width, and every
    field but the DP-attention group, which 0.5.23 spells `--attn-dp-size N` where meshsat's
    layouts say `enable_dp_attention` with `dp_size` N (the widths above hold it); every
    fourth command of the fixture."""
    from meshsat.solver.inputs.layout_input import LayoutSources, load_layout
    from meshsat.solver.memory.models import model_config

    meant = {
        (name, json.dumps(lay.values, sort_keys=True)): (dict(lay.config), dict(lay.derived))
        for name, _repo, gpus in SPACES
        for lay in solver.enumerate(gpus, model=model(name), sglang_version=PASTED)
    }
    for row in _pasted()[::4]:
        read = load_layout(
            LayoutSources(sglang=row["command"]), catalogue=model_config, release=PASTED
        )
        assert read.model is not None and not read.missing_flags, row["command"]
        report = solver.validate(read.config, read.model, sglang_version=PASTED)
        assert report.valid, row["command"]
        config, derived = meant[(row["model"], json.dumps(row["values"], sort_keys=True))]
        assert dict(report.derived) == derived, row["command"]
        resolved = dict(report.resolved)
        for name in DP_GROUP:
            del resolved[name], config[name]
        assert resolved == config, row["command"]


def test_no_printed_flag_sits_at_the_release_default() -> None:
    defaults = _argparse_defaults(PASTED)
    for row in _pasted():
        for dest, value in _typed(row["command"], PASTED).items():
            assert dest == "model_path" or str(value) != str(defaults[dest]), (row["command"], dest)


@pytest.mark.parametrize("version", sorted(known_versions()))
def test_rendering_a_recorded_input_gives_the_release_the_same_namespace(version: str) -> None:
    """What the fidelity recorder passed to the real release (`args`), rendered as meshsat's
    command and read back by that release's option table, sets the same value in every
    field (a field left out takes the release's recorded default): so the release resolves
    the printed command exactly as it resolved the record. Records where the recorder
    passed a value no command line can type (None for an option whose default is not
    None) or a removed spelling meshsat writes in its current form are left out; every
    fifth record is read (687 to 780 of a release)."""
    defaults = _argparse_defaults(version)
    _header, records = load(version)
    checked = 0
    for rec in records[::5]:
        args = rec.get("args") or rec["config"] or {}
        # None for an option whose default is not None, or False for one whose default is
        # None (a store_true flag such as 0.5.18's --enable-lora): no command line types it.
        typable = all(
            (v is not None or defaults.get(k) is None)
            and not (v is False and k in defaults and defaults[k] is None)
            for k, v in args.items()
        )
        # --lora-paths' adapters, --lora-target-modules' modules: meshsat reads only whether
        # there are any and writes none.
        typable = typable and not {"lora_paths", "lora_target_modules"} & set(args)
        if not rec["accepted"] or not typable or set(args) & set(OLD_SPELLINGS):
            continue
        command = launch_command(Config(**release_config(rec)), version, model_path="m")
        got = {**defaults, **_typed(command, version)}
        want = {**defaults, **{k: v for k, v in args.items() if k not in ENV_FIELDS}}
        diff = {
            k: (got.get(k), want[k])
            for k in want
            if k != "model_path" and str(got.get(k)) != str(want[k])
        }
        assert not diff, (rec["id"], command, diff)
        checked += 1
    assert checked >= 600


def test_a_typed_value_stays_typed_where_the_release_default_differs() -> None:
    """0.5.23 leaves --dcp-comm-backend unset (None) and picks a2a on CUDA with DCP; a user
    who typed ag_rs (meshsat's default) must find it in the printed command."""
    typed = Config(tp_size=8, dcp_size=8, dcp_comm_backend="ag_rs")
    assert "--dcp-comm-backend ag_rs" in launch_command(typed, "0.5.23")
    untyped = Config(tp_size=8, dcp_size=8)
    assert "--dcp-comm-backend" not in launch_command(untyped, "0.5.23")
    off = Config(tp_size=8, dcp_size=8, dcp_replicate_q_proj=False)
    assert "--no-dcp-replicate-q-proj" in launch_command(off, "0.5.23")


def _printed_commands(text: str) -> list[str]:
    """The command lines of a CLI's text output (`fix` prefixes its line with "command:")."""
    lines = (line.strip() for line in text.splitlines() if "sglang.launch_server" in line)
    return [line.removeprefix("command:").strip() for line in lines]


def test_plan_prints_pasteable_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """Each printed line, read back by `validate --sglang` (model facts from its own
    --model-path), is valid and has the row's widths: what each node runs (16 H200 are two
    nodes), and the layout as one engine (`command` in JSON) as well."""
    res = run_cli(capsys, "plan", "-m", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-n", "16")
    rows = json.loads(
        run_cli(capsys, "plan", "-m", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-n", "16",
                "-f", "json").out
    )["layouts"]  # fmt: skip
    lines = _printed_commands(res.out)
    assert res.code == 0 and lines == [r["node_command"] for r in rows]
    for row, line in zip(rows, lines, strict=True):
        for command in (line, row["command"]):
            assert command.split()[3:5] == ["--model-path", "deepseek-ai/DeepSeek-V3"]
            assert "SGLANG_ENABLE_CP_V2" not in command and "recorder-buffer" not in command
            back = run_cli(capsys, "validate", "--sglang", command, "--json")
            assert back.code == 0, (command, back.err)
            resolved = json.loads(back.out)["resolved"]
            assert (resolved["tp_size"], resolved["pp_size"], resolved["ep_size"]) == (
                row["tp"],
                row["pp"],
                row["ep"],
            )


def test_fix_and_enumerate_commands_carry_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    repo = "deepseek-ai/DeepSeek-V3"
    fixed = run_cli(capsys, "fix", "--set", "tp_size=8", "--set", "ep_size=3", "--model", repo)
    (line,) = _printed_commands(fixed.out)
    assert fixed.code == 0 and f"--model-path {repo}" in line
    listed = run_cli(
        capsys, "enumerate", "--gpus", "8", "--model", repo, "--command", "--limit", "3",
        "--format", "jsonl",
    )  # fmt: skip
    for text in listed.out.splitlines():
        command = json.loads(text)["command"]
        assert f"--model-path {repo}" in command
        assert solver.validate(parse_sglang_command(command).values).valid
    config = ROOT / "fidelity" / "models" / "llama" / "config.json"
    local = run_cli(capsys, "fix", "--set", "tp_size=3", "--model", str(config), "--gpus", "4")
    (line,) = _printed_commands(local.out)
    assert shlex.split(line)[4] == str(config.parent)


@pytest.mark.parametrize(
    "command",
    [
        "python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp 4 "
        "--enable-dp-attention --moe-dp-size 2",
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 6 "
        "--enable-dp-attention",
    ],
)
def test_a_fixed_dp_attention_width_reaches_the_printed_command(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """`--enable-dp-attention` with no width is DP attention over 1 group in 0.5.23; `fix`
    changing attn_dp_size on it printed the command without `--attn-dp-size` (the spelling
    read the width from dp_size alone), so the command ran another layout than reported.
    Oracle: the printed command read back resolves to the fix's own layout."""
    fixed = run_cli(capsys, "fix", "--sglang", command, "--json")
    assert fixed.code == 0, fixed.err
    best = json.loads(fixed.out)["fixes"][0]
    line = best["command_line"]
    back = run_cli(capsys, "validate", "--sglang", line, "--json")
    assert back.code == 0, (line, back.err)
    want = run_cli(capsys, "validate", "--json", *(a for k, v in best["config"].items()
                   for a in ("--set", f"{k}={v}")))  # fmt: skip
    got, expected = json.loads(back.out)["derived"], json.loads(want.out)["derived"]
    assert (got["attn_dp"], got["attn_tp"]) == (expected["attn_dp"], expected["attn_tp"]), line
    assert got["attn_dp"] > 1
