"""Record each release's argument resolution on real checkpoints' configs: quantized ones
(FP8 blocks, NVFP4 ModelOpt exports, INT4 compressed-tensors), DSA (GLM-5) and multimodal
wrappers (Kimi-K2.5), which the main corpus (`fidelity/record.py`, four small unquantized
configs in `fidelity/models/`) does not hold. `tests/test_checkpoint_resolution.py` replays
the record (tests/fixtures/checkpoint_resolution/<version>.jsonl.gz) through
`fidelity.compare.judge`, as the main corpus is replayed.

    MESHSAT_HF_CONFIGS=.venv/lib/python3.11/site-packages/aiconfigurator_core/model_configs \\
      PYTHONPATH=. .venv/bin/python -m fidelity.checkpoint_resolution 0.5.23 [N]

Runs from meshsat's environment and asks the release's venv (`fidelity/runner.py`). N
configs (default 400) from the main corpus's generator (`fidelity/generate.py`, its own
seed), each on the next checkpoint in turn, resolved as on an H100 where the release can
be told so (0.5.19 and later), else on CPU.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from fidelity import generate, record

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "checkpoint_resolution"
SEED = 41

#: aiconfigurator-core's bundled configs (`<stem>_config.json`, with its
#: `_hf_quant_config.json` where it ships one).
CHECKPOINTS = (
    "deepseek-ai--DeepSeek-V3",
    "nvidia--DeepSeek-V3.1-NVFP4",
    "zai-org--GLM-5-FP8",
    "nvidia--GLM-5-NVFP4",
    "Qwen--Qwen3-235B-A22B-FP8",
    "nvidia--Qwen3.5-397B-A17B-NVFP4",
    "moonshotai--Kimi-K2.5",
    "MiniMaxAI--MiniMax-M2.5",
)


def checkpoint_folder(bundle: Path, stem: str, into: Path) -> Path:
    """`stem`'s folder as SGLang reads a checkpoint: config.json and hf_quant_config.json."""
    d = into / stem
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(bundle / f"{stem}_config.json", d / "config.json")
    hfq = bundle / f"{stem}_hf_quant_config.json"
    if hfq.is_file():
        shutil.copy(hfq, d / "hf_quant_config.json")
    return d


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    version, n = args[0], int(args[1]) if len(args) > 1 else 400
    bundle = Path(os.environ["MESHSAT_HF_CONFIGS"])
    fields = frozenset(record.dump_flags(version)["fields"])
    platform = "cuda" if version != "0.5.18" else "cpu"  # 0.5.18 cannot be told CUDA
    items: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folders = {s: checkpoint_folder(bundle, s, Path(tmp)) for s in CHECKPOINTS}
        for i, (_name, cfg) in enumerate(generate.configs(n, SEED)):
            stem = CHECKPOINTS[i % len(CHECKPOINTS)]
            spelled, env, _dropped = generate.spell(version, cfg, fields)
            items.append({"id": i, "model": str(folders[stem]), "args": spelled, "env": env,
                          "platform": platform, "checkpoint": stem, "config": cfg})  # fmt: skip
        verdicts = record.resolve(version, items)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{version}.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"sglang": version, "seed": SEED, "n": n}) + "\n")
        for item, v in zip(items, verdicts, strict=True):
            rec = {k: item[k] for k in ("id", "checkpoint", "config", "args", "env", "platform")}
            f.write(json.dumps({**rec, **{k: x for k, x in v.items() if k != "id"}}) + "\n")
    harness = sum(1 for v in verdicts if v.get("harness_error"))
    print(f"{len(items)} configs ({harness} the harness could not run) -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
