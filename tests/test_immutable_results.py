"""Nothing the API returns can be changed under the library (issue 13).

Every object reachable from a result is vandalised: shared parts must refuse writes
(frozen dataclasses and models, read-only mappings, tuples) and anything writable must
be the caller's own copy. The oracle is the same calls made before the vandalism: their
answers must not move. Before the fix, `Layout.shape.constant` was the cached
enumerator's own dict, so one caller's write changed every later layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from pydantic import BaseModel

from meshsat import solver
from meshsat.solver.groups import groups

_INVALID = {"tp_size": 8, "dp_size": 3, "enable_dp_attention": True, "attn_cp_size": 3}
_GROUPS = {"tp_size": 4, "attn_cp_size": 2, "ep_size": 2}
_PROPERTIES = ("resolved", "config", "derived", "values", "vary", "best", "shape")


def _snapshot() -> Any:
    layouts = list(solver.enumerate(4))
    return (
        solver.validate(_INVALID).to_dict(),
        solver.validate({"tp_size": 2}, explain=True).to_dict(),
        solver.fix(_INVALID, gpus=8, top=2).to_dict(),
        [(dict(x.config), dict(x.derived), x.values) for x in layouts],
        solver.count(4),
        groups(_GROUPS).to_dict(),
        [(r.id, r.fields, r.message) for r in solver.RULES],
    )


def _results() -> list[Any]:
    return [
        solver.validate(_INVALID),
        solver.validate({"tp_size": 2}, explain=True),
        solver.fix(_INVALID, gpus=8, top=2),
        list(solver.enumerate(4)),
        groups(_GROUPS),
        solver.RULES,
        solver.RESOLUTIONS,
    ]


def _refuses(write: Callable[[], None]) -> None:
    with pytest.raises((TypeError, AttributeError, ValueError, dataclasses.FrozenInstanceError)):
        write()


def _vandalise(obj: Any, seen: set[int], depth: int = 0) -> int:
    """Try to change `obj` and everything inside; return how many objects were attacked."""
    if id(obj) in seen or depth > 8 or isinstance(obj, str | int | float | bool | type(None)):
        return 0
    seen.add(id(obj))
    hits = 1
    if isinstance(obj, dict | list | set):  # must be the caller's own copy
        inner = list(obj.values()) if isinstance(obj, dict) else list(obj)
        obj.clear()
        return hits + sum(_vandalise(x, seen, depth + 1) for x in inner)
    if isinstance(obj, tuple):
        return hits + sum(_vandalise(x, seen, depth + 1) for x in obj)
    if isinstance(obj, Mapping):
        for key in list(obj):
            _refuses(lambda k=key: obj.__setitem__(k, "vandal"))  # type: ignore[attr-defined]
            hits += _vandalise(obj[key], seen, depth + 1)
        return hits
    names: list[str] = []
    if dataclasses.is_dataclass(obj):
        names = [f.name for f in dataclasses.fields(obj)]
    elif isinstance(obj, BaseModel):
        names = list(type(obj).model_fields)
    else:
        return hits
    for name in names:
        _refuses(lambda n=name: setattr(obj, n, "vandal"))
        hits += _vandalise(getattr(obj, name), seen, depth + 1)
    for prop in _PROPERTIES:
        if isinstance(getattr(type(obj), prop, None), property):
            try:
                value = getattr(obj, prop)
            except LookupError:
                continue
            hits += _vandalise(value, seen, depth + 1)
    return hits


def test_writing_to_every_result_changes_no_later_answer() -> None:
    before = _snapshot()
    attacked = _vandalise(_results(), set())
    assert attacked > 100  # the walk really reached inside the results
    assert _snapshot() == before


def test_shared_enumeration_shape_is_read_only() -> None:
    layout = next(iter(solver.enumerate(8)))
    _refuses(lambda: layout.shape.constant.__setitem__("moe_a2a_backend", "x"))  # type: ignore[index]
    _refuses(lambda: layout.config.__setitem__("tp_size", 3))  # type: ignore[index]
