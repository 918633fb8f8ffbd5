"""LoRA's launch checks (lora_hook.py of 0.5.23: check_lora_server_args and
check_lora_moe_runner_args, from check_server_args) and --lora-paths turning LoRA on.

Each row is a command line and the first error SGLang 0.5.23 raised on it, word for word, or
None where it launched: its own argument resolution and check_server_args() on CPU with
H100 facts (/work/shared/sglang_oracle/oracle.py --launch, platform cuda, 2026-12).
"""

from __future__ import annotations

from typing import Any

import pytest

from fidelity.compare import model
from meshsat.solver.inputs import parse_sglang_command
from meshsat.solver.lang.config import Config
from meshsat.solver.packs import get_pack
from meshsat.solver.validation.validate import validate

PATHS = "--lora-paths a=/tmp/a"
V2 = f"{PATHS} --lora-backend triton_v2"
LORA_TRITON = f"--moe-runner-backend lora_triton {V2}"
PDMUX = "--enable-pdmux --chunked-prefill-size -1 --disable-overlap-schedule"

#: (model, flags after --tp 4, SGLang 0.5.23's first error or None).
ROWS: tuple[tuple[str, str, str | None], ...] = (
    # --lora-paths turns LoRA on; the default back-end is csgmv.
    (
        "qwen3_moe",
        f"--moe-runner-backend lora_triton {PATHS}",
        "--moe-runner-backend lora_triton requires --lora-backend triton_v2",
    ),
    ("qwen3_moe", LORA_TRITON, None),
    (
        "qwen3_moe",
        "--moe-runner-backend lora_triton --lora-backend triton_v2",
        "--moe-runner-backend lora_triton requires --enable-lora (or --lora-paths)",
    ),
    (
        "qwen3_moe",
        "--moe-runner-backend lora_marlin --lora-paths a=/tmp/a b=/tmp/b --lora-backend "
        "triton_v2 --attn-dp-size 2",
        "--moe-runner-backend lora_marlin does not yet support DP-attention with "
        "--attn-dp-size > 1",
    ),
    # Before check_two_batch_overlap's own demand for attention DP.
    (
        "qwen3_moe",
        f"--moe-runner-backend lora_cutedsl {V2} --enable-two-batch-overlap",
        "--moe-runner-backend lora_cutedsl does not yet support two-batch overlap",
    ),
    (
        "qwen3_moe",
        f"{LORA_TRITON} --quantization modelopt_fp4",
        "--moe-runner-backend lora_triton cannot run ModelOpt NVFP4 MoE; use "
        "--moe-runner-backend lora_marlin",
    ),
    ("qwen3_moe", f"--moe-runner-backend lora_marlin {V2} --quantization modelopt_fp4", None),
    (
        "qwen3_moe",
        f"{LORA_TRITON} --quantization awq",
        "--moe-runner-backend lora_triton supports unquantized BF16, 128-block FP8 and "
        "ModelOpt NVFP4 MoE, got --quantization awq",
    ),
    ("qwen3_moe", f"{LORA_TRITON} --quantization unquant", None),
    ("qwen3_moe", f"{LORA_TRITON} --quantization fp8", None),
    # An MXFP8 checkpoint swaps the runner for flashinfer_trtllm first (R-MXFP8-RUNNER).
    ("qwen3_moe", f"{LORA_TRITON} --quantization mxfp8", None),
    (
        "qwen3_moe",
        f"{LORA_TRITON} --elastic-ep-backend mooncake --elastic-ep-join-mode recover",
        "--moe-runner-backend lora_triton does not yet support elastic EP",
    ),
    (
        "qwen3_moe",
        f"{LORA_TRITON} --moe-a2a-backend deepep",
        "--moe-runner-backend lora_triton requires Standard dispatch, got --moe-a2a-backend deepep",
    ),
    (
        "qwen3_moe",
        f"{LORA_TRITON} --ep 4 --enable-eplb",
        "--moe-runner-backend lora_triton currently requires trivial expert placement "
        "without EPLB or redundant experts",
    ),
    # triton_v2 under any other MoE runner: check_lora_server_args, only with LoRA on.
    (
        "llama",
        f"{V2} --attn-dp-size 2",
        "--lora-backend triton_v2 does not yet support DP-attention with --attn-dp-size > 1",
    ),
    ("llama", "--lora-backend triton_v2 --attn-dp-size 2", None),
    ("llama", f"{PATHS} --attn-dp-size 2", None),
    (
        "qwen3_moe",
        f"--ep 4 --moe-a2a-backend deepep --enable-two-batch-overlap {V2}",
        "--lora-backend triton_v2 does not yet support two-batch overlap",
    ),
    # PD-Multiplexing: triton_v2's mode check, before PD-Multiplexing's own demands
    # (chunked prefill and the overlap scheduler off) in check_server_args.
    ("llama", f"{V2} {PDMUX}", "--lora-backend triton_v2 does not yet support PD-multiplexing"),
    (
        "llama",
        f"{V2} --enable-pdmux",
        "--lora-backend triton_v2 does not yet support PD-multiplexing",
    ),
    (
        "qwen3_moe",
        f"{LORA_TRITON} {PDMUX}",
        "--moe-runner-backend lora_triton does not yet support PD-multiplexing",
    ),
    ("llama", f"{PATHS} {PDMUX}", None),
)


def _judge(name: str, flags: str, version: str = "0.5.23") -> Any:
    parsed = parse_sglang_command(f"python -m sglang.launch_server --model-path x --tp 4 {flags}")
    return validate(parsed.values, model(name), sglang_version=get_pack(version), explain=False)


@pytest.mark.parametrize("name,flags,error", ROWS, ids=[f"{m}:{f}" for m, f, _ in ROWS])
def test_first_error_is_sglangs(name: str, flags: str, error: str | None) -> None:
    report = _judge(name, flags)
    # Violations are in SGLang's handler order: the first is the error it stops at.
    first = report.violations[0].message if report.violations else None
    assert first == error, [v.rule for v in report.violations]


def test_lora_paths_turn_lora_on_from_0_5_18() -> None:
    """check_lora_server_args sets --enable-lora (None on the CLI) when --lora-paths names
    adapters, in 0.5.18 (`_late_resolution`) as in 0.5.19 and 0.5.23; 0.4.6.post5 has no
    --enable-lora, so nothing turns it on (and no flag of its is refused; it wants the radix
    cache off, LORA-PATHS-RADIX)."""
    for version in ("0.5.18", "0.5.19", "0.5.23"):
        report = _judge("qwen3_moe", PATHS, version)
        assert report.valid and report.resolved_env["enable_lora"] is True, version
    old = _judge("llama", f"{PATHS} --disable-radix-cache", "0.4.6.post5")
    assert old.valid and old.resolved_env["enable_lora"] is False


def test_lora_paths_are_read_as_whether_any_adapter_is_named() -> None:
    """--lora-paths takes any number of words (SGLang tests the list's truth); an adapter
    given only by a shell expansion leaves it unknown, and the next flag is read."""

    def read(flags: str) -> Any:
        return parse_sglang_command(f"python -m sglang.launch_server --model-path x {flags}")

    several = read("--lora-paths a=/x b=/y --tp 2")
    assert several.values["lora_paths"] is True and several.values["tp_size"] == 2
    assert read("--lora-paths --tp 2").values["lora_paths"] is False
    assert read("--lora-paths=a=/x").values["lora_paths"] is True
    unknown = read('--lora-paths "$ADAPTERS" --tp 2')
    assert "lora_paths" not in unknown.values and "lora_paths" in unknown.unknown_values


def test_fix_keeps_the_adapters_and_the_runner() -> None:
    """fix repairs a LoRA runner without LoRA by turning it on (with triton_v2), not by an
    MXFP8 checkpoint that swaps the runner away; it never adds or drops adapters, nor the
    rank and modules LoRA starts without them on (LORA-RANK-MODULES): with neither, LoRA
    cannot start, and the runner goes."""
    from meshsat.solver.repair.fix import fix

    shapes = {"max_lora_rank": 8, "lora_target_modules": True}
    for facts, wanted in (
        ({"lora_paths": True}, {"lora_backend": "triton_v2"}),
        (shapes, {"lora_backend": "triton_v2", "enable_lora": True}),
        ({}, {"moe_runner_backend": "auto"}),
    ):
        cfg = Config(tp_size=4, moe_runner_backend="lora_triton", **facts)
        out = fix(cfg, model("qwen3_moe"), sglang_version=get_pack("0.5.23"))
        changed = {c.field: c.new for c in out.fixes[0].changes}
        assert changed == wanted, facts


#: SGLang's own answers (0.5.18, 0.5.19 and 0.5.23 alike: each release's resolution and
#: check_server_args on CPU, its own parser reading the words, fidelity/runner.py; 0.5.23
#: also with H100 facts) to LoRA turned on with no adapter named: it needs both a rank
#: (not 0) and a module list (not empty). (flags, refused).
NO_ADAPTER: tuple[tuple[str, bool], ...] = (
    ("--enable-lora", True),
    ("--enable-lora --max-lora-rank 8", True),
    ("--enable-lora --lora-target-modules q_proj", True),
    ("--enable-lora --max-lora-rank 0 --lora-target-modules q_proj", True),
    ("--enable-lora --max-lora-rank 8 --lora-target-modules", True),
    ("--enable-lora --max-lora-rank 8 --lora-target-modules q_proj", False),
    ("--enable-lora --max-lora-rank 8 --lora-target-modules all", False),
    (f"--enable-lora {PATHS}", False),
    (f"{PATHS} --max-lora-rank 0", False),
    ("--max-lora-rank 8", False),
)


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
@pytest.mark.parametrize("flags,refused", NO_ADAPTER)
def test_lora_without_adapters_needs_a_rank_and_modules(
    version: str, flags: str, refused: bool
) -> None:
    report = _judge("llama", flags, version)
    rules = [v.rule for v in report.violations]
    assert rules == (["LORA-RANK-MODULES"] if refused else []), rules
    if refused:
        assert report.violations[0].message == (
            "When no initial --lora-paths is provided, you need to specify both "
            "--max-lora-rank and --lora-target-modules for LoRA initialization."
        )


def test_the_rank_and_modules_are_read_from_a_pasted_command() -> None:
    """--max-lora-rank is a number; --lora-target-modules a list, read as whether it names a
    module (a bare flag: none); fix prints the words of both as typed (they are facts)."""
    from meshsat.solver.inputs.launch import read_launch_commands
    from meshsat.solver.inputs.rewrite import fixed_command
    from meshsat.solver.repair.fix import fix

    line = (
        "python -m sglang.launch_server --model-path x --tp 3 --enable-lora "
        "--max-lora-rank 16 --lora-target-modules q_proj v_proj --tp 4 --dp 3 "
        "--enable-dp-attention"
    )
    values = parse_sglang_command(line).values
    assert (values["max_lora_rank"], values["lora_target_modules"]) == (16, True)
    bare = parse_sglang_command("python -m sglang.launch_server --lora-target-modules --tp 2")
    assert bare.values["lora_target_modules"] is False and bare.values["tp_size"] == 2
    # 0.4.6.post5 has neither flag.
    old = _judge("llama", "--max-lora-rank 8", "0.4.6.post5")
    assert [v.rule for v in old.violations] == ["FLAG-ABSENT-MAX-LORA-RANK"]
    result = fix(Config(**values), model("llama"), sglang_version=get_pack("0.5.23")).best
    (launch,) = read_launch_commands(line)
    printed = fixed_command(line, launch, result.config, attn_dp_spelling=True)
    assert "--max-lora-rank 16 --lora-target-modules q_proj v_proj" in printed


def test_triton_v2_refuses_rocm() -> None:
    """_check_v2_lora_modes' last mode (0.5.23, source: `get_platform().is_hip`; the
    oracle has no ROCm facts): triton_v2 under any runner, the lora_* runners' too."""
    hip = {"platform": "hip", "tp_size": 2, "lora_paths": True, "lora_backend": "triton_v2"}
    first = _rules("llama", hip)
    assert first[:1] == ["LORA-V2-ROCM"]
    runner = {**hip, "moe_runner_backend": "lora_triton"}
    assert _rules("qwen3_moe", runner)[:1] == ["MOE-LORA-ROCM"]
    assert not _rules("llama", {**hip, "platform": "cuda"})
    assert not _rules("llama", {**hip, "lora_backend": "triton"})


def test_0_4_6_post5_refuses_lora_paths_with_the_radix_cache() -> None:
    """0.4.6.post5's check_server_args asserts `lora_paths is None or disable_radix_cache`
    (a refusal, not a silent change). Its own answers (ServerArgs + check_server_args on
    CPU): refused with adapters alone or at TP 2, accepted with --disable-radix-cache or on
    a PD decode server (its __post_init__ turns the radix cache off)."""
    assert _rules("llama", {"lora_paths": True}, "0.4.6.post5") == ["LORA-PATHS-RADIX"]
    assert _rules("llama", {"lora_paths": True, "tp_size": 2}, "0.4.6.post5") == [
        "LORA-PATHS-RADIX"
    ]
    for ok in ({"disable_radix_cache": True}, {"disaggregation_mode": "decode"}):
        assert not _rules("llama", {"lora_paths": True, **ok}, "0.4.6.post5")
    assert not _rules("llama", {"disable_radix_cache": True}, "0.4.6.post5")
    # 0.5.x takes adapters with the radix cache.
    for version in ("0.5.18", "0.5.19", "0.5.23"):
        assert not _rules("llama", {"lora_paths": True}, version)


def _rules(name: str, config: dict[str, Any], version: str = "0.5.23") -> list[str]:
    report = validate(config, model(name), sglang_version=version, explain=False)
    return [v.rule for v in report.violations]
