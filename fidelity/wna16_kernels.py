"""Record which MoE kernels a release's compressed-tensors config gives WNA16 weights
(tests/fixtures/wna16_kernels/<version>.json; `tests/test_wna16_kernels.py` replays it
against `meshsat.solver.lang.checkpoint_quant.wna16_kernels`).

Runs inside a release venv ($HOME/.cache/meshsat-fidelity/<version>, see fidelity/README.md):

    PYTHONPATH=. ~/.cache/meshsat-fidelity/0.5.23/bin/python fidelity/wna16_kernels.py 0.5.23

For each weight scheme of `SCHEMES` (bits, symmetry, group size, activation order, dynamic),
the release's own `CompressedTensorsConfig` predicates, the ones its MoE scheme choice asks:
`_is_wNa16_group_channel` (the WNA16 family, on the Marlin runner by default),
`_is_mxint4a16` (served by the FlashInfer TRT-LLM runner) and, from 0.5.19,
`_is_wna16_triton_moe_supported` (what the Triton runner takes; 0.5.18 has no check).
"""

from __future__ import annotations

import importlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fidelity" / "weight_shapes"))
importlib.import_module("stubs")  # the stand-ins, before any sglang import

OUT = ROOT / "tests" / "fixtures" / "wna16_kernels"

#: Weight schemes: every combination of these (the integer group and channel ones a
#: compressed-tensors WNA16 checkpoint writes).
AXES: dict[str, tuple[Any, ...]] = {
    "num_bits": (4, 8),
    "symmetric": (True, False),
    "strategy": ("group", "channel"),
    "group_size": (32, 64, 128),
    "actorder": (None, "group"),
    "dynamic": (False,),
}


def schemes() -> list[dict[str, Any]]:
    out = []
    for values in itertools.product(*AXES.values()):
        w = dict(zip(AXES, values, strict=True))
        if w["strategy"] == "channel":
            if w["group_size"] != 32 or w["actorder"] is not None:
                continue  # one channel scheme per width and symmetry
            w["group_size"] = None
        out.append({"type": "int", **w})
    return out


def main() -> int:
    version = sys.argv[1]
    import sglang

    quantization_args = importlib.import_module("compressed_tensors.quantization").QuantizationArgs
    from sglang.srt.layers.quantization.compressed_tensors.compressed_tensors import (
        CompressedTensorsConfig as C,
    )

    assert sglang.__version__ == version, (sglang.__version__, version)
    triton = getattr(C, "_is_wna16_triton_moe_supported", None)
    records = []
    for scheme in schemes():
        w = quantization_args(**scheme)
        records.append(
            {
                "weights": scheme,
                "wna16": bool(C._is_wNa16_group_channel(None, w, None)),
                "mxint4": bool(C._is_mxint4a16(None, w, None)),
                "wna16_triton": None if triton is None else bool(triton(None, w)),
            }
        )
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{version}.json"
    path.write_text(json.dumps({"sglang": version, "schemes": records}, indent=1) + "\n")
    print(f"{len(records)} schemes -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
