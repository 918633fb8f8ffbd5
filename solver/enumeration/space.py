"""The layout space that `enumerate` ranges over, declared once.

The generator and the brute-force reference both read their dimensions and domains
from here, so they cannot disagree about *what* is enumerated, only (testably) about
which points are legal.

A dimension is one or more fields that vary together. Prefill CP is a single
dimension because `enable_prefill_cp` without a strategy is always rejected
(CP-STRATEGY-REQUIRED) and a strategy without the flag is meaningless: its three
values are (off, none), (on, zigzag) and (on, interleave). Size fields range over
the divisors of the GPU count; boolean and enum fields over their declared choices.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from meshsat.solver.errors import InputError
from meshsat.solver.lang.expr import Value
from meshsat.solver.lang.fields import CONFIG_SPECS, SPECS
from meshsat.solver.lang.limits import shown

#: Fields varied when the caller names none (the CP pair counts as one).
DEFAULT_VARY: tuple[str, ...] = (
    "tp_size",
    "pp_size",
    "dp_size",
    "attn_cp_size",
    "moe_dp_size",
    "ep_size",
    "dcp_size",
    "enable_dp_attention",
    "enable_prefill_cp",
)

#: The prefill-CP pair: its fields and its three values.
CP_PAIR: tuple[str, str] = ("enable_prefill_cp", "cp_strategy")
CP_PAIR_VALUES: tuple[tuple[Value, ...], ...] = (
    (False, None),
    (True, "zigzag"),
    (True, "interleave"),
)

#: Short names accepted wherever a field is named on the command line: a size field's width
#: name (`attn_cp` is the attention-CP width, as `attn_tp` and `attn_dp` are), one per field.
ALIASES: dict[str, str] = {
    "tp": "tp_size",
    "pp": "pp_size",
    "dp": "dp_size",
    "ep": "ep_size",
    "attn_cp": "attn_cp_size",
    "moe_dp": "moe_dp_size",
    "dcp": "dcp_size",
    "dwdp": "dwdp_size",
}


@dataclass(frozen=True)
class Dim:
    """One dimension of the space: fields that take their values together.

    `values` lists the tuples of a finite dimension; a size dimension (`size=True`)
    has one field and ranges over the divisors of the GPU count instead.
    """

    fields: tuple[str, ...]
    size: bool = False
    values: tuple[tuple[Value, ...], ...] = ()

    @property
    def name(self) -> str:
        return self.fields[0]

    def domain(self, gpus: int) -> tuple[tuple[Value, ...], ...]:
        if self.size:
            return tuple((d,) for d in divisors(gpus))
        return self.values


def enumerable(name: str) -> bool:
    """Whether `--vary` accepts this field: sizes, booleans and enums with fixed choices."""
    spec = CONFIG_SPECS.get(name)
    if spec is None:
        return False
    return spec.size or spec.kind == "bool" or (spec.kind == "enum" and bool(spec.choices))


def accepted_fields() -> tuple[str, ...]:
    return tuple(n for n in CONFIG_SPECS if enumerable(n))


def canonical(name: str) -> str:
    key = name.strip().replace("-", "_")
    return ALIASES.get(key, key)


def dims_of(vary: Iterable[str]) -> tuple[Dim, ...]:
    """The dimensions for these field names (aliases allowed), in first-seen order.

    Naming either field of the CP pair varies the pair. Anything that is not a size,
    a boolean or an enum with fixed choices is an `InputError` listing what is.
    """
    dims: list[Dim] = []
    seen: set[str] = set()
    for raw_name in vary:
        name = canonical(raw_name)
        if not enumerable(name):
            choices = accepted_fields()
            close = (
                difflib.get_close_matches(name, [*choices, *ALIASES], n=1)
                if len(name) <= 64
                else []
            )
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InputError(
                f"cannot vary {shown(raw_name)}{hint} (--vary accepts size fields and boolean "
                f"or enum fields with fixed choices: {len(choices)} fields, e.g. "
                f"{', '.join(choices[:4])}; see `meshsat fields`)"
            )
        if name in CP_PAIR:
            if CP_PAIR[0] in seen:
                continue
            seen.update(CP_PAIR)
            dims.append(Dim(CP_PAIR, values=CP_PAIR_VALUES))
            continue
        if name in seen:
            continue
        seen.add(name)
        spec = SPECS[name]
        if spec.size:
            dims.append(Dim((name,), size=True))
        elif spec.kind == "bool":
            dims.append(Dim((name,), values=((False,), (True,))))
        else:
            dims.append(Dim((name,), values=tuple((c,) for c in spec.choices)))
    return tuple(dims)


def varied_fields(dims: Iterable[Dim]) -> tuple[str, ...]:
    return tuple(f for d in dims for f in d.fields)


@cache
def divisors(n: int) -> tuple[int, ...]:
    """Divisors of n in increasing order (trial division up to √n)."""
    if n < 1:
        return ()
    low: list[int] = []
    high: list[int] = []
    i = 1
    while i * i <= n:
        if n % i == 0:
            low.append(i)
            if i * i != n:
                high.append(n // i)
        i += 1
    return (*low, *reversed(high))
