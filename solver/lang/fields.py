"""Field specifications derived from the pydantic models, and the `F` namespace rules use.

`F.tp_size` is a rule-language reference to the resolved value of `tp_size`;
`F.tp_size.as_raw` reads the value the user gave. Model facts live in the same
namespace (`F.num_attention_heads`), so a rule can mix both.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic.fields import FieldInfo

from meshsat.solver.lang.config import Config
from meshsat.solver.lang.expr import OPEN, Field, Kind, Value
from meshsat.solver.lang.model_spec import ModelSpec


@dataclass(frozen=True)
class FieldSpec:
    """What every layer needs to know about one input field."""

    name: str
    kind: Kind
    choices: tuple[Value, ...]
    optional: bool
    default: Value
    size: bool
    flags: tuple[str, ...]
    help: str
    group: str
    tool_only: bool
    model_fact: bool
    minimum: int | None

    @property
    def ref(self) -> Field:
        return Field(self.name, self.kind, self.choices, self.optional)

    def describe_type(self) -> str:
        if self.choices:
            vals = "|".join("none" if c is None else str(c) for c in self.choices)
            return vals
        base = {"int": "int", "bool": "bool", "float": "float", "enum": "string"}[self.kind]
        if self.size:
            base = "positive int"
        return f"{base} or none" if self.optional else base


def _analyse(annotation: Any) -> tuple[Kind, tuple[Value, ...], bool]:
    optional = False
    ann = annotation
    origin = get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(ann) if a is not type(None)]
        optional = len(args) < len(get_args(ann))
        if len(args) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        ann = args[0]
        origin = get_origin(ann)
    if origin is Literal:
        choices: tuple[Value, ...] = tuple(get_args(ann))
        if optional:
            choices = (None, *choices)
        return "enum", choices, optional
    if ann is bool:
        if optional:
            return "enum", (None, False, True), True
        return "bool", OPEN, False
    if ann is int:
        return "int", OPEN, optional
    if ann is float:
        return "float", OPEN, optional
    if ann is str:
        return "enum", OPEN, optional
    raise TypeError(f"unsupported field type {annotation!r}")


def _minimum(info: FieldInfo) -> int | None:
    for m in info.metadata:
        ge = getattr(m, "ge", None)
        if ge is not None:
            return int(ge)
    return None


def _spec(name: str, info: FieldInfo, model_fact: bool) -> FieldSpec:
    kind, choices, optional = _analyse(info.annotation)
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    flags = extra.get("flags") or []
    return FieldSpec(
        name=name,
        kind=kind,
        choices=choices,
        optional=optional,
        default=info.default,
        size=bool(extra.get("size", False)),
        flags=tuple(str(f) for f in flags) if isinstance(flags, list) else (),
        help=info.description or "",
        group=str(extra.get("group", "model" if model_fact else "layout")),
        tool_only=bool(extra.get("tool_only", False)),
        model_fact=model_fact,
        minimum=_minimum(info),
    )


SPECS: dict[str, FieldSpec] = {
    **{n: _spec(n, i, False) for n, i in Config.model_fields.items()},
    **{n: _spec(n, i, True) for n, i in ModelSpec.model_fields.items()},
}
CONFIG_SPECS: dict[str, FieldSpec] = {n: s for n, s in SPECS.items() if not s.model_fact}


class _Namespace:
    """Attribute access to field references; unknown names fail at catalogue build."""

    def __getattr__(self, name: str) -> Field:
        try:
            return SPECS[name].ref
        except KeyError:
            raise AttributeError(f"no field named {name!r}") from None


F = _Namespace()
