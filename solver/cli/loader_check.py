"""Why a listing is empty when no layout could ever start: the checkpoint's quantization.

Why a module: `plan` and `enumerate` enumerate layouts, and an empty list reads "nothing
fits" unless something says otherwise; when the release's loader refuses the checkpoint
itself (a method it does not register, a `--quantization` it does not take beside it),
that holds for every layout alike, and the one line should say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meshsat.solver.catalogue.quantization import LOADER_RULES
from meshsat.solver.lang.model_spec import ModelSpec


def loader_refusal(
    given: Mapping[str, Any], spec: ModelSpec | None, sglang_version: str | None
) -> str | None:
    """`[RULE] message` when the release refuses the checkpoint whatever the layout (the
    fields `given` on every layout, e.g. `--quantization` and the GPU class), else None."""
    from meshsat.solver import validate

    if spec is None or (spec.quant_method is None and "quantization" not in given):
        return None
    report = validate(dict(given), spec, explain=False, sglang_version=sglang_version)
    for v in report.violations:
        if v.rule in LOADER_RULES:
            return f"[{v.rule}] {v.message}"
    return None
