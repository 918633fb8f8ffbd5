"""Record what each SGLang release says of --base-gpu-id and --gpu-id-step at launch.

    python -m fidelity.gpu_ids [0.5.23 ...]        # default: every release in the cache

Each command goes through the release's own parser, resolution and `check_server_args()`
(`runner.py resolve`, CPU only). The answers go to `tests/fixtures/gpu_ids/<version>.json`;
`tests/test_gpu_ids.py` replays them: SGLang's two asserts (a negative base, a step below 1)
with its words, and that it lets GPU ids past the node through (those fail later, in
`torch.cuda.set_device`, which no CPU run reaches: TOPO-GPU-ID-RANGE is meshsat's).
"""

from __future__ import annotations

import json
from typing import Any

from fidelity.record import ROOT, asked_versions, resolve

FIXTURES = ROOT / "tests" / "fixtures" / "gpu_ids"

#: (id, argv after the launcher): each assert alone, both (which one SGLang stops at),
#: ids past an 8-GPU node, and ids inside it.
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("negative-base", ("--tp-size", "1", "--base-gpu-id", "-1")),
    ("zero-step", ("--tp-size", "1", "--gpu-id-step", "0")),
    ("negative-step", ("--tp-size", "2", "--gpu-id-step", "-2")),
    ("both", ("--tp-size", "1", "--base-gpu-id", "-1", "--gpu-id-step", "0")),
    ("past-the-node-base", ("--tp-size", "8", "--base-gpu-id", "4")),
    ("past-the-node-step", ("--tp-size", "8", "--gpu-id-step", "2")),
    ("inside-the-node", ("--tp-size", "2", "--base-gpu-id", "3", "--gpu-id-step", "2")),
)


def record(version: str) -> dict[str, Any]:
    items = [{"id": i, "model": "llama", "argv": list(argv)} for i, argv in COMMANDS]
    answers = resolve(version, items)
    keep = ("accepted", "error", "step", "launch_error", "launch_site", "harness_error")
    return {
        "sglang": version,
        "records": [
            {"id": i, "argv": list(argv), **{k: a.get(k) for k in keep}}
            for (i, argv), a in zip(COMMANDS, answers, strict=True)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for version in asked_versions(__doc__ or "", argv):
        path = FIXTURES / f"{version}.json"
        path.write_text(json.dumps(record(version), indent=1) + "\n")
        print(f"{version}: {len(COMMANDS)} commands -> {path.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
