"""The platform read from a launch that names no `--device`: Ascend only when the launch holds
a value or variable nothing but the Ascend stack takes.

Oracles: the releases' own choices lists (`sglang_flags.json`, exported from SGLang 0.5.18,
0.5.19 and 0.5.23 by `fidelity/`) for which option values are Ascend's; SGLang's public
Ascend PD recipe (tests/fixtures/pd/sglang-docs-ascend-deepseek.sh, written without
`--device npu`); TOPO-NODE-GPUS, whose verdict on 32 ranks over 2 nodes tells a node of 16
from a node of 8.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from meshsat.solver import validate
from meshsat.solver.deployment.validate import load_server, read
from meshsat.solver.inputs.accelerator import ASCEND_ONLY_VALUES
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources, load_layout
from meshsat.solver.integrations.launch_guard import judge_argv

_N2 = "python -m sglang.launch_server --model-path m --tp 32 --nnodes 2 --node-rank 0"


def _recorded_ascend_choices() -> set[tuple[str, str]]:
    """(option, value) of every recorded choice that names Ascend or its NPU."""
    data = json.loads(
        resources.files("meshsat.solver.inputs").joinpath("sglang_flags.json").read_text("utf-8")
    )
    return {
        (option, value)
        for table in data["choices"].values()
        for option, values in table.items()
        for value in values
        if "ascend" in str(value).lower() or "npu" in str(value).lower()
    }


def _layout(text: str, *sets: str) -> LayoutInput:
    return load_layout(LayoutSources(sglang=text, sets=sets))


def _inferred(layout: LayoutInput) -> list[str]:
    return [n for n in layout.notes if "platform npu inferred" in n]


def test_the_ascend_only_table_is_the_releases_ascend_choices() -> None:
    table = {(flag, value) for flag, values in ASCEND_ONLY_VALUES.items() for value in values}
    assert table == _recorded_ascend_choices()


@pytest.mark.parametrize(("flag", "value"), sorted(_recorded_ascend_choices()))
def test_each_ascend_choice_makes_an_npu_node(flag: str, value: str) -> None:
    layout = _layout(f"{_N2} {flag} {value}")
    assert layout.config.platform == "npu" and layout.config.gpus_per_node == 16
    assert _inferred(layout) == [
        f"platform npu inferred from {flag} {value} (Ascend-only; the command names no "
        "--device); give --set platform=cuda to judge it otherwise"
    ]
    assert "TOPO-NODE-GPUS" not in {v.rule for v in validate(layout.config).violations}


@pytest.mark.parametrize(
    "text",
    [
        f"HCCL_BUFFSIZE=1536 {_N2}",
        f"export ASCEND_MF_STORE_URL=tcp://h:1\n{_N2}",
        f"PYTORCH_NPU_ALLOC_CONF=expandable_segments:True {_N2}",
        f"{_N2} --attention-backend=ascend",
    ],
)
def test_ascend_variables_and_inline_values_make_an_npu_node(text: str) -> None:
    layout = _layout(text)
    assert layout.config.platform == "npu" and len(_inferred(layout)) == 1


@pytest.mark.parametrize(
    "text",
    [
        _N2,
        f"HCCL_COMM_ID=10.0.0.1:9999 HCCL_SOCKET_IFNAME=eth0 {_N2}",  # Intel Gaudi's HCCL
        f"MY_HCCL_BUFFSIZE=1 NCCL_BUFFSIZE=4194304 {_N2}",
        f"{_N2} --served-model-name HCCL_BUFFSIZE --attention-backend fa3",
        f"{_N2} --served-model-name ascend --sampling-backend flashinfer",
        f"HCCL_BUFFSIZE=1536 {_N2} --device cuda --attention-backend ascend",  # named: kept
        f"{_N2} --device $DEVICE --attention-backend ascend",  # named, value unknown: kept
    ],
)
def test_a_cuda_launch_stays_cuda_on_nodes_of_8(text: str) -> None:
    layout = _layout(text)
    assert layout.config.platform == "cuda" and layout.config.gpus_per_node == 8
    assert _inferred(layout) == []
    assert "TOPO-NODE-GPUS" in {v.rule for v in validate(layout.config).violations}


def test_set_platform_wins_over_what_is_inferred() -> None:
    layout = _layout(f"HCCL_BUFFSIZE=1 {_N2} --attention-backend ascend", "platform=cuda")
    assert layout.config.platform == "cuda" and layout.config.gpus_per_node == 8
    assert _inferred(layout) == []


def test_the_ascend_pd_recipe_without_device_is_judged_on_npus() -> None:
    text = (Path(__file__).parent / "fixtures/pd/sglang-docs-ascend-deepseek.sh").read_text()
    assert "--device" not in text
    deployment = read(text, load_server(None, "0.5.23"), LayoutSources())
    for server in deployment.servers:
        assert server.layout.config.platform == "npu"
        assert server.layout.config.gpus_per_node == 16
        assert _inferred(server.layout) == [
            "platform npu inferred from --disaggregation-transfer-backend ascend (Ascend-only; "
            "the command names no --device); give --set platform=cuda to judge it otherwise"
        ]


def test_the_launch_guard_reads_the_process_environment_alike() -> None:
    argv = ["--model-path", "m", "--tp", "32", "--nnodes", "2", "--node-rank", "0"]
    npu = judge_argv(argv, environ={"ASCEND_TOOLKIT_HOME": "/x"}, sglang_version="0.5.23")
    cuda = judge_argv(argv, environ={"HCCL_COMM_ID": "a:1"}, sglang_version="0.5.23")
    assert "TOPO-NODE-GPUS" not in {v.rule for v in npu.report.violations}
    assert "TOPO-NODE-GPUS" in {v.rule for v in cuda.report.violations}
