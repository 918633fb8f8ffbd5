"""Rule packs: choosing one, what each release changes, and every back-end on every pack.

The 0.5.23 expectations restate SGLang 0.5.23's own `arg_groups/parallel_hook.py`
(`handle_deprecated_dp_attention`, `handle_data_parallelism`,
`handle_decode_context_parallelism`, `handle_context_parallelism`), not meshsat's code; the
recorded verdicts of the real release are replayed by the fidelity tests.
"""

from __future__ import annotations

import json
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from meshsat.solver import InputError, MeshsatWarning, check, validate
from meshsat.solver.backends.interp import evaluate
from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.catalogue import speculative_dflash_uno
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.packs import NEWEST, PACKS, SEED, Pack, get_pack, installed_pack
from meshsat.solver.packs.compare import compare
from tests.cli_helpers import run_cli
from tests.strategies import raw_envs

V0523 = get_pack("0.5.23")


def test_unknown_version_lists_the_known_packs() -> None:
    with pytest.raises(InputError, match=r"known packs: .*0\.5\.23"):
        get_pack("9.9.9")


def test_default_is_the_newest_pack() -> None:
    assert get_pack(None) is NEWEST is PACKS[-1]
    assert validate({}).sglang_version == NEWEST.version


@pytest.mark.parametrize(
    ("installed", "expected", "warns"),
    [("0.5.23", "0.5.23", False), ("0.6.1", "0.5.23", True), (None, NEWEST.version, True)],
)
def test_installed_version_is_read_from_metadata(
    monkeypatch: pytest.MonkeyPatch, installed: str | None, expected: str, warns: bool
) -> None:
    def version(name: str) -> str:
        assert name == "sglang"
        if installed is None:
            raise metadata.PackageNotFoundError(name)
        return installed

    monkeypatch.setattr(metadata, "version", version)
    installed_pack.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert installed_pack().version == expected
            assert installed_pack().version == expected  # said once: the answer is cached
        assert len(caught) == (1 if warns else 0)
        # One warning of meshsat's own class, naming the pack that stands in.
        assert all(issubclass(w.category, MeshsatWarning) for w in caught)
        assert all(expected in str(w.message) for w in caught)
        assert check({"tp_size": 2}).sglang_version == expected
    finally:
        installed_pack.cache_clear()


def test_attn_dp_size_is_dp_attention_on_0_5_23() -> None:
    config = {"tp_size": 8, "attn_dp_size": 8, "ep_size": 8, "moe_a2a_backend": "deepep"}
    report = validate(config, sglang_version="0.5.23")
    assert report.valid
    assert (report.derived["attn_dp"], report.derived["gpus_used"]) == (8, 8)
    seed = validate(config, sglang_version=SEED, explain=False)
    assert [v.rule for v in seed.violations] == ["FLAG-ABSENT-ATTN-DP-SIZE"]


def test_replicas_with_attention_dp_are_rejected_on_0_5_23() -> None:
    report = validate({"tp_size": 8, "attn_dp_size": 4, "dp_size": 2}, sglang_version=V0523)
    assert [v.rule for v in report.violations] == ["DP-REPLICAS-ATTN-DP"]
    assert report.violations[0].message.startswith("--dp-size 2 with --attn-dp-size 4")


def test_dsa_cp_asks_about_replicas_before_its_own_assertions_on_0_5_23() -> None:
    """The oracle (0.5.23's own resolution, QA r23): `deepseek_v32 --tp 4 --dp-size 4
    --attn-dp-size 8 --enable-prefill-cp --disaggregation-mode decode` raises "--dp-size 4
    with --attn-dp-size 8: data-parallel replicas combined with attention data parallelism
    are not supported." (model_override_base.py context_parallel_attn_dp_size), not the
    decode-role assertion model_hook.py makes after the override collection."""
    config = {"tp_size": 4, "dp_size": 4, "attn_dp_size": 8, "enable_prefill_cp": True}
    config["disaggregation_mode"] = "decode"
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory.models import model_config

    v32 = ModelSpec.from_hf_config(model_config("deepseek-ai/DeepSeek-V3.2-Exp"))
    rules = [v.rule for v in validate(config, v32, sglang_version=V0523).violations]
    assert rules[0] == "DP-REPLICAS-ATTN-DP-CP" and "CP-DSA-NOT-DECODE" in rules
    assert rules.index("DP-REPLICAS-ATTN-DP-CP") < rules.index("CP-DSA-NOT-DECODE")


def test_decode_cp_excludes_prefill_cp_on_0_5_23_only() -> None:
    config = {"tp_size": 8, "dcp_size": 2, "attn_cp_size": 2, "enable_prefill_cp": True}
    config["cp_strategy"] = "zigzag"
    assert "DCP-NO-PREFILL-CP" in {
        v.rule for v in validate(config, sglang_version=V0523).violations
    }
    assert validate(config, sglang_version=SEED).valid


def test_cp_divisibility_reads_the_attention_dp_width_on_0_5_23() -> None:
    replicas = {"tp_size": 8, "dp_size": 3, "attn_cp_size": 2}  # three engines of tp 8, cp 2
    assert validate(replicas, sglang_version=V0523).valid
    assert [v.rule for v in validate(replicas, sglang_version=SEED).violations] == ["CP-DPCP-DIV"]


@pytest.mark.parametrize("version", [SEED.version, V0523])
def test_topology_and_model_rules_are_launch_checks(version: str) -> None:
    """Every recorded release's resolution accepts what only these rules reject (fidelity
    fixtures); check_server_args() and model loading refuse it at launch."""
    report = validate({"tp_size": 8, "attn_cp_size": 3}, sglang_version=version, explain=False)
    stages = {v.rule: v.stage for v in report.violations}
    assert stages["TOPO-ATTN-TP"] == "launch" and stages["CP-TP-DIV"] == "resolution"
    nodes = validate({"tp_size": 4, "nnodes": 3}, sglang_version=version, explain=False)
    assert [(v.rule, v.stage) for v in nodes.violations] == [("TOPO-NNODES", "launch")]


def test_first_violation_is_the_first_failing_handler() -> None:
    """0.5.23 runs decode CP before context parallelism: its error is the one SGLang raises."""
    config = {"tp_size": 6, "attn_cp_size": 4, "dcp_comm_backend": "a2a"}
    report = validate(config, sglang_version=V0523, explain=False)
    assert report.violations[0].rule == "DCP-BACKEND-NEEDS-DCP"
    assert report.to_dict()["first"] == "DCP-BACKEND-NEEDS-DCP"
    assert "CP-TP-DIV" in {v.rule for v in report.violations}


def test_compare_names_what_changed() -> None:
    changes = compare(SEED, V0523)
    # Read from 0.5.23's own handlers, each measured by a targeted fidelity record.
    assert set(changes.rules_added) == {
        "DP-REPLICAS-ATTN-DP",
        "DP-REPLICAS-ATTN-DP-CP",
        "DCP-NO-PREFILL-CP",
        "CP-HIP-DSV4",
        "CP-DSV32-INTERLEAVE",
        "EEP-ATTN-REPLICA",
        "EEP-DENSE-TP-ATTN-TP",
        "EEP-DCP-ATTN-TP",
        # issue 23: check_mega_moe_compat (the other new checks are 0.5.19's too).
        *("MEGAMOE-GPU", "MEGAMOE-OVERLAP", "A2A-DEEPEP-V2-DIRECT-NODES", "DCP-DSA-PD"),
        # The NPU's decode-CP model check (tests/test_dcp_platforms.py).
        "DCP-NPU-DSA",
        # 0.5.23's nvfp4 prefill/decode back-ends (handle_nvfp4_prefill_kv_dequant_dtype).
        *("KV4-NVFP4-PREFILL-BACKEND", "KV4-NVFP4-DECODE-GPU"),
        *("KV4-NVFP4-NATIVE-SM100", "KV4-NVFP4-DECODE-BACKEND"),
        # handle_kv4_compatibility's SM100 native layout (tests/test_nvfp4_v4_hisparse.py).
        *("KV4-NVFP4-NATIVE-PD", "KV4-NVFP4-NATIVE-HICACHE"),
        *("KV4-UNIFIED-MEMORY", "KV4-NVFP4-NATIVE-SPEC-PREFIX"),
        *("KV4-NVFP4-NATIVE-SPEC-ALGORITHM", "KV4-NVFP4-NATIVE-NGRAM-BREADTH"),
        *("WEIGHT-VISION-TP-REDUCE", "WEIGHT-VISION-TP-REDUCE-CP"),
        "FLAG-CHOICE-CUDA-GRAPH-BACKEND-DECODE",
        "FLAG-CHOICE-CUDA-GRAPH-BACKEND-PREFILL",
        # _validate_prefill_complete (the PD hook): the new allocation policy's limits.
        *("PD-PREFILL-COMPLETE-ROLE", "PD-PREFILL-COMPLETE-BACKEND"),
        *("PD-PREFILL-COMPLETE-PP-CP", "PD-PREFILL-COMPLETE-ATTN-TP"),
        # lora_hook.py: the triton_v2 LoRA back-end (new) and what the LoRA runners need.
        *("LORA-V2-DP-ATTN", "LORA-V2-TBO", "MOE-LORA-BACKEND", "MOE-LORA-DP-ATTN"),
        *("MOE-LORA-TBO", "MOE-LORA-QUANT", "MOE-LORA-NVFP4", "MOE-LORA-EEP"),
        *("PD-PREFILL-COMPLETE-PDMUX", "PD-PREFILL-COMPLETE-DECODE-CACHE"),
        # _check_v2_lora_modes' PD-Multiplexing and ROCm modes (tests/test_lora.py).
        *("LORA-V2-PDMUX", "LORA-V2-ROCM", "MOE-LORA-PDMUX", "MOE-LORA-ROCM"),
        # _handle_dflash and _handle_dspark (tests/test_speculative_rules.py).
        *("SPEC-DFLASH-DEVICE", "SPEC-DFLASH-DP-LM-HEAD", "SPEC-DFLASH-DP-CP", "SPEC-DFLASH-PP"),
        *("SPEC-DSPARK-DEVICE", "SPEC-DSPARK-DP-LM-HEAD", "SPEC-DSPARK-DP-A2A"),
        *("SPEC-DSPARK-DP-CP", "SPEC-DSPARK-PP"),
        # _handle_uno (tests/test_speculative_rules.py).
        *(r.id for r in speculative_dflash_uno.UNO_0_5_23),
        # DSA decode CP refuses HiCache (_dsa_dcp_overrides); FlashInfer all-to-all needs
        # chunked prefill (validate_flashinfer_a2a_token_budget): tests/test_serving_rules.py.
        *("DCP-DSA-HICACHE", "A2A-FLASHINFER-CHUNKED"),
        # Its top-k check (tests/test_rule_qa_fixes.py).
        "DCP-DSA-TOPK",
        # handle_cache_compatibility's LMCache block (tests/test_cache_hooks.py).
        *("LMCACHE-HICACHE", "LMCACHE-RADIX", "LMCACHE-SPEC", "LMCACHE-DP-ATTN"),
        *("LMCACHE-DCP", "LMCACHE-BUFFER-ONLY", "LMCACHE-PD"),
        # validate_hisparse's feature checks (tests/test_nvfp4_v4_hisparse.py).
        *("HISPARSE-MIXED-CHUNK", "HISPARSE-SPEC-TOPK"),
    }
    # 0.5.23 accepts every runner and SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC again, drops
    # the legacy CP and rejoin flags with their rules, and scales EP with attention TP.
    assert set(changes.rules_removed) == {
        # 0.5.23's PD handler no longer refuses decode CP with a radix cache or HiCache.
        *("PD-DCP-BACKEND", "PD-DCP-RADIX", "PD-DCP-HICACHE"),
        # 0.5.23 added 'none' to --disaggregation-decode-retraction-backup.
        "FLAG-CHOICE-DISAGGREGATION-DECODE-RETRACTION-BACKUP",
        "FLAG-CHOICE-MOE-RUNNER-BACKEND",
        "FLAG-CHOICE-MOE-A2A-BACKEND",
        "FLAG-CHOICE-LORA-BACKEND",
        "METRICS-ENV",
        "CP-LEGACY-MODE-CHOICE",
        "CP-LEGACY-XOR",
        "EEP-REJOIN-DEPRECATED",
        "EEP-REJOIN-CONFLICT",
        "EEP-DP-EQ-TP",
        "CP-DSA-INTERLEAVE-DP",
        # tokenspeed_mla is an alias of cutedsl_mla (R-ATTN-ALIAS).
        *("ATTN-TOKENSPEED-MLA-BLACKWELL", "ATTN-TOKENSPEED-MLA-KV"),
        # intel_xpu prefills MLA models in 0.5.23 (0.5.18/0.5.19 refuse it).
        "ATTN-XPU-MLA-PREFILL",
    }
    assert "elastic_ep_rejoin" in changes.fields_removed
    assert "CP-DPCP-DIV" in changes.rules_changed
    assert changes.steps_added == ("R-ATTN-DP-SIZE", "R-ATTN-ALIAS", "R-NVFP4-BACKENDS")
    # 0.5.19 has the SM100 MoE-runner overrides too; 0.5.23's lists are longer.
    assert "R-SM100-MOE-RUNNER" in changes.steps_changed
    assert changes.fields_added == ("attn_dp_size", "disaggregation_decode_allocation_policy")
    assert compare(V0523, V0523).rules_changed == ()


def test_diff_command_with_a_layout(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(
        capsys,
        "diff",
        SEED.version,
        "0.5.23",
        "--set",
        "tp_size=8",
        "--set",
        "dp_size=3",
        "--set",
        "attn_cp_size=2",
        "--json",
    )
    data: dict[str, Any] = json.loads(r.out)
    assert data["layout"]["valid"] == {SEED.version: False, "0.5.23": True}
    r = run_cli(capsys, "diff", SEED.version, "0.4.0")
    assert r.code == 2 and "known packs" in r.err


@settings(max_examples=150)
@given(raw_envs())
def test_compiled_and_interpreted_packs_agree(env: dict[str, Any]) -> None:
    """Each pack compiles to the same verdicts its trees give node by node."""
    for pack in PACKS:
        c = compiled(pack)
        resolved, _ = c.resolve(env)
        fast = {pack.rules[i].id for i in c.violations(resolved, env)}
        walked = dict(env)
        for res in pack.resolutions:
            for step in res.steps:
                if evaluate(step.when, walked, env):
                    walked.update({n: evaluate(v, walked, env) for n, v in step.sets})
        slow = {
            r.id
            for r in pack.rules
            if evaluate(r.when, walked, env) and not evaluate(r.holds, walked, env)
        }
        assert fast == slow, pack.version


FLAGS_DIR = Path(__file__).resolve().parent.parent / "fidelity" / "flags"


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: p.version)
def test_each_pack_accepts_exactly_its_releases_flag_choices(pack: Pack) -> None:
    """The oracle is the release's own argparse table (fidelity/flags/<version>.json): a
    value of meshsat's field that the release's flag lists passes its argparse rules, any
    other is refused before any handler runs."""
    table = json.loads((FLAGS_DIR / f"{pack.version}.json").read_text())
    for dest in ("moe_a2a_backend", "moe_runner_backend", "load_balance_method"):
        flag = next((f for f in table["flags"] if f["dest"] == dest), None)
        if flag is None:
            continue  # spelled otherwise (0.4's --enable-deepep-moe) or absent: not a choice
        for value in SPECS[dest].choices:
            if value == SPECS[dest].default and value not in flag["choices"]:
                continue  # meshsat's spelling of "unset" (0.4's own default differs)
            report = validate({dest: value}, sglang_version=pack, explain=False)
            argparse = [
                v.rule for v in report.violations if pack.by_id[v.rule].source == "argparse"
            ]
            listed = flag is not None and value in flag["choices"]
            assert (not argparse) == listed, (pack.version, dest, value, argparse)


def test_every_value_the_release_accepts_is_input_and_none_is_a_string() -> None:
    """Issue 23: 0.5.23 takes --moe-a2a-backend ascend_tp and flashinfer_megamoe (0.5.19's
    parser refuses the latter); --elastic-ep-backend none is a string SGLang keeps, so elastic
    EP is on (its handler tests `is not None`), in the API and in a pasted command alike."""
    from meshsat.solver.inputs import parse_sglang_command

    ascend = validate({"tp_size": 4, "moe_a2a_backend": "ascend_tp"}, sglang_version=V0523)
    assert ascend.valid and ascend.resolved_env["moe_a2a_backend"] == "none"
    assert ascend.resolved_env["ep_size"] == 1  # ascend_tp is no EP-spanning backend
    mega = {"tp_size": 4, "moe_a2a_backend": "flashinfer_megamoe"}
    assert "FLAG-CHOICE-MOE-A2A-BACKEND" in {
        v.rule for v in validate(mega, sglang_version=SEED).violations
    }
    assert "FLAG-CHOICE-MOE-A2A-BACKEND" not in {
        v.rule for v in validate(mega, sglang_version=V0523).violations
    }
    parsed = parse_sglang_command(
        "python3 -m sglang.launch_server --model-path x --tp 4 --elastic-ep-backend none"
    )
    assert parsed.values["elastic_ep_backend"] == "none"
    on = validate({"tp_size": 4, "elastic_ep_backend": "none", "pp_size": 2}, sglang_version=V0523)
    assert "EEP-PP1" in {v.rule for v in on.violations}


def test_decode_cp_backend_defaults_as_each_release_resolves_it() -> None:
    """0.5.23 resolves an unset --dcp-comm-backend to a2a on CUDA with decode CP on (ag_rs
    elsewhere) and turns on Q replication for DeepSeek V3.2; 0.5.19 always says ag_rs."""
    dsv32 = {"architecture": "DeepseekV32ForCausalLM", "is_deepseek_dsa": True}
    layout = {"tp_size": 8, "dcp_size": 2}
    new = validate(layout, dsv32, sglang_version=V0523, explain=False).resolved_env
    assert (new["dcp_comm_backend"], new["dcp_replicate_q_proj"]) == ("a2a", True)
    cpu = validate({**layout, "platform": "cpu"}, sglang_version=V0523).resolved_env
    assert cpu["dcp_comm_backend"] == "ag_rs"
    assert validate(layout, sglang_version=SEED).resolved_env["dcp_comm_backend"] == "ag_rs"
