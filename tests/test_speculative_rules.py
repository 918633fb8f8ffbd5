"""Speculative decoding's checks and silent changes (solver/catalogue/speculative.py), against
each release's own answers.

The resolution corpus (tests/fixtures/fidelity/) predates these fields, so the answers of
every release's own argument resolution on 110 layouts around them (NGRAM and STANDALONE with
attention DP, NGRAM's and EAGLE's trees over pages on each back-end, NEXTN, the automatic and
the adjusted draft parameters, on Llama, DeepSeek V3 and V3.2 and Qwen3-MoE, on CPU and, for
0.5.23, on an H100) are kept in tests/fixtures/speculative/answers.json: the verdict, the step
that raised and its words, and what SGLang resolved the speculative fields to.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver import validate
from meshsat.solver.catalogue.speculative_names import (
    KNOWN_ALGORITHMS,
    KNOWN_ALGORITHMS_0_5_23,
    spellings,
)
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import get_pack

FIXTURE = Path(__file__).parent / "fixtures" / "speculative" / "answers.json"
MODELS = Path(__file__).parent.parent / "fidelity" / "models"
ANSWERS: dict[str, list[dict[str, Any]]] = json.loads(FIXTURE.read_text("utf-8"))["releases"]
CASES = [(v, i, row) for v, rows in ANSWERS.items() for i, row in enumerate(rows)]


@cache
def _model(name: str) -> ModelSpec:
    return ModelSpec.from_file(MODELS / name / "config.json")


def _config(version: str, row: dict[str, Any]) -> dict[str, Any]:
    """The layout as the release was given it: before 0.5.23 attention DP is
    `--enable-dp-attention --dp-size N`; a CUDA answer is an H100's."""
    cfg = dict(row["config"])
    if version != "0.5.23" and "attn_dp_size" in cfg:
        cfg.update(enable_dp_attention=True, dp_size=cfg.pop("attn_dp_size"))
    cfg["platform"] = row["platform"]
    if row["platform"] == "cuda":
        cfg["gpu_sm"] = 90
    return cfg


def _opens_with(ours: str, theirs: str) -> bool:
    """Our message opens with the release's words (its first 30 characters; a bare assert
    is `AssertionError()` in one recorder and `AssertionError` in the other)."""
    return ours.startswith(theirs.replace("()", "")[:30])


@pytest.mark.parametrize(("version", "i", "row"), CASES, ids=[f"{v}-{i}" for v, i, _ in CASES])
def test_the_release_answers_as_recorded(version: str, i: int, row: dict[str, Any]) -> None:
    pack = get_pack(version)
    report = validate(
        _config(version, row), _model(row["model"]), explain=False, sglang_version=pack
    )
    errors = [v for v in report.violations if pack.stage(v.rule) == "resolution"]
    assert (not errors) == row["accepted"], (row, [v.rule for v in errors])
    if not row["accepted"]:
        first = errors[0]
        assert first.source == row["step"], (row, first.rule)
        assert _opens_with(first.message, row["error"]), (row, first.message)
        return
    for name, value in row["resolved"].items():
        ours = report.resolved_env[name]
        if name == "page_size" and value == 1 and ours is None:
            continue  # unset: SGLang's default, 1
        assert ours == value, (row, name, ours)


def test_the_answers_hold_each_check_and_both_verdicts() -> None:
    """The fixture reaches what it is for, on every release that has it."""
    for version, rows in ANSWERS.items():
        said = " ".join(r.get("error", "") for r in rows)
        assert 0.3 < sum(r["accepted"] for r in rows) / len(rows) < 0.7, version
        assert "AssertionError" in said and "'>' not supported" in said, version
        if version != "0.4.6.post5":
            for words in (
                "ngram speculative decoding does not support dp",
                "standalone",
                "> 1 with page_size(",
                "speculative_eagle_topk > 1 with page_size > 1",
            ):
                assert words in said, (version, words)


def test_0_4_6_post5_makes_a_tree_over_pages_a_chain() -> None:
    """0.4.6.post5 does not refuse EAGLE's tree over pages: top-k 1, then steps + 1 tokens."""
    tree = {
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 4,
        "speculative_num_draft_tokens": 8,
        "page_size": 16,
        "platform": "cpu",
    }
    old = validate(tree, _model("llama"), explain=False, sglang_version="0.4.6.post5")
    assert old.valid
    assert (
        old.resolved_env["speculative_eagle_topk"],
        old.resolved_env["speculative_num_draft_tokens"],
    ) == (1, 4)
    new = validate(tree, _model("llama"), explain=False, sglang_version="0.5.19")
    assert [v.rule for v in new.violations] == ["SPEC-EAGLE-PAGE-TREE"]


def _tree(**extra: Any) -> dict[str, Any]:
    """EAGLE with a draft tree (top-k 2) on an H100, no --page-size typed."""
    return {
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 2,
        "speculative_num_draft_tokens": 4,
        "platform": "cuda",
        "gpu_sm": 90,
        **extra,
    }


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
@pytest.mark.parametrize(
    "backends",
    [
        {"attention_backend": "flashmla"},
        # Equal split back-ends are the base one (R-ATTN-BACKEND), which then pages by 64.
        {"prefill_attention_backend": "flashmla", "decode_attention_backend": "flashmla"},
    ],
    ids=["base", "split"],
)
def test_the_page_tree_check_reads_the_page_the_back_end_forces(
    version: str, backends: dict[str, str]
) -> None:
    """flashmla runs pages of 64 with no --page-size typed (R-PAGE-SIZE), so a tree on it is
    over pages and refused, as SGLang 0.5.23 refuses it (shared oracle, H100: "got
    attention_backend='flashmla'"); a chain on it is accepted. The page is resolved before the
    speculative checks read it: unresolved, the unset page (1) would let the tree pass."""
    model = _model("deepseek_v3")
    tree = validate(_tree(**backends), model, explain=False, sglang_version=version)
    assert tree.resolved_env["page_size"] == 64
    assert tree.resolved_env["attention_backend"] == "flashmla"
    assert [v.rule for v in tree.violations] == ["SPEC-EAGLE-PAGE-TREE"]
    assert "got attention_backend='flashmla'" in tree.violations[0].message
    chain = _tree(**backends, speculative_eagle_topk=1)
    assert validate(chain, model, explain=False, sglang_version=version).valid


def test_0_4_6_post5_makes_a_tree_over_a_forced_page_a_chain() -> None:
    """0.4.6.post5 resolves flashmla's page (64) before its speculative adjustments: the tree
    with no --page-size typed becomes a chain, top-k 1 and steps + 1 draft tokens."""
    old = validate(
        _tree(attention_backend="flashmla"),
        _model("deepseek_v3"),
        explain=False,
        sglang_version="0.4.6.post5",
    )
    assert old.valid, [v.rule for v in old.violations]
    env = old.resolved_env
    assert (
        env["page_size"],
        env["speculative_eagle_topk"],
        env["speculative_num_draft_tokens"],
    ) == (
        64,
        1,
        4,
    )


def _first(version: str, name: str, **config: Any) -> tuple[str, str] | None:
    """The first error meshsat reports (rule, message), or None."""
    report = validate(config, _model(name), explain=False, sglang_version=version)
    return (report.violations[0].rule, report.violations[0].message) if report.violations else None


H100: dict[str, Any] = {"platform": "cuda", "gpu_sm": 90}
_TREE = {"speculative_num_steps": 3, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}

#: SGLang 0.5.23's own first error on lower- and mixed-case names (oracle --launch, H100
#: facts): (algorithm, layout, the words it opens with).
CASE_ANSWERS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("ngram", {"attn_dp_size": 2, "tp_size": 2}, "Currently ngram speculative decoding"),
    ("Ngram", {"attn_dp_size": 2, "tp_size": 2}, "Currently ngram speculative decoding"),
    ("standalone", {"attn_dp_size": 2, "tp_size": 2}, "Currently standalone speculative"),
    ("eagle", {"attention_backend": "trtllm_mha", **_TREE}, "trtllm_mha backend only supports"),
    ("nextn", {"speculative_eagle_topk": 4}, "AssertionError"),
    ("Eagle", {"speculative_num_steps": 3}, "'>' not supported between"),
    ("eagle3", {"attention_backend": "flashmla", **_TREE}, "speculative_eagle_topk > 1 with"),
    ("ngram", {"page_size": 16, "attention_backend": "fa3"}, "speculative_eagle_topk(10) > 1"),
)


@pytest.mark.parametrize(("name", "layout", "words"), CASE_ANSWERS)
def test_lower_case_names_are_sglangs_upper_case_ones(
    name: str, layout: dict[str, Any], words: str
) -> None:
    """handle_speculative_decoding upper-cases the name first (0.5.18 to 0.5.23, read in
    each release's speculative_hook.py; 0.5.23's answers measured): every check reads NGRAM,
    EAGLE, ... (R-SPEC-CASE); 0.4.6.post5's argparse takes the upper-case choices only.
    0.5.18 and 0.5.19 answer as they do to the upper-case name."""
    first = _first("0.5.23", "llama", speculative_algorithm=name, **layout, **H100)
    assert first is not None and _opens_with(first[1], words), first
    assert _first("0.5.23", "llama", speculative_algorithm=name, **H100) is None
    for version in ("0.5.18", "0.5.19"):
        cfg = dict(layout)
        if "attn_dp_size" in cfg:
            cfg.update(enable_dp_attention=True, dp_size=cfg.pop("attn_dp_size"))
        upper = _first(version, "llama", speculative_algorithm=name.upper(), **cfg, **H100)
        assert upper is not None and upper[0].startswith(("SPEC-", "ATTN-")), (version, upper)
        assert _first(version, "llama", speculative_algorithm=name, **cfg, **H100) == upper
    old = _first("0.4.6.post5", "llama", speculative_algorithm="eagle", **H100)
    assert old is not None and old[0] == "FLAG-CHOICE-SPECULATIVE-ALGORITHM"


def test_the_resolved_name_is_upper_case() -> None:
    report = validate({"speculative_algorithm": "nextn", **H100}, _model("llama"), explain=False)
    assert report.resolved_env["speculative_algorithm"] == "EAGLE"
    spec = [n.resolution for n in report.notes if n.resolution.startswith("R-SPEC-")]
    assert spec[:2] == ["R-SPEC-CASE", "R-SPEC-NEXTN"]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_every_spelling_the_unknown_check_takes_is_upper_cased(version: str) -> None:
    """R-SPEC-CASE and SPEC-UNKNOWN-ALGORITHM read one list of names per release: every
    spelling of a known name (camel NextN, NGram, DFlash, DSpark included) resolves to the
    upper-case name, NEXTN then to EAGLE, and no spelling passes the check un-cased."""
    names = KNOWN_ALGORITHMS_0_5_23 if version == "0.5.23" else KNOWN_ALGORITHMS
    for name in names:
        for typed in (name, *spellings(name)):
            r = validate({"speculative_algorithm": typed}, _model("llama"), sglang_version=version)
            want = "EAGLE" if name == "NEXTN" else typed if name == "NONE" else name
            assert r.resolved["speculative_algorithm"] == want, (version, typed)
            assert "SPEC-UNKNOWN-ALGORITHM" not in {v.rule for v in r.violations}, typed
    # UNO is a name from 0.5.23 on (SGLang 0.5.19: "Unknown speculative algorithm name").
    uno = _first("0.5.19", "llama", speculative_algorithm="Uno", **H100)
    assert uno is not None and uno[0] == "SPEC-UNKNOWN-ALGORITHM"


def test_nextn_in_camel_case_is_eagle() -> None:
    """`NextN` (SGLang's docs spell it so) is NEXTN, so EAGLE: it takes EAGLE's automatic
    parameters ((5, 4, 8) for Llama), as SGLang 0.5.23 accepted it (oracle --launch)."""
    r = validate(
        {"speculative_algorithm": "NextN", **H100}, _model("llama"), sglang_version="0.5.23"
    )
    assert r.valid and r.resolved["speculative_algorithm"] == "EAGLE"
    assert r.resolved["speculative_eagle_topk"] == 4


#: SGLang 0.5.23's verdicts (oracle --launch, Llama, steps 3 / top-k 1 / 4 draft tokens,
#: PD-Multiplexing with chunked prefill off): on CPU the EAGLE family and NGRAM turn the
#: overlap scheduler off, so PD-Multiplexing starts; FROZEN_KV_MTP keeps it, as CUDA does.
PDMUX_ANSWERS: tuple[tuple[str, str, bool], ...] = (
    ("EAGLE", "cpu", True),
    ("NextN", "cpu", True),
    ("ngram", "cpu", True),
    ("Eagle3", "cpu", True),
    ("FROZEN_KV_MTP", "cpu", False),
    ("EAGLE", "cuda", False),
    ("NGram", "cuda", False),
    ("FROZEN_KV_MTP", "cuda", False),
)


@pytest.mark.parametrize(("algorithm", "platform", "accepted"), PDMUX_ANSWERS)
def test_speculative_decoding_on_cpu_turns_the_overlap_scheduler_off(
    algorithm: str, platform: str, accepted: bool
) -> None:
    """R-SPEC-OVERLAP (`_disable_overlap_schedule_for_cpu`) resolves the flag that
    PDMUX-OVERLAP reads."""
    config: dict[str, Any] = {
        "platform": platform,
        "speculative_algorithm": algorithm,
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
    }
    if platform == "cuda":
        config["gpu_sm"] = 90
    plain = validate(config, _model("llama"), sglang_version="0.5.23")
    assert plain.resolved["disable_overlap_schedule"] is accepted
    pdmux = {**config, "enable_pdmux": True, "chunked_prefill_size": -1}
    report = validate(pdmux, _model("llama"), sglang_version="0.5.23")
    assert report.valid is accepted, [v.rule for v in report.violations]


def test_eagle_turns_the_overlap_scheduler_off_everywhere_in_0_4() -> None:
    """0.4.6.post5's `__post_init__`: EAGLE and EAGLE3 run without it on any platform."""
    r = validate(
        {"speculative_algorithm": "EAGLE", **H100}, _model("llama"), sglang_version="0.4.6.post5"
    )
    assert r.resolved["disable_overlap_schedule"] is True
    r = validate(
        {"speculative_algorithm": "EAGLE", **H100}, _model("llama"), sglang_version="0.5.23"
    )
    assert not r.resolved["disable_overlap_schedule"]


def test_ngram_is_refused_on_npu() -> None:
    """`_handle_ngram` opens with the device (0.5.18 and 0.5.19: CUDA or CPU; 0.5.23 adds
    XPU; ROCm's device is cuda): read in each release's source, the oracle has no NPU."""
    for version, devices in (
        ("0.5.18", "CUDA or CPU"),
        ("0.5.19", "CUDA or CPU"),
        ("0.5.23", "CUDA, CPU, or XPU"),
    ):
        first = _first(version, "llama", speculative_algorithm="ngram", platform="npu")
        assert first == (
            "SPEC-NGRAM-DEVICE",
            f"Ngram speculative decoding only supports {devices} devices.",
        )
        for platform in ("cuda", "hip", "cpu"):
            assert (
                _first(version, "llama", speculative_algorithm="NGRAM", platform=platform) is None
            )


_DP = {"tp_size": 2, "attn_dp_size": 2}
#: SGLang 0.5.23's first error (oracle --launch; `None`: it went past every layout check
#: to the draft checkpoint, which meshsat assumes given), on CPU and with H100 facts.
DRAFT_ANSWERS: tuple[tuple[str, str, dict[str, Any], str | None], ...] = (
    ("DFLASH", "cpu", {}, "DFLASH speculative decoding is not supported by SRTPlatform"),
    ("dspark", "cpu", {"pp_size": 2}, "DSpark speculative decoding only supports CUDA"),
    ("DFLASH", "cuda", {}, None),
    ("DFLASH", "cuda", {"pp_size": 2}, "Currently DFLASH speculative decoding only supports pp"),
    ("dflash", "cuda", _DP, "DFLASH with dp attention requires --enable-dp-lm-head."),
    ("DFLASH", "cuda", {**_DP, "enable_dp_lm_head": True}, None),
    (
        "DFLASH",
        "cuda",
        {**_DP, "tp_size": 4, "attn_cp_size": 2, "enable_dp_lm_head": True},
        "DFLASH with dp attention does not support context parallel.",
    ),
    ("DSPARK", "cuda", {}, None),
    ("DSPARK", "cuda", {"pp_size": 2}, "DSpark pipeline parallelism requires PD prefill"),
    ("DSPARK", "cuda", {"pp_size": 2, "disaggregation_mode": "prefill"}, None),
    ("DSPARK", "cuda", _DP, "DSpark with dp attention requires --enable-dp-lm-head."),
    (
        "dspark",
        "cuda",
        {**_DP, "tp_size": 4, "attn_cp_size": 2, "enable_dp_lm_head": True},
        "DSpark with dp attention does not support context parallel (attn_cp_size=2).",
    ),
)


@pytest.mark.parametrize(("name", "platform", "layout", "error"), DRAFT_ANSWERS)
def test_dflash_and_dspark_check_the_layout_0_5_23(
    name: str, platform: str, layout: dict[str, Any], error: str | None
) -> None:
    facts = H100 if platform == "cuda" else {"platform": "cpu"}
    first = _first("0.5.23", "llama", speculative_algorithm=name, **layout, **facts)
    assert (first and first[1]) == error or (
        error is not None and first is not None and _opens_with(first[1], error)
    ), first


def test_dspark_with_attention_dp_takes_three_all_to_all_backends() -> None:
    """0.5.23 on Qwen3-MoE with H100 facts: deepep refused, none/mori/megamoe go on."""
    moe = {"tp_size": 2, "ep_size": 2, "attn_dp_size": 2, "enable_dp_lm_head": True, **H100}
    first = _first(
        "0.5.23", "qwen3_moe", speculative_algorithm="DSPARK", moe_a2a_backend="deepep", **moe
    )
    assert first is not None and first[0] == "SPEC-DSPARK-DP-A2A"
    for backend in ("mori", "megamoe"):
        rules = _first(
            "0.5.23", "qwen3_moe", speculative_algorithm="DSPARK", moe_a2a_backend=backend, **moe
        )
        assert rules is None or not rules[0].startswith("SPEC-DSPARK"), (backend, rules)
    # 0.5.19 has no such checks in meshsat's packs (its handlers differ: left alone).
    assert _first("0.5.19", "llama", speculative_algorithm="DFLASH", platform="cpu") is None


#: SGLang 0.5.23's verdict on an EAGLE tree (top-k 4) with trtllm_mha as one phase's back-end
#: only (oracle --launch, H100 facts; 0.5.19 answers the same): its check reads
#: `attention_backends_of`, the resolved (prefill, decode) pair. (base, prefill, decode,
#: refused).
SPLIT_TRTLLM: tuple[tuple[str | None, str | None, str | None, bool], ...] = (
    (None, None, "trtllm_mha", True),
    (None, "trtllm_mha", None, True),
    ("fa3", "trtllm_mha", "fa3", True),
    ("fa3", "fa3", "trtllm_mha", True),
    ("triton", None, "fa3", False),
    (None, "fa3", "fa3", False),
)


@pytest.mark.parametrize(("base", "prefill", "decode", "refused"), SPLIT_TRTLLM)
@pytest.mark.parametrize("version", ["0.5.19", "0.5.23"])
def test_trtllm_mha_as_one_phases_back_end_takes_top_k_1(
    version: str, base: str | None, prefill: str | None, decode: str | None, refused: bool
) -> None:
    split = {"prefill_attention_backend": prefill, "decode_attention_backend": decode}
    layout = {"attention_backend": base, **split, **_TREE, **H100}
    first = _first(version, "llama", speculative_algorithm="EAGLE", **layout)
    assert (first is not None and first[0] == "SPEC-TRTLLM-MHA-TOPK") == refused, first
    chain = {**layout, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    assert _first(version, "llama", speculative_algorithm="EAGLE", **chain) is None


_UNO = {"uno_lora_path": True, "speculative_num_draft_tokens": 4}
_UNO_TREE = {**_UNO, "speculative_eagle_topk": 4, "speculative_num_steps": 3}
_FA3 = {"attention_backend": "fa3"}
#: SGLang 0.5.23's first error on UNO layouts (oracle --launch, Llama, H100 facts unless
#: `platform` says CPU; None: launched). meshsat's words are the release's, but for a tree
#: whose Q overflows its capacity: SGLang says so first, meshsat (which does not model the
#: capacity) says the parent-list check, which every such layout fails too.
UNO_ANSWERS: tuple[tuple[dict[str, Any], str | None], ...] = (
    (_UNO, None),
    ({**_UNO, "speculative_num_steps": 3, "speculative_eagle_topk": 1}, None),
    ({**_UNO, "platform": "cpu"}, "UNO only supports CUDA."),
    ({"speculative_num_draft_tokens": 4}, "UNO requires --uno-lora-path."),
    ({"uno_lora_path": True}, "UNO requires --speculative-num-draft-tokens to be a positive"),
    ({**_UNO, "tp_size": 2}, "UNO requires TP=PP=1."),
    ({**_UNO, "pp_size": 2}, "UNO requires TP=PP=1."),
    ({**_UNO, "tp_size": 2, "attn_dp_size": 2}, "UNO requires TP=PP=1."),
    ({**_UNO, "dp_size": 2}, None),
    ({**_UNO, "enable_lora": True}, "UNO does not support public Multi-LoRA serving."),
    ({**_UNO, "lora_paths": True}, "UNO does not support public Multi-LoRA serving."),
    (
        {**_UNO, "attention_backend": "triton"},
        "UNO requires FA3 for both prefill and decode attention; got prefill='triton', "
        "decode='triton'.",
    ),
    (
        {**_UNO, **_FA3, "decode_attention_backend": "triton"},
        "UNO requires FA3 for both prefill and decode attention; got prefill='fa3', "
        "decode='triton'.",
    ),
    (
        {**_UNO, "attention_backend": "trtllm_mha"}
        | {"prefill_attention_backend": "fa3", "decode_attention_backend": "fa3"},
        None,
    ),
    # A tree (top-k above 1) on an unset back-end: Hopper's default is then FlashInfer or
    # Triton (the oracle has no FlashInfer: Triton), never FA3 (R-ATTN-BACKEND: FlashInfer).
    ({**_UNO_TREE}, "UNO requires FA3 for both prefill and decode attention"),
    ({**_UNO_TREE, **_FA3}, None),
    (
        {**_UNO_TREE, **_FA3, "speculative_num_steps": None},
        "UNO tree mode requires --speculative-num-steps so its draft width F",
    ),
    (
        {**_UNO_TREE, **_FA3, "speculative_num_draft_tokens": 2},
        "UNO tree mode requires Q >= F; got Q=2, F=4.",
    ),
    (
        {**_UNO_TREE, **_FA3, "speculative_num_draft_tokens": 130},
        "UNO tree mode currently supports at most Q=128 verify nodes, got Q=130.",
    ),
    (
        {
            **_UNO_TREE,
            **_FA3,
            "speculative_eagle_topk": 17,
            "speculative_num_steps": 9,
            "speculative_num_draft_tokens": 128,
        },
        "UNO tree mode currently supports Q*K <= 2048; got Q*K=128*17=2176.",
    ),
    (
        {**_UNO_TREE, **_FA3, "speculative_num_steps": 2, "speculative_num_draft_tokens": 8},
        "UNO tree mode cannot represent the requested Q in EAGLE's parent-list ABI: Q-1=7 "
        "exceeds K*(F-2)+1=5 for F=3, K=4.",
    ),
    (
        {**_UNO_TREE, **_FA3, "enable_pdmux": True, "chunked_prefill_size": -1}
        | {"disable_overlap_schedule": True},
        "UNO tree mode does not yet support PDMux.",
    ),
    (
        {**_UNO_TREE, **_FA3, "enable_two_batch_overlap": True},
        "UNO tree mode does not yet support two-batch overlap.",
    ),
)


@pytest.mark.parametrize(("layout", "error"), UNO_ANSWERS)
def test_uno_checks_the_layout_0_5_23(layout: dict[str, Any], error: str | None) -> None:
    cfg = {**H100, **{k: v for k, v in layout.items() if v is not None}}
    for name in ("UNO", "uno"):
        first = _first("0.5.23", "llama", speculative_algorithm=name, **cfg)
        assert (first and first[1]) == error or (
            error is not None and first is not None and _opens_with(first[1], error)
        ), first


_MIMO = "MiMoV2FlashForCausalLM"
_UNO_FA3_WORDS = "UNO requires FA3 for both prefill and decode attention; got "
#: SGLang 0.5.23's answer on UNO's back-end check off Hopper and on other models (oracle
#: --launch, each GPU class's platform facts, FlashInfer installed): `_handle_uno` runs after
#: the attention handler, so it reads the resolved pair, the GPU's and model's default
#: included (R-ATTN-BACKEND); MiMo V2's FlashInfer-or-Triton default (its sinks decide, which
#: meshsat does not read) is not FA3 either way. (gpu_sm, model, layout, the pair it names,
#: or None: launched.)
UNO_DEFAULTS: tuple[tuple[int, str, dict[str, Any], str | None], ...] = (
    (90, "deepseek_v3", _UNO_TREE, None),
    (90, "mimo_v2", _UNO, None),
    (90, "mimo_v2", _UNO_TREE, "prefill='flashinfer', decode='flashinfer'."),
    (90, "deepseek_v32", _UNO, "prefill='dsa', decode='dsa'."),
    (100, "llama", _UNO, "prefill='flashinfer', decode='flashinfer'."),
    (100, "deepseek_v3", _UNO, "prefill='trtllm_mla', decode='trtllm_mla'."),
    (100, "mimo_v2", _UNO, "prefill='fa4', decode='fa4'."),
    (100, "mimo_v2", {**_UNO, "prefill_attention_backend": "fa3"}, "prefill='fa3', decode='fl"),
    (100, "mimo_v2", {**_UNO, **_FA3}, None),
    (120, "deepseek_v3", _UNO, "prefill='triton', decode='triton'."),
    (120, "mimo_v2", _UNO, "prefill='flashinfer', decode='flashinfer'."),
    (80, "mimo_v2", {**_UNO, "decode_attention_backend": "fa3"}, "prefill='flashinfer', decode="),
    (80, "qwen3_moe", {**_UNO, "prefill_attention_backend": "fa3"}, "prefill='fa3', decode='fl"),
    (80, "llama", {**_UNO, **_FA3}, None),
)


@pytest.mark.parametrize(("gpu_sm", "name", "layout", "pair"), UNO_DEFAULTS)
def test_uno_reads_the_resolved_default_back_ends(
    gpu_sm: int, name: str, layout: dict[str, Any], pair: str | None
) -> None:
    cfg = {"platform": "cuda", "gpu_sm": gpu_sm, "speculative_algorithm": "UNO", **layout}
    # The recorder has no MiMo V2 checkpoint: its architecture is what the default reads.
    spec = ModelSpec(architecture=_MIMO) if name == "mimo_v2" else _model(name)
    report = validate(cfg, spec, explain=False, sglang_version="0.5.23")
    first = (report.violations[0].rule, report.violations[0].message) if report.violations else None
    if pair is None:
        assert first is None, first
    else:
        assert first is not None and first[0] == "SPEC-UNO-FA3", first
        assert first[1].startswith(_UNO_FA3_WORDS + pair), first


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_an_unknown_algorithm_is_named_upper_cased(version: str) -> None:
    """SGLang upper-cases the name before it looks it up, so it quotes an unknown one so
    (0.5.18, 0.5.19 and 0.5.23 runners: "Unknown speculative algorithm name: MTP")."""
    for typed in ("mtp", "Mtp", "MTP"):
        first = _first(version, "llama", speculative_algorithm=typed)
        assert first == ("SPEC-UNKNOWN-ALGORITHM", "Unknown speculative algorithm name: MTP")


def test_uno_lora_path_is_read_as_given() -> None:
    """--uno-lora-path takes one value (any, an expansion's too); SGLang asks `is not None`.
    Releases before 0.5.23 have no such flag (their parser refuses it)."""
    from meshsat.solver.inputs import parse_sglang_command

    line = "python -m sglang.launch_server --model-path x --speculative-algorithm UNO"
    read = parse_sglang_command(f'{line} --uno-lora-path "$UNO" --tp 2').values
    assert read["uno_lora_path"] is True and read["tp_size"] == 2
    assert "uno_lora_path" not in parse_sglang_command(line).values


#: A DeepSeek V3.2 with only `--prefill-attention-backend fa3` named: its model override then
#: names no back-end and `get_default_attn_backend` picks the base by GPU class. 0.5.23's
#: resolution with each class's facts (2026-12-07): SM90 fa3, SM100 flashinfer, SM80 triton;
#: the page-tree checks (pages of 64) then refuse NGRAM on fa3 and triton, and never see dsa.
#: With no GPU class the default is one meshsat does not know: assumed to pass.
_V32_SPLIT = {"tp_size": 8, "prefill_attention_backend": "fa3"}
_V32_TREE = {
    "speculative_algorithm": "EAGLE",
    "speculative_eagle_topk": 4,
    "speculative_num_steps": 3,
}
PAGE_TREE_DEFAULTS = (
    (90, {"speculative_algorithm": "NGRAM"}, "SPEC-NGRAM-PAGE"),
    (100, {"speculative_algorithm": "NGRAM"}, None),
    (80, {"speculative_algorithm": "NGRAM"}, "SPEC-NGRAM-PAGE"),
    (None, {"speculative_algorithm": "NGRAM"}, None),
    (90, _V32_TREE, None),
    (100, _V32_TREE, None),
    (80, _V32_TREE, None),
    (None, _V32_TREE, None),
)


@pytest.mark.parametrize(("gpu_sm", "spec", "refused_by"), PAGE_TREE_DEFAULTS)
def test_the_page_tree_checks_read_the_resolved_default(
    gpu_sm: int | None, spec: dict[str, Any], refused_by: str | None
) -> None:
    cfg: dict[str, Any] = {"platform": "cuda", **_V32_SPLIT, **spec}
    if gpu_sm is not None:
        cfg["gpu_sm"] = gpu_sm
    report = validate(cfg, _model("deepseek_v32"), explain=False, sglang_version="0.5.23")
    assert [v.rule for v in report.violations] == ([refused_by] if refused_by else [])


def test_cpu_runs_its_platform_back_end_under_a_page_tree() -> None:
    """On CPU the platform names the back-end (torch_native on the oracle's host, intel_amx
    with AMX: neither a page-tree back-end), which R-ATTN-BACKEND does not fill."""
    cfg = {"platform": "cpu", "page_size": 16, **_V32_TREE}
    report = validate(cfg, _model("llama"), explain=False, sglang_version="0.5.23")
    assert [v.rule for v in report.violations] == ["SPEC-EAGLE-PAGE-TREE"]
    assert "got attention_backend='torch_native'" in report.violations[0].message
