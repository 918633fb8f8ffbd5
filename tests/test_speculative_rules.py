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
