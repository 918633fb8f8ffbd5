"""Launch scripts that name their sizes in shell variables (`tp_size=16` ... `--tp
"$tp_size"`): read as the value the script set, checked against bash itself, which runs
the same script with the launcher swapped for `printf`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.inputs.launch import read_launch_commands
from tests.bash_oracle import needs_bash, words_bash_passes
from tests.cli_helpers import run_cli

LAUNCH = "python3 -m sglang.launch_server"

#: SGLang's multi-node SLURM example (docs, "Multi-Node Deployment"), as published.
SLURM = """#!/bin/bash -l
#SBATCH -J Llama-405B-Online-Inference-TP16-SGL
#SBATCH --nodes=2
#SBATCH --ntasks=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
model=meta-llama/Meta-Llama-3.1-405B-Instruct
tp_size=16
HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
NCCL_INIT_ADDR="${HEAD_NODE}:8000"
srun --ntasks=2 --nodes=2 --output="SLURM_Logs/%x_%j_node$SLURM_NODEID.out" \\
    python3 -m sglang.launch_server \\
    --model-path "$model" \\
    --grammar-backend "xgrammar" \\
    --tp "$tp_size" \\
    --dist-init-addr "$NCCL_INIT_ADDR" \\
    --nnodes 2 \\
    --node-rank "$SLURM_NODEID" &
wait
"""


def _values(script: str) -> dict[str, str | None]:
    """flag -> the value meshsat read (None: unknown here)."""
    words = read_launch_commands(script)[0].words
    return {
        w.text: None if v.expansion is not None else v.text
        for w, v in zip(words[::2], words[1::2], strict=False)
    }


def test_slurm_example_is_valid_on_16_gpus(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It used to read tp as unknown, judge it at 1, and refuse the two nodes
    (TOPO-NNODES); the node rank and the address stay unknown (set by SLURM)."""
    values = _values(SLURM)
    assert values["--tp"] == "16"
    assert (values["--model-path"] or "").endswith("405B-Instruct")
    assert values["--node-rank"] is None and values["--dist-init-addr"] is None
    script = tmp_path / "slurm.sh"
    script.write_text(SLURM)
    run = run_cli(capsys, "validate", "--sglang-file", str(script), "--json")
    assert run.code == 0, run.out + run.err
    report = json.loads(run.out)
    assert report["valid"] and report["derived"]["gpus_used"] == 16
    assert "$tp_size = '16' (set on line 8)" in run.err  # input notes go to stderr


@pytest.mark.parametrize(
    ("script", "tp"),
    [
        ("TP=8\n{L} --tp $TP", "8"),
        ("export TP=8\n{L} --tp ${{TP}}", "8"),
        ('A=1\nB="${{A}}6"\n{L} --tp "$B"', "16"),
        ("{L} --tp ${{TP:-4}}", "4"),  # never set: the script's default
        ("TP=2\n{L} --tp ${{TP:-4}}", "2"),
        ("TP=\n{L} --tp ${{TP:-4}}", "4"),
        ("TP=\n{L} --tp ${{TP-4}}", ""),
        ("TP=2\nTP=8\n{L} --tp $TP\nTP=4", "8"),  # the latest before the launch
        ("TP=8 {L} --tp $TP", None),  # a prefix sets the environment, not the expansion
        ("TP=$(nproc)\n{L} --tp $TP", None),
        ('if [ -n "$X" ]; then TP=8; fi\n{L} --tp $TP', None),  # a branch
        ("TP=2\nif true; then TP=8; fi\n{L} --tp $TP", None),
        ('[ -z "$TP" ] && TP=8\n{L} --tp $TP', None),
        ("for n in 1; do TP=8; done\n{L} --tp $TP", None),
        ("{L} --tp $1", None),
        ("N=2\n{L} --tp $((8 * N))", "16"),  # bashlex cannot parse these: masked, read here
        ("N=2\nW=$(( N*8 ))\n{L} --tp $W --nnodes $N", "16"),
        ("N=7\n{L} --tp $(( -N / 2 ))", "-3"),  # bash divides towards zero
        ("{L} --tp $((17 % 5))", "2"),
        ("{L} --tp $((8 * N))", None),
        ("N=2\n{L} --tp $((N > 1))", None),  # only + - * / %
        ("{L} --tp ${{#TP}}", None),
        ('TP=8\nssh h "{L} --tp $TP"', "8"),  # double quotes: this shell expands it
        ("TP=8\nssh h '{L} --tp $TP'", None),  # single quotes: the remote shell does
        ("export TP=8\nbash -c '{L} --tp $TP'", "8"),  # bash -c gets the environment
        ("export TP=8\nTP=4\nbash -c '{L} --tp $TP'", "4"),  # its value when bash starts
        ("TP=8\nbash -c '{L} --tp $TP'", None),  # not exported: not in bash's environment
        ("TP=8 srun bash -c '{L} --tp $TP'", "8"),  # a prefix is in the runner's environment
        ("export TP=8\nssh h '{L} --tp $TP'", None),  # ssh does not pass it
    ],
)
def test_forms(script: str, tp: str | None) -> None:
    assert _values(script.format(L=LAUNCH))["--tp"] == tp


NAMES = st.sampled_from(["TP", "tp_size", "N"])
DIGITS = st.integers(1, 64).map(str)


@st.composite
def scripts(draw: st.DrawFn) -> tuple[str, bool]:
    """A script of assignments then a launch reading `--tp` from them; and whether the
    shell's order makes the value certain (then meshsat must know it). `sure`: names whose
    value is certain; `unsure`: names set where it is not (a branch, an `&&` list)."""
    lines: list[str] = []
    sure: set[str] = set()
    unsure: set[str] = set()

    def settle(name: str, known: bool) -> None:
        (sure if known else unsure).add(name)
        (unsure if known else sure).discard(name)

    for _ in range(draw(st.integers(0, 5))):
        name, other, value = draw(NAMES), draw(NAMES), draw(DIGITS)
        kind = draw(st.sampled_from(["plain", "export", "chain", "default", "arith", "if", "and"]))
        if kind == "plain":
            lines.append(f"{name}={value}")
            settle(name, True)
        elif kind == "export":
            lines.append(f"export {name}={value}")
            settle(name, True)
        elif kind == "chain":
            lines.append(f'{name}="${{{other}:-1}}{value}"')
            settle(name, other not in unsure)
        elif kind == "default":
            lines.append(f"{name}=${{{other}:-{value}}}")
            settle(name, other not in unsure)
        elif kind == "arith":
            lines.append(f"{name}=$(( {other} * 2 + {value} ))")
            settle(name, other in sure)
        elif kind == "if":
            lines.append(f"if true; then {name}={value}; fi")
            settle(name, False)
        else:
            lines.append(f"true && {name}={value}")
            settle(name, False)
    form, certain = draw(
        st.sampled_from(
            [
                ("${N:-3}", "N" not in unsure),
                ("$TP", "TP" in sure),
                ('"${tp_size}"', "tp_size" in sure),
                ("${TP:-7}0", "TP" not in unsure),
                ("$N$N", "N" in sure),
                ("$(( TP * 2 ))", "TP" in sure),
                ("$((tp_size/3))", "tp_size" in sure),
            ]
        )
    )
    if draw(st.booleans()):  # run by `bash -c '...'`: only soundness is checked there
        lines.append(f"bash -c '{LAUNCH} --tp {form}'")
        certain = False
    else:
        lines.append(f"{LAUNCH} --tp {form}")
    return "\n".join(lines) + "\n", certain


@needs_bash
@settings(max_examples=40, deadline=None)
@given(scripts())
def test_against_bash(case: tuple[str, bool]) -> None:
    script, certain = case
    read = _values(script)["--tp"]
    ran = words_bash_passes(script, LAUNCH)
    if read is not None:
        assert ran[1] == read, script
    if certain:
        assert read is not None, script
