"""A model config's sizes are bounded where a config enters (`limits.check_model_sizes`).

Why: nothing bounded them. A config.json with 10^6 layers made `plan --gpu` take 33 s and
1.4 GB, then a traceback; 10^11 was a MemoryError and a hidden size of 10^30 an
OverflowError. README's bounds promise exit 2 with one line at once, naming the key.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.errors import InputError
from meshsat.solver.lang.limits import MODEL_SIZE_LIMITS, check_model_sizes
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.facts import facts_from_config
from meshsat.solver.memory.models import CATALOGUE
from tests.cli_helpers import run_cli

LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "vocab_size": 32000,
    "intermediate_size": 11008,
    "max_position_embeddings": 4096,
}
#: One absurd value per kind of size, and the key it is given under.
ABSURD = [
    ("num_hidden_layers", 10**6),
    ("hidden_size", 10**30),
    ("num_attention_heads", 10**30),
    ("num_local_experts", 10**6),
    ("vocab_size", 10**11),
    ("intermediate_size", 10**30),
    ("max_position_embeddings", 10**30),
    ("head_dim", 1e30),
]


@pytest.mark.parametrize(("key", "value"), ABSURD)
def test_an_absurd_size_is_one_line_and_exit_2_at_once(
    key: str, value: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**LLAMA, key: value}))
    started = time.perf_counter()
    r = run_cli(capsys, "plan", "--model", str(config), "--gpu", "H100", "--gpus", "8",
                "--rank", "kv")  # fmt: skip
    assert time.perf_counter() - started < 2.0
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert r.err.startswith(f"meshsat: error: model config: {key} is ") and "at most" in r.err


def test_both_readers_refuse_a_nested_size_and_the_rope_scaling_product() -> None:
    """The rules' reader and the memory model's (a pasted config, the web's) refuse alike;
    a size inside `text_config` names its path; a YaRN factor that scales the positions
    past the bound (a float overflow before) is refused too."""
    nested = {**LLAMA, "text_config": {"num_hidden_layers": 10_001}}
    for read in (ModelSpec.from_hf_config, facts_from_config):
        with pytest.raises(InputError, match=r"text_config\.num_hidden_layers is 10001"):
            read(nested)
    yarn = {"type": "yarn", "original_max_position_embeddings": 4096, "factor": 1e300}
    with pytest.raises(InputError, match="rope_scaling"):
        facts_from_config({**LLAMA, "rope_scaling": yarn})


def test_every_bound_is_far_above_every_catalogued_model() -> None:
    for name, config in CATALOGUE.items():
        check_model_sizes(config, name)
    limits = {kind: limit for kind, limit, _ in MODEL_SIZE_LIMITS}
    assert limits["layers"] == 10_000 and limits["experts"] == 65_536
