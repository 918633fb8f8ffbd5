"""Shell syntax bashlex cannot parse (`case`, `$((...))`), rewritten at the same width so
that launch scripts holding it are read instead of refused (solver/inputs/shell_masks.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.errors import InputError
from meshsat.solver.inputs.launch import read_launch_commands
from meshsat.solver.inputs.shell_masks import mask_arithmetic, mask_case

LAUNCH = "python -m sglang.launch_server"
L = f"{LAUNCH} --model-path m"

#: A SLURM script that parses its options with getopts, as published multi-node scripts do.
GETOPTS = f"""#!/bin/bash
MODEL_PATH="deepseek-ai/DeepSeek-R1"
TP=16
while getopts "m:t:h" opt; do
  case $opt in
    m) MODEL_PATH="$OPTARG" ;;
    t) TP="$OPTARG";;
    h|\\?) echo "usage: $0 [-m MODEL]"; exit 2 ;;
  esac
done
srun bash -c "{LAUNCH} --model-path $MODEL_PATH --tp 16 --nnodes 2 --node-rank \\$SLURM_PROCID"
"""

ROLES = f"""ROLE=$1
case "$ROLE" in
  prefill)
    {L} --disaggregation-mode prefill --tp 8 ;;
  decode) {L} --disaggregation-mode decode --tp 8 --base-gpu-id 0
    ;;
  *)
    echo "usage: $0 prefill|decode"; exit 1 ;;
esac
"""


def _tp(command: object) -> str | None:
    words = command.words  # type: ignore[attr-defined]
    i = [w.text for w in words].index("--tp")
    return None if words[i + 1].expansion else words[i + 1].text


def test_getopts_script_is_read() -> None:
    """Refused before ("cannot parse the launch command: type = {pattern}, token = {m}");
    now read, and what a branch assigns is unknown afterwards (it may not run)."""
    (launch,) = read_launch_commands(GETOPTS)
    assert _tp(launch) == "16"
    words = [w.text for w in launch.words]
    path = launch.words[words.index("--model-path") + 1]
    assert path.expansion == "$MODEL_PATH"


def test_launches_in_branches_are_launches() -> None:
    modes = [
        [w.text for w in c.words][[w.text for w in c.words].index("--disaggregation-mode") + 1]
        for c in read_launch_commands(ROLES)
    ]
    assert modes == ["prefill", "decode"]


@pytest.mark.parametrize("script", [GETOPTS, ROLES])
def test_same_width_same_lines(script: str) -> None:
    masked = mask_case(script)
    assert len(masked) == len(script) and masked != script
    assert [i for i, c in enumerate(masked) if c == "\n"] == [
        i for i, c in enumerate(script) if c == "\n"
    ]
    assert "case" not in masked.replace("usage", "") and "esac" not in masked


def test_nested_case_is_still_refused_with_the_cause() -> None:
    nested = "case $a in\n x) case $b in\n y) true ;;\n esac ;;\nesac\n" + L + " --tp 2\n"
    with pytest.raises(InputError, match="cannot parse the launch command"):
        read_launch_commands(nested)


def test_quoted_case_words_are_text() -> None:
    text = f"echo 'case x in a) b ;; esac'\n{L} --tp 2\n"
    assert mask_case(text) == text


EXPR = st.recursive(
    st.sampled_from(["1", "8", "N", "$N", "${N}", "17"]),
    lambda inner: st.tuples(inner, st.sampled_from([" + ", "*", " / ", "%", " - "]), inner).map(
        lambda t: f"({t[0]}{t[1]}{t[2]})"
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(EXPR, min_size=1, max_size=3))
def test_arithmetic_mask_keeps_width_and_expressions(exprs: list[str]) -> None:
    text = "N=3\n" + " ".join(f"--x $(({e}))" for e in exprs) + "\n"
    masked, table = mask_arithmetic(text)
    assert len(masked) == len(text)
    assert "$((" not in masked
    assert sorted(table.values()) == sorted(exprs)
