"""Adapters from outside vocabularies: SGLang command lines, files, HF configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meshsat.solver import InputError, ModelSpec, validate
from meshsat.solver.inputs import config_from_values, load_config_file, parse_sglang_command
from meshsat.solver.inputs.accelerator import visible_devices
from meshsat.solver.inputs.layout_input import LayoutSources, load_layout


@pytest.mark.parametrize(
    "flag,field",
    [
        ("--tp", "tp_size"),
        ("--tp-size", "tp_size"),
        ("--tensor-parallel-size", "tp_size"),
        ("--dp", "dp_size"),
        ("--dp-size", "dp_size"),
        ("--data-parallel-size", "dp_size"),
        ("--ep", "ep_size"),
        ("--ep-size", "ep_size"),
        ("--expert-parallel-size", "ep_size"),
        ("--pp", "pp_size"),
        ("--pp-size", "pp_size"),
        ("--pipeline-parallel-size", "pp_size"),
        ("--attn-cp-size", "attn_cp_size"),
        ("--attention-context-parallel-size", "attn_cp_size"),
        ("--dcp-size", "dcp_size"),
        ("--decode-context-parallel-size", "dcp_size"),
        ("--moe-dp-size", "moe_dp_size"),
        ("--moe-data-parallel-size", "moe_dp_size"),
        ("--nnodes", "nnodes"),
        ("--dwdp-size", "dwdp_size"),
        ("--attn-dp-size", "attn_dp_size"),
        ("--attention-data-parallel-size", "attn_dp_size"),
    ],
)
def test_size_flag_aliases(flag: str, field: str) -> None:
    assert parse_sglang_command(f"python -m sglang.launch_server {flag} 4").values == {field: 4}
    assert parse_sglang_command(f"sglang serve {flag}=4").values == {field: 4}


def test_full_launch_command() -> None:
    parsed = parse_sglang_command(
        "SGLANG_ENABLE_CP_V2=0 CUDA_VISIBLE_DEVICES=0,1 python3 -m sglang.launch_server "
        "--model-path deepseek-ai/DeepSeek-V3 --trust-remote-code --tp 8 --dp 2 "
        "--enable-dp-attention --enable-nsa-prefill-context-parallel "
        "--nsa-prefill-cp-mode in-seq-split --moe-a2a-backend deepep --cuda-graph-bs 1 2 4 "
        "--no-dcp-replicate-q-proj --mem-fraction-static 0.8"
    )
    assert parsed.values == {
        "env_enable_cp_v2": False,
        "tp_size": 8,
        "dp_size": 2,
        "enable_dp_attention": True,
        "enable_dsa_prefill_context_parallel": True,
        "dsa_prefill_cp_mode": "in-seq-split",
        "moe_a2a_backend": "deepep",
        "dcp_replicate_q_proj": False,
    }
    assert parsed.model_path == "deepseek-ai/DeepSeek-V3"
    assert parsed.ignored == ["CUDA_VISIBLE_DEVICES", "--trust-remote-code", "--cuda-graph-bs"]
    assert parsed.memory == {"mem_fraction_static": 0.8}  # read for the memory verdict


def test_balancedness_env_variable_is_a_fact() -> None:
    parsed = parse_sglang_command("SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC=1 sglang serve --tp 2")
    assert parsed.values["env_enable_eplb_balancedness_metric"] is True


@pytest.mark.parametrize(
    "cmdline,message",
    [
        ("python -m sglang.launch_server --tp", "--tp expects a value"),
        ("python -m sglang.launch_server --tp eight", "tp_size must be a positive integer"),
        ("python -m sglang.launch_server 'unterminated", "cannot parse"),
        ("python -m sglang.launch_server", "has no --flags"),
        ("sglang serve --tp 2 stray", "unexpected word 'stray'"),
        ("sglang serve --enable-dp-attention=maybe", "enable_dp_attention must be true or false"),
    ],
)
def test_bad_command_lines(cmdline: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_sglang_command(cmdline)


def test_a_value_outside_a_fields_choices_is_kept_for_the_release_to_refuse() -> None:
    """Not bad input: SGLang's parser refuses it (CMD-UNKNOWN-FLAG), the field stays unset."""
    parsed = parse_sglang_command("python -m sglang.launch_server --tp 2 --cp-strategy zigzga")
    assert parsed.outside == [("--cp-strategy", "zigzga")]
    assert "cp_strategy" not in parsed.values and parsed.values["tp_size"] == 2


@pytest.mark.parametrize(
    "suffix,text",
    [
        (".json", json.dumps({"tp_size": 8, "enable-dp-attention": True, "dp_size": 2})),
        (".yaml", "tp_size: 8\nenable-dp-attention: true\ndp_size: 2\n"),
        (".toml", "tp_size = 8\nenable-dp-attention = true\ndp_size = 2\n"),
    ],
)
def test_config_files(tmp_path: Path, suffix: str, text: str) -> None:
    path = tmp_path / f"layout{suffix}"
    path.write_text(text)
    config = config_from_values(load_config_file(path))
    assert (config.tp_size, config.dp_size, config.enable_dp_attention) == (8, 2, True)
    assert config.user_set() == {"tp_size", "dp_size", "enable_dp_attention"}


@pytest.mark.parametrize(
    "name,text,message",
    [
        ("a.json", "{tp_size: 8", "invalid JSON at line 1"),
        ("a.yaml", "tp_size: [8", "invalid YAML"),
        ("a.toml", "tp_size = ", "invalid TOML"),
        ("a.ini", "tp_size=8", "must end in .json"),
        ("a.json", "[1, 2]", "must hold a mapping"),
    ],
)
def test_bad_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        load_config_file(path)


def test_missing_file() -> None:
    with pytest.raises(InputError, match="not found"):
        load_config_file("/nonexistent/layout.yaml")


@pytest.mark.parametrize(
    "values,message",
    [
        ({"tp": 8}, "unknown field 'tp'; did you mean tp_size"),
        ({"tp_sise": 8}, "did you mean tp_size"),
        ({"tp_size": 0}, "tp_size must be a positive integer, got 0"),
        ({"tp_size": -2}, "tp_size must be a positive integer, got -2"),
        ({"tp_size": 2.5}, "tp_size must be a positive integer, got 2.5"),
        ({"tp_size": "8"}, "tp_size must be a positive integer, got '8'"),
        ({"cp_strategy": "ring"}, "cp_strategy must be one of none, zigzag, interleave"),
        (
            {"moe_a2a_backend": "nccl"},
            r"moe_a2a_backend must be one of \d+ values, e.g. none, deepep",
        ),
        ({"enable_dp_attention": "yes"}, "enable_dp_attention must be true or false"),
        ({"node_rank": -1}, "node_rank must be a non-negative integer"),
    ],
)
def test_bad_values_name_the_field_and_accepted_values(values: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        config_from_values(values)


def test_hf_config_key_spellings(tmp_path: Path) -> None:
    deepseek = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "n_routed_experts": 256,
        "num_hidden_layers": 61,
    }
    assert ModelSpec.from_hf_config(deepseek) == ModelSpec(
        architecture="DeepseekV3ForCausalLM",
        num_attention_heads=128,
        num_key_value_heads=128,
        num_experts=256,
        num_hidden_layers=61,
        dense_mlp_fully_dp=True,  # deepseek_v2.py honours --moe-dense-tp-size 1
        max_context_length=2048,  # no position key: SGLang's default (get_context_length)
        mla_attention=False,  # no kv_lora_rank: SGLang runs it as MHA (HICACHE-DCP-MLA)
    )
    mixtral = {
        "architectures": ["MixtralForCausalLM"],
        "num_attention_heads": 32,
        "num_local_experts": 8,
        "num_hidden_layers": 32,
    }
    spec = ModelSpec.from_hf_config(mixtral)
    assert (spec.num_experts, spec.num_key_value_heads) == (8, 32)  # kv defaults to heads
    wrapped = {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "vision_config": {},
        "text_config": {"num_attention_heads": 64, "n_routed_experts": 384},
    }
    spec = ModelSpec.from_hf_config(wrapped)
    assert spec.is_multimodal and spec.num_attention_heads == 64 and spec.num_experts == 384
    mla = {**wrapped, "text_config": {**wrapped["text_config"], "kv_lora_rank": 512}}
    assert ModelSpec.from_hf_config(mla).mla_attention  # the text model's key counts too
    assert ModelSpec().mla_attention is None  # no config: not known
    v32 = {"architectures": ["DeepseekV3ForCausalLM"], "index_topk": 2048}
    assert ModelSpec.from_hf_config(v32).is_deepseek_dsa
    (tmp_path / "config.json").write_text(json.dumps(deepseek))
    assert ModelSpec.from_file(tmp_path).num_experts == 256  # a model folder works too


#: Device lists CANN's reference gives for ASCEND_RT_VISIBLE_DEVICES, with the count of
#: devices the process then has (the IDs before the first one it cannot read), and a shell
#: expansion nobody expanded.
@pytest.mark.parametrize(
    ("listed", "devices"), [("1", 1), ("1,2,3", 3), ("1, 2,3", 1), ("1,2,-1,3", 2), ("$NPUS", 0)]
)
def test_ascend_visible_devices_count_as_cann_reads_them(listed: str, devices: int) -> None:
    assert visible_devices(listed) == devices


_N2 = "python -m sglang.launch_server --model-path m --tp 32 --nnodes 2 --node-rank 0"
_A3 = ",".join(str(i) for i in range(16))
_A2 = ",".join(str(i) for i in range(8))


@pytest.mark.parametrize(
    ("text", "sets", "per_node", "refused"),
    [
        (_N2, (), 8, True),  # CUDA: the default node of 8, as before
        (f"CUDA_VISIBLE_DEVICES={_A3} {_N2}", (), 8, True),  # CUDA's list is not read
        (f"{_N2} --device npu", (), 16, False),  # Ascend, node not stated: an A3 node
        (f"ASCEND_RT_VISIBLE_DEVICES={_A2} {_N2} --device npu", (), 8, True),  # its list
        (f"{_N2} --device npu", ("gpus_per_node=8",), 8, True),  # --set wins over both
        (f"ASCEND_RT_VISIBLE_DEVICES={_A3} {_N2} --device npu", ("gpus_per_node=8",), 8, True),
    ],
)
def test_node_size_of_a_launch(
    text: str, sets: tuple[str, ...], per_node: int, refused: bool
) -> None:
    """32 ranks on 2 nodes fit nodes of 16 (Atlas A3), not of 8 (HGX, Atlas A2)."""
    layout = load_layout(LayoutSources(sglang=text, sets=sets))
    assert layout.config.gpus_per_node == per_node
    assert (
        "TOPO-NODE-GPUS" in {v.rule for v in validate(layout.config, explain=False).violations}
    ) == refused


def test_device_npu_is_the_platform_and_nodes_may_differ_in_devices() -> None:
    node = "python -m sglang.launch_server --device npu --tp 16 --nnodes 2 --dist-init-addr a:1"
    parsed = parse_sglang_command(
        f"ASCEND_RT_VISIBLE_DEVICES={_A3} {node} --node-rank 0\n"
        f"ASCEND_RT_VISIBLE_DEVICES={_A2} {node} --node-rank 1"
    )
    assert parsed.job == [] and "--device" not in parsed.ignored
    assert parsed.values == {"platform": "npu", "tp_size": 16, "nnodes": 2, "gpus_per_node": 8}
    cuda = parse_sglang_command("python -m sglang.launch_server --device cuda --tp 2")
    assert cuda.values == {"tp_size": 2} and "--device" in cuda.ignored
