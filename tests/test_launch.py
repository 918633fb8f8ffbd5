"""Launch commands as pasted: a corpus with the layout each must read, a round trip over
generated layouts in every shape the reader supports, and bad input as one line."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver.errors import InputError
from solver.inputs import parse_sglang_command
from tests.cli_helpers import run_cli
from tests.launch_corpus import CORPUS, MULTI_NODE


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 40


@pytest.mark.parametrize(("text", "layout"), CORPUS, ids=[str(i) for i in range(len(CORPUS))])
def test_every_pasted_command_reads_its_layout(text: str, layout: dict[str, Any]) -> None:
    assert parse_sglang_command(text).values == layout


def test_shell_expansions_are_unknown_not_errors() -> None:
    parsed = parse_sglang_command(
        "python3 -m sglang.launch_server --tp 16 --nnodes 2 --node-rank $NODE_RANK"
    )
    assert parsed.unknown_values == {"node_rank": "$NODE_RANK"}
    assert any("$NODE_RANK" in n for n in parsed.notes)


def test_flags_are_sorted_into_known_and_unknown() -> None:
    parsed = parse_sglang_command(
        "sglang serve --model-path x --tp 2 --enable-torch-compile --tp-sizee 4"
    )
    assert parsed.ignored == ["--model-path", "--enable-torch-compile"]
    assert parsed.unknown_flags == ["--tp-sizee"]
    assert parsed.values == {"tp_size": 2}


def test_a_multi_node_script_is_one_job() -> None:
    assert parse_sglang_command(MULTI_NODE).values == {"tp_size": 16, "nnodes": 2}
    with pytest.raises(InputError, match="line 2 disagrees with the first node on tp_size"):
        parse_sglang_command(
            MULTI_NODE.replace(
                "--tp 16 --nnodes 2 --node-rank 1", "--tp 8 --nnodes 2 --node-rank 1"
            )
        )
    with pytest.raises(InputError, match=r"do not cover 0\.\.1"):
        parse_sglang_command(MULTI_NODE.replace("--node-rank 1", "--node-rank 0"))
    with pytest.raises(InputError, match="different --dist-init-addr"):
        parse_sglang_command(MULTI_NODE.replace("10.0.0.1:5000 &\n", "10.0.0.2:5000 &\n", 1))


# --- round trip: any layout, written in any supported shape, reads back ------------------
SIZES = st.sampled_from([1, 2, 4, 8, 16])
LAYOUTS = st.fixed_dictionaries(
    {},
    optional={
        "tp_size": SIZES, "dp_size": SIZES, "pp_size": SIZES, "ep_size": SIZES,
        "attn_cp_size": SIZES, "moe_dp_size": SIZES, "dcp_size": SIZES,
        "enable_dp_attention": st.just(True), "enable_prefill_cp": st.just(True),
        "cp_strategy": st.sampled_from(["zigzag", "interleave"]),
        "moe_a2a_backend": st.sampled_from(["deepep", "mooncake", "flashinfer"]),
    },
)  # fmt: skip
FLAG = {
    "tp_size": "--tp", "dp_size": "--dp-size", "pp_size": "--pp", "ep_size": "--ep-size",
    "attn_cp_size": "--attn-cp-size", "moe_dp_size": "--moe-dp-size", "dcp_size": "--dcp-size",
    "enable_dp_attention": "--enable-dp-attention", "enable_prefill_cp": "--enable-prefill-cp",
    "cp_strategy": "--cp-strategy", "moe_a2a_backend": "--moe-a2a-backend",
}  # fmt: skip


def render(layout: dict[str, Any], shape: str, equals: bool) -> str:
    words = ["--model-path", "/models/x"]
    for name, value in layout.items():
        if value is True:
            words.append(FLAG[name])
        elif equals:
            words.append(f"{FLAG[name]}={value}")
        else:
            words += [FLAG[name], shlex.quote(str(value))]
    launcher = "python3 -m sglang.launch_server"
    if shape == "continuations":
        return launcher + " \\\n" + " \\\n".join(f"  {w}" for w in words) + "\n"
    if shape == "column0":
        return launcher + " \\\n" + " \\\n".join(words)
    if shape == "env":
        return "CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO " + launcher + " " + " ".join(words)
    if shape == "docker":
        return (
            "docker run --gpus all --ipc=host -e HF_TOKEN=$HF_TOKEN lmsysorg/sglang:latest "
            + launcher
            + " "
            + " ".join(words)
            + " > server.log 2>&1 &"
        )
    return launcher + " " + " ".join(words)


@settings(max_examples=120)
@given(
    LAYOUTS,
    st.sampled_from(["plain", "continuations", "column0", "env", "docker"]),
    st.booleans(),
)
def test_rendered_layouts_read_back(layout: dict[str, Any], shape: str, equals: bool) -> None:
    assert parse_sglang_command(render(layout, shape, equals)).values == layout


# --- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("python3 -m sglang.launch_server --tp 'eight", "cannot parse the launch command"),
        ("python3 -m sglang.launch_server --model-path x --tp", "--tp expects a value (line 1)"),
        ("vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 8", "not an SGLang launch"),
    ],
)
def test_bad_commands_are_one_line(
    capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    r = run_cli(capsys, "validate", "--sglang", text)
    assert r.code == 2 and says in r.err and r.err.count("\n") == 1 and r.out == ""


def test_hostile_files_exit_two_at_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    binary = tmp_path / "a.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    big = tmp_path / "big.sh"
    with big.open("wb") as f:
        f.truncate(50 * 1024 * 1024)
    for path, says in ((binary, "not UTF-8"), (big, "bytes; a launch script is at most")):
        start = time.perf_counter()
        r = run_cli(capsys, "validate", "--sglang-file", str(path))
        assert time.perf_counter() - start < 1.0  # the bound the issue sets for hostile input
        assert r.code == 2 and says in r.err and r.err.count("\n") == 1


def test_a_script_file_and_standard_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "launch.sh"
    script.write_text(MULTI_NODE, encoding="utf-8")
    r = run_cli(capsys, "validate", "--sglang-file", str(script), "--json")
    assert r.code == 0
    import io
    import json

    assert json.loads(r.out)["resolved"]["tp_size"] == 16
    monkeypatch.setattr("sys.stdin", io.StringIO("sglang serve --tp 4 --dp 3"))
    r = run_cli(capsys, "validate", "--sglang", "-", "--json")
    assert json.loads(r.out)["resolved"]["dp_size"] == 3
