"""Memory flags written inside a pasted launch command size the memory verdict.

`--mem-fraction-static` and the other flags of `meshsat.solver.inputs.memory_flags` are not
layout fields; `validate --gpu` (and fix, deployments, the web API) read them from the
command, or a command `meshsat plan` printed with a raised fraction read MEM-FIT when
pasted back. meshsat's own option, given, wins (with a note). The oracles: plan's own rows
(the layout fits, with these KV tokens) and the memory model's API called with the flag's
value (`memory_of`). Each test failed before the command's flags were read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver import validate
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.convert import config_from_values
from meshsat.solver.inputs.memory_flags import MEMORY_FLAGS, memory_value
from meshsat.solver.inputs.sglang_cmdline import parse_sglang_command
from meshsat.solver.memory import memory_of
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.web.api import prepare
from meshsat.solver.web.work import Answer, Work
from tests.cli_helpers import Run, run_cli
from tests.memory_rows import column_rows

SERVE = "python -m sglang.launch_server"
KIMI = "moonshotai/Kimi-K2-Instruct"
#: A layout plan prints for Kimi-K2 on 8 H200 with the fraction raised to 0.895: at the
#: default (0.833) the weights and reserve exceed the GPU; at 0.85 they still do.
KIMI_LAYOUT = f"{SERVE} --model-path {KIMI} --tp-size 4 --pp-size 2 --attn-dp-size 4"


def _validate(capsys: pytest.CaptureFixture[str], command: str, *options: str) -> Run:
    return run_cli(capsys, "validate", "--sglang", command, *options, "--format", "json")


def _rules(doc: dict[str, Any]) -> list[str]:
    return [v["rule"] for v in doc["violations"]]


def _web(endpoint: str, body: dict[str, Any]) -> Answer:
    found, params = prepare(endpoint, body)
    return found.answer(body, params, Work(endpoint, 60.0))


@pytest.mark.parametrize(
    ("model", "gpu", "gpus"),
    [(KIMI, "H200", "8"), ("stepfun-ai/Step-3.5-Flash", "H200", "3")],
)
def test_every_command_plan_prints_passes_validate_with_its_kv_tokens(
    capsys: pytest.CaptureFixture[str], model: str, gpu: str, gpus: str
) -> None:
    """The round trip: each printed command, pasted into `validate --gpu`, loads (no
    MEM-FIT) with the KV tokens its row reported."""
    res = run_cli(capsys, "plan", "--model", model, "--gpu", gpu, "--gpus", gpus,
                  "--top", "1000", "--format", "json")  # fmt: skip
    assert res.code == 0, res.err
    rows = json.loads(res.out)["layouts"]
    raised = [row for row in rows if "--mem-fraction-static" in row["command"]]
    assert raised, "no row raised the fraction: the round trip checks nothing"
    for row in raised:
        checked = _validate(capsys, row["command"], "--gpu", gpu)
        doc = json.loads(checked.out)
        assert checked.code == 0, (row["command"], doc["violations"])
        memory = doc["memory"]
        assert memory["max_total_num_tokens"] * memory["pools"] == row["total_kv_tokens"]
        assert "--mem-fraction-static" not in checked.err  # read, not "not checked"


def test_meshsats_own_fraction_wins_over_the_commands_with_a_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    raised = _validate(capsys, f"{KIMI_LAYOUT} --mem-fraction-static 0.895", "--gpu", "H200")
    assert raised.code == 0, raised.out
    assert json.loads(raised.out)["memory"]["mem_fraction_static"] == 0.895
    given = ("--gpu", "H200", "--mem-fraction-static", "0.85")
    lowered = _validate(capsys, f"{KIMI_LAYOUT} --mem-fraction-static 0.895", *given)
    doc = json.loads(lowered.out)
    assert lowered.code == 1 and _rules(doc) == ["MEM-FIT"]
    assert doc["memory"]["mem_fraction_static"] == 0.85
    assert (
        "--mem-fraction-static 0.85 sizes memory; the command's --mem-fraction-static 0.895 "
        "does not" in lowered.err
    )
    given = ("--gpu", "H200", "--mem-fraction-static", "0.895")
    lifted = _validate(capsys, f"{KIMI_LAYOUT} --mem-fraction-static 0.85", *given)
    assert lifted.code == 0, lifted.out
    same = _validate(capsys, f"{KIMI_LAYOUT} --mem-fraction-static 0.895", *given)
    assert same.code == 0 and "sizes memory" not in same.err  # no note when they agree


def test_meshsats_own_context_length_wins_over_the_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = f"{SERVE} --model-path Qwen/Qwen3-8B --context-length 32768"
    theirs = _validate(capsys, command, "--gpu", "H100")
    assert json.loads(theirs.out)["memory"]["context_length"] == 32768
    ours = _validate(capsys, command, "--gpu", "H100", "--context-length", "1024")
    assert json.loads(ours.out)["memory"]["context_length"] == 1024
    assert "the command's --context-length 32768 does not" in ours.err


#: One value per memory flag, on a model where it moves the figures.
FLAG_CASES = {
    "--mem-fraction-static": ("0.7", "Qwen/Qwen3-8B", 1),
    "--context-length": ("32768", "Qwen/Qwen3-8B", 1),
    "--kv-cache-dtype": ("fp8_e4m3", "Qwen/Qwen3-8B", 1),
    "--page-size": ("64", "Qwen/Qwen3-8B", 1),
    "--swa-full-tokens-ratio": ("0.5", "openai/gpt-oss-20b", 1),
    "--mamba-full-memory-ratio": ("0.5", "Qwen/Qwen3-Next-80B-A3B-Instruct", 4),
    "--max-total-tokens": ("100k", "Qwen/Qwen3-8B", 1),
    "--cpu-offload-gb": ("4", "Qwen/Qwen3-8B", 1),
    "--dtype": ("float32", "Qwen/Qwen3-8B", 1),
}


def test_every_memory_flag_has_a_case() -> None:
    assert set(FLAG_CASES) == set(MEMORY_FLAGS)


@pytest.mark.parametrize("flag", sorted(FLAG_CASES))
def test_each_memory_flag_of_a_command_sizes_memory_as_the_model_api_does(
    capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    text, model, tp = FLAG_CASES[flag]
    command = f"{SERVE} --model-path {model} --tp {tp}"
    checked = _validate(capsys, f"{command} {flag} {text}", "--gpu", "H100")
    assert checked.code == 0, checked.out
    assert flag not in checked.err  # not among the flags "not checked by meshsat"
    keyword, kind = MEMORY_FLAGS[flag]
    # `--page-size` is a layout field too: the pool follows the page the layout resolves.
    page = {"page_size": kind(text)} if keyword == "page_size" else {}
    report = validate(config_from_values({"tp_size": tp, **page}))
    config = catalogue_config(model)
    expected = memory_of(report, config, "H100", pack="0.5.23", **{keyword: kind(text)})
    plain = memory_of(validate(config_from_values({"tp_size": tp})), config, "H100", pack="0.5.23")
    assert json.loads(checked.out)["memory"] == expected.to_dict() != plain.to_dict()


def test_a_kv_dtype_the_model_cannot_price_is_said_and_left_to_the_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """nvfp4 is an SGLang choice the memory model has no bytes for: the command is still
    judged (not refused), sized at the default dtype, and a note says so. On Blackwell:
    SGLang refuses an nvfp4 KV cache on Hopper (KV4-NVFP4-BLACKWELL)."""
    command = f"{SERVE} --model-path Qwen/Qwen3-8B"
    odd = _validate(capsys, f"{command} --kv-cache-dtype nvfp4", "--gpu", "B200")
    plain = _validate(capsys, command, "--gpu", "B200")
    assert odd.code == 0 and json.loads(odd.out)["memory"] == json.loads(plain.out)["memory"]
    assert "--kv-cache-dtype nvfp4: the memory model has no size for it" in odd.err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        # A layout field too (the KV page's rules and the speculative page-tree checks read
        # it): refused as every field's value is.
        ("--page-size big", "page_size must be a positive integer or none, got 'big'"),
        ("--cpu-offload-gb 1.5", "--cpu-offload-gb expects an integer, got '1.5'"),
        (
            "--max-total-tokens 1.5Ki",
            "--max-total-tokens expects an integer (or 1k, 1M, 1Ki, ...), got '1.5Ki'",
        ),
        (
            "--max-total-tokens 0",
            "the command's --max-total-tokens must be >= 1, got 0 (SGLang pools at most that "
            "many tokens and stops: 'Not enough memory')",
        ),
        (
            "--mem-fraction-static 1.5",
            "the command's --mem-fraction-static must be in (0, 1), got 1.5",
        ),
    ],
)
def test_a_bad_memory_value_is_one_line(
    capsys: pytest.CaptureFixture[str], flags: str, message: str
) -> None:
    res = _validate(capsys, f"{SERVE} --model-path Qwen/Qwen3-8B {flags}", "--gpu", "H100")
    assert res.code == 2 and res.out == ""
    assert res.err.strip() == f"meshsat: error: {message}"


def test_a_config_files_memory_flags_are_read_under_the_commands(tmp_path: Path) -> None:
    """SGLang's `--config FILE`: its keys are flags before the command's own."""
    (tmp_path / "serve.yaml").write_text("mem-fraction-static: 0.9\npage-size: 16\n")
    parsed = parse_sglang_command(
        f"{SERVE} --config serve.yaml --page-size 64 --tp 2", search=(tmp_path,)
    )
    assert parsed.memory == {"mem_fraction_static": 0.9, "page_size": 64}


#: A PD deployment whose servers carry different fractions: the prefill's loads, the
#: decode's does not.
PD = (
    f"{KIMI_LAYOUT} --disaggregation-mode prefill --port 30000 --mem-fraction-static 0.895\n"
    f"{KIMI_LAYOUT} --disaggregation-mode decode --port 30001 --mem-fraction-static 0.85\n"
    "python -m sglang_router.launch_router --port 8000 --pd-disaggregation "
    "--prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30001\n"
)


def _server_rules(doc: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    return {r["role"]: [(v["rule"], v["message"]) for v in r["violations"]] for r in doc["roles"]}


def test_each_server_of_a_deployment_is_sized_with_its_own_fraction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    res = _validate(capsys, PD, "--gpu", "H200")
    assert res.code == 1
    found = _server_rules(json.loads(res.out))
    assert found["prefill"] == []
    ((rule, message),) = found["decode"]
    assert rule == "MEM-FIT" and message.endswith("(mem_fraction_static 0.85)")
    web = _web("validate", {"sglang": PD, "gpu": "H200"})
    assert (web.exit, web.document) == (1, json.loads(res.out))
    both = _validate(capsys, PD, "--gpu", "H200", "--mem-fraction-static", "0.9")
    assert both.code == 0, both.out
    assert "decode@2: --mem-fraction-static 0.9 sizes memory; the command's" in both.err


def test_fix_and_the_web_api_read_the_commands_fraction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """fix kept a layout that loads at the command's fraction only after changing it."""
    command = f"{KIMI_LAYOUT} --mem-fraction-static 0.895"
    fixed = run_cli(capsys, "fix", "--sglang", command, "--gpu", "H200", "--format", "json")
    assert fixed.code == 0, fixed.out
    doc = json.loads(fixed.out)
    assert doc["valid_input"] and doc["fixes"][0]["changes"] == []
    web = _web("validate", {"sglang": command, "gpu": "H200"})
    assert web.exit == 0 and web.document["memory"]["mem_fraction_static"] == 0.895
    web_fix = _web("fix", {"sglang": command, "gpu": "H200"})
    assert web_fix.exit == 0 and web_fix.document == doc


def test_a_manifest_plan_emitted_is_sized_with_its_commands_fraction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`plan --emit lws` of a row on a raised fraction, read back as a manifest."""
    plan = ("plan", "--model", "stepfun-ai/Step-3.5-Flash", "--gpu", "H200", "--gpus", "3")
    emitted = run_cli(capsys, *plan, "--emit", "lws")
    assert emitted.code == 0 and "--mem-fraction-static" in emitted.out, emitted.err
    path = tmp_path / "lws.yaml"
    path.write_text(emitted.out)
    res = run_cli(capsys, "validate", "--sglang-file", str(path), "--gpu", "H200", "--json")
    assert res.code == 0, res.out
    (row,) = json.loads(run_cli(capsys, *plan, "--format", "json").out)["layouts"]
    memory = json.loads(res.out)["memory"]
    assert memory["max_total_num_tokens"] * memory["pools"] == row["total_kv_tokens"]


# ---- --max-total-tokens and --cpu-offload-gb, against SGLang's own arithmetic ------------

QWEN3_8B = f"{SERVE} --model-path Qwen/Qwen3-8B"
FIXTURES = Path(__file__).parent / "fixtures" / "launch_values"


def _memory(capsys: pytest.CaptureFixture[str], command: str, *options: str) -> dict[str, Any]:
    res = _validate(capsys, command, *options)
    assert res.code in (0, 1), res.err
    memory: dict[str, Any] = json.loads(res.out)["memory"]
    return memory


def test_max_total_tokens_reads_as_sglangs_own_parser() -> None:
    """The table SGLang 0.5.23's `human_readable_int` (the flag's type parser) gave for each
    text, run in the fidelity venv (null: refused)."""
    table = json.loads((FIXTURES / "human_readable_int.json").read_text())["values"]
    assert len(table) > 10
    for text, expected in table.items():
        if expected is None:
            with pytest.raises(InputError):
                memory_value("--max-total-tokens", text)
        else:
            assert memory_value("--max-total-tokens", text) == ("max_total_tokens", expected)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # min(profiled, N) // page_size * page_size (`_apply_token_constraints`, then
        # `calculate_pool_sizes_from_max_tokens`): 100,000 // 64 * 64.
        ("--max-total-tokens 100000 --page-size 64", 99_968),
        ("--max-total-tokens 25.6k", 25_600),
        ("--max-total-tokens 1Mi", None),  # above the profiled pool: the profiled value
    ],
)
def test_max_total_tokens_caps_each_ranks_pool_in_whole_pages(
    capsys: pytest.CaptureFixture[str], flags: str, expected: int | None
) -> None:
    page = "--page-size 64" if "--page-size" in flags else ""
    plain = _memory(capsys, f"{QWEN3_8B} {page}", "--gpu", "H100")
    capped = _memory(capsys, f"{QWEN3_8B} {flags}", "--gpu", "H100")
    want = plain["kv_tokens"] if expected is None else expected
    assert plain["kv_tokens"] > 100_000  # the cap binds where it is below
    assert capped["kv_tokens"] == capped["max_total_num_tokens"] == want
    assert capped["max_requests"] == want // 4096
    assert capped["weights_gib"] == plain["weights_gib"]


def test_max_total_tokens_is_per_attention_dp_rank(capsys: pytest.CaptureFixture[str]) -> None:
    """Every DP rank's scheduler sizes its own pool and reads N undivided: 2 DP-attention
    ranks hold 2 · N."""
    layout = f"{QWEN3_8B} --tp 2 --dp 2 --enable-dp-attention --max-total-tokens 50000"
    memory = _memory(capsys, layout, "--gpu", "H100")
    assert (memory["max_total_num_tokens"], memory["pools"]) == (50_000, 2)
    assert memory["max_requests"] == 2 * (50_000 // 4096)


#: Qwen3-8B's decoder layer on one rank at tp 1, bf16, in build order (hidden 4096, 32 query
#: and 8 KV heads of 128, intermediate 12288): qkv_proj, o_proj, gate_up_proj, down_proj,
#: the two norms and the per-head q/k norms.
QWEN3_8B_LAYER = [4096 * 6144 * 2, 4096 * 4096 * 2, 2 * 12288 * 4096 * 2, 12288 * 4096 * 2]
QWEN3_8B_NORMS = 2 * 4096 * 2 + 2 * 128 * 2


def _offloaded(limit: float, tp: int) -> int:
    """SGLang's `OffloaderV1`, by hand: whole parameters, layer after layer, while what it
    moved is under the limit."""
    moved = 0
    for _layer in range(36):
        for size in [t // tp for t in QWEN3_8B_LAYER] + [4096 * 2] * 2 + [128 * 2] * 2:
            if moved >= limit:
                return moved
            moved += size
    return moved


def test_the_hand_walk_is_the_layer_shapes() -> None:
    assert sum(QWEN3_8B_LAYER) + QWEN3_8B_NORMS == 385_892_864
    # 1 GiB: two whole layers, then the third's linears up to down_proj (it crosses 1 GiB).
    assert _offloaded(2**30, 1) == 3 * 385_892_864 - QWEN3_8B_NORMS


@pytest.mark.parametrize("tp", [1, 2])
def test_cpu_offload_takes_whole_parameters_of_each_rank_off_the_gpu(
    capsys: pytest.CaptureFixture[str], tp: int
) -> None:
    """Per rank (one offloader per rank's process) and in GiB (`cpu_offload_gb * 1024**3`):
    at tp 2 a GB of 1e9 would stop one parameter earlier (o_proj, not gate_up_proj)."""
    layout = f"{QWEN3_8B} --tp {tp}"
    plain = _memory(capsys, layout, "--gpu", "H100")
    offload = _memory(capsys, f"{layout} --cpu-offload-gb 1", "--gpu", "H100")
    moved = _offloaded(2**30, tp)
    if tp == 2:
        assert moved != _offloaded(1e9, tp)
    assert plain["weights_gib"] - offload["weights_gib"] == pytest.approx(moved / 2**30, abs=1e-9)
    # SGLang's pool: the rest of pre·fraction after the (smaller) weights, per cell.
    rest = (plain["pre_load_gib"] * plain["mem_fraction_static"] - offload["weights_gib"]) * 2**30
    assert offload["kv_tokens"] == int(rest // plain["kv_bytes_per_token"]) > plain["kv_tokens"]


def test_cpu_offload_turns_does_not_fit_into_fits(capsys: pytest.CaptureFixture[str]) -> None:
    """15.3 GiB of weights on a 16 GiB GPU leave no pool; 8 GiB offloaded leave one."""
    plain = _validate(capsys, QWEN3_8B, "--gpu-memory", "16GiB")
    assert plain.code == 1 and _rules(json.loads(plain.out)) == ["MEM-FIT"]
    offload = _validate(capsys, f"{QWEN3_8B} --cpu-offload-gb 8", "--gpu-memory", "16GiB")
    assert offload.code == 0, offload.out
    assert json.loads(offload.out)["memory"]["kv_tokens"] > 0
    none = _memory(capsys, f"{QWEN3_8B} --cpu-offload-gb -3", "--gpu", "H100")
    assert none == _memory(capsys, QWEN3_8B, "--gpu", "H100")  # SGLang offloads only if > 0


def test_the_streaming_columns_cap_as_the_full_value_does() -> None:
    """enumerate's and plan's columns (`row_reader`) against `MemoryModel.of`, capped."""
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory import MemoryModel

    model = "Qwen/Qwen3-30B-A3B"
    mm = MemoryModel(model, "H100", max_total_tokens=150_010, page_size=16)
    capped = 0
    spec = ModelSpec.from_hf_config(catalogue_config(model))
    # The layouts carry the page they resolve: the typed 16, as a launch sets it.
    for (_, tokens, _, _), _, m in column_rows(mm, 4, spec, {"page_size": 16}):
        assert abs(tokens - m.kv_tokens) <= 16  # float summation order, in whole pages
        assert tokens <= 150_000  # 150,010 // 16 · 16
        capped += tokens == m.kv_tokens == 150_000
    assert capped > 5


def test_the_estimate_admits_from_the_capped_pool() -> None:
    """The performance estimate reads its KV tokens from the memory model: a cap of 20,480
    tokens holds 20,480 // (1,024 + 1,024) = 10 whole contexts, and 64 requests queue
    beyond the 11 the scheduler admits (`admission_capacity`)."""
    from meshsat.solver.memory import Parallel
    from meshsat.solver.perf import PerfModel, Workload

    w = Workload(isl=1024, osl=1024)
    plain = PerfModel("Qwen/Qwen3-8B", "H100", w, engine="roofline")
    capped = PerfModel(
        "Qwen/Qwen3-8B", "H100", w, engine="roofline", memory_options={"max_total_tokens": 20480}
    )
    assert capped.estimate(Parallel()).kv_concurrency == 10
    assert plain.estimate(Parallel()).kv_concurrency > 100
    slow, fast = (m.estimate(Parallel(), concurrency=64) for m in (capped, plain))
    assert slow.ttft_ms > 2 * fast.ttft_ms


def test_dtype_serves_unquantized_weights_and_an_auto_kv_cache_in_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SGLang's `_get_and_verify_dtype`: float32 (or `float`) upcasts a bf16 checkpoint, so
    every weight and the `auto` KV cache take 4 bytes: Qwen3-8B's cell is 36 layers · 8 KV
    heads · (128 + 128) · 4 bytes; half, float16 and bfloat16 are the checkpoint's 2."""
    plain = _memory(capsys, QWEN3_8B, "--gpu", "H100")
    for name in ("half", "float16", "bfloat16", "auto"):
        assert _memory(capsys, f"{QWEN3_8B} --dtype {name}", "--gpu", "H100") == plain
    for name in ("float32", "float"):
        wide = _memory(capsys, f"{QWEN3_8B} --dtype {name}", "--gpu", "H100")
        assert wide["model_weights_gib"] == 2 * plain["model_weights_gib"]
        assert wide["kv_bytes_per_token"] == 36 * 8 * 256 * 4 == 2 * plain["kv_bytes_per_token"]
    fp8_kv = _memory(
        capsys, f"{QWEN3_8B} --dtype float32 --kv-cache-dtype fp8_e4m3", "--gpu", "H100"
    )
    assert fp8_kv["kv_bytes_per_token"] == 36 * 8 * 256 * 1  # an explicit KV dtype stays
    fits = _validate(capsys, QWEN3_8B, "--gpu-memory", "32GiB")
    wide_32 = _validate(capsys, f"{QWEN3_8B} --dtype float32", "--gpu-memory", "32GiB")
    assert fits.code == 0 and wide_32.code == 1
    assert _rules(json.loads(wide_32.out)) == ["MEM-FIT"]


def test_auto_serves_a_float32_checkpoint_in_16_bits_and_float32_does_not() -> None:
    """`auto` downcasts a float32 config to float16 (bfloat16 for Gemma); an explicit
    float32 keeps it."""
    from meshsat.solver.memory import MemoryModel, Parallel

    config = {**catalogue_config("Qwen/Qwen3-8B"), "torch_dtype": "float32"}
    auto = MemoryModel(config, "H100").of(Parallel())
    wide = MemoryModel(config, "H100", dtype="float32").of(Parallel())
    assert auto.kv_bytes_per_token == 36 * 8 * 256 * 2
    assert wide.kv_bytes_per_token == 36 * 8 * 256 * 4


def test_from_0_5_23_the_offloader_keeps_mlas_kv_b_proj_on_the_gpu() -> None:
    """0.5.23's `_get_resident_parameter_ids` keeps `kv_b_proj` (w_kc/w_vc are derived from
    it on its device); 0.5.19's offloader moves it. With a limit above the whole stage the
    difference is every layer's kv_b_proj shard: DeepSeek-V3 in bf16 at tp 8, 61 layers of
    512 · 128 heads · (128 + 128) · 2 bytes / 8."""
    from meshsat.solver.memory import Parallel
    from meshsat.solver.memory.facts import facts_from_config
    from meshsat.solver.memory.gpus import gpu
    from meshsat.solver.memory.weights import WeightModel

    config = dict(catalogue_config("deepseek-ai/DeepSeek-V3"))
    config.pop("quantization_config", None)
    facts = facts_from_config(config)
    p = Parallel(tp=8, attn_tp=8, moe_tp=8)
    moved = {
        pack: WeightModel(facts, gpu("H200"), pack).offloaded(p, 0, 1e15)
        for pack in ("0.5.19", "0.5.23")
    }
    assert moved["0.5.19"] - moved["0.5.23"] == 61 * 512 * 128 * 256 * 2 // 8
