"""Hostile inputs for the fuzz suite, built at test time (no committed binaries)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.lang.limits import MAX_DEPTH, MAX_FILE_BYTES

#: Text that a careless or hostile user might put anywhere.
NASTY_TEXT = (
    "[/x]",
    "[bold]x[/bold]",
    "--foo[/bar]",
    "nan",
    "inf",
    "-inf",
    "1e308",
    "9" * 20,
    "9" * 5000,
    "-0",
    "0x10",
    "ünïcödé ✓",
    "\x00",
    "a\nb",
    "",
    " ",
    "none",
    "true",
    "{}",
    "[1, 2]",
    "x" * 3000,
)
FIELD_NAMES = tuple(CONFIG_SPECS)

text_values = st.one_of(
    st.sampled_from(NASTY_TEXT),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(max_size=12),
)
field_names = st.one_of(
    st.sampled_from(FIELD_NAMES), st.sampled_from(("tp", "model", "[/x]", "")), st.text(max_size=8)
)
_good_sets = st.one_of(
    st.builds(
        lambda n, v: f"{n}={v}",
        st.sampled_from(
            ("tp_size", "dp_size", "attn_cp_size", "ep_size", "moe_dp_size", "pp_size")
        ),
        st.sampled_from((1, 2, 3, 4, 8)),
    ),
    st.sampled_from(
        (
            "enable_dp_attention=true",
            "enable_prefill_cp=true",
            "cp_strategy=zigzag",
            "moe_a2a_backend=deepep",
            "dcp_size=2",
        )
    ),
)
_nasty_sets = st.builds(lambda n, v: f"{n}={v}", field_names, text_values)
# Mostly well-formed, so that the commands get past input checking and do real work.
set_args = st.builds(
    lambda item: ["--set", item], st.one_of(_good_sets, _good_sets, _good_sets, _nasty_sets)
)
gpu_args = st.one_of(
    st.integers(min_value=1, max_value=24).map(str),
    st.integers(min_value=1, max_value=24).map(str),
    st.integers(min_value=-3, max_value=48).map(str),
    st.sampled_from(("0", "1048577", str(2**40), str(2**63), "abc", "1e3", "8.0")),
)
where_atoms = st.sampled_from(
    (
        "tp >= 2",
        "tp % 0 == 0",
        "tp // (cp - cp) == 1",
        "attn_tp <= 8",
        "ep == tp",
        "cp_strategy == 'zigzag'",
        "not dp_attn",
        "gpus_used > 1e3",
        "tp ** 2 == 4",
        "__import__('os')",
        "tp >=",
        "[/x]",
        "not " * 40 + "tp == 1",
        "(" * 200 + "tp" + ")" * 200 + " == 1",
    )
)
where_args = st.one_of(
    where_atoms,
    st.builds(
        lambda a, op, b: f"{a} {op} {b}", where_atoms, st.sampled_from(("and", "or")), where_atoms
    ),
    st.text(max_size=20),
)
format_args = st.sampled_from(("json", "jsonl", "csv", "table", "json", "table", "csv", "xml"))
timeout_args = st.sampled_from(("1e308", "0.001", "5", "5", "1e308", "0", "-1", "nan", "abc"))


@st.composite
def argvs(draw: st.DrawFn) -> list[str]:
    """A command line over every command and option, mostly well-formed, often not."""
    command = draw(st.sampled_from(("validate", "fix", "groups", "enumerate", "rules", "fields")))
    argv = [command]
    if command in ("validate", "fix", "groups", "enumerate"):
        for item in draw(st.lists(set_args, max_size=3)):
            argv += item
    if command in ("validate", "fix", "groups") and draw(st.booleans()):
        argv += ["--sglang", draw(st.sampled_from(("--tp 8 --dp 3", "[/x] --tp", "--tp", "")))]
    if command in ("validate", "fix", "groups") and draw(st.integers(0, 4)) == 0:
        argv += ["--example", draw(st.sampled_from(("dp-cp-conflict", "nope", "[/x]")))]
    if command == "fix":
        if draw(st.booleans()):
            argv += ["--gpus", draw(gpu_args)]
        if draw(st.booleans()):
            argv += ["--timeout", draw(timeout_args)]
        if draw(st.booleans()):
            argv += ["--pin", draw(field_names)]
        if draw(st.integers(0, 3)) == 0:
            argv += ["--top", draw(st.sampled_from(("abc", "0", "2", "-1")))]
    if command == "enumerate":
        argv += ["--gpus", draw(gpu_args)]
        for w in draw(st.lists(where_args, max_size=2)):
            argv += ["--where", w]
        if draw(st.integers(0, 3)) == 0:
            argv += ["--vary", draw(field_names)]
        if draw(st.integers(0, 3)) == 0:
            argv += ["--sort", draw(st.sampled_from(("tp", "-ep", "nope")))]
            argv += ["--limit", draw(st.sampled_from(("5", "-1", "x")))]
        if draw(st.booleans()):
            argv += ["--count"]
        argv += ["--timeout", "20"]  # a hang guard, never reached by a passing case
    if command == "groups" and draw(st.booleans()):
        argv += ["--rank", draw(st.sampled_from(("0", "3", "-1", "99999", "x")))]
    if draw(st.booleans()):
        argv += ["--format", draw(format_args)]
    if draw(st.integers(0, 5)) == 0:
        argv += ["--json"]
    if draw(st.integers(0, 12)) == 0:
        argv += [draw(st.sampled_from(("--foo[/bar]", "--bogus", "-z", "extra")))]
    return argv


#: Hugging Face configs whose facts are malformed: each must be refused, not dropped.
BAD_HF_CONFIGS: tuple[dict[str, Any], ...] = (
    {"architectures": 3},
    {"architectures": {"a": 1}},
    {"architectures": "DeepseekV3ForCausalLM"},
    {"architectures": ["X"], "text_config": "s"},
    {"architectures": ["X"], "text_config": [1]},
    {"architectures": ["X"], "text_config": 4},
    {"architectures": ["X"], "num_attention_heads": 0},
    {"architectures": ["X"], "num_attention_heads": -8},
    {"architectures": ["X"], "num_attention_heads": "6"},
    {"architectures": ["X"], "num_attention_heads": float("nan")},
    {"architectures": ["X"], "num_key_value_heads": 0},
    {"architectures": ["X"], "n_routed_experts": -4},
    {"model_type": "x", "num_hidden_layers": 2.5},
)


def hostile_files(root: Path) -> dict[str, Path]:
    """Files that once hung meshsat, exhausted memory or crashed it, written now."""
    files: dict[str, Path] = {}

    def put(name: str, data: str | bytes) -> None:
        path = root / name
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
        files[name] = path

    deep = MAX_DEPTH * 40
    put("deep.json", '{"tp_size": ' + "[" * deep + "]" * deep + "}")
    put("deep.yaml", "tp_size: " + "[" * deep + "]" * deep + "\n")
    put("deep.toml", "tp_size = " + "[" * deep + "]" * deep + "\n")
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        bomb.append(
            f"{chr(97 + i)}: &{chr(97 + i)} " + "[" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]"
        )
    bomb.append("tp_size: *j")
    put("bomb.yaml", "\n".join(bomb) + "\n")
    put("comments.yaml", "# nothing\n" * (MAX_FILE_BYTES // 10 + 10))
    put("big.json", '{"tp_size": 8, "x": "' + "y" * MAX_FILE_BYTES + '"}')
    put("latin1.yaml", "tp_size: 8\n# caf\xe9\n".encode("latin-1"))
    put("markup.yaml", 'eplb_algorithm: "[/x]"\ninit_expert_location: "[bold]x"\n')
    put("nan.yaml", "schedule_conservativeness: .nan\n")
    put("list.json", "[1, 2, 3]")
    put("hf-bad.json", json.dumps({"architectures": "DeepseekV3ForCausalLM"}))
    put("hf-deep.json", "[" * 100_000 + "]" * 100_000)
    return files


# --- the surfaces of issue 28: pasted launch scripts, plan, diff -------------------------
#: Pieces of a pasted launch: launchers, layout and other flags with nasty values, shell
#: syntax bash would refuse or expand, terminal escapes and bidi controls, continuations.
LAUNCH_PIECES = (
    "python -m sglang.launch_server",
    "python3 -m sglang.launch_server",
    "sglang serve",
    "docker run -e SGLANG_ENABLE_CP_V2=1 img python -m sglang.launch_server",
    "CUDA_VISIBLE_DEVICES=0,1 NCCL_X=1",
    "export SGLANG_ENABLE_CP_V2=1;",
    "--tp 8",
    "--tp-size=16",
    "--dp 3",
    "--attn-cp-size 2",
    "--ep-size",
    "--enable-dp-attention",
    "--enable-ep-moe",
    "--nnodes 2 --node-rank 1",
    "--node-rank 7",
    "--dist-init-addr 10.0.0.1:5000",
    "--model-path deepseek-ai/DeepSeek-V3",
    "--model-path /dev/zero",
    "--model-path " + "m" * 5000,
    "--cuda-graph-bs 1 2 4",
    "--moe-a2a-backend nope",
    "--tp",
    "--t",
    "--bogus-flag",
    "--x\x1b[2J",
    "--y\x07\x9b31m",
    "--z\u202e",
    "--tp 8\r",
    "--tp $TP",
    '--tp "$(nproc)"',
    "--tp ${X:-8}",
    "--tp '8",
    '--tp "8',
    "`id`",
    "--tp 8 | tee log",
    "--tp 8 > log 2>&1 &",
    "<<EOF",
    "# a comment",
    "if true; then",
    "done",
    "((",
    "\\",
    "\\\n",
    " \\\n",
    "\n",
    "[/x]",
    "--" + "x" * 3000,
    "9" * 400,
)
launch_texts = st.lists(st.sampled_from(LAUNCH_PIECES), min_size=1, max_size=12).map(" ".join)

MODEL_NAMES = (
    "deepseek-ai/DeepSeek-V3",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-8B",
    "nope",
    "[/x]",
    "/dev/zero",
    "",
)
GPU_NAMES = ("H100", "H200", "B200", "MI300X", "h200", "nope", "[/x]", "")
GPU_MEMORY = ("80GiB", "141GB", "1e400GiB", "-1GiB", "nan", "0", "x", "80")


#: `plan`'s estimator inputs and hostile values for each.
PERF_OPTIONS = (
    ("--isl", ("1", "1024", "0", str(10**12), "x")),
    ("--osl", ("1", "64", "0", str(10**12), "-5")),
    ("--ttft", ("50", "0.001", "0", "-1", "nan", "inf", "1e308")),
    ("--tpot", ("20", "1e-9", "nan", "-inf", "1e308", "x")),
    ("--engine", ("auto", "roofline", "aic", "x")),
    ("--mem-fraction-static", ("0.9", "0", "1", "nan", "-0.5", "x")),
    ("--free-memory", ("78.81GiB", "0", "-1GiB", "1e400GiB", "nan", "x")),
    ("--timeout", ("20", "0", "-1", "nan", "1e308")),
    # Never a device or an existing file: a fuzz run must not write outside its own files.
    ("--plot", ("/nonexistent/dir/p.png",)),
)


#: `plan --quantization`: online FP8 (priced), values the field takes that a checkpoint or
#: the memory model refuses, and values it does not take at all.
QUANTIZATIONS = (
    "fp8",
    "w8a8_fp8",
    "awq",
    "modelopt_fp4",
    "compressed-tensors",
    "none",
    "FP8",
    "fp9",
    "",
    "[/x]",
    "fp8\x1b[2J",
)


@st.composite
def plan_argvs(draw: st.DrawFn) -> list[str]:
    """`meshsat plan` command lines, small GPU counts (the work at scale has its own test)."""
    argv = ["plan", "--model", draw(st.sampled_from(MODEL_NAMES))]
    argv += ["--gpus", draw(st.sampled_from(("1", "2", "8", "16", "0", "-4", "x", str(2**63))))]
    if draw(st.integers(0, 3)):
        argv += ["--gpu", draw(st.sampled_from(GPU_NAMES))]
    if draw(st.integers(0, 2)) == 0:
        argv += ["--gpu-memory", draw(st.sampled_from(GPU_MEMORY))]
    if draw(st.booleans()):
        argv += ["--context-length", draw(st.sampled_from(("1", "4096", "0", "1e9", "x")))]
    if draw(st.booleans()):
        argv += ["--gpus-per-node", draw(st.sampled_from(("1", "8", "3", "0", "x")))]
    if draw(st.booleans()):
        argv += ["--top", draw(st.sampled_from(("1", "3", "0", "-1")))]
    if draw(st.booleans()):
        argv += ["--format", draw(st.sampled_from(("table", "json", "csv", "xml")))]
    # The estimator's inputs (`--rank perf`, the default): workload, SLA, engine, sizing.
    for option, values in PERF_OPTIONS:
        if draw(st.integers(0, 4)) == 0:
            argv += [option, draw(st.sampled_from(values))]
    if draw(st.integers(0, 5)) == 0:
        argv += ["--rank", draw(st.sampled_from(("perf", "kv", "x")))]
    if draw(st.integers(0, 3)) == 0:
        argv += ["--quantization", draw(st.sampled_from(QUANTIZATIONS))]
    return argv


VERSIONS = (
    "0.5.23",
    "0.5.19",
    "0.5.18",
    "0.4.6.post5",
    "installed",
    "9.9",
    "[/x]",
    "",
    "0.5.23\x1b[2J",
)


@st.composite
def diff_argvs(draw: st.DrawFn) -> list[str]:
    """`meshsat diff A B`, with and without a layout to judge under both releases."""
    argv = ["diff", draw(st.sampled_from(VERSIONS)), draw(st.sampled_from(VERSIONS))]
    for item in draw(st.lists(set_args, max_size=2)):
        argv += item
    if draw(st.integers(0, 3)) == 0:
        argv += ["--sglang", draw(launch_texts)]
    if draw(st.booleans()):
        argv += ["--format", draw(format_args)]
    return argv
