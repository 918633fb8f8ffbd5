"""What a `fix --pin FIELD` holds, declared once for every back-end.

An operator who pins a field means "the server runs with this value". Keeping the value as
typed is not enough: SGLang's resolution step may rewrite it silently (DWDP sets dp_size to
its own size), and a fix that keeps `--dp-size 3` in the command while the server runs dp 8
has not kept the pin. So a pin is two conditions, one rule-language expression that the Z3
search (`meshsat.solver.repair.search`) and the Python check of every answer
(`meshsat.solver.repair.fix`) both read:

- the typed value stays the input's;
- the resolved value, what SGLang runs with, equals it.

A field the input leaves unset (None, e.g. `dcp_comm_backend`) has no value to run with:
its pin keeps it unset and leaves SGLang's own choice free. A field left at a default that
is a value (dp_size 1) is pinned to that value as it runs.

From 0.5.23 on (`attn_dp_spelling`) the release's own `--attn-dp-size` is read by meshsat as
DP attention over `dp_size` groups (R-ATTN-DP-SIZE), so the value SGLang runs as
`attn_dp_size` is that width whenever DP attention is on: DWDP, which sets the width to its
own size, rewrites a pinned `--attn-dp-size 3` to 8 though the internal field still reads 3.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.lang.expr import And, Cmp, Expr, ite, lift
from meshsat.solver.lang.fields import SPECS, F


def run_as(name: str, attn_dp_spelling: bool = False) -> Expr:
    """The value SGLang runs `name` with: its resolved field, but for `attn_dp_size` in a
    release that spells it, the DP-attention width when DP attention is on (module
    docstring; `meshsat.solver.inputs.spelling.spelled` reads it the same way)."""
    ref = SPECS[name].ref
    if name != "attn_dp_size" or not attn_dp_spelling:
        return ref
    return ite(F.enable_dp_attention & (F.dp_size > 1), F.dp_size, ref)


def pin_holds(name: str, value: Any, attn_dp_spelling: bool = False) -> Expr:
    """The pin of `name` at the input's `value` (module docstring)."""
    ref = SPECS[name].ref
    typed = Cmp("==", ref.as_raw, lift(value, like=ref))
    if value is None:
        return typed
    return And(typed, Cmp("==", run_as(name, attn_dp_spelling), lift(value, like=ref)))


def pins_broken(
    pins: Mapping[str, Any],
    resolved: Mapping[str, Any],
    raw: Mapping[str, Any],
    attn_dp_spelling: bool = False,
) -> tuple[str, ...]:
    """The pins (field: the input's value) a layout does not hold, read off its typed and
    resolved values by the plain evaluator: the check independent of the Z3 search."""
    return tuple(
        n for n, v in pins.items() if not evaluate(pin_holds(n, v, attn_dp_spelling), resolved, raw)
    )
