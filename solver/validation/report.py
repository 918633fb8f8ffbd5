"""What `validate` returns: plain frozen dataclasses, cheap to build on the hot path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from meshsat.solver.backends.render import fmt_value
from meshsat.solver.errors import MeshsatError
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.lang.model_spec import ModelSpec


@dataclass(frozen=True)
class Violation:
    """One failed rule, with SGLang's wording and the arithmetic behind it."""

    rule: str
    message: str
    fields: tuple[str, ...]
    detail: str
    hint: str
    source: str
    severity: str = "error"
    #: "resolution" when SGLang's argument resolution raises it, "launch" when only the
    #: launch does (the pack says which, per release).
    stage: str = "resolution"

    def to_dict(self, fields: tuple[str, ...] | None = None) -> dict[str, Any]:
        """`fields`: the rule's fields as the release names them, where they differ."""
        return {
            "rule": self.rule,
            "message": self.message,
            "fields": list(self.fields if fields is None else fields),
            "detail": self.detail,
            "hint": self.hint,
            "source": self.source,
            "stage": self.stage,
        }


@dataclass(frozen=True)
class Note:
    """A silent change SGLang makes: not an error, but the layout differs from the input."""

    resolution: str
    field: str
    old: Any
    new: Any
    because: str
    source: str
    #: The change touches something the user can see: a field they set, a derived width,
    #: the GPU count or whether a CP strategy runs. Others (an environment default that
    #: nothing in this layout reads) are shown only with `-v`.
    visible: bool = True
    #: The launch's unknown values the new value follows (`tp_size = $TP`): `new` is then
    #: only what SGLang's default for them gives, and is not said.
    follows: str | None = None
    #: Whether SGLang makes the change at all reads those unknown values too (`because`
    #: then holds only at their default): the note says it may.
    conditional: bool = False

    @property
    def text(self) -> str:
        if self.conditional and self.follows:
            return (
                f"SGLang may set {self.field} (given {fmt_value(self.old)}), depending on "
                f"{self.follows}: it does when {self.because}"
            )
        new = f"from {self.follows}" if self.follows else f"= {fmt_value(self.new)}"
        return (
            f"SGLang will set {self.field} {new} (given {fmt_value(self.old)}) because "
            f"{self.because}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "resolution": self.resolution,
            "field": self.field,
            "old": self.old,
            "new": None if self.follows else self.new,
            "follows": self.follows,
            "conditional": self.conditional,
            "because": self.because,
            "source": self.source,
            "visible": self.visible,
            "text": self.text,
        }


@dataclass(frozen=True)
class Report:
    """Everything `validate` learned about one layout."""

    valid: bool
    config: Config
    model: ModelSpec | None
    violations: tuple[Violation, ...]
    warnings: tuple[Violation, ...]
    notes: tuple[Note, ...]
    #: Read-only views (`types.MappingProxyType`): a caller cannot change a report.
    derived: Mapping[str, Any]
    resolved_env: Mapping[str, Any] = field(repr=False)
    #: Minimal set of user-set fields that cannot all hold together; None when valid or
    #: when no explanation was asked for.
    conflict: tuple[str, ...] | None = None
    #: The SGLang release whose rules decided (its pack's version).
    sglang_version: str = ""
    #: Fields a launch gave a value meshsat cannot know (field -> the value as written,
    #: `--tp $TP`): validated at SGLang's default (`meshsat.solver.validation.undecided`).
    unknown: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: Ids of the rules left undecided by `unknown`: they fail at the default, but read a
    #: value this launch does not give (reported as warnings, not violations).
    undecided: tuple[str, ...] = ()
    #: The fields whose resolved values may depend on `unknown` (`undecided.open_fields`).
    open_fields: frozenset[str] = frozenset()
    #: The release spells DP attention `attn_dp_size` (0.5.23 on; `inputs.spelling`): JSON
    #: then shows the resolved layout in those fields, which `resolved` keeps internal.
    attn_dp_spelling: bool = False

    def reads_unknown(self, name: str) -> tuple[str, ...]:
        """The unknown fields (`field = value as written`) a derived width or field reads:
        what makes the number shown for `name` SGLang's default rather than the launch's."""
        if not self.unknown:
            return ()
        from meshsat.solver.lang.derived import DERIVED
        from meshsat.solver.lang.expr import fields_of
        from meshsat.solver.packs import get_pack

        reach = get_pack(self.sglang_version or None).reach
        width = next((w for w in DERIVED if w.name == name), None)
        raw = set(fields_of(width.body) if width is not None else (name,)) & self.open_fields
        read = {r for f in raw for r in reach.get(f, {f})}
        return tuple(f"{f} = {self.unknown[f]}" for f in sorted(read & set(self.unknown)))

    @property
    def resolved(self) -> dict[str, Any]:
        """The configuration SGLang would run, after its silent changes (meshsat's internal
        spelling: `dp_size` is the DP-attention width when `enable_dp_attention` is on)."""
        return {k: self.resolved_env[k] for k in CONFIG_SPECS}

    @property
    def resolved_as_released(self) -> dict[str, Any]:
        """`resolved` in the release's own fields, as SGLang itself resolves them (0.5.23:
        `attn_dp_size` the width, `dp_size` 1), so it reads back as `--config` unchanged."""
        from meshsat.solver.inputs.spelling import spelled

        return spelled(self.resolved_env, self.attn_dp_spelling)

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "sglang_version": self.sglang_version,
            # Violations are in SGLang's handler order: the first is the error it stops at.
            "first": self.violations[0].rule if self.violations else None,
            "violations": [v.to_dict(self._released(v)) for v in self.violations],
            "conflict": list(self.conflict) if self.conflict is not None else None,
            "warnings": [w.to_dict(self._released(w)) for w in self.warnings],
            "notes": [n.to_dict() for n in self.notes],
            "derived": dict(self.derived),
            "resolved": self.resolved_as_released,
            "unknown": dict(self.unknown),
            "undecided": list(self.undecided),
            # The derived widths whose number is SGLang's default's, not the launch's.
            "derived_unknown": [name for name in self.derived if self.reads_unknown(name)],
        }

    def _released(self, v: Violation) -> tuple[str, ...]:
        from meshsat.solver.inputs.spelling import released_fields

        return released_fields(
            v.fields,
            self.config.user_set(),
            bool(self.resolved_env.get("enable_dp_attention")),
            self.attn_dp_spelling,
        )

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


class InvalidLayoutError(MeshsatError, ValueError):
    """A layout breaks one or more rules. Carries every violation, not just the first."""

    def __init__(self, report: Report) -> None:
        self.report = report
        lines = [
            f"[{v.rule}] {v.message}" + (f" ({v.detail})" if v.detail else "")
            for v in report.violations
        ]
        super().__init__(
            f"invalid parallel layout ({len(lines)} rule(s) violated):\n  " + "\n  ".join(lines)
        )
