"""The embedded catalogue against real `config.json` copies (aiconfigurator-core's bundle).

Why: most catalogue entries (`solver/memory/models.py`) were retyped by hand, and a mistyped
width silently mis-sizes every layout of that model. aiconfigurator-core, a project
dependency, ships the published Hugging Face `config.json` of many of the same models (and
ModelOpt's `hf_quant_config.json` beside some): an oracle meshsat did not write. Every key a
catalogue entry holds must equal the bundled config's value, and the facts meshsat derives
from both (`facts_from_config`) must agree field by field. Where a catalogue model has no
bundled copy but a checkpoint of the same architecture does, the pairing is listed in
`TWINS` with its reason; where a key legitimately differs between a pair, it is listed in
`DIFFERS` with its reason (and the listing must still be needed: a stale one fails).
Entries with no bundled copy but a public one elsewhere (a verbatim `config.json` copy, a
transformers dump, a converter's preset citing the release's config) are checked key by key
against `tests/fixtures/catalogue_configs/oracles.json`, which names its sources per entry.
Entries with no oracle at all are listed in `UNVERIFIED`, so that adding a bundled copy, or
a catalogue entry, forces a decision here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.memory.facts import facts_from_config
from meshsat.solver.memory.models import CATALOGUE

aic = pytest.importorskip("aiconfigurator_core")
BUNDLE = Path(aic.__file__).parent / "model_configs"

_INSTRUCT = "an Instruct release is its base checkpoint fine-tuned: the architecture fields agree"
_QUANTIZED = "a quantized release of the same architecture: only its quantization differs"

#: catalogue id -> (bundled checkpoint of the same architecture, why it may stand in).
TWINS: dict[str, tuple[str, str]] = {
    "deepseek-ai/DeepSeek-V3.1": (
        "nvidia/DeepSeek-V3.1-NVFP4",
        "NVIDIA's NVFP4 requantization of DeepSeek-V3.1 keeps its config.json apart from the"
        " quantization (kept in hf_quant_config.json)",
    ),
    "deepseek-ai/DeepSeek-V3.2-Exp": (
        "deepseek-ai/DeepSeek-V3.2",
        "V3.2 is V3.2-Exp's DSA architecture, released again (bundled_models.SOURCES)",
    ),
    "meta-llama/Llama-3.1-8B-Instruct": ("meta-llama/Meta-Llama-3.1-8B", _INSTRUCT),
    "meta-llama/Llama-3.1-70B-Instruct": ("meta-llama/Meta-Llama-3.1-70B", _INSTRUCT),
    "meta-llama/Llama-3.1-405B-Instruct": ("meta-llama/Meta-Llama-3.1-405B", _INSTRUCT),
    "meta-llama/Llama-3.3-70B-Instruct": (
        "meta-llama/Meta-Llama-3.1-70B",
        "Llama 3.3 70B is a post-trained Llama 3.1 70B (same widths, vocabulary and context)",
    ),
    "meta-llama/Meta-Llama-3-8B-Instruct": (
        "meta-llama/Meta-Llama-3.1-8B",
        "Llama 3.1 8B kept Llama 3 8B's widths and vocabulary; only the context grew",
    ),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": (
        "meta-llama/Meta-Llama-3.1-8B",
        "the distill is Llama-3.1-8B fine-tuned on R1 outputs (its card names the base)",
    ),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": ("mistralai/Mixtral-8x7B-v0.1", _INSTRUCT),
    "mistralai/Mixtral-8x22B-Instruct-v0.1": ("mistralai/Mixtral-8x22B-v0.1", _INSTRUCT),
    "MiniMaxAI/MiniMax-M2": (
        "MiniMaxAI/MiniMax-M2.5",
        "M2.5 is M2 trained further: the same MiniMaxM2ForCausalLM widths (230B-A10B) and"
        " FP8 checkpoint format",
    ),
    "Qwen/Qwen3-8B-FP8": ("Qwen/Qwen3-8B", _QUANTIZED),
    "Qwen/Qwen3.5-397B-A17B-FP8": ("Qwen/Qwen3.5-397B-A17B", _QUANTIZED),
    "Qwen/Qwen3.5-35B-A3B-FP8": ("Qwen/Qwen3.5-35B-A3B", _QUANTIZED),
    "nvidia/Llama-3.1-8B-Instruct-FP4": ("meta-llama/Meta-Llama-3.1-8B", _QUANTIZED),
    "nvidia/Llama-3.1-405B-Instruct-FP4": ("meta-llama/Meta-Llama-3.1-405B", _QUANTIZED),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8": (
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        _QUANTIZED,
    ),
}

_BF16_TWIN = "the twin is the 16-bit checkpoint: the quantization is not verified here"
_NO_VISION = (
    "aiconfigurator bundles Llama 4's text_config only (its copy drops vision_config), so the"
    " vision tower is not verified here"
)

#: catalogue id -> {key path (dotted; `facts.<field>` for a derived fact): why it differs}.
DIFFERS: dict[str, dict[str, str]] = {
    "deepseek-ai/DeepSeek-V3.1": {
        "quantization_config": "DeepSeek's FP8 blocks against NVIDIA's NVFP4 requantization",
        "facts.quant": "the same",
        "facts.kv_cache_quant_algo": "NVIDIA's hf_quant_config adds an FP8 KV cache",
    },
    "Qwen/Qwen3-8B-FP8": {"quantization_config": _BF16_TWIN, "facts.quant": _BF16_TWIN},
    "Qwen/Qwen3.5-397B-A17B-FP8": {"quantization_config": _BF16_TWIN, "facts.quant": _BF16_TWIN},
    "Qwen/Qwen3.5-35B-A3B-FP8": {"quantization_config": _BF16_TWIN, "facts.quant": _BF16_TWIN},
    "nvidia/Llama-3.1-8B-Instruct-FP4": {
        "quantization_config": _BF16_TWIN,
        "facts.quant": _BF16_TWIN,
    },
    "nvidia/Llama-3.1-405B-Instruct-FP4": {
        "quantization_config": _BF16_TWIN,
        "facts.quant": _BF16_TWIN,
    },
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": {
        "vision_config": _NO_VISION,
        "facts.vision": _NO_VISION,
        "facts.vision_fraction_factor": _NO_VISION,
    },
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": {
        "vision_config": _NO_VISION,
        "facts.vision": _NO_VISION,
        "facts.vision_fraction_factor": _NO_VISION,
    },
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8": {
        "vision_config": _NO_VISION,
        "facts.vision": _NO_VISION,
        "facts.vision_fraction_factor": _NO_VISION,
        "quantization_config": _BF16_TWIN,
        "facts.quant": _BF16_TWIN,
    },
    "mistralai/Mixtral-8x22B-Instruct-v0.1": {
        "vocab_size": "the Instruct release extended the base's 32000-token vocabulary to"
        " 32768 (Mistral's v3 tokenizer, with control tokens for tool calls)",
        "facts.vocab_size": "the same",
    },
    "meta-llama/Meta-Llama-3-8B-Instruct": {
        "max_position_embeddings": "Llama 3's 8k context; 3.1 stretched it to 128k",
        "facts.rope_cache_elements": "the rotary cache follows max_position_embeddings",
    },
    "nvidia/Qwen3.5-122B-A10B-NVFP4": {
        "vision_config.model_type": "NVIDIA's export (transformers 5.x) spells the tower's"
        " type 'qwen3_5_moe_vision', Qwen's own release 'qwen3_5_moe'; nothing reads it",
        "quantization_config.exclude_modules": "the 122B's list names each of its 48 layers'"
        " 'layers.N.mlp.shared_expert*' where the 397B's (the catalogue's) has one"
        " '*.mlp.shared_expert.*': the same modules, and the quant fact agrees",
    },
}

#: Module lists the catalogue keeps abridged (the linear modules only, or one glob per
#: family where the checkpoint lists every layer): each catalogue entry must name modules
#: the checkpoint's list names too (equal, or one's glob matches the other); what the
#: abridgement leaves out is caught, where it matters, by the derived `quant` fact.
ABRIDGED = frozenset(
    {
        "quantization_config.modules_to_not_convert",
        "quantization_config.exclude_modules",
    }
)

_NOT_FOUND = (
    "no bundled copy, and no public copy of its config.json (or of a converter's preset"
    " written from it) was found"
)
#: catalogue ids with no oracle here: their values stay unverified by this test.
UNVERIFIED: dict[str, str] = {
    **dict.fromkeys(
        (
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
            "mistralai/Mistral-Small-24B-Instruct-2501",
        ),
        _NOT_FOUND,
    ),
    **dict.fromkeys(
        ("stepfun-ai/Step-3.5-Flash", "stepfun-ai/Step-3.5-Flash-FP8"),
        "the bundled Step-3.7-Flash is another architecture (model_type step3p7, sliding-window"
        " layers, a 128896-token vocabulary), not a twin, and no public copy of Step-3.5-Flash's"
        " own config.json was found (its catalogue entry is SGLang's Step3p5Config defaults;"
        " the release's README, mirrored in jjyaoao/Step-3.5-Flash@3030beea README.md, gives"
        " a 128,896-token vocabulary and a 256K context against those defaults' 128815 and"
        " 128000: to settle when a copy turns up)",
    ),
}

#: Published config facts of entries aiconfigurator does not bundle, and where each was read.
ORACLES: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "catalogue_configs" / "oracles.json").read_text()
)


def _oracle_values(repo: str) -> dict[str, Any]:
    """The verified keys of `repo`: its own, over its `twin_of`'s (a quantized release)."""
    entry = ORACLES["models"][repo]
    twin = entry.get("twin_of")
    return {**(_oracle_values(twin) if twin else {}), **entry["values"]}


def _stem(repo: str) -> str:
    return repo.replace("/", "--", 1)


def _oracle_id(repo: str) -> str:
    return TWINS[repo][0] if repo in TWINS else repo


def _bundled(repo: str) -> bool:
    return (BUNDLE / f"{_stem(repo)}_config.json").is_file()


def _oracle(repo: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checkpoint's config as SGLang reads it, and the same with every quantization key
    either file states. SGLang reads ModelOpt's `hf_quant_config.json` (its `quantization`
    section) only when `config.json` has no `quantization_config`
    (`ModelConfig._parse_quant_hf_config`); the catalogue may hold keys only that file
    spells (`group_size`, `exclude_modules`), so its keys are compared with both."""
    stem = _stem(_oracle_id(repo))
    cfg: dict[str, Any] = json.loads((BUNDLE / f"{stem}_config.json").read_text())
    hf_quant = BUNDLE / f"{stem}_hf_quant_config.json"
    if not hf_quant.is_file():
        return cfg, cfg
    section = {"quant_method": "modelopt", **json.loads(hf_quant.read_text())["quantization"]}
    own = cfg.get("quantization_config")
    read = {**cfg, "quantization_config": own or section}
    return read, {**cfg, "quantization_config": {**section, **(own or {})}}


PUBLISHED_ORACLE = sorted(ORACLES["models"])
CHECKED = [repo for repo in CATALOGUE if repo not in {*UNVERIFIED, *PUBLISHED_ORACLE}]


def _names_match(mine: str, theirs: list[str], exact: frozenset[str]) -> bool:
    return mine in exact or any(fnmatchcase(t, mine) or fnmatchcase(mine, t) for t in theirs)


def _config_mismatches(
    mine: Mapping[str, Any], theirs: Mapping[str, Any], path: str, exempt: Mapping[str, str]
) -> Iterator[str]:
    for key, value in mine.items():
        at = f"{path}.{key}" if path else key
        if at in exempt:
            continue
        if key not in theirs:
            yield f"{at}: catalogue {value!r}, config has no such key"
        elif isinstance(value, Mapping) and isinstance(theirs[key], Mapping):
            yield from _config_mismatches(value, theirs[key], at, exempt)
        elif at in ABRIDGED and isinstance(value, list) and isinstance(theirs[key], list):
            exact = frozenset(theirs[key])
            extra = [m for m in value if not _names_match(m, theirs[key], exact)]
            if extra:
                yield f"{at}: catalogue names {extra!r}, which the config's list does not"
        elif value != theirs[key]:
            yield f"{at}: catalogue {value!r}, config {theirs[key]!r}"


def _differs(mine: Mapping[str, Any], theirs: Mapping[str, Any], path: str) -> bool:
    """Whether the value at dotted `path` differs (or is missing) between two configs."""
    for key in path.split("."):
        if not (isinstance(mine, Mapping) and isinstance(theirs, Mapping)):
            return True
        if key not in mine or key not in theirs:
            return True
        mine, theirs = mine[key], theirs[key]
    return bool(mine != theirs)


@pytest.mark.parametrize("repo", CHECKED)
def test_catalogue_entry_matches_its_bundled_config(repo: str) -> None:
    mine = CATALOGUE[repo]
    read, theirs = _oracle(repo)
    exempt = DIFFERS.get(repo, {})
    problems = list(_config_mismatches(mine, theirs, "", exempt))
    facts_mine, facts_theirs = facts_from_config(mine), facts_from_config(read)
    for f in dataclasses.fields(facts_mine):
        a, b = getattr(facts_mine, f.name), getattr(facts_theirs, f.name)
        listed = f"facts.{f.name}" in exempt
        if a != b and not listed:
            problems.append(f"facts.{f.name}: catalogue {a!r}, config {b!r}")
        elif a == b and listed:
            problems.append(f"facts.{f.name}: listed in DIFFERS but agrees ({a!r})")
    for path in exempt:
        if not path.startswith("facts.") and not _differs(mine, theirs, path):
            problems.append(f"{path}: listed in DIFFERS but agrees")
    assert not problems, f"{repo} (oracle {_oracle_id(repo)}):\n  " + "\n  ".join(problems)


def test_every_entry_is_checked_or_listed_unverified() -> None:
    """A catalogue entry is either compared with a bundled copy (its own or a listed twin's),
    or with the published copies the fixture names, or listed as unverified; and one of the
    latter two really has no bundled copy of its own."""
    assert set(UNVERIFIED) <= set(CATALOGUE), set(UNVERIFIED) - set(CATALOGUE)
    assert set(PUBLISHED_ORACLE) <= set(CATALOGUE), set(PUBLISHED_ORACLE) - set(CATALOGUE)
    assert not set(UNVERIFIED) & set(PUBLISHED_ORACLE), set(UNVERIFIED) & set(PUBLISHED_ORACLE)
    assert set(TWINS) | set(DIFFERS) <= set(CHECKED)
    missing = [repo for repo in CHECKED if not _bundled(_oracle_id(repo))]
    assert not missing, f"no bundled config.json for {missing}: pair them in TWINS or list them"
    now_bundled = [repo for repo in [*UNVERIFIED, *PUBLISHED_ORACLE] if _bundled(repo)]
    assert not now_bundled, f"{now_bundled} are bundled now: check them"
    own = [repo for repo in TWINS if _bundled(repo)]
    assert not own, f"{own} have a bundled copy of their own: compare with it, not a twin"


_ABSENT = object()


def _at(cfg: Any, path: str) -> Any:
    """The value at dotted `path` in a config as JSON spells it (so `true` is not `1`, nor
    `1` `1.0`), or `_ABSENT`."""
    for key in path.split("."):
        if not isinstance(cfg, Mapping) or key not in cfg:
            return _ABSENT
        cfg = cfg[key]
    return json.dumps(cfg, default=dict, sort_keys=True)


@pytest.mark.parametrize("repo", PUBLISHED_ORACLE)
def test_catalogue_entry_matches_its_published_config(repo: str) -> None:
    entry = ORACLES["models"][repo]
    sources = [s.split(":")[0] for s in entry["sources"]]
    assert sources and set(sources) <= set(ORACLES["sources"]), entry["sources"]
    want = _oracle_values(repo)
    assert want, f"{repo}: no verified key"
    problems = []
    for path, value in want.items():
        mine = _at(CATALOGUE[repo], path)
        if mine is _ABSENT:
            problems.append(f"{path}: catalogue has no such key, oracle {value!r}")
        elif mine != json.dumps(value, sort_keys=True):
            problems.append(f"{path}: catalogue {mine}, oracle {json.dumps(value)}")
    assert not problems, f"{repo} (oracle {entry['sources']}):\n  " + "\n  ".join(problems)
