"""Will it start, against SGLang's own *model classes*: each record is a release building a
whole checkpoint (`DeepseekV3ForCausalLM`, `Qwen3MoeForCausalLM`, `Qwen3_5MoeForConditional
Generation`, `GlmMoeDsaForCausalLM`, ...) on the meta device under a layout, with the
checkpoint's published config (fidelity/weight_shapes/models.py). meshsat's launch-stage
weight-shape rules must refuse exactly the layouts the release refused, with its message."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver import validate
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.models import model_config

FIXTURES = Path(__file__).parent / "fixtures" / "weight_shapes" / "models"
#: SGLang's own words for a layout its model class refuses while it is built: a weight that
#: does not split (quantization methods' `create_weights`, `linear.py` /
#: `distributed/utils.py` `divide`, the AWQ/GPTQ checks), a vision tower's group
#: (`reject_attn_tp_shard_with_tp_reduce`), 0.4.6.post5's `EPMoE` built without its
#: `layer_id` (Mixtral, Qwen2-MoE and Grok under --enable-ep-moe, `MODEL-EP-MOE-0-4`), and a
#: MoE runner without the all-to-all backend's fused function (`MOE-MARLIN-A2A`).
SHAPE_WORDS = re.compile(
    r"is not divisible by|not aligned|multiple of|shards over the attention TP group"
    r"|EPMoE.__init__\(\) missing 1 required positional argument: 'layer_id'"
    r"|requires a fused func for a2a backend"
)
#: Bare asserts (`assert x % tp == 0`, no message) in these files are shape checks too:
#: the model files' head splits and `FusedMoE.__init__`.
ASSERT_SITES = ("srt/models/", "layers/moe/", "layers/linear.py")


def _releases() -> list[Any]:
    return [pytest.param(p, id=p.stem) for p in sorted(FIXTURES.glob("*.json"))]


def is_shape_error(rec: dict[str, Any]) -> bool:
    """An error that is SGLang's model class refusing the layout (`SHAPE_WORDS`); anything
    else (a GPU kernel the CPU build lacks, a platform check) is the harness's and is not
    compared."""
    err = rec["error"]
    if err is None:
        return False
    if SHAPE_WORDS.search(err["message"]):
        return True
    bare = err["type"] == "AssertionError" and not err["message"]
    return bare and any(s in (err["site"] or "") for s in ASSERT_SITES)


def compared(rec: dict[str, Any]) -> bool:
    """A build that finished or stopped at a weight-shape check (not at the layout's own
    arguments, and not at something the CPU stand-ins cannot build)."""
    return rec["stage"] == "build" and (rec["error"] is None or is_shape_error(rec))


@cache
def facts(model: str) -> ModelSpec:
    return ModelSpec.from_hf_config(model_config(model))


#: The GPU class the records are built as (`_patch_cpu_paths` answers Hopper).
RECORDED_SM = 90


def meshsat_launch(rec: dict[str, Any], version: str) -> list[tuple[str, str]]:
    layout = {**rec["layout"], "gpu_sm": RECORDED_SM}
    report = validate(layout, facts(rec["model"]), explain=False, sglang_version=version)
    return [(v.rule, v.message) for v in report.violations if v.stage == "launch"]


def disagreement(rec: dict[str, Any], version: str) -> str | None:
    got = meshsat_launch(rec, version)
    if rec["error"] is None:
        return None if not got else f"{rec['model']} {rec['layout']}: built, meshsat {got}"
    said = rec["error"]["message"]
    if said in {message for _, message in got} or (not said and got):
        return None  # SGLang's message, or a bare assert that meshsat also refuses
    return f"{rec['model']} {rec['layout']}: SGLang {said!r}, meshsat {got}"


#: Where meshsat and a release's model class disagree, and why (the test fails if one goes
#: away, so the list cannot go stale): (release, checkpoint, layout's EP) -> reason.
KNOWN: dict[tuple[str, str, int], str] = {
    ("0.4.6.post5", "meta-llama/Llama-4-Scout-17B-16E-Instruct", 32): (
        "0.4.6's llama4.py builds its 16 experts with FusedMoE over TP whatever --ep-size "
        "says, so EP 32 builds; MODEL-EXPERTS (a seed rule, not a weight-shape one) refuses"
    ),
    **{
        ("0.4.6.post5", "mistralai/Mixtral-8x7B-Instruct-v0.1", ep): (
            "0.4.6's mixtral.py builds its 8 experts with FusedMoE over TP under "
            "--enable-deepep-moe (EPMoE only with --enable-ep-moe), so EP 16 and 32 build; "
            "MODEL-EXPERTS refuses"
        )
        for ep in (16, 32)
    },
}


def _key(rec: dict[str, Any], version: str) -> tuple[str, str, int]:
    return (version, rec["model"], rec["layout"].get("ep_size", 1))


@pytest.mark.parametrize("path", _releases())
def test_rules_agree_with_sglangs_model_classes(path: Path) -> None:
    """Every comparable build: meshsat refuses with SGLang's own message when the model
    class refused, and raises no launch-stage rule when it built (but for `KNOWN`)."""
    data = json.loads(path.read_text())
    version = data["version"]
    records = [r for r in data["records"] if compared(r)]
    wrong = {_key(r, version): d for r in records if (d := disagreement(r, version))}
    assert {k: wrong[k] for k in wrong if k not in KNOWN} == {}
    assert {k for k in KNOWN if k[0] == version} == set(wrong)
    # Both verdicts occur, so the comparison can fail either way.
    assert any(r["error"] is None for r in records)
    assert any(r["error"] is not None for r in records)


def test_every_release_builds_most_of_the_table() -> None:
    """The stand-ins build the model classes: a record that stopped elsewhere than at a
    weight-shape check is the harness's, and stays rare (docs/weight-shapes.md lists them)."""
    for path in FIXTURES.glob("*.json"):
        records = json.loads(path.read_text())["records"]
        builds = [r for r in records if r["stage"] == "build"]
        harness = [r for r in builds if r["error"] is not None and not is_shape_error(r)]
        assert len(harness) * 10 <= len(builds), (path.stem, [h["error"] for h in harness][:3])
