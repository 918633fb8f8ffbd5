"""`fix` on a pasted command prints the user's own command, edited: every word the fix did
not change stays as typed.

Oracles, none of them the editor itself:
- the real SGLang 0.5.23's parser: `python -m fidelity.kept_flags` handed a padded broken
  command and the command `fix` printed for it to that release's `launch_server` parser
  (tests/fixtures/kept_flags/0.5.23.jsonl.gz): every option but the fixed fields must parse
  to the same value, and the fixed fields to the fix's values;
- meshsat's own launch reader, on random padding drawn from the release's recorded flag
  table (a hypothesis property): the printed command (and `validate --rewrite`'s script,
  the same editor) reads back as the fixed layout, and its words outside the layout flags
  are the input's, in order, with the same values.
"""

from __future__ import annotations

import gzip
import json
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fidelity.compare import sglang_resolved
from fidelity.kept_flags import BROKEN, LAUNCHER, extra_flags, fixture_path
from meshsat.solver.inputs.launch import LaunchCommand, read_launch_commands
from meshsat.solver.inputs.layout_input import LayoutSources, load_layout
from meshsat.solver.inputs.memory_flags import MEMORY_FLAGS
from meshsat.solver.inputs.rewrite import fixed_command, rewrite_script
from meshsat.solver.inputs.sglang_cmdline import parse_launch
from meshsat.solver.inputs.spelling import spelled
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.packs import get_pack
from meshsat.solver.repair.fix import fix
from meshsat.solver.repair.results import FixResult
from tests.cli_helpers import run_cli

VERSION = "0.5.23"
#: Fields a flag sets, as the launch command writes them (not tool-only facts).
WRITTEN = [n for n, s in CONFIG_SPECS.items() if s.flags and not s.tool_only and n != "node_rank"]
#: Fields that became layout fields after the fixture was recorded (launch rules read them,
#: solver/catalogue/kv_cache.py, attention_backend.py): its padding may set them, and the fix
#: keeps them as typed.
PADDED_FIELDS = frozenset(
    {
        "context_length",
        "kv_cache_dtype",
        "swa_full_tokens_ratio",
        "prefill_attention_backend",
        "decode_attention_backend",
        # speculative.multi_layer_eagle reads it (TOPO-PP-SPEC).
        "enable_multi_layer_eagle",
        # KV4-UNIFIED-MEMORY reads it; the fixture predates the field.
        "enable_unified_memory",
    }
)


def best(command: str) -> FixResult:
    """The fix of a command's layout (padding may say where it runs: Ascend-only flags)."""
    config = load_layout(LayoutSources(sglang=command), release=VERSION).config
    return _fixed(json.dumps(config.model_dump(exclude_unset=True), sort_keys=True))


@cache
def _fixed(values: str) -> FixResult:
    return fix(Config.model_validate(json.loads(values)), sglang_version=VERSION).best


def layout_of(command: str) -> dict[str, Any]:
    config = load_layout(LayoutSources(sglang=command), release=VERSION).config
    return {n: v for n, v in spelled(config, True).items() if n in WRITTEN}


def printed(command: str, result: FixResult) -> str:
    spelling = "attn_dp_size" not in get_pack(VERSION).absent_fields
    (launch,) = read_launch_commands(command)
    return fixed_command(command, launch, result.config, attn_dp_spelling=spelling)


def untouched(command: LaunchCommand) -> list[str]:
    """The words of a launch outside every layout flag (and its value), as the shell
    passes them on."""
    spans = [s for found in parse_launch(command).spans.values() for s in found]
    return [w.text for w in command.words if not any(a <= w.pos < b for a, b in spans)]


def rows() -> list[dict[str, Any]]:
    with gzip.open(fixture_path(VERSION), "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()][1:]


@pytest.mark.parametrize("row", rows(), ids=lambda r: r["command"][32:60])
def test_sglang_parses_the_kept_flags_as_before(row: dict[str, Any]) -> None:
    result = best(row["command"])
    padded_layout = layout_of(row["command"])
    base_layout = layout_of(f"{LAUNCHER} {row['base']}")
    assert {k: v for k, v in padded_layout.items() if k not in PADDED_FIELDS} == {
        k: v for k, v in base_layout.items() if k not in PADDED_FIELDS
    }
    assert printed(row["command"], result) == row["fixed"]  # what the release parsed
    assert row["fixed_error"] == row["input_error"]
    if row["input_error"] is not None:
        return
    before, after = row["input_args"], row["fixed_args"]
    moved = {k for k in before if before[k] != after[k]}
    layout = {c.field for c in result.changes} | {"attn_dp_size", "dp_size"}
    assert moved and moved <= layout | {"enable_dp_attention"}
    seen = sglang_resolved(after)
    for change in result.changes:
        assert seen[change.field] == change.new, change


_VALUE = st.text(st.sampled_from("abcXYZ019 _-.:/,='\"{}"), min_size=1, max_size=8).filter(
    lambda v: not v.startswith("-")
)


#: The padding's flags: not the typed memory flags (`--max-total-tokens :` is refused by
#: SGLang's parser and by meshsat's reader alike, so it is no command to fix).
_PADDING = [(f, a) for f, a in extra_flags(VERSION) if f not in MEMORY_FLAGS]


@st.composite
def padded(draw: st.DrawFn) -> tuple[str, str]:
    """A broken layout with random release flags (and values needing quotes), `--flag=value`
    forms and environment prefixes mixed in."""
    base = draw(st.sampled_from(BROKEN))
    groups = shlex.split(base)
    layout: list[str] = []
    for word in groups:
        if word.startswith("--") or not layout:
            layout.append(word)
        else:
            layout[-1] += " " + word
    extras: list[str] = []
    for flag, arity in draw(st.lists(st.sampled_from(_PADDING), max_size=6)):
        values = [shlex.quote(draw(_VALUE)) for _ in range(min(arity, 1 + draw(st.booleans())))]
        if arity == 1 and draw(st.booleans()):
            extras.append(f"{flag}={values[0]}")
        else:
            extras.append(" ".join([flag, *values]))
    words = draw(st.permutations([*layout, *extras]))
    env = [f"NCCL_{i}={shlex.quote(draw(_VALUE))}" for i in range(draw(st.integers(0, 2)))]
    return base, " ".join([*env, LAUNCHER, "--model-path", "M", *words])


@settings(max_examples=40, deadline=None)
@given(padded())
def test_every_flag_the_fix_does_not_touch_survives(case: tuple[str, str]) -> None:
    base, command = case
    result = best(command)
    assert layout_of(command) == layout_of(f"{LAUNCHER} {base}")
    line = printed(command, result)
    wanted = spelled(result.config, True)
    assert layout_of(line) == {n: v for n, v in wanted.items() if n in WRITTEN}
    script, _ = rewrite_script(command, result.config, attn_dp_spelling=True)  # one editor
    (before,) = read_launch_commands(command)
    for text in (line, script):
        (after,) = read_launch_commands(text)
        assert after.env == before.env
        assert untouched(after) == untouched(before)
    assert layout_of(script) == layout_of(line)


PASTED = (
    "NCCL_DEBUG=INFO python -m sglang.launch_server --model-path M --tp 6 --port 30010 "
    "--host 0.0.0.0 --trust-remote-code --served-model-name 'my model' --dp=4 "
    "--max-running-requests 64 --enable-dp-attention"
)


def test_fix_prints_the_pasted_command_with_only_the_layout_changed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = run_cli(capsys, "fix", "--sglang", PASTED, "--json")
    assert run.code == 0, run.err
    fixes = json.loads(run.out)["fixes"]
    changed = {c["field"]: c["new"] for c in fixes[0]["changes"]}
    assert changed == {"dp_size": 3}  # the fix this layout needs, then the command:
    assert fixes[0]["command_line"] == (
        "NCCL_DEBUG=INFO python -m sglang.launch_server --model-path M --tp 6 --port 30010 "
        "--host 0.0.0.0 --trust-remote-code --served-model-name 'my model' --attn-dp-size 3 "
        "--max-running-requests 64"
    )


def test_emitted_lws_listens_where_the_command_says(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(capsys, "fix", "--sglang", f"nohup {PASTED} > log 2>&1 &", "--emit", "lws")
    assert run.code == 0, run.err
    (lws,) = yaml.safe_load_all(run.out)
    leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert leader["ports"] == [{"containerPort": 30010, "name": "http"}]
    assert leader["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}]
    words = leader["command"]
    assert words[:3] == ["python", "-m", "sglang.launch_server"]  # no nohup, no redirection
    assert words[words.index("--served-model-name") + 1] == "my model"
    assert ">" not in words


PD_SCRIPT = (
    "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
    "--disaggregation-mode prefill --port 30000 --page-size 16 "
    "--disaggregation-transfer-backend nixl --tp 2\n"
    "NCCL_DEBUG=INFO python -m sglang.launch_server --model-path "
    "meta-llama/Llama-3.1-8B-Instruct --disaggregation-mode decode --port=30001 "
    "--random-seed 7 --disaggregation-transfer-backend nixl --tp 4 --dp 3 "
    "--enable-dp-attention --base-gpu-id 2\n"
    "python -m sglang_router.launch_router --port 8000 --pd-disaggregation "
    "--prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30001\n"
)


def test_each_server_of_a_deployment_keeps_its_own_flags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "pd.sh"
    path.write_text(PD_SCRIPT)
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--json")
    assert run.code == 0, run.err
    roles = json.loads(run.out)["roles"]
    launches = read_launch_commands(PD_SCRIPT)
    assert [r["fixes"][0]["changes"] for r in roles][1] == [
        {"field": "dp_size", "old": 3, "new": 4}
    ]
    for role, before in zip(roles, launches, strict=True):
        (after,) = read_launch_commands(role["fixes"][0]["command_line"])
        assert after.env == before.env
        assert untouched(after) == untouched(before)
        config = Config.model_validate(role["fixes"][0]["config"])
        assert layout_of(role["fixes"][0]["command_line"]) == {
            n: v for n, v in spelled(config, True).items() if n in WRITTEN
        }


def test_a_fix_onto_one_node_drops_the_node_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """`fix --top 3` of a two-node `--tp 12` launch: the third alternative runs on one node
    but kept `--node-rank 0 --dist-init-addr 10.0.0.1:5000`, with which SGLang 0.5.23 still
    rendezvouses at that address (`_resolve_dist_init_method`): a host that is not it never
    starts. They go with --nnodes; a fix that stays on two nodes keeps them."""
    launch = (
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 12 "
        "--nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000 --port 30010"
    )
    run = run_cli(capsys, "fix", "--sglang", launch, "--top", "3", "--json")
    fixes = json.loads(run.out)["fixes"]
    assert {f["config"]["nnodes"] for f in fixes} == {1, 2}
    for found in fixes:
        words = shlex.split(found["command_line"])
        apart = found["config"]["nnodes"] != 1
        assert ("--node-rank" in words) == apart and ("--dist-init-addr" in words) == apart
        assert ("10.0.0.1:5000" in words) == apart and "--port 30010" in found["command_line"]


@pytest.mark.parametrize(
    ("typed", "dropped"),
    [
        ("--nnodes 2 --node-rank=1 --dist-init-addr=10.0.0.1:5000", True),
        ("--nnodes=2 --dist-init-addr 10.0.0.1:5000 --node-rank 1", True),
        # One node as typed: its own rendezvous address (a port of its choosing) is its.
        ("--dist-init-addr 127.0.0.1:5000", False),
    ],
)
def test_node_flags_go_only_with_the_nodes(typed: str, dropped: bool) -> None:
    """Both spellings of each flag; the rest of the command as typed."""
    text = f"python -m sglang.launch_server --tp 3 {typed} --trust-remote-code"
    (command,) = read_launch_commands(text)
    line = fixed_command(text, command, Config(tp_size=4), attn_dp_spelling=True)
    words = shlex.split(line)
    assert not any(w.startswith("--nnodes") for w in words)
    assert any(w.startswith("--dist-init-addr") for w in words) != dropped
    assert not any(w.startswith("--node-rank") for w in words)
    assert words[-1] == "--trust-remote-code" and "--tp" in words
