"""Memory beside a layout on the command line: the verdict folds in, the numbers are the API's."""

from __future__ import annotations

import json

import pytest

from meshsat import solver
from meshsat.solver.memory import memory_of
from tests.cli_helpers import run_cli

V3 = "deepseek-ai/DeepSeek-V3"


def test_a_layout_that_cannot_load_is_invalid_with_the_arithmetic(
    capsys: pytest.CaptureFixture[str],
) -> None:
    r = run_cli(capsys, "validate", "--model", V3, "--gpu", "H100", "--set", "tp_size=8", "--json")
    data = json.loads(r.out)
    assert r.code == 1 and data["valid"] is False and data["first"] == "MEM-FIT"
    message = data["violations"][0]["message"]
    assert message.startswith("does not fit: weights ") and "GiB free on a H100" in message
    assert data["memory"]["fits"] is False


def test_the_cli_reports_the_api_figures(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(
        capsys, "validate", "--model", V3, "--gpu", "H200", "--set", "tp_size=8",
        "--context-length", "32768", "--json",
    )  # fmt: skip
    data = json.loads(r.out)
    assert r.code == 0 and data["memory"]["fits"] is True
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory.models import model_config

    report = solver.validate({"tp_size": 8}, ModelSpec.from_hf_config(model_config(V3)))
    expected = memory_of(report, V3, "H200", context_length=32768)
    assert data["memory"] == json.loads(json.dumps(expected.to_dict()))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--gpu", "H100"), "--gpu needs --model"),
        (("--model", V3, "--gpu", "H100", "--gpu-memory", "80GiB"), "not both"),
        (("--model", V3, "--gpu", "H999"), "H100"),
    ],
)
def test_bad_memory_input_is_one_line(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], says: str
) -> None:
    r = run_cli(capsys, "validate", "--set", "tp_size=8", *args)
    assert r.code == 2 and says in r.err and r.err.count("\n") == 1


def test_online_fp8_quantization_reaches_the_weights(capsys: pytest.CaptureFixture[str]) -> None:
    llama = "meta-llama/Llama-3.1-8B-Instruct"
    args = ("validate", "--model", llama, "--gpu", "H100", "--set", "tp_size=1", "--json")
    plain = json.loads(run_cli(capsys, *args).out)["memory"]
    fp8 = json.loads(run_cli(capsys, *args, "--set", "quantization=fp8").out)["memory"]
    from meshsat.solver.memory import MemoryModel, Parallel
    from meshsat.solver.memory.models import model_config
    from meshsat.solver.memory.quantized_checkpoints import with_quantization_flag

    online = with_quantization_flag(model_config(llama), "fp8")
    expected = MemoryModel(online, "H100").of(Parallel()).weights_gib
    assert (
        fp8["weights_gib"] == pytest.approx(expected) and fp8["weights_gib"] < plain["weights_gib"]
    )


def test_enumerate_prices_online_fp8_as_validate_does(capsys: pytest.CaptureFixture[str]) -> None:
    llama = "meta-llama/Llama-3.1-8B-Instruct"
    common = ("--model", llama, "--gpu", "H100", "--set", "quantization=fp8")
    valid = run_cli(capsys, "validate", *common, "--set", "tp_size=1", "--json")
    listed = run_cli(capsys, "enumerate", "--gpus", "1", *common, "-f", "jsonl")
    row = json.loads(listed.out.splitlines()[0])
    assert row["weights_gib"] == pytest.approx(
        json.loads(valid.out)["memory"]["weights_gib"], abs=0.01
    )


@pytest.mark.parametrize("command", ["validate", "fix"])
def test_the_commands_model_path_sizes_memory_or_says_why_not(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A pasted command's `--model-path` is the model --gpu sizes (fix used to ignore it and
    ask for --model); one meshsat cannot read is named, with the embedded ids it is close to."""
    known = run_cli(capsys, command, "--gpu", "H200", "--json", "--sglang",
                    f"python -m sglang.launch_server --model-path {V3} --tp 8")  # fmt: skip
    assert known.code == 0, known.err
    unknown = run_cli(capsys, command, "--gpu", "H200", "--sglang",
                      "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3-0324"
                      " --tp 8")  # fmt: skip
    assert unknown.code == 2 and unknown.err.count("\n") == 1
    assert "--model-path deepseek-ai/DeepSeek-V3-0324 is not a local folder" in unknown.err
    assert "deepseek-ai/DeepSeek-V3" in unknown.err.split("close:")[1]
