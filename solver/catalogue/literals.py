"""The values an open field (any string) can usefully take: the literals the rules use.

No rule can tell apart two strings it never names, so for `eplb_algorithm`,
`init_expert_location` and the other open fields these literals, the default, None where
allowed and the input's own value are every case there is. `fix` chooses among them and
the explainer's witness search tries them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from meshsat.solver.catalogue import ERRORS, RESOLUTIONS
from meshsat.solver.lang.expr import Cmp, Const, Expr, Field, In, walk
from meshsat.solver.lang.fields import CONFIG_SPECS


@cache
def open_literals() -> dict[str, tuple[Any, ...]]:
    """For fields with an open value set (any string), the literals the catalogue uses.

    With the field's default, None where allowed and the input's own value, they are the
    values fix may choose: no rule can tell the other strings apart.
    """
    found: dict[str, dict[Any, None]] = {
        n: {} for n, s in CONFIG_SPECS.items() if s.kind == "enum" and not s.choices
    }
    exprs: list[Expr] = [e for r in ERRORS for e in (r.when, r.holds)]
    for res in RESOLUTIONS:
        for step in res.steps:
            exprs.append(step.when)
            for name, value in step.sets:
                if name in found and isinstance(value, Const):
                    found[name].setdefault(value.value, None)
                exprs.append(value)
    for e in exprs:
        for node in walk(e):
            if isinstance(node, In) and isinstance(node.x, Field) and node.x.name in found:
                for v in node.values:
                    found[node.x.name].setdefault(v, None)
            if isinstance(node, Cmp):
                for a, b in ((node.a, node.b), (node.b, node.a)):
                    if isinstance(a, Field) and a.name in found and isinstance(b, Const):
                        found[a.name].setdefault(b.value, None)
    return {n: tuple(v) for n, v in found.items()}
